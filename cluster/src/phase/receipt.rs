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

/// A model as a CLI or a launch spells it: the provider it names, if any, and the model id
/// after it. The first `/` parts them, so a router's id keeps its own slashes
/// (`openai-compat/zai-coding-plan/glm-5.2` is provider `openai-compat`, model
/// `zai-coding-plan/glm-5.2`; `openrouter/anthropic/claude-sonnet-5` is provider
/// `openrouter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spelled<'a> {
    provider: Option<&'a str>,
    id: &'a str,
}

/// The provider Claude Code runs every model on: its stream names the bare id, and OpenCode
/// addresses an anthropic API entry as `anthropic/<model>` (the spec's two spellings of one
/// thing).
const IMPLIED_PROVIDER: &str = "anthropic";

fn spelled(model: &str) -> Spelled<'_> {
    match model.trim().split_once('/') {
        Some((provider, id)) if !provider.is_empty() && !id.is_empty() => Spelled {
            provider: Some(provider),
            id,
        },
        _ => Spelled {
            provider: None,
            id: model.trim(),
        },
    }
}

/// Whether two model ids are one: the same id, or the dated snapshot an alias resolves to
/// (`claude-sonnet-4-5` → `claude-sonnet-4-5-20250929`).
fn same_id(requested: &str, effective: &str) -> bool {
    if requested.eq_ignore_ascii_case(effective) {
        return true;
    }
    effective
        .strip_prefix(requested)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|date| date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `effective` is `requested`, provider and model both. A provider is never dropped:
/// where both name one they must agree, so a box that served the asked id through another
/// provider (`zai-coding-plan/glm-5.2` asked, `openai-compat/zai-coding-plan/glm-5.2` ran —
/// the model-receipt field report) is a mismatch. Where one side names none, it is read as
/// Claude Code's (`anthropic`) when the other names that, and a request that names no
/// provider left the choice to the CLI, so any provider it names answers it.
pub fn same_model(requested: &str, effective: &str) -> bool {
    let (asked, ran) = (spelled(requested), spelled(effective));
    match (asked.provider, ran.provider) {
        (Some(a), Some(r)) => a.eq_ignore_ascii_case(r) && same_id(asked.id, ran.id),
        (None, _) => same_id(asked.id, ran.id),
        (Some(a), None) => a.eq_ignore_ascii_case(IMPLIED_PROVIDER) && same_id(asked.id, ran.id),
    }
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
    fn the_same_model_an_alias_snapshot_or_claude_codes_own_provider_is_known() {
        for (asked, ran) in [
            ("claude-sonnet-4-5", "claude-sonnet-4-5"),
            ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
            ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
            ("claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
            ("zai-coding-plan/glm-5.2", "zai-coding-plan/glm-5.2"),
            (
                "openrouter/anthropic/claude-sonnet-5",
                "openrouter/anthropic/claude-sonnet-5",
            ),
            ("crewlet/glm-5.2", "crewlet/glm-5.2"),
            ("glm-5.2", "zai-coding-plan/glm-5.2"),
        ] {
            let r = ModelReceipt::new(Some(asked), Some(ran), Some("stream:init"));
            assert_eq!(r.status, ReceiptStatus::Known, "{asked} vs {ran}");
        }
        assert!(!same_model("claude-sonnet-4", "claude-sonnet-4-5"));
    }

    #[test]
    fn a_substituted_provider_is_a_mismatch_though_the_model_id_is_the_same() {
        for (asked, ran) in [
            // the field report's second case: the router composed its own provider
            (
                "zai-coding-plan/glm-5.2",
                "openai-compat/zai-coding-plan/glm-5.2",
            ),
            ("zai-coding-plan/glm-5.2", "openai-compat/glm-5.2"),
            (
                "openrouter/anthropic/claude-sonnet-5",
                "anthropic/claude-sonnet-5",
            ),
            // Claude Code serves Anthropic's models alone: a bare id is not another provider's
            ("zai-coding-plan/glm-5.2", "glm-5.2"),
            // the field report's first case: the platform's default ran
            (
                "zai-coding-plan/glm-5.2",
                "openai-compat/deepseek/deepseek-v4-flash",
            ),
        ] {
            let r = ModelReceipt::new(Some(asked), Some(ran), Some("opencode:session"));
            assert_eq!(r.status, ReceiptStatus::Mismatch, "{asked} vs {ran}");
            let text = r.mismatch_text().expect("a mismatch says so");
            assert!(text.contains(asked) && text.contains(ran), "{text}");
        }
    }

    #[test]
    fn nothing_read_is_unknown_even_when_a_model_was_asked() {
        let r = ModelReceipt::new(Some("claude-sonnet-4-5"), None, Some("stream:init"));
        assert_eq!(r.status, ReceiptStatus::Unknown);
        assert_eq!(r.source, None);
        assert_eq!(r.mismatch_text(), None);
    }
}
