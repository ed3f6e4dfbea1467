//! Small text helpers the lifecycle's steps share: new ids, cutting a text to a bound on a
//! whole line, and quoting a word for a POSIX shell.

/// A new id, `{prefix}-{32 hex}`: a UUIDv7, so ids made one after another sort one after
/// another (74 bits of each are random). A store key made of a random id lands anywhere in its
/// family's B-tree, and every write of a batch dirtied pages of its own: at 10,000 runs the
/// embedded store's commits wrote a third more pages than at 100 (issue 20's scale bench).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", boxfleet_cluster::clock::unique())
}

/// The turn id a seat's delivery is launched under, `turn-{32 hex}` derived from the seat and
/// the delivery: whoever works the delivery — the engine it went to, the next one after a
/// detach, the built-in engine after a crash — launches the same turn, so a repeated launch
/// gets the first one's outcome (DESIGN §6 I13) and a message never starts two jobs.
pub fn turn_id_for_delivery(seat: &str, delivery_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(b"boxfleet turn of delivery\0")
        .chain_update(seat.as_bytes())
        .chain_update(b"\0")
        .chain_update(delivery_id.as_bytes())
        .finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("turn-{hex}")
}

/// `text` cut to at most `max` bytes on a whole line, with a line saying how much was left
/// out; unchanged when it fits.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let kept = &text[..end];
    let kept = kept.rfind('\n').map_or(kept, |i| &kept[..i]);
    let left = text.len() - kept.len();
    format!("{kept}\n[… {left} bytes left out]")
}

/// `value` as one single-quoted POSIX shell word.
pub(crate) fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_keeps_whole_lines_and_says_what_it_left_out() {
        assert_eq!(cut("short", 10), "short");
        let text = "line one\nline two\nline three\n";
        assert_eq!(cut(text, 12), "line one\n[… 21 bytes left out]");
        // a multi-byte character is never split
        assert_eq!(cut("ééé", 3), "é\n[… 4 bytes left out]");
    }

    #[test]
    fn a_quoted_word_survives_its_own_quotes() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert!(new_id("turn").starts_with("turn-"));
        let turn = turn_id_for_delivery("eng", "d-1");
        assert_eq!(turn, turn_id_for_delivery("eng", "d-1"));
        assert_ne!(turn, turn_id_for_delivery("ops", "d-1"));
        assert_eq!(turn.len(), "turn-".len() + 32);
    }
}
