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
    // a guess at the count (most lines of a log are longer than 32 bytes): counting first
    // would read the whole text twice
    let mut lines = Vec::with_capacity(text.len() / 32 + 1);
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

/// The lines of `render(text, claims)`, from the lines of `text`, without reading the text
/// again: a line break inside a claim goes with it, joining its two lines, and every offset
/// after a claim moves by the difference between the claim and its marker. `claims` are
/// sorted and disjoint, as `merge` leaves them.
pub(crate) fn rendered(lines: &[Line], claims: &[crate::Claim]) -> Vec<Line> {
    let mut out = lines.to_vec();
    render_in_place(&mut out, claims);
    out
}

/// [`rendered`] in place: a line is only ever dropped or moved back, so each is written at
/// or before where it was read.
pub(crate) fn render_in_place(lines: &mut Vec<Line>, claims: &[crate::Claim]) {
    if claims.is_empty() {
        return;
    }
    let total = lines.last().map_or(0, |l| l.next);
    let mut kept = 0;
    let mut claim = 0;
    // how far offsets past the claims before `claim` move
    let mut shift: isize = 0;
    let mut start = 0;
    // the new offset of `at`, an offset not strictly inside a claim
    let map = |at: usize, claim: &mut usize, shift: &mut isize| {
        while let Some(c) = claims.get(*claim).filter(|c| c.end <= at) {
            let marker = crate::MARKER_PREFIX.len() + c.kind.name().len() + 1;
            *shift += marker as isize - (c.end - c.start) as isize;
            *claim += 1;
        }
        (at as isize + *shift) as usize
    };
    for index in 0..lines.len() {
        let line = lines[index];
        // past the claims wholly before the break; `claim` is the first one that is not
        let end = map(line.end, &mut claim, &mut shift);
        let broken = line.next > line.end;
        if broken && claims.get(claim).is_some_and(|c| c.start <= line.end) {
            // the break is inside a claim: this line goes on into the next
            continue;
        }
        let next = map(line.next, &mut claim, &mut shift);
        lines[kept] = Line { start, end, next };
        kept += 1;
        start = next;
    }
    lines.truncate(kept);
    // a claim that took the text's last break leaves a last line without one
    let total = map(total, &mut claim, &mut shift);
    if start < total {
        lines.push(Line {
            start,
            end: total,
            next: total,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_lines_are_the_lines_of_the_rendered_text() {
        use crate::{Claim, Kind};
        let cases: &[(&str, &[(usize, usize)])] = &[
            ("ab\ncd\nef", &[(1, 4)]),
            ("ab\ncd\nef", &[(2, 3)]),
            ("ab\ncd\nef", &[(0, 8)]),
            ("ab\ncd\nef\n", &[(3, 9)]),
            ("ab\ncd\nef\n", &[(6, 9)]),
            ("ab\n\n\ncd", &[(3, 4), (5, 7)]),
            ("ab\ncd\nef", &[(0, 1), (3, 5), (7, 8)]),
            ("abc", &[(1, 2)]),
        ];
        for &(text, spans) in cases {
            let claims: Vec<Claim> = spans
                .iter()
                .map(|&(start, end)| Claim {
                    start,
                    end,
                    kind: Kind::PrivateKey,
                })
                .collect();
            let out = crate::render(text, &claims);
            assert_eq!(
                rendered(&split(text), &claims),
                split(&out),
                "{text:?} {spans:?}"
            );
        }
    }

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
