//! The bounds on what a box wrote (the spec's "The whole record fits its event"; DESIGN §11,
//! I14), applied once, by the coordinator, to everything a collection read — after it is
//! redacted whole, so a secret straddling a cut never survives as a fragment:
//!
//! | piece                   | bound                  | past the bound                                   |
//! |-------------------------|------------------------|--------------------------------------------------|
//! | the findings report     | 256 KiB                | whole lines from its start, the rest counted     |
//! | a failure's text        | 256 KiB                | its first 32 KiB and its end, the middle counted |
//! | the transcript          | 64 KiB head + 192 KiB tail | one note line where its middle was, counted on the record |
//! | the question            | 16 KiB                 | whole lines from its start; a first line past it is not asked |
//! | the question's audience | 256 bytes              | not asked                                        |
//! | the delivered refs      | 16 KiB                 | listed up to it, the rest counted on the record  |
//!
//! A report, a failure or a question past its bound is first offered to the seat's auxiliary
//! model ([`condense`](super::condense)); these cuts are what happens where no model can, and
//! to whatever a model answered, so nothing past a bound is ever published.

use super::limits::{
    MAX_AUDIENCE_BYTES, MAX_DELIVERED_REF_BYTES, MAX_QUESTION_BYTES, MAX_REPORT_BYTES,
};

/// A failure's head, an eighth of its bound: where the engine states the exit status, the
/// CLI's own error and any piece it could not read.
pub const FAILURE_HEAD_BYTES: usize = MAX_REPORT_BYTES / 8;
/// The transcript's start, kept whole lines up to this: the run's plan and first look.
pub const TRANSCRIPT_HEAD_BYTES: usize = 64 * 1024;
/// The transcript's end, kept whole lines up to this: its conclusion and what broke.
pub const TRANSCRIPT_TAIL_BYTES: usize = 192 * 1024;

/// A text's whole lines from its start up to `max` bytes, with a line saying how many lines
/// and bytes were left out; unchanged when it fits. A first line longer than `max` keeps its
/// own start, cut on a character and marked `…`.
pub fn from_start(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let (kept, rest) = head_lines(text, max.saturating_sub(NOTE_ROOM));
    format!("{kept}\n{}", left_out(rest))
}

/// A failure's text: its first [`FAILURE_HEAD_BYTES`] and its end, whole lines, with one line
/// where its middle was; unchanged when it fits `max`.
pub fn failure(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let room = max.saturating_sub(NOTE_ROOM);
    let head_room = FAILURE_HEAD_BYTES.min(room);
    let (head, rest) = head_lines(text, head_room);
    let (middle, tail) = tail_lines(rest, room - head.len());
    format!("{head}\n{}\n{tail}", left_out(middle))
}

/// A transcript bounded: the lines it keeps and what it left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transcript {
    pub lines: Vec<String>,
    pub elided_lines: u64,
    pub elided_bytes: u64,
}

/// A transcript's whole lines from its start up to [`TRANSCRIPT_HEAD_BYTES`] and from its end
/// up to [`TRANSCRIPT_TAIL_BYTES`], with one note line where its middle was.
pub fn transcript(lines: Vec<String>) -> Transcript {
    let total: usize = lines.iter().map(|line| line.len() + 1).sum();
    if total <= TRANSCRIPT_HEAD_BYTES + TRANSCRIPT_TAIL_BYTES {
        return Transcript {
            lines,
            ..Transcript::default()
        };
    }
    let mut head_end = 0;
    let mut used = 0;
    while head_end < lines.len() && used + lines[head_end].len() < TRANSCRIPT_HEAD_BYTES {
        used += lines[head_end].len() + 1;
        head_end += 1;
    }
    let mut tail_start = lines.len();
    let mut used = 0;
    while tail_start > head_end && used + lines[tail_start - 1].len() < TRANSCRIPT_TAIL_BYTES {
        used += lines[tail_start - 1].len() + 1;
        tail_start -= 1;
    }
    let mut kept: Vec<String> = lines[..head_end].to_vec();
    // a single line longer than its half keeps its own start (or end), marked …
    let mut middle = head_end..tail_start;
    if head_end == 0 && !middle.is_empty() {
        kept.push(format!(
            "{}…",
            char_prefix(&lines[0], TRANSCRIPT_HEAD_BYTES)
        ));
        middle.start = 1;
    }
    let last_partial = tail_start == lines.len() && middle.end > middle.start;
    if last_partial {
        middle.end -= 1;
    }
    let elided_lines = middle.len() as u64;
    let elided_bytes: u64 = lines[middle.clone()]
        .iter()
        .map(|line| line.len() as u64 + 1)
        .sum();
    kept.push(format!(
        "[… {elided_lines} lines ({} KiB) of the transcript left out here]",
        elided_bytes.div_ceil(1024)
    ));
    if last_partial {
        let last = &lines[lines.len() - 1];
        kept.push(format!("…{}", char_suffix(last, TRANSCRIPT_TAIL_BYTES)));
    } else {
        kept.extend(lines[tail_start..].iter().cloned());
    }
    Transcript {
        lines: kept,
        elided_lines,
        elided_bytes,
    }
}

/// The delivered refs deduplicated and listed up to [`MAX_DELIVERED_REF_BYTES`]; the second
/// value counts the ones left out.
pub fn delivered_refs(refs: Vec<String>) -> (Vec<String>, u64) {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<String> = Vec::new();
    let mut used = 0;
    let mut elided = 0;
    for reference in refs {
        if !seen.insert(reference.clone()) {
            continue;
        }
        if used + reference.len() + 1 > MAX_DELIVERED_REF_BYTES {
            elided += 1;
            continue;
        }
        used += reference.len() + 1;
        kept.push(reference);
    }
    (kept, elided)
}

/// Why a question cannot be put to anyone as it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unaskable(pub String);

/// A question bounded to [`MAX_QUESTION_BYTES`] on whole lines from its start, its audience
/// checked: one whose first line alone is past the bound, or whose audience is past
/// [`MAX_AUDIENCE_BYTES`], is not asked (whole lines would leave nothing to answer, a fragment
/// would be a question the agent never asked).
pub fn question(text: &str, audience: &str) -> Result<String, Unaskable> {
    if audience.len() > MAX_AUDIENCE_BYTES {
        return Err(Unaskable(format!(
            "the job's question was not asked: its audience is {} bytes, past the bound of {MAX_AUDIENCE_BYTES}; \
             name the requester, the team, the manager or one handle",
            audience.len()
        )));
    }
    let first_line = text.split('\n').next().unwrap_or_default();
    if first_line.len() > MAX_QUESTION_BYTES - NOTE_ROOM {
        return Err(Unaskable(format!(
            "the job's question was not asked: its first line alone is {} bytes, past the bound of {MAX_QUESTION_BYTES}; \
             ask it in fewer words, one line first",
            first_line.len()
        )));
    }
    Ok(from_start(text, MAX_QUESTION_BYTES))
}

/// Room kept for the note line a cut writes.
const NOTE_ROOM: usize = 96;

/// The whole lines of `text` from its start that fit `max` bytes, and the rest. A first line
/// longer than `max` keeps its own start, on a character, marked `…`.
fn head_lines(text: &str, max: usize) -> (String, &str) {
    let window = char_prefix(text, max);
    match window.rfind('\n') {
        Some(at) => (window[..at].to_owned(), &text[at + 1..]),
        None => {
            let piece = char_prefix(text, max.saturating_sub('…'.len_utf8()));
            (format!("{piece}…"), &text[piece.len()..])
        }
    }
}

/// The whole lines of `text`'s end that fit `max` bytes, and what comes before them.
fn tail_lines(text: &str, max: usize) -> (&str, String) {
    let window = char_suffix(text, max);
    let start = text.len() - window.len();
    match window.find('\n') {
        Some(at) if start > 0 => (&text[..start + at], window[at + 1..].to_owned()),
        Some(_) | None if start == 0 => ("", text.to_owned()),
        _ => {
            let piece = char_suffix(text, max.saturating_sub('…'.len_utf8()));
            (&text[..text.len() - piece.len()], format!("…{piece}"))
        }
    }
}

/// The note line a cut writes for what it left out.
fn left_out(rest: &str) -> String {
    let lines = rest.split('\n').count();
    format!(
        "[… {lines} lines, {} bytes left out]",
        rest.len() + usize::from(!rest.is_empty())
    )
}

/// The longest start of `text` of at most `max` bytes that ends on a character.
fn char_prefix(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The longest end of `text` of at most `max` bytes that starts on a character.
fn char_suffix(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(count: usize, width: usize) -> String {
        (0..count)
            .map(|i| format!("{i:0width$}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_report_past_its_bound_keeps_whole_lines_from_its_start_and_counts_the_rest() {
        let report = lines(20_000, 99); // 2 MB
        let bounded = from_start(&report, MAX_REPORT_BYTES);
        assert!(bounded.len() <= MAX_REPORT_BYTES, "{}", bounded.len());
        assert!(bounded.starts_with(&format!("{:099}\n", 0)));
        let note = bounded.lines().last().expect("a note");
        let kept = bounded.lines().count() - 1;
        assert_eq!(
            note,
            format!(
                "[… {} lines, {} bytes left out]",
                20_000 - kept,
                report.len() - (kept * 100 - 1)
            )
        );
        assert_eq!(from_start("fits", 10), "fits");
        // one line past the bound keeps its own start, on a character
        let one = "é".repeat(200);
        let cut = from_start(&one, 200);
        assert!(cut.len() <= 200 && cut.contains('…'), "{cut}");
    }

    #[test]
    fn a_failure_keeps_its_head_and_its_end() {
        let mut text = String::from("exited with status 3\nthe CLI said: boom\n");
        text.push_str(&lines(40_000, 49)); // 2 MB of stderr
        text.push_str("\nfatal: the line naming what broke");
        let bounded = failure(&text, MAX_REPORT_BYTES);
        assert!(bounded.len() <= MAX_REPORT_BYTES, "{}", bounded.len());
        assert!(bounded.starts_with("exited with status 3\nthe CLI said: boom\n"));
        assert!(bounded.ends_with("\nfatal: the line naming what broke"));
        assert!(
            bounded.contains(" bytes left out]\n"),
            "a note in the middle"
        );
        let head = bounded.find("[…").expect("note");
        assert!(head <= FAILURE_HEAD_BYTES && head > FAILURE_HEAD_BYTES - 100);
    }

    #[test]
    fn a_long_transcript_keeps_its_head_and_tail_and_counts_its_middle() {
        let all: Vec<String> = (0..10_000)
            .map(|i| format!("Bash: step {i:0150}"))
            .collect();
        let total: u64 = all.iter().map(|l| l.len() as u64 + 1).sum();
        let bounded = transcript(all.clone());
        let kept: u64 = bounded
            .lines
            .iter()
            .filter(|l| !l.starts_with("[…"))
            .map(|l| l.len() as u64 + 1)
            .sum();
        let size: usize = bounded.lines.iter().map(|l| l.len() + 1).sum();
        assert!(size <= TRANSCRIPT_HEAD_BYTES + TRANSCRIPT_TAIL_BYTES + 100);
        assert_eq!(bounded.lines[0], all[0]);
        assert_eq!(bounded.lines.last(), all.last());
        assert_eq!(kept + bounded.elided_bytes, total);
        assert_eq!(
            bounded.lines.len() as u64 - 1 + bounded.elided_lines,
            all.len() as u64
        );
        let note = bounded
            .lines
            .iter()
            .find(|l| l.starts_with("[…"))
            .expect("one note line");
        assert!(note.contains(&format!("{} lines", bounded.elided_lines)));
        // a short one is left as it is
        let short = transcript(vec!["Edit: a".into()]);
        assert_eq!((short.lines.len(), short.elided_lines), (1, 0));
        // one single line past both halves keeps its start and its end
        let one = transcript(vec!["x".repeat(300 * 1024), "y".repeat(300 * 1024)]);
        assert!(one.lines[0].ends_with('…') && one.lines[2].starts_with('…'));
        assert_eq!(one.elided_lines, 0);
    }

    #[test]
    fn refs_are_deduplicated_and_listed_up_to_their_bound_with_the_rest_counted() {
        let refs: Vec<String> = (0..1_000)
            .flat_map(|i| {
                let url = format!("https://github.com/acme/app/pull/{i:060}");
                [url.clone(), url]
            })
            .collect();
        let (kept, elided) = delivered_refs(refs);
        let size: usize = kept.iter().map(|r| r.len() + 1).sum();
        assert!(size <= MAX_DELIVERED_REF_BYTES);
        assert_eq!(kept.len() as u64 + elided, 1_000);
        assert!(elided > 0);
    }

    #[test]
    fn a_question_is_bounded_on_whole_lines_or_not_asked() {
        let long = format!("Which cap?\n{}", lines(1_000, 99));
        let asked = question(&long, "team").expect("asked");
        assert!(asked.len() <= MAX_QUESTION_BYTES && asked.starts_with("Which cap?\n"));
        assert!(asked.ends_with("bytes left out]"));
        let first_line = "why ".repeat(5_000);
        let refused = question(&first_line, "team").expect_err("not asked");
        assert!(
            refused.0.contains("first line alone is 20000 bytes"),
            "{}",
            refused.0
        );
        let refused = question("Which cap?", &"x".repeat(1 << 20)).expect_err("not asked");
        assert!(
            refused.0.contains("audience is 1048576 bytes"),
            "{}",
            refused.0
        );
        assert_eq!(question("Which cap?", "team"), Ok("Which cap?".into()));
    }
}
