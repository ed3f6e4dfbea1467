//! A CLI's login seeded into a local box and written back by compare-and-swap: only a refresh
//! goes back, only over the seed it replaced; a shared login that moved or was removed since
//! seeding wins; a credential the shared directory never held is never created from a box.

use std::path::Path;
use std::time::Duration;

use boxfleet_actors::credentials::{LOCK_WAIT, WriteBack, seed, write_back};
use boxfleet_actors::ports::{Provider, Sandbox};
use boxfleet_sandbox::DirectProvider;
use boxfleet_sandbox::contract::spec;

const LOGIN: &str = ".credentials.json";

struct Setup {
    dir: tempfile::TempDir,
    sandbox: std::sync::Arc<dyn Sandbox>,
}

impl Setup {
    async fn new(shared: Option<&str>) -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("login")).expect("mkdir");
        if let Some(body) = shared {
            std::fs::write(dir.path().join("login").join(LOGIN), body).expect("write");
        }
        let provider = DirectProvider::new(dir.path().join("data"));
        let sandbox = provider.create(&spec()).await.expect("create");
        Setup { dir, sandbox }
    }

    fn login(&self) -> std::path::PathBuf {
        self.dir.path().join("login")
    }

    fn shared(&self) -> Option<String> {
        std::fs::read_to_string(self.login().join(LOGIN)).ok()
    }

    fn lock(&self) -> std::path::PathBuf {
        self.dir.path().join("credentials.lock")
    }

    async fn back(&self, seeded: &[boxfleet_actors::credentials::Seeded]) -> Vec<WriteBack> {
        write_back(self.sandbox.as_ref(), seeded, &self.lock(), LOCK_WAIT)
            .await
            .into_iter()
            .map(|(_, outcome)| outcome.expect("written back"))
            .collect()
    }
}

fn in_box(s: &Setup, path: &str) -> Option<String> {
    let home = Path::new(s.sandbox.home());
    std::fs::read_to_string(home.join(path.trim_start_matches("~/"))).ok()
}

#[tokio::test]
async fn the_box_gets_the_login_and_an_idle_run_writes_nothing() {
    let s = Setup::new(Some("v1")).await;
    let seeded = seed(s.sandbox.as_ref(), &s.login(), &[LOGIN], "~/.claude")
        .await
        .expect("seed");
    assert_eq!(seeded.len(), 1);
    assert_eq!(
        in_box(&s, "~/.claude/.credentials.json").as_deref(),
        Some("v1")
    );
    assert_eq!(s.back(&seeded).await, vec![WriteBack::Idle]);
    assert_eq!(s.shared().as_deref(), Some("v1"));
}

#[tokio::test]
async fn a_refresh_goes_back_over_the_seed_it_replaced() {
    let s = Setup::new(Some("v1")).await;
    let seeded = seed(s.sandbox.as_ref(), &s.login(), &[LOGIN], "~/.claude")
        .await
        .expect("seed");
    s.sandbox
        .write_file("~/.claude/.credentials.json", b"v2-refreshed")
        .await
        .expect("the run refreshes");
    assert_eq!(s.back(&seeded).await, vec![WriteBack::Written]);
    assert_eq!(s.shared().as_deref(), Some("v2-refreshed"));
}

#[tokio::test]
async fn a_shared_login_that_moved_or_was_removed_wins() {
    let s = Setup::new(Some("v1")).await;
    let seeded = seed(s.sandbox.as_ref(), &s.login(), &[LOGIN], "~/.claude")
        .await
        .expect("seed");
    s.sandbox
        .write_file("~/.claude/.credentials.json", b"box-refresh")
        .await
        .expect("the run refreshes");
    std::fs::write(s.login().join(LOGIN), "host-refresh").expect("another seat refreshed");
    assert_eq!(s.back(&seeded).await, vec![WriteBack::SharedChanged]);
    assert_eq!(s.shared().as_deref(), Some("host-refresh"));

    std::fs::remove_file(s.login().join(LOGIN)).expect("logout");
    assert_eq!(s.back(&seeded).await, vec![WriteBack::SharedRemoved]);
    assert_eq!(s.shared(), None, "a logout is not undone by a box");
}

#[tokio::test]
async fn a_credential_the_host_never_held_is_never_created_from_a_box() {
    let s = Setup::new(None).await;
    let seeded = seed(s.sandbox.as_ref(), &s.login(), &[LOGIN], "~/.claude")
        .await
        .expect("seed");
    assert!(seeded.is_empty());
    s.sandbox
        .write_file("~/.claude/.credentials.json", b"made-in-the-box")
        .await
        .expect("write");
    assert!(s.back(&seeded).await.is_empty());
    assert_eq!(s.shared(), None);
}

#[tokio::test]
async fn a_write_back_waits_for_the_lock_and_gives_up_naming_it() {
    let s = Setup::new(Some("v1")).await;
    let seeded = seed(s.sandbox.as_ref(), &s.login(), &[LOGIN], "~/.claude")
        .await
        .expect("seed");
    s.sandbox
        .write_file("~/.claude/.credentials.json", b"v2")
        .await
        .expect("refresh");
    let held = std::fs::File::create(s.lock()).expect("lock file");
    held.lock().expect("another writer holds the lock");
    let outcomes = write_back(
        s.sandbox.as_ref(),
        &seeded,
        &s.lock(),
        Duration::from_millis(300),
    )
    .await;
    let error = outcomes[0].1.clone().expect_err("timed out");
    assert!(error.contains("credentials.lock"), "{error}");
    assert!(!error.contains("v2"), "no value in an error: {error}");
    assert_eq!(s.shared().as_deref(), Some("v1"));
    held.unlock().expect("unlock");
    assert_eq!(s.back(&seeded).await, vec![WriteBack::Written]);
}
