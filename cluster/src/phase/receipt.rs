//! The model receipt (DESIGN §11; the model-receipt field report): what the phase record says
//! about which model ran. The model a launch names is always sent to the box; the model that
//! ran is read from the agent CLI's own output; the two are compared here, and a mismatch is
//! never recorded as `known`.

use serde::{Deserialize, Serialize};

/// What the receipt concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptStatus {
    /// the CLI named the model that ran, and it is the one asked for (or none was asked)
    Known,
    /// the CLI's output named no model
    #[default]
    Unknown,
    /// the CLI ran another model than the one asked for
    Mismatch,
}

/// `model: {requested, effective, source, status}` on the phase record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ModelReceipt {
    pub requested: Option<String>,
    pub effective: Option<String>,
    /// where `effective` was read (`stream:assistant`, `stream:init`, `opencode:session`)
    pub source: Option<String>,
    pub status: ReceiptStatus,
}

/// The model id with a `provider/` prefix dropped (OpenCode names `anthropic/claude-…`; the
/// stream names `claude-…`).
fn bare(model: &str) -> &str {
    model.rsplit_once('/').map_or(model, |(_, id)| id)
}

/// Whether `effective` is `requested`: the same id, or the dated snapshot an alias resolves
/// to (`claude-sonnet-4-5` → `claude-sonnet-4-5-20250929`).
pub fn same_model(requested: &str, effective: &str) -> bool {
    let (requested, effective) = (bare(requested.trim()), bare(effective.trim()));
    if requested.eq_ignore_ascii_case(effective) {
        return true;
    }
    effective
        .strip_prefix(requested)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|date| date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()))
}

impl ModelReceipt {
    pub fn new(requested: Option<&str>, effective: Option<&str>, source: Option<&str>) -> Self {
        let requested = requested.filter(|m| !m.is_empty());
        let effective = effective.filter(|m| !m.is_empty());
        let status = match (requested, effective) {
            (_, None) => ReceiptStatus::Unknown,
            (None, Some(_)) => ReceiptStatus::Known,
            (Some(asked), Some(ran)) if same_model(asked, ran) => ReceiptStatus::Known,
            (Some(_), Some(_)) => ReceiptStatus::Mismatch,
        };
        ModelReceipt {
            requested: requested.map(str::to_owned),
            effective: effective.map(str::to_owned),
            source: effective.and(source).map(str::to_owned),
            status,
        }
    }

    /// The failure text of a mismatch, naming both ids.
    pub fn mismatch_text(&self) -> Option<String> {
        (self.status == ReceiptStatus::Mismatch).then(|| {
            format!(
                "model_mismatch: the box ran {} ({}), not the requested {}",
                self.effective.as_deref().unwrap_or("?"),
                self.source.as_deref().unwrap_or("its output"),
                self.requested.as_deref().unwrap_or("?")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mismatch_is_never_known() {
        let r = ModelReceipt::new(
            Some("claude-sonnet-4-5"),
            Some("claude-haiku-4-5"),
            Some("stream:assistant"),
        );
        assert_eq!(r.status, ReceiptStatus::Mismatch);
        let text = r.mismatch_text().expect("a mismatch has a text");
        assert!(text.contains("claude-haiku-4-5") && text.contains("claude-sonnet-4-5"));
    }

    #[test]
    fn the_same_model_an_alias_snapshot_or_a_provider_prefix_is_known() {
        for (asked, ran) in [
            ("claude-sonnet-4-5", "claude-sonnet-4-5"),
            ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
            ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ] {
            let r = ModelReceipt::new(Some(asked), Some(ran), Some("stream:init"));
            assert_eq!(r.status, ReceiptStatus::Known, "{asked} vs {ran}");
        }
        assert!(!same_model("claude-sonnet-4", "claude-sonnet-4-5"));
    }

    #[test]
    fn nothing_read_is_unknown_even_when_a_model_was_asked() {
        let r = ModelReceipt::new(Some("claude-sonnet-4-5"), None, Some("stream:init"));
        assert_eq!(r.status, ReceiptStatus::Unknown);
        assert_eq!(r.source, None);
        assert_eq!(r.mismatch_text(), None);
    }
}
