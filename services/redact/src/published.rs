//! Credentials published as examples by their vendor (`rules/published_examples.tsv`): AWS's
//! documented `AKIAIOSFODNN7EXAMPLE`, the example keys Firebase's SDK ships. Anyone can read
//! them where they were published, so a transcript holding one gives nothing away and the
//! claim on it is dropped. Only a claim that is exactly a row's value is: the rows are whole
//! keys, and a key that differs from one by a character is some other key.

use std::collections::HashSet;
use std::sync::LazyLock;

const TABLE: &str = include_str!("../rules/published_examples.tsv");

static PUBLISHED: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    TABLE
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| line.split('\t').next().unwrap_or(line))
        .collect()
});

/// Whether `claimed` is one of the published example credentials, whole.
pub(crate) fn is_published_example(claimed: &str) -> bool {
    PUBLISHED.contains(claimed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_names_its_vendor_and_where_it_was_published() {
        let rows: Vec<&str> = TABLE
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .collect();
        assert!(rows.len() >= 18);
        for row in rows {
            let fields: Vec<&str> = row.split('\t').collect();
            assert_eq!(fields.len(), 3, "value, vendor, source: {row}");
            assert!(fields.iter().all(|f| !f.trim().is_empty()), "{row}");
            assert_eq!(
                fields[0].trim(),
                fields[0],
                "no blanks around a value: {row}"
            );
        }
    }

    #[test]
    fn only_the_whole_value_is_published() {
        assert!(is_published_example("AKIAIOSFODNN7EXAMPLE"));
        assert!(!is_published_example("AKIAIOSFODNN7EXAMPLF"));
        assert!(!is_published_example("AKIAIOSFODNN7EXAMPL"));
    }
}
