//! Where a runner keeps its pieces in a box: everything under `{home}/.boxfleet/`.

/// The runner's directory under the home.
pub const BOXFLEET_DIR: &str = ".boxfleet";
/// A job's stdout, in its job directory.
pub const STDOUT: &str = "stdout.log";
/// A job's stderr, in its job directory.
pub const STDERR: &str = "stderr.log";
/// The done marker, written to `done.tmp` and renamed (never empty): the exit status on its
/// first line, then the job's start and end on the box's clock, in Unix milliseconds
/// ([`JOB_CLOCK`]), on the second.
pub const DONE: &str = "done";
/// A wrapper's `PATH`: the runner's bin directory first (`BOXFLEET_PATH_BIN`, set just before),
/// then the box's own `PATH` (`/usr/bin:/bin` when it has none), every empty entry dropped: an
/// empty entry (a leading, trailing or doubled `:`) would put the current directory on the
/// search path. POSIX sh; globbing is off while the entries are split.
pub const JOB_PATH: &str = r#"boxfleet_path=
boxfleet_ifs=$IFS
IFS=:
set -f
for boxfleet_dir in $BOXFLEET_PATH_BIN ${PATH:-/usr/bin:/bin}; do
  if [ -n "$boxfleet_dir" ]; then boxfleet_path=${boxfleet_path:+$boxfleet_path:}$boxfleet_dir; fi
done
set +f
IFS=$boxfleet_ifs
PATH=$boxfleet_path
unset boxfleet_path boxfleet_ifs boxfleet_dir BOXFLEET_PATH_BIN"#;

/// A wrapper's clock: `boxfleet_ms` prints the box's time in Unix milliseconds (nanoseconds
/// from `date +%s%N` where the date supports it, else whole seconds: busybox prints `%N`
/// as is). POSIX sh; 64-bit shell arithmetic (dash, bash, busybox ash).
pub const JOB_CLOCK: &str = r#"boxfleet_ms() {
  t=$(date +%s%N 2>/dev/null)
  case $t in
    '') t=$(( $(date +%s) * 1000000000 )) ;;
    *[!0-9]*) t=$(( $(date +%s) * 1000000000 )) ;;
  esac
  echo $(( t / 1000000 ))
}"#;
/// The command a `command` job runs (never put on argv).
pub const COMMAND: &str = "command.sh";
/// The wrapper script the job's shell runs.
pub const WRAPPER: &str = "wrapper.sh";
/// The ask shim's name on `PATH`.
pub const ASK_SHIM: &str = "boxfleet-ask";

/// `{home}/.boxfleet`
pub fn boxfleet_dir(home: &str) -> String {
    format!("{}/{BOXFLEET_DIR}", home.trim_end_matches('/'))
}

/// `{home}/.boxfleet/bin` (put first on a job's `PATH`)
pub fn bin_dir(home: &str) -> String {
    format!("{}/bin", boxfleet_dir(home))
}

/// `{home}/.boxfleet/bin/boxfleet-ask`
pub fn ask_shim(home: &str) -> String {
    format!("{}/{ASK_SHIM}", bin_dir(home))
}

/// `{home}/.boxfleet/ask` — the shim's record: `question`, `audience`, `branch`, one file each.
pub fn ask_dir(home: &str) -> String {
    format!("{}/ask", boxfleet_dir(home))
}

/// `{home}/.boxfleet/report.md` — `BOXFLEET_REPORT`, where the findings report goes.
pub fn report(home: &str) -> String {
    format!("{}/report.md", boxfleet_dir(home))
}

/// `{home}/.boxfleet/jobs`
pub fn jobs_dir(home: &str) -> String {
    format!("{}/jobs", boxfleet_dir(home))
}

/// `{home}/.boxfleet/jobs/{launch_id}`
pub fn job_dir(home: &str, launch_id: &str) -> String {
    format!("{}/{launch_id}", jobs_dir(home))
}

/// `{dir}/{name}` for a file in a job directory.
pub fn in_job(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// Quotes a string for a POSIX shell: `'…'`, with each `'` written as `'\''`.
pub fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Whether a launch id is safe as one directory name.
pub fn valid_launch_id(launch_id: &str) -> bool {
    !launch_id.is_empty()
        && launch_id.len() <= 128
        && launch_id != "."
        && launch_id != ".."
        && launch_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_job_path_drops_empty_entries_under_every_shell() {
        for shell in ["sh", "dash", "busybox"] {
            let mut command = std::process::Command::new(shell);
            if shell == "busybox" {
                command.arg("sh");
            }
            let script =
                format!("BOXFLEET_PATH_BIN='/h/.boxfleet/bin'\n{JOB_PATH}\nprintf '%s' \"$PATH\"");
            let Ok(output) = command
                .args(["-c", &script])
                .env("PATH", ":/usr/bin::/bin:")
                .output()
            else {
                panic!("{shell} is not on this machine (the README's test command installs it)");
            };
            assert_eq!(
                String::from_utf8_lossy(&output.stdout),
                "/h/.boxfleet/bin:/usr/bin:/bin",
                "{shell}: {output:?}"
            );
        }
    }

    use super::*;

    #[test]
    fn paths_and_quoting() {
        assert_eq!(job_dir("/h/", "L1"), "/h/.boxfleet/jobs/L1");
        assert_eq!(ask_shim("/h"), "/h/.boxfleet/bin/boxfleet-ask");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert!(valid_launch_id("l-1.a_b"));
        assert!(!valid_launch_id("../x"));
        assert!(!valid_launch_id(".."));
        assert!(!valid_launch_id("a/b"));
    }
}
