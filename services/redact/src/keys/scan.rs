//! The text as the key rule reads it: its segments (its lines, split again at escaped line
//! breaks) and the armours and markers on them.

use std::ops::Range;
use std::sync::OnceLock;

use regex::Regex;

use crate::lines::Line;
use crate::{Claim, Kind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArmKind {
    /// BEGIN of a private key's armour
    Begin,
    /// END of a private key's armour
    End,
    /// any other armour (certificate, public key, signature): ends a key's block
    Other,
    /// a private key's marker, left by an earlier pass: ends a key's block
    Marker,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Arm {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) kind: ArmKind,
    pub(super) seg: usize,
}

/// A line of the text, or a part of one between escaped line breaks.
#[derive(Debug, Clone)]
pub(super) struct Seg {
    pub(super) start: usize,
    pub(super) end: usize,
    /// index of the text line that holds it
    pub(super) line: usize,
    /// whether it opens its text line (an escaped break does not precede it)
    pub(super) first: bool,
    /// the armours and markers on it, as a range of indices into `Scan::arms`
    pub(super) arms: Range<usize>,
    /// whether it holds a marker of any kind
    pub(super) has_marker: bool,
    /// whether it holds a password value's marker: a value the password rule redacts after
    /// this rule reads, so a first pass reads here what a second reads as this marker
    pub(super) has_value_marker: bool,
}

#[derive(Debug)]
pub(super) struct Scan<'t> {
    pub(super) text: &'t str,
    pub(super) segs: Vec<Seg>,
    pub(super) arms: Vec<Arm>,
    /// claims of other rules, merged and sorted
    claimed: Vec<(usize, usize)>,
    /// the text's lines
    lines: &'t [Line],
}

fn armour_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"-----(BEGIN|END) ([A-Z0-9][A-Z0-9 ]{0,60})-----")
            .expect("the armour pattern is a valid regex")
    })
}

pub(super) fn escape_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?:\\+r)?\\+n").expect("the escaped line break pattern is a valid regex")
    })
}

fn marker_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\[REDACTED:[A-Za-z0-9_.\-]{1,64}\]").expect("the marker pattern is valid")
    })
}

fn is_private_label(label: &str) -> bool {
    label.ends_with("PRIVATE KEY") || label == "PGP PRIVATE KEY BLOCK"
}

impl<'t> Scan<'t> {
    pub(super) fn new(text: &'t str, lines: &'t [Line], claimed: &[Claim]) -> Self {
        let mut segs = Vec::with_capacity(lines.len());
        // one search of the whole text: an escaped break holds no line break, so each lies
        // inside one line
        let mut escapes = escape_re().find_iter(text).peekable();
        for (index, line) in lines.iter().enumerate() {
            let mut start = line.start;
            let mut first = true;
            while let Some(m) = escapes.next_if(|m| m.start() < line.end) {
                segs.push(Seg {
                    start,
                    end: m.start(),
                    line: index,
                    first,
                    arms: 0..0,
                    has_marker: false,
                    has_value_marker: false,
                });
                start = m.end();
                first = false;
            }
            segs.push(Seg {
                start,
                end: line.end,
                line: index,
                first,
                arms: 0..0,
                has_marker: false,
                has_value_marker: false,
            });
        }

        // Armours and markers, in order of where they start.
        let mut found: Vec<(usize, usize, ArmKind)> = Vec::new();
        for caps in armour_re().captures_iter(text) {
            let (Some(all), Some(which), Some(label)) = (caps.get(0), caps.get(1), caps.get(2))
            else {
                continue;
            };
            let kind = if is_private_label(label.as_str()) {
                if which.as_str() == "BEGIN" {
                    ArmKind::Begin
                } else {
                    ArmKind::End
                }
            } else {
                ArmKind::Other
            };
            found.push((all.start(), all.end(), kind));
        }
        // each marker: where it stands, whether it is a key's, whether it is a value's
        let mut markers: Vec<(usize, usize, bool, bool)> = Vec::new();
        for m in marker_re().find_iter(text) {
            let private = m.as_str() == Kind::PrivateKey.to_string();
            let value = m.as_str() == Kind::Password.to_string();
            markers.push((m.start(), m.end(), private, value));
        }
        let mut arms = Vec::with_capacity(found.len() + markers.len());
        let mut marker_spans = Vec::new();
        {
            let (mut i, mut j) = (0, 0);
            while i < found.len() || j < markers.len() {
                let take_marker = match (found.get(i), markers.get(j)) {
                    (Some(a), Some(m)) => m.0 < a.0,
                    (None, Some(_)) => true,
                    _ => false,
                };
                if take_marker {
                    let (s, e, private, value) = markers[j];
                    j += 1;
                    marker_spans.push((s, value));
                    if private {
                        arms.push(Arm {
                            start: s,
                            end: e,
                            kind: ArmKind::Marker,
                            seg: 0,
                        });
                    }
                } else {
                    let (s, e, kind) = found[i];
                    i += 1;
                    arms.push(Arm {
                        start: s,
                        end: e,
                        kind,
                        seg: 0,
                    });
                }
            }
        }
        // Assign armours and markers to their segments (both lists are in text order).
        let mut si = 0;
        for (ai, arm) in arms.iter_mut().enumerate() {
            while si < segs.len() && segs[si].end < arm.start {
                si += 1;
            }
            if si == segs.len() {
                break;
            }
            arm.seg = si;
            let seg = &mut segs[si];
            if seg.arms.is_empty() {
                seg.arms = ai..ai + 1;
            } else {
                seg.arms.end = ai + 1;
            }
        }
        let mut si = 0;
        for (at, value) in marker_spans {
            while si < segs.len() && segs[si].end < at {
                si += 1;
            }
            if let Some(seg) = segs.get_mut(si) {
                seg.has_marker = true;
                seg.has_value_marker |= value;
            }
        }

        let mut spans: Vec<(usize, usize)> = claimed
            .iter()
            .filter(|c| c.start < c.end)
            .map(|c| (c.start, c.end))
            .collect();
        spans.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }

        Scan {
            text,
            segs,
            arms,
            claimed: merged,
            lines,
        }
    }

    pub(super) fn is_claimed(&self, start: usize, end: usize) -> bool {
        let at = self.claimed.partition_point(|&(_, e)| e <= start);
        self.claimed.get(at).is_some_and(|&(s, _)| s < end)
    }

    pub(super) fn line_start_of(&self, seg: usize) -> usize {
        self.lines[self.segs[seg].line].start
    }
}
