//! Whether a line reads like a piece of a key's body: a mixed-case run of base64 as wide as a
//! line read back, or a piece's width with a digit; OpenPGP's checksum; a mixed-case path as
//! wide as a full line. One pass, run by run, each byte's classes from a table.

use super::*;

/// Whether a segment could be read back as a key's line by an END written later.
pub(super) fn keyish(bytes: &[u8]) -> (bool, bool) {
    // run by run: a run of a path's characters (base64, `.` `_` `-` `=`) holds runs of base64
    // (and `=`) between its `.` `_` `-`; each byte's classes are or'd into its runs' from a
    // table, and each run is judged where it ends
    let mut found = false;
    let mut exact = false;
    let mut at = 0;
    while at < bytes.len() {
        if BYTE_CLASS[bytes[at] as usize] & PATH_RUN == 0 {
            at += 1;
            continue;
        }
        let path_start = at;
        let mut path_classes = 0;
        loop {
            // a run of base64, then what ends it: a path's `.` `_` `-` goes on with the path
            let b64_start = at;
            let mut b64_classes = 0;
            while let Some(&byte) = bytes.get(at) {
                let class = BYTE_CLASS[byte as usize];
                if class & B64_RUN == 0 {
                    break;
                }
                b64_classes |= class;
                at += 1;
            }
            // shorter than a piece and with no `=`, a run is none of a key's (most words)
            if at - b64_start >= MIN_PIECE || b64_classes & EQUALS != 0 {
                let (f, e) = judge_b64(&bytes[b64_start..at], b64_classes);
                found |= f;
                exact |= e;
            }
            path_classes |= b64_classes;
            match bytes.get(at) {
                Some(&byte) if BYTE_CLASS[byte as usize] & PATH_RUN != 0 => at += 1,
                _ => break,
            }
        }
        found |= judge_path(at - path_start, path_classes);
    }
    (found, exact)
}

const B64_RUN: u8 = 1;
const PATH_RUN: u8 = 2;
const UPPER: u8 = 4;
const LOWER: u8 = 8;
const DIGIT: u8 = 16;
const EQUALS: u8 = 32;

/// Each byte's classes for [`keyish`].
static BYTE_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        let mut class = 0;
        if byte.is_ascii_uppercase() {
            class |= UPPER | B64_RUN | PATH_RUN;
        } else if byte.is_ascii_lowercase() {
            class |= LOWER | B64_RUN | PATH_RUN;
        } else if byte.is_ascii_digit() {
            class |= DIGIT | B64_RUN | PATH_RUN;
        } else if byte == b'=' {
            class |= EQUALS | B64_RUN | PATH_RUN;
        } else if byte == b'+' || byte == b'/' {
            class |= B64_RUN | PATH_RUN;
        } else if byte == b'.' || byte == b'_' || byte == b'-' {
            class |= PATH_RUN;
        }
        table[b] = class;
        b += 1;
    }
    table
};

fn cases(classes: u8) -> (bool, bool, bool) {
    (
        classes & UPPER != 0,
        classes & LOWER != 0,
        classes & DIGIT != 0,
    )
}

/// A run of base64 (its bytes and their classes, or'd): found when it is mixed-case and as wide
/// as a full line read back (or a piece's width with a digit); exact at a key's line widths; or
/// OpenPGP's checksum (`=` and four or more after it, with only `+` before it: a diff's `+`
/// joins the run).
fn judge_b64(run: &[u8], classes: u8) -> (bool, bool) {
    let (u, l, d) = cases(classes);
    let w = run.len();
    let mut found = false;
    let mut exact = false;
    if u && l && (w >= MIN_FULL_BACK || (w >= MIN_PIECE && d)) {
        found = true;
        exact = (60..=80).contains(&w) || w + 1 == 64 || w + 1 == 70 || w + 1 == 76;
    }
    if classes & EQUALS != 0
        && let Some(first_eq) = run.iter().position(|&b| b == b'=')
        && w - first_eq >= 5
        && run[..first_eq].iter().all(|&b| b == b'+')
    {
        found = true;
    }
    (found, exact)
}

/// A mixed-case path as wide as a full line read back.
fn judge_path(len: usize, classes: u8) -> bool {
    let (u, l, _) = cases(classes);
    len >= MIN_FULL_BACK && u && l
}
