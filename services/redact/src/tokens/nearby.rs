//! What is read beside a token once it is found: its copies on its line, and an AWS secret
//! access key written bare after its key id.

use crate::{Claim, Kind};

/// How far from a claimed token, on its line, a copy of it is looked for.
const COPY_WINDOW: usize = 256;

/// The shortest token whose copies are redacted with it.
const MIN_COPIED: usize = 12;

/// A token read once is the same secret wherever it appears again beside it: a copy of it on
/// its line, within [`COPY_WINDOW`] either way (`token = 'X' | 'X'`, `--key X … echo X`), is
/// claimed too, though no rule would read the copy where it stands. Only on its line, so a
/// stream's settled lines read it as the whole text does; only within the window, so a line
/// of many tokens costs no more than its length.
pub(super) fn copies_on_their_line(text: &str, out: &mut Vec<Claim>) {
    let bytes = text.as_bytes();
    // a copy is a claim too, whose own window is read in turn: a copy past the first claim's
    // window but within a copy's is claimed in the same pass, as it would be on the second
    // (where the first is a marker and the copy beside it a token at a word's start), so
    // redacting twice reads as once; each place is claimed once, so the pass stays linear in
    // the copies found
    let mut work: Vec<Claim> = out
        .iter()
        .filter(|claim| {
            matches!(claim.kind, Kind::Token(_) | Kind::Named(_))
                && claim.end - claim.start >= MIN_COPIED
        })
        .copied()
        .collect();
    let mut claimed: std::collections::HashSet<usize> =
        work.iter().map(|claim| claim.start).collect();
    let mut copies = Vec::new();
    while let Some(claim) = work.pop() {
        // the window, cut at the line's breaks: each read no wider than the window, so a line
        // of many tokens costs its length times the window, not its length squared
        let back = claim.start.saturating_sub(COPY_WINDOW);
        let from =
            memchr::memrchr(b'\n', &bytes[back..claim.start]).map_or(back, |at| back + at + 1);
        let ahead = bytes.len().min(claim.end + COPY_WINDOW);
        let to = memchr::memchr(b'\n', &bytes[claim.end..ahead]).map_or(ahead, |at| claim.end + at);
        let token = &bytes[claim.start..claim.end];
        for at in memchr::memmem::find_iter(&bytes[from..to], token) {
            let start = from + at;
            if claimed.insert(start) {
                let copy = Claim {
                    start,
                    end: start + token.len(),
                    kind: claim.kind,
                };
                copies.push(copy);
                work.push(copy);
            }
        }
    }
    out.extend(copies);
}

/// How far after an AWS access key id, on its line, a bare secret key is looked for.
const AWS_PAIR_WINDOW: usize = 256;

/// An AWS secret access key written bare beside its key id (`AKIA… wJalr…`, a CSV's
/// `AKIA…,wJalr…`, `--access-key AKIA… --secret-key wJalr…`): after an access key id, on its
/// line and within [`AWS_PAIR_WINDOW`], a word of exactly 40 characters of the secret's
/// alphabet (`A–Z a–z 0–9 / +`) in both cases with a digit — a hex digest is one case, a path
/// has no 40-character word. Only after the id, and on its line, so the live tail's settled
/// lines read it exactly as the whole text does.
pub(super) fn secrets_beside_key_ids(text: &str, out: &mut Vec<Claim>) {
    let is_secret_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'/' || b == b'+';
    let ids: Vec<usize> = out
        .iter()
        .filter(|c| c.kind == Kind::Token("aws_access_key_id"))
        .map(|c| c.end)
        .collect();
    let bytes = text.as_bytes();
    let mut scanned_to = 0;
    for id_end in ids {
        let line_end = memchr::memchr(b'\n', &bytes[id_end..]).map_or(text.len(), |at| id_end + at);
        // each byte is read once however many ids share a line
        let mut at = id_end.max(scanned_to);
        let end = line_end.min(id_end + AWS_PAIR_WINDOW);
        while at < end {
            if !is_secret_byte(bytes[at]) {
                at += 1;
                continue;
            }
            let word_start = at;
            while at < text.len() && is_secret_byte(bytes[at]) {
                at += 1;
            }
            let word = &bytes[word_start..at];
            let after_ok = bytes.get(at).is_none_or(|&b| b != b'=' && b != b'[');
            let before_ok = word_start == 0 || !matches!(bytes[word_start - 1], b'_' | b'-' | b'.');
            if word.len() == 40
                && after_ok
                && before_ok
                && word.iter().any(u8::is_ascii_lowercase)
                && word.iter().any(u8::is_ascii_uppercase)
                && word.iter().any(u8::is_ascii_digit)
            {
                out.push(Claim {
                    start: word_start,
                    end: at,
                    kind: Kind::Token("aws_secret_access_key"),
                });
            }
        }
        scanned_to = scanned_to.max(at);
    }
}
