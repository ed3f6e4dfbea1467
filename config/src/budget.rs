//! `company.budgets` (the spec's "Budgets", lines 551–560): the seat and company token caps per
//! day, week and month on the company's clock, and the pre-flight floor a launch needs
//! (`sandbox_min_budget_tokens`, 2,000). A coding run is post-charged — the tokens are spent
//! inside the box before anything can refuse them — so the caps refuse what comes *next*: a
//! launch below the floor, and a reply or delivery that would resume a spent seat (the budget
//! park). No cap written is no limit.

use std::collections::BTreeMap;

use chrono::FixedOffset;
use serde::Deserialize;

use crate::catalogue::Bad;

/// The pre-flight floor when none is written (`sandbox_min_budget_tokens`).
pub const DEFAULT_MIN_BUDGET_TOKENS: u64 = 2_000;

/// Token caps (input plus output) per window; absent: none for that window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    #[serde(default)]
    pub day: Option<u64>,
    #[serde(default)]
    pub week: Option<u64>,
    #[serde(default)]
    pub month: Option<u64>,
}

impl Caps {
    /// Each window's cap that is written, by the window's kind (`day`, `week`, `month`).
    pub fn written(&self) -> Vec<(&'static str, u64)> {
        [
            ("day", self.day),
            ("week", self.week),
            ("month", self.month),
        ]
        .into_iter()
        .filter_map(|(kind, cap)| cap.map(|cap| (kind, cap)))
        .collect()
    }
}

/// `company.budgets`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// the company's clock as a UTC offset (`+00:00`, `-05:00`): a day, week and month turn
    /// at its midnight; absent: UTC
    #[serde(default)]
    pub clock: Option<String>,
    /// a launch needs at least this many tokens left in every window (default 2,000)
    #[serde(default)]
    pub min_tokens: Option<u64>,
    /// the company's own caps, over every seat's runs
    #[serde(default)]
    pub company: Caps,
    /// every seat's caps, unless `seats` names its own
    #[serde(default)]
    pub seat: Caps,
    /// a seat's own caps, by handle
    #[serde(default)]
    pub seats: BTreeMap<String, Caps>,
}

impl Budgets {
    /// The company's clock (UTC when none, or one that does not parse: validation refuses it).
    pub fn offset(&self) -> FixedOffset {
        self.clock
            .as_deref()
            .and_then(parse_offset)
            .unwrap_or_else(|| FixedOffset::east_opt(0).expect("UTC"))
    }

    /// The floor a launch needs.
    pub fn floor(&self) -> u64 {
        self.min_tokens.unwrap_or(DEFAULT_MIN_BUDGET_TOKENS)
    }

    /// `seat`'s caps: its own, else every seat's.
    pub fn caps_for(&self, seat: &str) -> Caps {
        self.seats.get(seat).copied().unwrap_or(self.seat)
    }

    /// Whether any cap is written (none: nothing is ever refused for budget).
    pub fn any(&self) -> bool {
        let written = |caps: &Caps| !caps.written().is_empty();
        written(&self.company) || written(&self.seat) || self.seats.values().any(written)
    }

    /// What is wrong with the block, each at its location.
    pub(crate) fn problems(&self, seats: &[String], bad: &mut Bad<'_>) {
        let field = "company.budgets";
        if let Some(clock) = &self.clock
            && parse_offset(clock).is_none()
        {
            bad(
                format!("{field}.clock"),
                format!("{clock:?} is not a UTC offset"),
                "write the company's offset from UTC as +HH:MM or -HH:MM (e.g. +00:00, -05:00)",
            );
        }
        let mut all: Vec<(String, &Caps)> = vec![
            (format!("{field}.company"), &self.company),
            (format!("{field}.seat"), &self.seat),
        ];
        all.extend(
            self.seats
                .iter()
                .map(|(handle, caps)| (format!("{field}.seats.{handle}"), caps)),
        );
        let floor = self.floor();
        for (at, caps) in all {
            for (kind, cap) in caps.written() {
                if cap < floor {
                    bad(
                        format!("{at}.{kind}"),
                        format!(
                            "{cap} is under the {floor} tokens a launch needs left (min_tokens): every launch would be refused"
                        ),
                        "give the window a cap above min_tokens, lower min_tokens, or leave the cap out for none",
                    );
                }
            }
        }
        for handle in self.seats.keys() {
            if !seats.is_empty() && !seats.contains(handle) {
                bad(
                    format!("{field}.seats.{handle}"),
                    format!("{handle:?} is not a seat of the chart"),
                    "name a seat under company.seats, or remove the entry",
                );
            }
        }
    }
}

/// `+HH:MM` / `-HH:MM` (or `Z`, `UTC`) as an offset.
fn parse_offset(text: &str) -> Option<FixedOffset> {
    let text = text.trim();
    if matches!(text, "Z" | "UTC" | "utc") {
        return FixedOffset::east_opt(0);
    }
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let (hours, minutes) = rest.split_once(':')?;
    let (hours, minutes): (i32, i32) = (hours.parse().ok()?, minutes.parse().ok()?);
    if hours > 14 || minutes > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_an_offset_and_caps_fall_back_to_every_seats() {
        let budgets: Budgets = serde_yaml::from_str(
            "clock: \"-05:30\"\nseat: { day: 100 }\nseats: { eng: { week: 7 } }\n",
        )
        .expect("parses");
        assert_eq!(budgets.offset().local_minus_utc(), -(5 * 3600 + 30 * 60));
        assert_eq!(budgets.caps_for("ops").day, Some(100));
        assert_eq!(budgets.caps_for("eng").written(), [("week", 7)]);
        assert_eq!(budgets.floor(), 2_000);
        assert!(budgets.any());
        assert!(!Budgets::default().any());
        assert!(parse_offset("+25:00").is_none() && parse_offset("0500").is_none());
        let mut bad = Vec::new();
        budgets.problems(&[], &mut |field, problem, _| {
            bad.push(format!("{field}: {problem}"))
        });
        assert_eq!(bad.len(), 2, "both caps are under the 2,000 floor: {bad:?}");
        assert!(
            bad[0].starts_with("company.budgets.seat.day: 100 is under the 2000"),
            "{bad:?}"
        );
    }
}
