//! Where a password key's words stand: the case-insensitive search every rule that starts at
//! a key word reads (found once per text, [`key_words`]), and the plain question whether a text
//! holds one.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};

use super::KEY_WORDS;
use super::code::is_ident;

pub(super) fn matcher() -> &'static AhoCorasick {
    static MATCHER: OnceLock<AhoCorasick> = OnceLock::new();
    MATCHER.get_or_init(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(KEY_WORDS)
            .expect("the key words are a valid, small pattern set")
    })
}

/// Whether a text holds a password key's word anywhere (a key or not).
pub(crate) fn mentions_key_word(text: &str) -> bool {
    matcher().find(text).is_some()
}

/// Where a key word stands in the text (one match of the key-word search).
pub(super) type Hit = aho_corasick::Match;

/// Every key word in the text that ends its word, in order (the leftmost-longest search's
/// matches, less those a letter, digit or `_` follows: `passed`, `password_hash` are no key's
/// word): found once and read by each rule that starts at a key word.
pub(super) fn key_words(text: &str) -> Vec<Hit> {
    let ends_word = |hit: &Hit| !text.as_bytes().get(hit.end()).is_some_and(|&b| is_ident(b));
    let Some(starts) = word_starts() else {
        return matcher().find_iter(text).filter(ends_word).collect();
    };
    let mut hits = Vec::new();
    let mut at = 0;
    while let Some(start) = starts.find_in(text, aho_corasick::Span::from(at..text.len())) {
        let input = aho_corasick::Input::new(text)
            .span(start.start()..text.len())
            .anchored(aho_corasick::Anchored::Yes);
        match anchored_matcher().find(input) {
            Some(hit) => {
                at = hit.end();
                if ends_word(&hit) {
                    hits.push(hit);
                }
            }
            None => at = start.start() + 1,
        }
    }
    hits
}

/// The key words' first three letters in every case (`pas`, `pWd`, …): every key word starts
/// with one, and unlike a case-insensitive search of the words (which looks for each `p` and
/// `P`) they can be searched many bytes at a time. `None` where that search is not available.
fn word_starts() -> Option<&'static aho_corasick::packed::Searcher> {
    static STARTS: OnceLock<Option<aho_corasick::packed::Searcher>> = OnceLock::new();
    STARTS
        .get_or_init(|| {
            let mut builder = aho_corasick::packed::Config::new().builder();
            for start in ["pas", "pwd"] {
                for case in 0..8u8 {
                    let variant: String = start
                        .chars()
                        .enumerate()
                        .map(|(i, c)| {
                            if case >> i & 1 == 1 {
                                c.to_ascii_uppercase()
                            } else {
                                c
                            }
                        })
                        .collect();
                    builder.add(variant);
                }
            }
            builder.build()
        })
        .as_ref()
}

/// [`matcher`], run anchored where a key word's first three letters stand.
fn anchored_matcher() -> &'static AhoCorasick {
    static MATCHER: OnceLock<AhoCorasick> = OnceLock::new();
    MATCHER.get_or_init(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .start_kind(aho_corasick::StartKind::Anchored)
            .build(KEY_WORDS)
            .expect("the key words are a valid, small pattern set")
    })
}
