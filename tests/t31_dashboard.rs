//! Scenario: the dashboard in a real browser (issue 18). Playwright (`playwright-core` from
//! npm, pinned, cached under `target/playwright`) drives Debian's Chromium, headless, with a
//! fresh profile and no network, against the dashboard of a 3-node fleet on real etcd:
//!
//! sign in with a token → a run appears on the board (with its role and agent id) → its page
//! follows the live tail (server-sent events) → it parks on a question, answered from the page
//! → the resumed job's phase card (report, tokens, model) → the fleet page shows three live
//! nodes and the supervision tree → a node SIGKILLed is marked lost.
//!
//! The script is `tests/browser/dashboard.mjs`; it and this test speak lines (stdout `step …`,
//! stdin `run …` / `killed …`). Screenshots land in `target/artefacts/dashboard/`.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use boxfleet_tests::EtcdServer;
use boxfleet_tests::fleet::Fleet;
use boxfleet_tests::node::launched_turn_and_job;
use boxfleet_tests::npm;

/// The pinned Playwright (its library alone: the browser is Debian's).
const PLAYWRIGHT: &str = "1.65.2";
/// Where Debian's chromium package puts the browser (`BOXFLEET_CHROMIUM` names another).
const CHROMIUM: &str = "/usr/bin/chromium";
/// How long one step of the script may take.
const STEP: Duration = Duration::from_secs(90);

/// The company the fleet runs: one agent seat under a role whose sandbox is on, with its own id.
const CHART: &str = "  roles: [{ name: engineer, sandbox: { enabled: true } }]\n  seats: [{ handle: web-seat, id: agent-7, kind: agent, role: engineer }]\n";

/// The job: progress, a question once the browser has seen the progress (the test's signal
/// `SIGNALS/ask`), and once answered a report (the demo's shape).
fn job(signals: &Path) -> String {
    format!(
        r#"if [ -z "${{BOXFLEET_ANSWER:-}}" ]; then
  echo "step 1/4: reading the repository"; sleep 1
  echo "step 2/4: drafted the cache layer"
  while [ ! -e '{ask}' ]; do sleep 0.2; done
  echo "step 3/4: asking"
  boxfleet-ask "Should the cache write through to PostgreSQL or to SQLite?"
  exit 0
fi
echo "step 4/4: resuming with $BOXFLEET_ANSWER"
echo "Findings: the cache writes through to $BOXFLEET_ANSWER." > "$BOXFLEET_REPORT""#,
        ask = signals.join("ask").display()
    )
}

fn playwright_core() -> PathBuf {
    fn runs(bin: &Path) -> Result<String, String> {
        let out = Command::new(bin)
            .arg("--version")
            .output()
            .map_err(|e| e.to_string())?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
    }
    let bin = npm::installed(&npm::Package {
        name: "playwright-core",
        version: PLAYWRIGHT,
        bin: "playwright-core",
        cache: "playwright",
        check: runs,
        override_env: "BOXFLEET_PLAYWRIGHT",
    });
    // <dir>/node_modules/.bin/playwright-core → <dir>/node_modules/playwright-core
    bin.parent()
        .and_then(Path::parent)
        .map(|modules| modules.join("playwright-core"))
        .expect("the package beside its binary")
}

fn chromium() -> String {
    let chromium = std::env::var("BOXFLEET_CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_owned());
    assert!(
        Path::new(&chromium).exists(),
        "the dashboard test drives a real Chromium and there is none at {chromium}: install \
         Debian's (apt-get install chromium; `bash .ci/run` does), or point BOXFLEET_CHROMIUM at one"
    );
    chromium
}

/// The script, running, and the lines it printed.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl Browser {
    fn start(url: &str, token: &str, screenshots: &Path, stderr: PathBuf) -> Browser {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser/dashboard.mjs");
        let mut child = Command::new("node")
            .arg(&script)
            .env("PLAYWRIGHT_CORE", playwright_core())
            .env("CHROMIUM", chromium())
            .env("DASHBOARD_URL", url)
            .env("BOXFLEET_TOKEN", token)
            .env("SCREENSHOTS", screenshots)
            .env("STEP_TIMEOUT_MS", STEP.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("the script's stderr file"))
            .spawn()
            .expect("run node tests/browser/dashboard.mjs (Node.js is needed)");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Browser {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    /// Waits for `step NAME`; panics with what the script said when it fails or goes quiet.
    fn step(&mut self, name: &str, fleet: &Fleet) {
        let wanted = format!("step {name}");
        loop {
            match self.lines.recv_timeout(STEP + Duration::from_secs(30)) {
                Ok(line) if line == wanted => return,
                Ok(line) if line.starts_with("fail") => self.failed(&line, fleet),
                Ok(_) => {}
                Err(_) => self.failed(&format!("no `{wanted}`"), fleet),
            }
        }
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("tell the script");
        self.stdin.flush().expect("flush");
    }

    fn failed(&mut self, why: &str, fleet: &Fleet) -> ! {
        // the script takes its screenshot and says what the page showed before it exits
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while matches!(self.child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        panic!(
            "the browser: {why}\n--- the script's stderr\n{stderr}\n--- the fleet\n{}",
            fleet.logs()
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_dashboard_shows_a_run_its_tail_its_question_its_card_and_a_lost_node() {
    let screenshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/artefacts/dashboard");
    let _ = std::fs::remove_dir_all(&screenshots);
    std::fs::create_dir_all(&screenshots).expect("the screenshots' dir");
    let mut fleet = Fleet::start_with_company(
        &EtcdServer::shared().client_url(),
        &["n1", "n2", "n3"],
        3,
        "",
        None,
        CHART,
    );
    let token = std::fs::read_to_string(fleet.node("n1").token_file())
        .expect("the admin token")
        .trim()
        .to_owned();
    let url = fleet.node("n1").http_url();
    let stderr = fleet.dir.path().join("browser.stderr");
    let mut browser = Browser::start(&url, &token, &screenshots, stderr);
    browser.step("signed-in", &fleet);
    let (code, out, err) = fleet.node("n2").cli(&[
        "launch",
        "--seat",
        "web-seat",
        "--runner",
        "command",
        "--command",
        &job(&fleet.dir.path().join("signals")),
    ]);
    assert_eq!(code, 0, "{out}{err}\n{}", fleet.logs());
    let (turn, launch) = launched_turn_and_job(&out);
    browser.say(&format!("run {turn} {launch}"));
    browser.step("board", &fleet);
    browser.step("tail", &fleet);
    // the page followed the job's progress: now it may ask
    fleet.signal("ask");
    for step in ["parked", "answered", "card", "fleet"] {
        browser.step(step, &fleet);
    }
    fleet.node_mut("n3").kill();
    browser.say("killed n3");
    browser.step("lost", &fleet);
    browser.step("done", &fleet);
    for shot in [
        "board.png",
        "run-live.png",
        "run-parked.png",
        "run-card.png",
        "fleet.png",
        "fleet-lost.png",
    ] {
        let path = screenshots.join(shot);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(size > 1_000, "{} is missing or empty", path.display());
    }
}
