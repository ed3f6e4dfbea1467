//! What the backend hands the runtime to start a box: the box's run environment
//! ([`box_environment`]), rendered as an env file ([`env_file`]), and the `run` argv
//! ([`run_argv`]); [`quote`] makes a word safe inside the `sh -c` scripts the box runs.
//!
//! The container is `run -d --init --name boxfleet-{id} --env-file records/env -v
//! {home}:/home/user -w /home/user [--user uid:gid] [--network N] {run_args} {image} sleep
//! infinity`. No value of the run environment is ever put on the argv.

use std::collections::BTreeMap;

use boxfleet_actors::ports::BoxError;

use super::config::{BOX_HOME, ContainerConfig};
use crate::direct::DEFAULT_LOCALE;

/// Quotes a word for `sh`.
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Renders an env file (`NAME=value` a line, read literally by both runtimes).
pub(super) fn env_file(env: &BTreeMap<String, String>) -> Result<Vec<u8>, BoxError> {
    let mut text = String::new();
    for (name, value) in env {
        if value.contains('\n') || value.contains('\r') || name.contains(char::is_whitespace) {
            return Err(BoxError::Failed(format!(
                "refused environment variable {name:?}: an env file cannot carry a line break or a space in a name"
            )));
        }
        text.push_str(name);
        text.push('=');
        text.push_str(value);
        text.push('\n');
    }
    Ok(text.into_bytes())
}

/// The box's run environment: the allowlist (PATH, home, locale, temporary and XDG
/// directories inside the home), then the spec's (a spec's name wins).
pub(super) fn box_environment(
    box_path: &str,
    spec_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (name, value) in [
        ("PATH", box_path.to_owned()),
        ("HOME", BOX_HOME.to_owned()),
        ("LANG", DEFAULT_LOCALE.to_owned()),
        ("LC_ALL", DEFAULT_LOCALE.to_owned()),
        ("TERM", "dumb".to_owned()),
        ("TMPDIR", format!("{BOX_HOME}/.tmp")),
        ("XDG_CACHE_HOME", format!("{BOX_HOME}/.cache")),
        ("XDG_CONFIG_HOME", format!("{BOX_HOME}/.config")),
        ("XDG_DATA_HOME", format!("{BOX_HOME}/.local/share")),
        ("XDG_STATE_HOME", format!("{BOX_HOME}/.local/state")),
    ] {
        env.insert(name.to_owned(), value);
    }
    env.extend(spec_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// The `run` argv for a box: the backend's own flags, then the operator's `run_args` (the
/// runtimes take the last of a repeated flag, so the operator's win), then the image.
pub(super) fn run_argv(
    container: &str,
    env_file: &str,
    home: &str,
    user: Option<&str>,
    config: &ContainerConfig,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "-d",
        "--init",
        "--name",
        container,
        "--env-file",
        env_file,
        "-v",
        &format!("{home}:{BOX_HOME}"),
        "-w",
        BOX_HOME,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if let Some(user) = user {
        args.extend(["--user".to_owned(), user.to_owned()]);
    }
    if let Some(network) = config.network.as_ref().filter(|n| !n.is_empty()) {
        args.extend(["--network".to_owned(), network.clone()]);
    }
    args.extend(config.run_args.iter().cloned());
    args.extend([
        config.image.clone(),
        "sleep".to_owned(),
        "infinity".to_owned(),
    ]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn run_argv_without_user_or_network_is_the_backends_flags_then_the_image() {
        let config = ContainerConfig::new("img:1", "/state");
        let args = run_argv("boxfleet-c1", "/r/env", "/b/home", None, &config);
        assert_eq!(
            args,
            strings(&[
                "run",
                "-d",
                "--init",
                "--name",
                "boxfleet-c1",
                "--env-file",
                "/r/env",
                "-v",
                "/b/home:/home/user",
                "-w",
                "/home/user",
                "img:1",
                "sleep",
                "infinity",
            ])
        );
    }

    #[test]
    fn run_argv_puts_user_and_network_before_the_operators_flags() {
        let mut config = ContainerConfig::new("img", "/state");
        config.network = Some("boxes".into());
        config.run_args = strings(&["--network", "host", "--cpus", "2"]);
        let args = run_argv("n", "e", "h", Some("1000:1000"), &config);
        assert_eq!(
            args[11..],
            strings(&[
                "--user",
                "1000:1000",
                "--network",
                "boxes",
                "--network",
                "host",
                "--cpus",
                "2",
                "img",
                "sleep",
                "infinity",
            ])[..]
        );
    }

    #[test]
    fn an_empty_network_leaves_the_runtimes_default() {
        let mut config = ContainerConfig::new("img", "/state");
        config.network = Some(String::new());
        let args = run_argv("n", "e", "h", None, &config);
        assert!(!args.iter().any(|a| a == "--network"));
    }

    #[test]
    fn box_environment_is_the_allowlist_then_the_specs() {
        let spec: BTreeMap<String, String> = [("TERM".to_owned(), "xterm".to_owned())]
            .into_iter()
            .collect();
        let env = box_environment("/bin", &spec);
        assert_eq!(env["PATH"], "/bin");
        assert_eq!(env["HOME"], "/home/user");
        assert_eq!(env["TMPDIR"], "/home/user/.tmp");
        assert_eq!(env["TERM"], "xterm");
        assert_eq!(env.len(), 10);
    }

    #[test]
    fn env_file_is_a_line_per_variable_and_refuses_a_line_break() {
        let env: BTreeMap<String, String> = [
            ("A".to_owned(), "1 2".to_owned()),
            ("B".to_owned(), "x=y".to_owned()),
        ]
        .into_iter()
        .collect();
        assert_eq!(env_file(&env).ok(), Some(b"A=1 2\nB=x=y\n".to_vec()));
        let broken: BTreeMap<String, String> =
            [("A".to_owned(), "1\n2".to_owned())].into_iter().collect();
        assert!(env_file(&broken).is_err());
        let spaced: BTreeMap<String, String> =
            [("A B".to_owned(), "1".to_owned())].into_iter().collect();
        assert!(env_file(&spaced).is_err());
    }

    #[test]
    fn quote_closes_and_reopens_around_a_single_quote() {
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
