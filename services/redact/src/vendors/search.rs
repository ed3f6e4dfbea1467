//! Where the table's keywords and the context rule's name words stand in a text: the one
//! search both [`super::find`] and [`super::keyword_hits`] read.
//!
//! A keyword counts only where its reader can claim something, so the keywords are searched
//! in two sets:
//! - **anywhere**: the context rule's name words (they end a name: `api_key`, `clientSecret`),
//!   a checksummed row's keywords (the checksum is evidence enough for a token glued to a word)
//!   and keywords that do not start with a word's byte. This set is small, so aho-corasick
//!   searches it with its SIMD prefilter.
//! - **at a word's start**: every other row's keywords, which are read only where a word starts
//!   ([`super::starts_word`]). One pass over the text finds the word starts whose first two
//!   bytes begin some keyword ([`super::word_starts`]), and the keyword automaton is run
//!   anchored there alone.
//!
//! A byte-at-a-time automaton over all ~400 keywords read every byte of the text and was a
//! third of the redactor's time (issue 19's bench); the two sets find the same keywords where
//! they can be claimed at less than half that cost.

use aho_corasick::{AhoCorasick, AhoCorasickKind, Anchored, Input, MatchKind, StartKind};

use super::Found;
use super::word_starts::{Candidates, Pairs};

/// One keyword found: where it starts, the keyword, and what it and every shorter keyword of
/// its set it starts with are.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hit<'s> {
    pub start: usize,
    pub keyword: &'s str,
    pub found: &'s [Found],
}

/// One set of keywords and its automaton.
struct Set {
    finder: AhoCorasick,
    keywords: Vec<String>,
    /// per keyword: what it is, and what each shorter keyword of the set it starts with is (a
    /// leftmost-longest search reports the longest at each start)
    found_as: Vec<Vec<Found>>,
}

impl Set {
    fn build(entries: &[(String, Found)], start: StartKind) -> Set {
        let mut keywords: Vec<String> = Vec::new();
        let mut own: Vec<Vec<Found>> = Vec::new();
        for (keyword, found) in entries {
            match keywords.iter().position(|k| k == keyword) {
                Some(at) => own[at].push(*found),
                None => {
                    keywords.push(keyword.clone());
                    own.push(vec![*found]);
                }
            }
        }
        let found_as = keywords
            .iter()
            .map(|keyword| {
                let mut all: Vec<Found> = Vec::new();
                for (other, found) in keywords.iter().zip(&own) {
                    if keyword.starts_with(other.as_str()) {
                        all.extend(found.iter().copied());
                    }
                }
                all.dedup();
                all
            })
            .collect();
        let mut builder = AhoCorasick::builder();
        builder
            .match_kind(MatchKind::LeftmostLongest)
            .start_kind(start);
        if start == StartKind::Anchored {
            // run at one place at a time: the fastest transitions, no prefilter to set up
            builder.kind(Some(AhoCorasickKind::DFA));
        }
        let finder = builder
            .build(&keywords)
            .expect("the vendor keywords build an automaton");
        Set {
            finder,
            keywords,
            found_as,
        }
    }

    fn hit(&self, start: usize, pattern: usize) -> Hit<'_> {
        Hit {
            start,
            keyword: &self.keywords[pattern],
            found: &self.found_as[pattern],
        }
    }
}

/// Both sets, and the byte pairs the word-start set's keywords begin with.
pub(super) struct Search {
    anywhere: Set,
    at_words: Set,
    /// the byte pairs the word-start set's keywords begin with
    pairs: Pairs,
}

impl Search {
    /// `entries`: each keyword, what it is, and whether it is read anywhere (`true`) or only
    /// where a word starts. Every word-start keyword is at least two bytes and starts with a
    /// word's byte.
    pub fn new(entries: &[(String, Found, bool)]) -> Search {
        let pick = |anywhere: bool| -> Vec<(String, Found)> {
            entries
                .iter()
                .filter(|entry| entry.2 == anywhere)
                .map(|(keyword, found, _)| (keyword.clone(), *found))
                .collect()
        };
        let at_words = pick(false);
        let pairs = Pairs::new(at_words.iter().map(|(keyword, _)| keyword.as_bytes()));
        Search {
            anywhere: Set::build(&pick(true), StartKind::Unanchored),
            at_words: Set::build(&at_words, StartKind::Anchored),
            pairs,
        }
    }

    /// Every keyword hit in the text, in order of where it starts.
    pub fn hits<'s>(&'s self, text: &'s str) -> Hits<'s> {
        let mut hits = Hits {
            search: self,
            text,
            anywhere_from: 0,
            candidates: self.pairs.candidates(text.as_bytes()),
            next_anywhere: None,
            next_word: None,
        };
        hits.next_anywhere = hits.find_anywhere();
        hits.next_word = hits.find_at_word();
        hits
    }
}

/// The two sets' hits, merged by where they start.
pub(super) struct Hits<'s> {
    search: &'s Search,
    text: &'s str,
    /// where the anywhere set's search goes on from
    anywhere_from: usize,
    /// where the word-start set's keywords may stand, from where its search goes on
    candidates: Candidates<'s>,
    next_anywhere: Option<Hit<'s>>,
    next_word: Option<Hit<'s>>,
}

impl<'s> Hits<'s> {
    /// The next hit of the anywhere set: the longest keyword at the leftmost start, the search
    /// going on one byte after that start (a keyword inside another is found too).
    fn find_anywhere(&mut self) -> Option<Hit<'s>> {
        let set = &self.search.anywhere;
        let input = Input::new(self.text).span(self.anywhere_from..self.text.len());
        let found = set.finder.find(input)?;
        self.anywhere_from = found.start() + 1;
        Some(set.hit(found.start(), found.pattern().as_usize()))
    }

    /// The next word start where a word-start keyword stands.
    fn find_at_word(&mut self) -> Option<Hit<'s>> {
        let set = &self.search.at_words;
        for at in self.candidates.by_ref() {
            let input = Input::new(self.text)
                .span(at..self.text.len())
                .anchored(Anchored::Yes);
            if let Some(found) = set.finder.find(input) {
                return Some(set.hit(at, found.pattern().as_usize()));
            }
        }
        None
    }
}

impl<'s> Iterator for Hits<'s> {
    type Item = Hit<'s>;

    fn next(&mut self) -> Option<Hit<'s>> {
        let anywhere_first = match (&self.next_anywhere, &self.next_word) {
            (Some(a), Some(w)) => a.start <= w.start,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        if anywhere_first {
            let hit = self.next_anywhere.take();
            self.next_anywhere = self.find_anywhere();
            hit
        } else {
            let hit = self.next_word.take();
            self.next_word = self.find_at_word();
            hit
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search() -> Search {
        let entries = [
            ("SG.".to_owned(), Found::Row(0), false),
            ("glpat-".to_owned(), Found::Row(1), false),
            ("gl".to_owned(), Found::Row(2), false),
            ("token".to_owned(), Found::NameWord(5), true),
            ("ghp_".to_owned(), Found::Row(3), true),
        ];
        Search::new(&entries)
    }

    fn starts(text: &str) -> Vec<(usize, String)> {
        let search = search();
        let hits = search.hits(text);
        hits.map(|hit| (hit.start, hit.keyword.to_owned()))
            .collect()
    }

    fn at(list: &[(usize, &str)]) -> Vec<(usize, String)> {
        list.iter().map(|(at, k)| (*at, (*k).to_owned())).collect()
    }

    #[test]
    fn a_word_start_keyword_is_found_only_where_a_word_starts() {
        assert_eq!(starts("SG.x xSG.y"), at(&[(0, "SG.")]));
        assert_eq!(starts("a=SG.x"), at(&[(2, "SG.")]));
        // after an escaped break, tab or return, as JSON writes them
        assert_eq!(starts(r"x\nSG.y"), at(&[(3, "SG.")]));
        assert_eq!(starts(r"\tSG."), at(&[(2, "SG.")]));
        assert_eq!(starts(r"\\nSG."), at(&[(3, "SG.")]));
        assert_eq!(starts("xnSG."), at(&[]));
    }

    #[test]
    fn the_anywhere_set_is_read_inside_words_and_both_merge_in_order() {
        assert_eq!(
            starts("api_token glpat-x ghp_y xghp_z"),
            at(&[(4, "token"), (10, "glpat-"), (18, "ghp_"), (25, "ghp_")])
        );
    }

    #[test]
    fn the_longest_keyword_at_a_start_stands_for_the_shorter_ones() {
        let search = search();
        let hits: Vec<_> = search.hits("glpat-x gl-y").collect();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].found, &[Found::Row(1), Found::Row(2)]);
        assert_eq!(hits[1].found, &[Found::Row(2)]);
    }
}
