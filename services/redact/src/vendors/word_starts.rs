//! The places a word-start keyword can stand: where a word starts ([`super::starts_word`]:
//! after a byte that is no word's, or right after an escaped break or tab) and whose two
//! bytes begin some keyword of the set.
//!
//! Telling word starts apart byte by byte mispredicts a branch at every word's edge, and that
//! alone cost more than the keyword automaton saved (27 ms over the bench's 16 MiB). On x86-64
//! with AVX2, 32 positions are classified at once: each position's byte against the keywords'
//! first bytes, the next two against their second and third bytes (a two-byte keyword's two
//! against theirs), and the bytes before it for a word's edge or an escape, giving a mask of
//! the positions that may start a keyword; each is then checked exactly. Elsewhere, and at a text's first two and last 34 bytes, the same test runs
//! one position at a time; a property test holds the two to the same answers.

/// A byte of a word: an ASCII letter or digit, or `_` ([`super::starts_word`]).
const fn word_bytes() -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = byte.is_ascii_alphanumeric() || byte == b'_';
        b += 1;
    }
    table
}

pub(super) static WORD: [bool; 256] = word_bytes();

/// The byte pairs the keywords begin with, exactly, and the bytes each position may hold, for
/// the 32-at-once test.
pub(super) struct Pairs {
    /// bit `(first << 8) | second` set when some keyword begins with those two bytes
    exact: Box<[u64; 1024]>,
    /// the same for the two-byte keywords alone
    whole: Box<[u64; 1024]>,
    /// for each length `n` from 3 to [`PREFIX`]: bit [`hashed`] set for each keyword's first
    /// `n` bytes, for keywords that long (`n` below [`PREFIX`]) or longer (`n` = [`PREFIX`])
    prefixes: Vec<Box<[u64; 1024]>>,
    /// per low nibble, a bit per high nibble (0 to 7): the keywords' first bytes, second bytes
    /// and third bytes; and the two-byte keywords' first and second bytes
    first: [u8; 16],
    second: [u8; 16],
    third: [u8; 16],
    two_first: [u8; 16],
    two_second: [u8; 16],
}

impl Pairs {
    /// Every keyword is two bytes or more, and starts with a word's byte.
    pub fn new<'k>(keywords: impl Iterator<Item = &'k [u8]>) -> Pairs {
        let mut pairs = Pairs {
            exact: Box::new([0u64; 1024]),
            whole: Box::new([0u64; 1024]),
            prefixes: (3..=PREFIX).map(|_| Box::new([0u64; 1024])).collect(),
            first: [0; 16],
            second: [0; 16],
            third: [0; 16],
            two_first: [0; 16],
            two_second: [0; 16],
        };
        for keyword in keywords {
            assert!(
                keyword.len() >= 2 && WORD[keyword[0] as usize],
                "a word-start keyword ({:?}) is two bytes or more and starts a word",
                String::from_utf8_lossy(keyword)
            );
            assert!(
                keyword.is_ascii(),
                "a keyword is ASCII (the 32-at-once test's bytes)"
            );
            let pair = usize::from(keyword[0]) << 8 | usize::from(keyword[1]);
            set(&mut pairs.exact, pair);
            add(&mut pairs.first, keyword[0]);
            add(&mut pairs.second, keyword[1]);
            match keyword.len() {
                2 => {
                    set(&mut pairs.whole, pair);
                    add(&mut pairs.two_first, keyword[0]);
                    add(&mut pairs.two_second, keyword[1]);
                }
                len => {
                    let n = len.min(PREFIX);
                    set(&mut pairs.prefixes[n - 3], hashed(&keyword[..n]));
                    add(&mut pairs.third, keyword[2]);
                }
            }
        }
        pairs
    }

    /// Whether some keyword may begin with the bytes at `at` (false positives only from the
    /// hashes): it is those two bytes, or its first bytes (up to [`PREFIX`]) are those.
    #[inline]
    fn begins_some(&self, bytes: &[u8], at: usize) -> bool {
        let pair = usize::from(bytes[at]) << 8 | usize::from(bytes[at + 1]);
        if !get(&self.exact, pair) {
            return false;
        }
        get(&self.whole, pair)
            || (3..=PREFIX).any(|n| {
                bytes
                    .get(at..at + n)
                    .is_some_and(|prefix| get(&self.prefixes[n - 3], hashed(prefix)))
            })
    }

    /// The bits of `mask` (positions `at + bit`) whose two bytes begin some keyword: each looked
    /// up with no branch on the answer (most fail, at no pattern a predictor could learn).
    fn exact_pairs(&self, bytes: &[u8], at: usize, mut mask: u32) -> u32 {
        let mut kept = 0;
        while mask != 0 {
            let bit = mask.trailing_zeros();
            mask &= mask - 1;
            let here = at + bit as usize;
            let pair = usize::from(bytes[here]) << 8 | usize::from(bytes[here + 1]);
            kept |= u32::from(get(&self.exact, pair)) << bit;
        }
        kept
    }

    /// Whether a keyword of the set may start at `at`: a word starts there and its two bytes
    /// begin one.
    fn candidate(&self, bytes: &[u8], at: usize) -> bool {
        if at + 1 >= bytes.len() {
            return false;
        }
        let byte = bytes[at];
        WORD[byte as usize]
            && (at == 0
                || !WORD[bytes[at - 1] as usize]
                || (at >= 2
                    && bytes[at - 2] == b'\\'
                    && matches!(bytes[at - 1], b'n' | b't' | b'r')))
            && self.begins_some(bytes, at)
    }

    /// The candidates in `bytes`, in order.
    pub fn candidates<'a>(&'a self, bytes: &'a [u8]) -> Candidates<'a> {
        Candidates {
            pairs: self,
            bytes,
            at: 0,
            mask: 0,
            mask_at: 0,
            wide: wide::available(),
        }
    }
}

fn set(bits: &mut [u64; 1024], at: usize) {
    bits[at >> 6] |= 1 << (at & 63);
}

fn get(bits: &[u64; 1024], at: usize) -> bool {
    bits[at >> 6] >> (at & 63) & 1 != 0
}

/// How many of a keyword's first bytes are looked for before the keyword automaton reads it
/// (`test_` and `live_` begin words every log writes).
const PREFIX: usize = 6;

/// Up to [`PREFIX`] bytes hashed to 16 bits (Fibonacci hashing, salted by the length): a
/// keyword's first bytes, or a text's.
fn hashed(bytes: &[u8]) -> usize {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    let salted = u64::from_le_bytes(word) ^ (bytes.len() as u64) << 56;
    (salted.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize
}

/// Adds `byte` to a set kept as a bit per high nibble, by low nibble.
fn add(set: &mut [u8; 16], byte: u8) {
    set[usize::from(byte & 0x0F)] |= 1 << (byte >> 4);
}

/// The candidates of a text, in order.
pub(super) struct Candidates<'a> {
    pairs: &'a Pairs,
    bytes: &'a [u8],
    /// the first position not yet tested
    at: usize,
    /// positions `mask_at + bit` a 32-at-once test left to check exactly
    mask: u32,
    mask_at: usize,
    wide: bool,
}

impl Candidates<'_> {
    /// Tests positions one at a time only (the 32-at-once test's reference).
    #[cfg(test)]
    fn narrow(mut self) -> Self {
        self.wide = false;
        self
    }
}

impl Iterator for Candidates<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        loop {
            while self.mask != 0 {
                let at = self.mask_at + self.mask.trailing_zeros() as usize;
                self.mask &= self.mask - 1;
                if self.pairs.begins_some(self.bytes, at) {
                    return Some(at);
                }
            }
            if self.at + 1 >= self.bytes.len() {
                return None;
            }
            if self.wide && self.at >= 2 && self.at + 34 <= self.bytes.len() {
                self.mask = self.pairs.exact_pairs(
                    self.bytes,
                    self.at,
                    wide::mask(self.pairs, self.bytes, self.at),
                );
                self.mask_at = self.at;
                self.at += 32;
                continue;
            }
            let at = self.at;
            self.at += 1;
            if self.pairs.candidate(self.bytes, at) {
                return Some(at);
            }
        }
    }
}

/// The 32-at-once test (AVX2).
#[allow(unsafe_code)]
mod wide {
    use super::Pairs;

    #[cfg(target_arch = "x86_64")]
    pub fn available() -> bool {
        std::is_x86_feature_detected!("avx2")
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn available() -> bool {
        false
    }

    /// Bit `i` set when position `at + i` may start a keyword (checked exactly after). Needs
    /// `2 <= at` and `at + 34 <= bytes.len()`, and AVX2 ([`available`]).
    #[cfg(target_arch = "x86_64")]
    pub fn mask(pairs: &Pairs, bytes: &[u8], at: usize) -> u32 {
        assert!(at >= 2 && at + 34 <= bytes.len());
        // SAFETY: AVX2 is present (the caller asked `available`), and every load reads 32
        // bytes from `at - 2` to `at + 2`, all inside `bytes` (asserted above)
        unsafe { mask_avx2(pairs, bytes.as_ptr().add(at - 2)) }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn mask(_: &Pairs, _: &[u8], _: usize) -> u32 {
        unreachable!("the 32-at-once test runs only where available() says it can")
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn mask_avx2(pairs: &Pairs, base: *const u8) -> u32 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's bounds: base..base + 36 lies inside the text
        let (before2, before, here, next, after_next) = unsafe {
            (
                _mm256_loadu_si256(base.cast()),
                _mm256_loadu_si256(base.add(1).cast()),
                _mm256_loadu_si256(base.add(2).cast()),
                _mm256_loadu_si256(base.add(3).cast()),
                _mm256_loadu_si256(base.add(4).cast()),
            )
        };
        let splat = |b: u8| _mm256_set1_epi8(b as i8);
        // `lo < x < hi` on signed bytes: a byte past ASCII is negative, never inside
        let between = |x: __m256i, lo: u8, hi: u8| {
            _mm256_and_si256(
                _mm256_cmpgt_epi8(x, splat(lo)),
                _mm256_cmpgt_epi8(splat(hi), x),
            )
        };
        let word = |x: __m256i| {
            let digit = between(x, b'0' - 1, b'9' + 1);
            let upper = between(x, b'A' - 1, b'Z' + 1);
            let lower = between(x, b'a' - 1, b'z' + 1);
            let underscore = _mm256_cmpeq_epi8(x, splat(b'_'));
            _mm256_or_si256(
                _mm256_or_si256(digit, upper),
                _mm256_or_si256(lower, underscore),
            )
        };
        // membership of a byte in a set given as a bit per high nibble, by low nibble
        let high_bit = _mm256_setr_epi8(
            1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, -128, 0,
            0, 0, 0, 0, 0, 0, 0,
        );
        let low_nibble = splat(0x0F);
        let member = |x: __m256i, table: &[u8; 16]| {
            let table = _mm256_broadcastsi128_si256(
                // SAFETY: 16 bytes read from a 16-byte array
                unsafe { _mm_loadu_si128(table.as_ptr().cast()) },
            );
            let low = _mm256_and_si256(x, low_nibble);
            let high = _mm256_and_si256(_mm256_srli_epi16(x, 4), low_nibble);
            let bits = _mm256_and_si256(
                _mm256_shuffle_epi8(table, low),
                _mm256_shuffle_epi8(high_bit, high),
            );
            _mm256_xor_si256(_mm256_cmpeq_epi8(bits, _mm256_setzero_si256()), splat(0xFF))
        };
        let escaped = _mm256_and_si256(
            _mm256_cmpeq_epi8(before2, splat(b'\\')),
            _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_cmpeq_epi8(before, splat(b'n')),
                    _mm256_cmpeq_epi8(before, splat(b't')),
                ),
                _mm256_cmpeq_epi8(before, splat(b'r')),
            ),
        );
        let edge = _mm256_or_si256(_mm256_xor_si256(word(before), splat(0xFF)), escaped);
        let starts = _mm256_and_si256(edge, member(here, &pairs.first));
        let two = _mm256_and_si256(
            member(here, &pairs.two_first),
            member(next, &pairs.two_second),
        );
        let longer = _mm256_and_si256(
            member(next, &pairs.second),
            member(after_next, &pairs.third),
        );
        let candidates = _mm256_and_si256(starts, _mm256_or_si256(two, longer));
        _mm256_movemask_epi8(candidates) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEYWORDS: [&[u8]; 7] = [
        b"SG.", b"glpat-", b"xoxb-", b"AKIA", b"dop_v1_", b"_x", b"gl",
    ];

    fn pairs() -> Pairs {
        Pairs::new(KEYWORDS.into_iter())
    }

    #[test]
    fn word_starts_that_begin_a_keyword() {
        let pairs = pairs();
        let text = br#"SG.a xSG.b "SG.c" \nSG.d \\tglpat- nSG. AKIAx _xy SGx AKx glx"#;
        let found: Vec<usize> = pairs.candidates(text).collect();
        let narrow: Vec<usize> = pairs.candidates(text).narrow().collect();
        assert_eq!(found, narrow);
        let words: Vec<String> = found
            .iter()
            .map(|&at| String::from_utf8_lossy(&text[at..at + 2]).into_owned())
            .collect();
        assert_eq!(words, ["SG", "SG", "SG", "gl", "AK", "_x", "gl"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_wide_test_finds_what_the_narrow_one_does(
            text in proptest::collection::vec(
                prop_oneof![
                    Just(b'S'), Just(b'G'), Just(b'.'), Just(b'\\'), Just(b'n'), Just(b't'),
                    Just(b'r'), Just(b' '), Just(b'g'), Just(b'l'), Just(b'_'), Just(b'x'),
                    Just(b'A'), Just(b'K'), Just(0xC3u8), any::<u8>(),
                ],
                0..300,
            )
        ) {
            // both may let through a position no keyword starts at (the hashed prefixes, the
            // nibble sets), which the automaton then reads and drops; at every position a
            // keyword does start, the two agree
            let pairs = pairs();
            let starts = |at: &usize| KEYWORDS.iter().any(|k| text[*at..].starts_with(k));
            let wide: Vec<usize> = pairs.candidates(&text).filter(starts).collect();
            let narrow: Vec<usize> = pairs.candidates(&text).narrow().filter(starts).collect();
            prop_assert_eq!(wide, narrow);
        }
    }
}
