//! The password rule, by the spec's own examples (redaction paragraph and the live tail's).

mod support;

use boxfleet_redact::{Stream, redact, settled};
use proptest::prelude::*;

const R: &str = "[REDACTED:password]";

fn r(text: &str) -> String {
    text.replace("{R}", R)
}

/// Redacts, checks idempotence, and compares.
#[track_caller]
fn check(input: &str, want: &str) {
    let want = r(want);
    let got = redact(input);
    assert_eq!(got, want, "redacting {input:?}");
    assert_eq!(redact(&got), got, "redacting twice {input:?}");
}

#[track_caller]
fn untouched(input: &str) {
    check(input, input);
}

// ---- keys -----------------------------------------------------------------------------------

#[test]
fn key_words_and_names_ending_in_them() {
    check("password: hunter2", "password: {R}");
    check("passwd=hunter2", "passwd={R}");
    check("pwd=hunter2", "pwd={R}");
    check("passphrase: hunter2", "passphrase: {R}");
    check("db_password=hunter2", "db_password={R}");
    check("ROOT_PASSWORD=hunter2", "ROOT_PASSWORD={R}");
    check("Retype password: hunter2", "Retype password: {R}");
    check("Root password: hunter2", "Root password: {R}");
    check("user.password=hunter2", "user.password={R}");
    check("PassWord: hunter2", "PassWord: {R}");
}

#[test]
fn a_longer_word_is_no_key() {
    untouched("passwords: are stored hashed");
    untouched("Reset your passwords: it takes a minute");
    untouched("password_hash: abc");
    untouched("the password is long");
}

#[test]
fn a_key_that_is_the_value_of_the_key_before_it_is_no_key() {
    check("pwd= password:", "pwd= {R}");
}

#[test]
fn separators_and_operators() {
    check("password: x1", "password: {R}");
    check("password = x1", "password = {R}");
    check("password := \"x1\"", "password := \"{R}\"");
    check("if password == \"x1\" {", "if password == \"{R}\" {");
    check("'password' => 'x1',", "'password' => '{R}',");
    check("password=>x1", "password=>{R}");
    check("password:=x1", "password:={R}");
    check("password==x1", "password=={R}");
}

#[test]
fn quoted_keys() {
    check(r#"{"password": "x"}"#, r#"{"password": "{R}"}"#);
    check(r#"{"password":"x"}"#, r#"{"password":"{R}"}"#);
    check("'password' => 'x'", "'password' => '{R}'");
    check(r#""db_password": "x""#, r#""db_password": "{R}""#);
    check(r#"{"password": ""}"#, r#"{"password": ""}"#);
}

#[test]
fn a_quote_closes_only_the_keys_own_string() {
    untouched(r#"app.post("POST /auth/password": () => handler)"#);
    untouched(r#"routes = {"POST /auth/password": () => reset()}"#);
}

#[test]
fn still_published_a_quoted_key_with_other_characters() {
    untouched(r#"{"Admin Password": "x"}"#);
}

#[test]
fn markup_closes_the_key() {
    check("**Password**: x", "**Password**: {R}");
    check("**Password:** x", "**Password:** {R}");
    check("`password`: x", "`password`: {R}");
    check("| Password: | x |", "| Password: | {R} |");
    check("| **Password:** | x |", "| **Password:** | {R} |");
    check("**Root password:** x", "**Root password:** {R}");
}

#[test]
fn markup_over_the_value() {
    check("**Password:**\nhunter2\n", "**Password:**\n{R}\n");
    check("- **Password:**\n  hunter2\n", "- **Password:**\n  {R}\n");
}

#[test]
fn a_token_run_into_the_key_is_no_key() {
    // The token rule claims sk-…; a key inside it is no key (checked with the prompt too).
    let text = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHPwd: x";
    let got = redact(text);
    assert!(!got.contains("Pwd: [REDACTED:password]"), "{got}");
}

// ---- the value --------------------------------------------------------------------------------

#[test]
fn value_stops_at_a_marker_and_an_armour() {
    untouched("password: [REDACTED:password]");
    check(
        "password: ab[REDACTED:github]",
        "password: {R}[REDACTED:github]",
    );
    check("password=ab-----BEGIN", "password={R}-----BEGIN");
    untouched("password: -----BEGIN RSA PRIVATE KEY-----");
}

#[test]
fn escaped_break_inside_a_value() {
    check(r"pwd=ab\ncd", r"pwd={R}\n{R}");
}

#[test]
fn still_published_punctuation_after_an_escaped_break() {
    check(r"pwd=ab\n!!", r"pwd={R}\n!!");
}

#[test]
fn punctuation_is_a_value() {
    check("password: ***", "password: {R}");
}

// ---- the value on a later line ------------------------------------------------------------------

#[test]
fn value_on_the_next_line() {
    check("Password:\nhunter2\n", "Password:\n{R}\n");
    check("Password:\n\n\nhunter2\n", "Password:\n\n\n{R}\n");
}

#[test]
fn value_under_a_line_number_gutter() {
    check(
        "  9\tPassword:\n 10\thunter2\n",
        "  9\tPassword:\n 10\t{R}\n",
    );
    check(
        "  9\tPassword:\n 10\t\n 11\thunter2\n",
        "  9\tPassword:\n 10\t\n 11\t{R}\n",
    );
}

#[test]
fn value_under_a_grep_context_gutter() {
    check(
        "config.yml-12-  password:\nconfig.yml-13-    hunter2\n",
        "config.yml-12-  password:\nconfig.yml-13-    {R}\n",
    );
}

#[test]
fn value_under_a_diff_plus() {
    check("+password:\n+  hunter2\n", "+password:\n+  {R}\n");
}

#[test]
fn value_under_a_timestamp_whose_fraction_changes() {
    check(
        "2024-05-01T10:00:00.123Z Password:\n2024-05-01T10:00:01Z hunter2\n",
        "2024-05-01T10:00:00.123Z Password:\n2024-05-01T10:00:01Z {R}\n",
    );
}

#[test]
fn value_in_an_echo_a_line_at_a_time() {
    check(
        "echo \"Password:\" >> notes.txt\necho \"\" >> notes.txt\necho \"hunter2\" >> notes.txt\n",
        "echo \"Password:\" >> notes.txt\necho \"\" >> notes.txt\necho \"{R}\" >> notes.txt\n",
    );
    check(
        "echo \"Password:\" > notes.txt\necho \"hunter2\" >> notes.txt\n",
        "echo \"Password:\" > notes.txt\necho \"{R}\" >> notes.txt\n",
    );
}

#[test]
fn value_in_a_concatenated_string() {
    check(
        "s = \"Password:\" +\n    \"hunter2\" +\n    \"more\";\n",
        "s = \"Password:\" +\n    \"{R}\" +\n    \"more\";\n",
    );
    check(
        "s = \"Password:\" +\n    \"hunter2\";\n",
        "s = \"Password:\" +\n    \"{R}\";\n",
    );
}

#[test]
fn value_in_a_table_row_below() {
    check("| Password: |\n| hunter2 |\n", "| Password: |\n| {R} |\n");
}

#[test]
fn a_key_where_the_value_would_be_ends_the_read() {
    check(
        "Password:\nRetype password:\n",
        "Password:\nRetype password:\n",
    );
    check(
        "Password:\nhunter2 Retype password:\nhunter2\n",
        "Password:\n{R} Retype password:\n{R}\n",
    );
}

#[test]
fn a_line_not_ending_in_the_punctuation_makes_it_the_value() {
    check(
        "echo \"Password:\" >> f\nls -la\n",
        "echo \"Password:{R} >> f\nls -la\n",
    );
}

// ---- what is still published --------------------------------------------------------------------

#[test]
fn still_published_a_blank_numbered_line_that_lost_its_tab() {
    check(
        "  9\tPassword:\n 10\n 11\thunter2\n",
        "  9\tPassword:\n {R}\n 11\thunter2\n",
    );
}

#[test]
fn still_published_a_value_shaped_like_the_lines_first_word() {
    check(
        "pass1 Retype password:\npass2 next\n",
        "pass1 Retype password:\npass2 {R}\n",
    );
}

#[test]
fn still_published_a_list_dash_after_a_logged_message() {
    check(
        "msg: - Password:\n- hunter2x9\n",
        "msg: - Password:\n{R} hunter2x9\n",
    );
}

#[test]
fn still_published_a_strings_first_line() {
    let text = r#"{"text": "> Password:\n> hunter2x9"}"#;
    assert!(redact(text).contains("hunter2x9"));
    untouched(r#"{"text": "| Password: |\n| hunter2x9 |"}"#);
}

#[test]
fn still_published_a_yaml_block_scalar_after_its_first_word() {
    check("password: |\n  hunter2\n", "password: {R}\n  hunter2\n");
    check("password: >-\n  hunter2\n", "password: {R}\n  hunter2\n");
}

#[test]
fn still_published_a_diff_with_a_changed_value() {
    check(" password:\n-old\n+new\n", " password:\n{R}\n+new\n");
    check(
        " password:\n-  old\n+  new\n",
        " password:\n{R}  old\n+  new\n",
    );
}

#[test]
fn still_published_a_value_holding_its_own_key_under_an_echo() {
    check(
        "echo \"Password:\" >> f\necho \"hunter2 password:\" >> f\n",
        "echo \"Password:{R} >> f\necho \"hunter2 password:\" >> f\n",
    );
    check(
        "| Password: |\n| > Retype password: |\n",
        "| Password: {R}\n| > Retype password: |\n",
    );
}

// ---- what it costs -------------------------------------------------------------------------------

#[test]
fn costs_a_logged_prompt_over_the_next_message() {
    check(
        "msg=\"password:\"\nmsg=\"connected\"\n",
        "msg=\"password:\"\nmsg=\"{R}\"\n",
    );
}

#[test]
fn costs_a_go_case_over_the_next_line() {
    check(
        "\tcase \"password\":\n\t\treturn true\n",
        "\tcase \"password\":\n\t\t{R} true\n",
    );
}

#[test]
fn a_json_key_whose_value_is_on_the_next_line() {
    check(
        "{\"password\":\n  \"hunter2\"}\n",
        "{\"password\":\n  \"{R}\"}\n",
    );
}

#[test]
fn costs_a_code_span_in_prose() {
    check("Use `Password:` hunter2 here", "Use `Password:` {R} here");
}

#[test]
fn costs_a_choice_between_two_strings() {
    check(
        r#"type = masked ? "password" : "text""#,
        r#"type = masked ? "password" : "{R}""#,
    );
}

#[test]
fn costs_the_shells_pwd_before_a_colon() {
    check(
        "docker run -v `pwd`:/app img",
        "docker run -v `pwd`:{R} img",
    );
}

// ---- prompts ----------------------------------------------------------------------------------------

#[test]
fn prompts_are_left_as_written() {
    untouched("Password:");
    untouched("hunter2 Retype password:");
    check("pwd=x password:", "pwd={R} password:");
}

// ---- the live tail ------------------------------------------------------------------------------------

#[test]
fn a_key_waits_for_the_line_that_decides_its_value() {
    let text = "ok\nPassword:\n";
    assert_eq!(settled(text).len, 3);
    let text = "ok\nPassword:\n\n";
    assert_eq!(settled(text).len, 3);
    let text = "ok\nPassword:\nhunter2\n";
    assert_eq!(settled(text).len, text.len());
}

#[test]
fn a_key_followed_by_punctuation_and_more_waits_one_line() {
    let text = "msg=\"Enter password:\" level=info\n";
    assert_eq!(settled(text).len, 0);
    let text = "msg=\"Enter password:\" level=info\nnext\n";
    assert_eq!(settled(text).len, text.len());
}

#[test]
fn a_go_case_waits_one_line() {
    let text = "case \"password\":\n";
    assert_eq!(settled(text).len, 0);
    let text = "case \"password\":\n\treturn true\n";
    assert_eq!(settled(text).len, text.len());
}

#[test]
fn a_run_of_prompt_lines_is_shown_as_written() {
    let text = "password:\"\npassword:\"\npassword:\"\n";
    let s = settled(text);
    assert_eq!(s.len, "password:\"\npassword:\"\n".len());
}

#[test]
fn the_stream_shows_what_redact_does() {
    let text = "ok\n  9\tPassword:\n 10\t\n 11\thunter2\nmsg=\"password:\"\nmsg=\"connected\"\n";
    let mut stream = Stream::new();
    let mut shown = String::new();
    for ch in text.chars() {
        shown.push_str(&stream.push(&ch.to_string()));
    }
    shown.push_str(&stream.finish());
    assert_eq!(shown, redact(text));
}

// ---- the hold contract, as a property --------------------------------------------------------------

fn piece() -> impl Strategy<Value = String> {
    let gutters = prop::sample::select(vec![
        "",
        "  9\t",
        " 10\t",
        "+",
        "-",
        " ",
        "echo \"",
        "msg=\"",
        "| ",
        "12:00:00.1 ",
        "12:00:01 ",
        "- ",
        "**",
        "\t",
        "\"",
    ]);
    let keys = prop::sample::select(vec![
        "password",
        "Password",
        "pwd",
        "db_password",
        "Retype password",
        "\"password\"",
        "passwords",
        "**Password",
        "`pwd`",
        "",
    ]);
    let seps = prop::sample::select(vec![":", "=", ":=", "==", "=>", ": ", " = ", "", "::"]);
    let tails = prop::sample::select(vec![
        "",
        "\"",
        "\" >> f",
        "\" +",
        " |",
        "**",
        "hunter2",
        " hunter2",
        "\"x\"",
        "\"\"",
        r"ab\ncd",
        " [REDACTED:password]",
        " ***",
        "\" level=info",
        "\";",
        " password:",
        " -----END",
    ]);
    (gutters, keys, seps, tails).prop_map(|(g, k, s, t)| format!("{g}{k}{s}{t}\n"))
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..7).prop_map(|lines| lines.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, rng_seed: support::rng_seed(), ..ProptestConfig::default() })]

    #[test]
    fn hold_keeps_what_later_text_could_change(t in text(), c in text(), tail in "[a-z\" ]{0,6}") {
        let cont = format!("{c}{tail}");
        let held = settled(&t);
        let prefix = &t[..held.len];
        let whole = format!("{t}{cont}");
        let rest = &whole[held.len..];
        let full = redact(&whole);
        let mut parts = redact(prefix);
        prop_assert!(full.starts_with(&parts), "full {:?} prefix {:?}", full, parts);
        parts.push_str(&redact(rest));
        prop_assert_eq!(full, parts);
    }

    #[test]
    fn redacting_twice_changes_nothing(t in text()) {
        let once = redact(&t);
        prop_assert_eq!(redact(&once), once.clone());
    }

    #[test]
    fn never_panics(t in "\\PC{0,60}") {
        let once = redact(&t);
        let _ = settled(&t);
        prop_assert_eq!(redact(&once), once.clone());
    }
}

// ---- linear time -----------------------------------------------------------------------------------

fn time_of(text: &str) -> std::time::Duration {
    let start = std::time::Instant::now();
    let out = redact(text);
    let _ = settled(text);
    std::hint::black_box(out);
    start.elapsed()
}

#[test]
fn linear_on_long_lines_of_keys_and_long_runs_of_blank_lines() {
    const SIZE: usize = 1 << 20;
    let ordinary = "the quick brown fox jumps over the lazy dog 0123456789\n".repeat(SIZE / 55);
    let base = time_of(&ordinary).max(std::time::Duration::from_millis(5));
    let shapes = [
        "pwd=x ".repeat(SIZE / 6),
        "pwd.pwd.".repeat(SIZE / 8),
        "password:\n".repeat(SIZE / 10),
        "\"password\": \"".repeat(SIZE / 14),
        format!("password:{}x\n", "\n".repeat(SIZE)),
        format!("  9\tPassword:\n{}", " 10\t\n".repeat(SIZE / 5)),
        "| **Password:** | ".repeat(SIZE / 18),
        "[REDACTED:".repeat(SIZE / 10),
        format!("x{}", "password".repeat(SIZE / 8)),
        "passwords ".repeat(SIZE / 10),
    ];
    for shape in &shapes {
        let took = time_of(shape);
        assert!(
            took < base * 60,
            "{:?}… took {took:?} against {base:?} for ordinary text",
            &shape[..20]
        );
    }
}

#[test]
fn a_path_ending_in_a_keys_name_is_a_file_not_a_key() {
    check(
        "cat: /etc/passwd: No such file or directory\n",
        "cat: /etc/passwd: No such file or directory\n",
    );
    check(
        "open C:\\secrets\\password: access denied\n",
        "open C:\\secrets\\password: access denied\n",
    );
    check("passwd: hunter2x9\n", "passwd: [REDACTED:password]\n");
}

/// Issue 19: the shell's working directories are no passwords (an `env` dump keeps its
/// directory); a connection string's `Pwd=` and a `db_pwd` still are.
#[test]
fn the_shells_working_directories_are_left_alone() {
    untouched("PWD=/home/user/project\nOLDPWD=/tmp\nSHELL=/bin/bash\n");
    untouched("docker run -v $PWD:/app -w /app image\n");
    untouched("export PWD=/srv/build; make\n");
    check(
        "Driver={ODBC};Server=db;Uid=sa;Pwd=Hunter2x9;",
        "Driver={ODBC};Server=db;Uid=sa;Pwd={R};",
    );
    check("db_pwd=Hunter2x9\n", "db_pwd=[REDACTED:password]\n");
}

/// Issue 19: a name whose last segment is `pass` is a password's key; `pass` alone (a test
/// runner's `PASS:`) or run into a word (`bypass`, `compass`) is none.
#[test]
fn a_pass_segment_ends_a_keys_name() {
    check("DB_PASS=Hunter2x9\n", "DB_PASS={R}\n");
    check("smtp-pass: Hunter2x9\n", "smtp-pass: {R}\n");
    check(
        "mysql --pass=Hunter2x9 -u root\n",
        "mysql --pass={R} -u root\n",
    );
    check("{\"db_pass\": \"Hunter2x9\"}\n", "{\"db_pass\": \"{R}\"}\n");
    untouched("PASS: test_login\nFAIL: test_logout\n");
    untouched("bypass = true\ncompass: north\n");
    untouched("tests pass: 12 of 12\n");
}

/// Issue 19: code that names a password without holding one keeps its text — a type, a call,
/// a variable, a reference, structure, an enum's number, a format's argument — while every
/// literal beside it is still a password.
#[test]
fn code_that_names_a_password_is_left_alone() {
    for code in [
        "fn connect(user: &str, password: &str) -> Conn {",
        "    password: String,",
        "    password: String::new(),",
        "    pub password: Option<SecretString>,",
        "    pwd: *mut passwd,",
        "    pub pw_passwd: *mut c_char,",
        "    password: impl Into<String>,",
        "    password: new_password,",
        "    self.0.password = password;",
        "    self.0.password = password.into();",
        "    let password = config.password();",
        "    options: Some(Options { no_password: true }),",
        "    in_filter_pass: Cell<usize>,",
        "fn set_basic_auth<T, U>(&mut self, username: T, password: U) {",
        "    NETKIT_PASS = 0,",
        "    NL80211_ATTR_SAE_PASSWORD = 277,",
        "pub const IORING_MSG_RING_FLAGS_PASS: u32 = 2;",
        "pub const USER_PASSWORD: crate::ObjectIdentifier =",
        "    if in_current_pass == 0 {",
        "    password?: string;",
        "    \"password\": [",
        "    \"password\": {",
        "    let should_pass = [",
        "    db_password: ${DB_PASSWORD}",
        "    password=$(PGPASSWORD)",
        "    PASSWORD=$DB_PASS",
        "    password: {{ .Values.db.password }}",
        "    password: <your-password>",
        "    password = %(password)s",
        "    connect(host=h, password=settings.db_password)",
        "    println!(\"expected {expected_password:?}, got {password:?}\");",
        "nagios ALL=NOPASSWD: /usr/sbin/needrestart -p",
        "gpg: The option --passphrase= can be empty.",
        "psql postgres://$(PGUSER):$(PGPASSWORD)@db:5432/app",
        "DATABASE_URL=postgres://app:$DB_PASS@db/app",
        "WWW-Authenticate: Bearer resource_metadata=\"https://mcp.example.com/prm\"",
    ] {
        untouched(&format!("{code}\n"));
    }
}

#[test]
fn literals_beside_code_are_still_passwords() {
    check("password: hunter2\n", "password: {R}\n");
    check("password = \"hunter2\";\n", "password = \"{R}\";\n");
    check("    password: \"hunter2\",\n", "    password: \"{R}\",\n");
    // a shell's assignment has no spaces: its `;` ends a command, not a statement of code
    check("PGPASSWORD=my_secret_pw; psql\n", "PGPASSWORD={R}; psql\n");
    check("export DB_PASS=hunter2x9;\n", "export DB_PASS={R};\n");
    // a comparison's literal, on either side
    check("if password == \"hunter2\":\n", "if password == \"{R}\":\n");
    check("if \"hunter2\" == password:\n", "if \"{R}\" == password:\n");
    check(
        "assert 'hunter2' != user.pwd\n",
        "assert '{R}' != user.pwd\n",
    );
    // a connection string's fields around its password stay
    check(
        "Server=db;Password=Hunter2x9;Encrypt=yes\n",
        "Server=db;Password={R};Encrypt=yes\n",
    );
    check("Password=Hunter2x9;Server=db\n", "Password={R};Server=db\n");
}

/// A value already a marker (a token the token rule took, a password read before it) ends in
/// the quote closing its string; that quote is not one the next key's line opens. Read as
/// opening, it made the next key's quoted value look like the next field, and it leaked.
#[test]
fn a_quoted_value_after_a_marker_on_its_line_is_read() {
    check(
        r#"{"token":"ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","password":"hunter2secret"}"#,
        r#"{"token":"[REDACTED:github_token]","password":"[REDACTED:password]"}"#,
    );
    check(
        r#"{"password":"a1b2c3d4","db_password":"hunter2secret"}"#,
        r#"{"password":"[REDACTED:password]","db_password":"[REDACTED:password]"}"#,
    );
    check(
        "{'key':'[REDACTED:jwt]','password':'hunter2secret'}",
        "{'key':'[REDACTED:jwt]','password':'[REDACTED:password]'}",
    );
    check(
        r#"x = "[REDACTED:jwt]", password = "hunter2secret""#,
        r#"x = "[REDACTED:jwt]", password = "[REDACTED:password]""#,
    );
    check(
        r#""{\"a\":\"[REDACTED:jwt]\",\"password\":\"hunter2secret\"}""#,
        r#""{\"a\":\"[REDACTED:jwt]\",\"password\":\"[REDACTED:password]\"}""#,
    );
}

/// A value that names a secret, a template standing in for one, or says it is fake, is no
/// password (detect-secrets' and gitleaks' negatives); a value with a capital, a digit or a
/// symbol is still read.
#[test]
fn names_templates_and_fakes_are_no_passwords() {
    for text in [
        "password: real_key",
        "password: \"real_key\"",
        "administrator_login_password = var.db_password",
        "password = \"${aws_db_instance.default.password}\"",
        "DB_PASSWORD: \"${{ secrets.DB_PASSWORD }}\"",
        "password = \"somefakekey\"",
        "cloudant_password = \"a-fake-tooshort-key\"",
        "artifactory:_password=AP6xxxxxx",
    ] {
        untouched(text);
    }
    check("password: real_key9", "password: [REDACTED:password]");
    check("password: Real_key", "password: [REDACTED:password]");
    check("password = \"${a}b\"", "password = \"[REDACTED:password]\"");
}
