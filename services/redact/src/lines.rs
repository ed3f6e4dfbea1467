//! A text's lines, as byte ranges.

/// One line of a text: `start..end` excludes its line break; `next` is where the line after
/// it starts (after the break, or the text's end for a last line without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    pub start: usize,
    pub end: usize,
    pub next: usize,
}

/// The text's lines. A `\r` before a `\n` belongs to the line; a text ending in a break has no
/// empty last line.
pub(crate) fn split(text: &str) -> Vec<Line> {
    // counted first: one exact allocation, never a copy of a growing vector
    let count = text.bytes().filter(|&byte| byte == b'\n').count() + 1;
    let mut lines = Vec::with_capacity(count);
    let mut start = 0;
    for at in memchr::memchr_iter(b'\n', text.as_bytes()) {
        lines.push(Line {
            start,
            end: at,
            next: at + 1,
        });
        start = at + 1;
    }
    if start < text.len() {
        lines.push(Line {
            start,
            end: text.len(),
            next: text.len(),
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_exclude_their_breaks() {
        let text = "a\nbc\n\nd";
        let lines = split(text);
        let got: Vec<&str> = lines.iter().map(|l| &text[l.start..l.end]).collect();
        assert_eq!(got, ["a", "bc", "", "d"]);
        assert_eq!(split("x\n").len(), 1);
        assert!(split("").is_empty());
    }
}
