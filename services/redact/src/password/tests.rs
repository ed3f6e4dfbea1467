//! The password rule's unit tests.

use super::*;

proptest::proptest! {
    #[test]
    fn the_key_words_are_the_case_insensitive_searchs_that_end_a_word(
        text in "([pP][aAwW][sSdD][sSwW]?[wWoOpP]?[oOrRhH]?[rRdDaA]?[dDsS]?[eE]?| |_|e|x|=|\n|é){0,40}"
    ) {
        let ends_word = |end: usize| {
            !text.as_bytes().get(end).is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_')
        };
        let expected: Vec<(usize, usize)> = matcher()
            .find_iter(&text)
            .filter(|hit| ends_word(hit.end()))
            .map(|hit| (hit.start(), hit.end()))
            .collect();
        let found: Vec<(usize, usize)> =
            key_words(&text).iter().map(|hit| (hit.start(), hit.end())).collect();
        proptest::prop_assert_eq!(found, expected);
    }
}

fn claims(text: &str) -> Vec<&str> {
    let lines = crate::lines::split(text);
    let mut out = Vec::new();
    find(text, &lines, &mut out);
    out.iter()
        .map(|claim| &text[claim.start..claim.end])
        .collect()
}

#[test]
fn prompts() {
    assert!(is_prompt("Password:"));
    assert!(is_prompt("hunter2 Retype password:"));
    assert!(is_prompt("pwd=x password:"));
    assert!(is_prompt("**Root password:**"));
    assert!(!is_prompt("pwd= password:"));
    assert!(!is_prompt("password: x"));
    assert!(!is_prompt("passwords:"));
    assert!(!is_prompt(
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789Pwd:"
    ));
}

#[test]
fn separators() {
    assert_eq!(claims("password := x"), ["x"]);
    assert_eq!(claims("password == x"), ["x"]);
    assert_eq!(claims("password == \"x\""), ["x"]);
    // a comparison with a number or with code's own name is no password
    assert!(claims("in_current_pass == 0 {").is_empty());
    assert!(claims("if password == self.password {").is_empty());
    assert_eq!(claims("password => x"), ["x"]);
    assert_eq!(claims("password=x"), ["x"]);
    assert!(claims("password::hash(x)").is_empty());
}

#[test]
fn gutter_reads_numbers_and_fractions() {
    let text = "10:00:00.123 Password:\n10:00:01 hunter2\n";
    assert_eq!(claims(text), ["hunter2"]);
    let text = "  12\tPassword:\n  13\t\n  14\thunter2\n";
    assert_eq!(claims(text), ["hunter2"]);
}

#[test]
fn hold_waits_for_the_value() {
    let text = "a\nPassword:\n\n";
    let lines = crate::lines::split(text);
    assert_eq!(hold(text, &lines).line, Some(1));
    let text = "a\nPassword:\nhunter2\n";
    let lines = crate::lines::split(text);
    assert_eq!(hold(text, &lines).line, None);
}
