//! Condensing what a box wrote past its bound (spec lines 294–296): the report and a failure,
//! which the resumed executor acts on, and the question, which a person reads, are shortened by
//! the seat's auxiliary model (`role.llm_auxiliary`, else `llm`, else `default`) and labelled
//! as condensed — never cut while a model can condense them. The model is shown at most
//! [`MAX_CONDENSE_BYTES`] (a report and a question from their start, a failure from both
//! ends); what it answers is redacted again and held to the bound like anything else. Where no
//! model can (none configured, the call failed), [`bounds`](super::bounds) cuts the piece on
//! whole lines and says what it left out.

use tracing::{info, warn};

use super::Coordinator;
use super::bounds;
use super::limits::MAX_CONDENSE_BYTES;
use crate::ports::Overlong;

/// Room kept beside a condensed piece for its label.
const LABEL_ROOM: usize = 256;

impl Coordinator {
    /// `text` condensed by `seat`'s auxiliary model and labelled, when it is past `bound`;
    /// `None` when it fits or no model could condense it (the caller's bound cuts it then).
    pub(super) async fn condensed(
        &self,
        seat: &str,
        turn_id: &str,
        piece: Overlong,
        text: &str,
        bound: usize,
    ) -> Option<String> {
        if text.len() <= bound {
            return None;
        }
        let condenser = self.condenser()?;
        let shown = match piece {
            Overlong::Report | Overlong::Question => bounds::from_start(text, MAX_CONDENSE_BYTES),
            Overlong::Failure => bounds::failure(text, MAX_CONDENSE_BYTES),
        };
        let room = bound.saturating_sub(LABEL_ROOM);
        match condenser.condense(seat, piece, &shown, room).await {
            Ok(condensed) if !condensed.text.trim().is_empty() => {
                let text = boxfleet_redact::redact(condensed.text.trim());
                let label = format!(
                    "[condensed by {} from {} bytes, past its {} KiB bound]",
                    condensed.model,
                    shown.len(),
                    bound / 1024
                );
                info!(turn_id, ?piece, from = shown.len(), to = text.len(), model = %condensed.model, "sandbox_text_condensed");
                Some(match piece {
                    // a person reads the question first: its label comes after it
                    Overlong::Question => format!("{text}\n{label}"),
                    Overlong::Report | Overlong::Failure => format!("{label}\n{text}"),
                })
            }
            Ok(_) => {
                warn!(turn_id, ?piece, "sandbox_condense_empty");
                None
            }
            Err(why) => {
                warn!(turn_id, ?piece, %why, "sandbox_condense_failed");
                None
            }
        }
    }
}
