//! The key rule's unit tests.

use super::backward::end_line_material;
use super::line::{cases, is_b64, is_path_char, is_path_like, match_gutter};
use super::*;

/// `keyish` as it was written before its one-pass form, to check the two agree.
fn keyish_reference(bytes: &[u8]) -> (bool, bool) {
    let mut i = 0;
    let mut found = false;
    let mut exact = false;
    while i < bytes.len() {
        if !(is_b64(bytes[i]) || bytes[i] == b'=') {
            i += 1;
            continue;
        }
        let s = i;
        while i < bytes.len() && (is_b64(bytes[i]) || bytes[i] == b'=') {
            i += 1;
        }
        let run = &bytes[s..i];
        let (u, l, d) = cases(run);
        if u && l && (run.len() >= MIN_FULL_BACK || (run.len() >= MIN_PIECE && d)) {
            found = true;
            let w = run.len();
            exact |= (60..=80).contains(&w) || w + 1 == 64 || w + 1 == 70 || w + 1 == 76;
        }
        if memchr::memchr(b'=', run)
            .is_some_and(|at| run.len() - at >= 5 && run[..at].iter().all(|&b| b == b'+'))
        {
            found = true;
        }
    }
    let mut i = 0;
    while !found && i < bytes.len() {
        if !is_path_char(bytes[i]) {
            i += 1;
            continue;
        }
        let s = i;
        while i < bytes.len() && is_path_char(bytes[i]) {
            i += 1;
        }
        found |= is_path_like(&bytes[s..i]);
    }
    (found, exact)
}

proptest::proptest! {
    #[test]
    fn keyish_in_one_pass_reads_as_it_did(
        pieces in proptest::collection::vec(proptest::sample::select(vec![
            "A", "b", "9", "+", "/", "=", ".", "_", "-", " ", "é", "==", "+++=",
            "AbCdEfGh", "abcdefgh", "ABCDEFGH", "12345678", "a/B.c_D-e",
            "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", "=AbCd", "+=Ab12",
        ]), 0..24)
    ) {
        let line = pieces.concat();
        proptest::prop_assert_eq!(keyish(line.as_bytes()), keyish_reference(line.as_bytes()));
    }
}

fn b64(seed: u64, width: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..width)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ALPHABET[(state % 64) as usize] as char
        })
        .collect()
}

#[test]
fn reading_only_the_windows_around_armours_finds_what_reading_everything_does() {
    let key = |seed: u64| {
        let body: Vec<String> = (0..20).map(|i| b64(seed + i, 64)).collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            body.join("\n")
        )
    };
    let tail_only = |seed: u64| {
        let body: Vec<String> = (0..10).map(|i| b64(seed + i, 64)).collect();
        format!("{}\nq3O4Ou\n-----END PRIVATE KEY-----\n", body.join("\n"))
    };
    let filler = |n: usize| "ordinary build output, nothing secret\n".repeat(n);
    let keyish_filler = |n: usize| {
        (0..n)
            .map(|i| format!("{}\n", b64(900 + i as u64, 64)))
            .collect::<String>()
    };
    let texts = [
        format!(
            "{}{}{}{}{}",
            filler(3000),
            key(1),
            filler(5000),
            key(2),
            filler(10)
        ),
        format!("{}{}{}", keyish_filler(3000), tail_only(3), filler(4000)),
        format!(
            "{}-----BEGIN RSA PRIVATE KEY-----\n{}",
            filler(4000),
            keyish_filler(3000)
        ),
        format!(
            "{}{}{}{}",
            key(4),
            filler(1700),
            tail_only(5),
            keyish_filler(1200)
        ),
    ];
    for text in texts {
        let lines = crate::lines::split(&text);
        let mut windowed = Vec::new();
        find(&text, &lines, &[], &mut windowed);
        let mut whole = Vec::new();
        find_in(&text, &lines, &[], 0, &mut whole);
        assert!(!whole.is_empty());
        assert_eq!(windowed, whole);
    }
}

#[test]
fn gutter_shapes_match() {
    assert_eq!(match_gutter(b"  13\tMIIE", b"  12\t"), Some(5));
    assert_eq!(match_gutter(b"f.pem-13-MIIE", b"f.pem:12:"), Some(9));
    assert_eq!(match_gutter(b"+MIIE", b"+"), Some(1));
    assert_eq!(
        match_gutter(b"2024-01-01T10:00:01Z MIIE", b"2024-01-01T10:00:00.123Z "),
        Some(21)
    );
    assert_eq!(match_gutter(b"MIIE", b"x "), None);
}

#[test]
fn end_line_pieces() {
    let t = b"=== RUN TestSHA256Sum x -----END";
    assert_eq!(end_line_material(t, 0, 24), Some(8));
    let t = b"[Worker1A] -----END";
    assert_eq!(end_line_material(t, 0, 11), Some(1));
    let t = b"foo: -----END";
    assert_eq!(end_line_material(t, 0, 5), None);
}

mod claimed {
    use super::*;

    fn keys_of(text: &str, claimed: &[Claim]) -> Vec<(usize, usize)> {
        let lines = crate::lines::split(text);
        let mut out = Vec::new();
        find(text, &lines, claimed, &mut out);
        out.iter().map(|c| (c.start, c.end)).collect()
    }

    #[test]
    fn a_line_whose_run_another_rule_claimed_is_no_line_of_the_key() {
        let token = "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        let text = format!("{token}\n-----END PRIVATE KEY-----\n");
        let unclaimed = keys_of(&text, &[]);
        // unclaimed, the line reads as a mixed-case name as wide as a key's line
        assert_eq!(unclaimed, vec![(0, text.len() - 1)]);
        let claim = Claim {
            start: 0,
            end: token.len(),
            kind: Kind::Token("github_token"),
        };
        assert_eq!(keys_of(&text, &[claim]), Vec::<(usize, usize)>::new());
    }

    #[test]
    fn a_claimed_piece_before_an_end_is_no_key_material() {
        let text = "pwd=Hunter2Abc -----END PRIVATE KEY-----\n";
        let claim = Claim {
            start: 4,
            end: 14,
            kind: Kind::Password,
        };
        assert_eq!(keys_of(text, &[claim]), Vec::<(usize, usize)>::new());
    }
}

#[test]
fn the_private_key_marker_the_hold_looks_for_is_the_kinds() {
    assert_eq!(hold::PRIVATE_KEY_MARKER, Kind::PrivateKey.to_string());
}
