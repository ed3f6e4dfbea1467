//! Whether a line reads like a piece of a key's body: a mixed-case run of base64 as wide as a
//! line read back, or a piece's width with a digit; OpenPGP's checksum; a mixed-case path as
//! wide as a full line. One pass, each byte's classes from a table.

use super::*;

/// Whether a segment could be read back as a key's line by an END written later.
pub(super) fn keyish(bytes: &[u8]) -> (bool, bool) {
    // one pass: each byte's classes from a table; a run of base64 (and `=`) and a run of a
    // path's characters (base64, `.` `_` `-` `=`) are each judged where they end
    let mut found = false;
    let mut exact = false;
    let mut b64 = Run::default();
    let mut path = Run::default();
    for &b in bytes {
        let class = BYTE_CLASS[b as usize];
        if class & B64_RUN != 0 {
            b64.take(b, class);
        } else if b64.len > 0 {
            let (f, e) = b64.judge_b64();
            found |= f;
            exact |= e;
            b64 = Run::default();
        }
        if class & PATH_RUN != 0 {
            path.take(b, class);
        } else if path.len > 0 {
            found |= path.judge_path();
            path = Run::default();
        }
    }
    if b64.len > 0 {
        let (f, e) = b64.judge_b64();
        found |= f;
        exact |= e;
    }
    if path.len > 0 {
        found |= path.judge_path();
    }
    (found, exact)
}

const B64_RUN: u8 = 1;
const PATH_RUN: u8 = 2;
const UPPER: u8 = 4;
const LOWER: u8 = 8;
const DIGIT: u8 = 16;

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
        } else if byte == b'+' || byte == b'/' || byte == b'=' {
            class |= B64_RUN | PATH_RUN;
        } else if byte == b'.' || byte == b'_' || byte == b'-' {
            class |= PATH_RUN;
        }
        table[b] = class;
        b += 1;
    }
    table
};

/// A run of bytes [`keyish`] is reading.
#[derive(Default)]
struct Run {
    len: usize,
    /// the classes of its bytes, or'd
    classes: u8,
    /// where its first `=` is, from its start
    first_eq: Option<usize>,
    /// a byte other than `+` came before its first `=`
    other_before_eq: bool,
}

impl Run {
    fn take(&mut self, byte: u8, class: u8) {
        if byte == b'=' && self.first_eq.is_none() {
            self.first_eq = Some(self.len);
        } else if self.first_eq.is_none() && byte != b'+' {
            self.other_before_eq = true;
        }
        self.classes |= class;
        self.len += 1;
    }

    fn cases(&self) -> (bool, bool, bool) {
        (
            self.classes & UPPER != 0,
            self.classes & LOWER != 0,
            self.classes & DIGIT != 0,
        )
    }

    /// A run of base64: found when it is mixed-case and as wide as a full line read back (or a
    /// piece's width with a digit); exact at a key's line widths; or OpenPGP's checksum
    /// (`=` and four or more after it, with only `+` before it: a diff's `+` joins the run).
    fn judge_b64(&self) -> (bool, bool) {
        let (u, l, d) = self.cases();
        let w = self.len;
        let mut found = false;
        let mut exact = false;
        if u && l && (w >= MIN_FULL_BACK || (w >= MIN_PIECE && d)) {
            found = true;
            exact = (60..=80).contains(&w) || w + 1 == 64 || w + 1 == 70 || w + 1 == 76;
        }
        if self
            .first_eq
            .is_some_and(|at| w - at >= 5 && !self.other_before_eq)
        {
            found = true;
        }
        (found, exact)
    }

    /// A mixed-case path as wide as a full line read back.
    fn judge_path(&self) -> bool {
        let (u, l, _) = self.cases();
        self.len >= MIN_FULL_BACK && u && l
    }
}
