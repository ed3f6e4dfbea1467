//! A CLI's login seeded into a local box and written back by compare-and-swap: only a refresh
//! goes back, only over the seed it replaced; a shared login that moved or was removed since
//! seeding wins; a credential the shared directory never held is never created from a box.
//! The seeds are recorded in the box's records, so every teardown — a collection, a kill, the
//! orphan reaper — gives back what the run refreshed, and none gives it back twice.

use std::path::Path;
use std::time::Duration;

use boxfleet_actors::credentials::{LOCK_WAIT, Seeded, WriteBack, give_back, seed, write_back};
use boxfleet_actors::ports::{BoxSpec, Provider, Sandbox};
use boxfleet_sandbox::DirectProvider;
use boxfleet_sandbox::contract::spec;

const LOGIN: &str = ".credentials.json";

struct Setup {
    dir: tempfile::TempDir,
    provider: DirectProvider,
    sandbox: std::sync::Arc<dyn Sandbox>,
}

impl Setup {
    async fn new(shared: Option<&str>) -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("login")).expect("mkdir");
        if let Some(body) = shared {
            std::fs::write(dir.path().join("login").join(LOGIN), body).expect("write");
        }
        Setup::with_timeout(dir, 900).await
    }

    async fn with_timeout(dir: tempfile::TempDir, timeout_seconds: u64) -> Setup {
        let provider = DirectProvider::new(dir.path().join("data"));
        let sandbox = provider
            .create(&BoxSpec {
                timeout_seconds,
                ..spec()
            })
            .await
            .expect("create");
        Setup {
            dir,
            provider,
            sandbox,
        }
    }

    async fn seeded(&self) -> Vec<Seeded> {
        seed(self.sandbox.as_ref(), &self.login(), &[LOGIN], "~/.claude")
            .await
            .expect("seed")
    }

    async fn refresh(&self, body: &str) {
        self.sandbox
            .write_file("~/.claude/.credentials.json", body.as_bytes())
            .await
            .expect("the run refreshes its login");
    }

    /// The seeds the box's records keep.
    async fn kept(&self) -> Vec<Seeded> {
        let record = self
            .sandbox
            .login_record()
            .await
            .expect("read the login record")
            .expect("a login record");
        serde_json::from_slice(&record).expect("the login record is json")
    }

    fn box_gone(&self) -> bool {
        !self.provider.box_dir(self.sandbox.id()).exists()
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

#[tokio::test]
async fn the_seeds_are_recorded_beside_the_home_never_in_it() {
    let s = Setup::new(Some("v1")).await;
    let seeded = s.seeded().await;
    assert_eq!(s.kept().await, seeded);
    let records = s.provider.box_dir(s.sandbox.id()).join("records");
    assert!(records.join("logins.json").is_file());
    let home = Path::new(s.sandbox.home());
    assert!(!home.starts_with(&records) && !records.starts_with(home));
    let text = std::fs::read_to_string(records.join("logins.json")).expect("read");
    assert!(
        !text.contains("v1"),
        "the record holds digests, never a value"
    );
}

#[tokio::test]
async fn a_killed_box_gives_back_the_login_its_run_refreshed() {
    let s = Setup::new(Some("v1")).await;
    s.seeded().await;
    s.refresh("v2-refreshed-then-abandoned").await;
    s.provider.kill(s.sandbox.id()).await.expect("kill");
    assert!(s.box_gone());
    assert_eq!(s.shared().as_deref(), Some("v2-refreshed-then-abandoned"));
}

#[tokio::test]
async fn an_orphan_the_reaper_removes_gives_back_its_login() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("login")).expect("mkdir");
    std::fs::write(dir.path().join("login").join(LOGIN), "v1").expect("write");
    // a box nothing touches for its (zero-second) timeout and where nothing runs is an orphan
    let s = Setup::with_timeout(dir, 0).await;
    s.seeded().await;
    s.refresh("v2-refreshed-before-the-crash").await;
    let reaped = s.provider.reap_orphans().await;
    assert_eq!(reaped, vec![s.sandbox.id().to_owned()]);
    assert!(s.box_gone());
    assert_eq!(s.shared().as_deref(), Some("v2-refreshed-before-the-crash"));
}

#[tokio::test]
async fn a_collected_box_killed_later_gives_back_only_what_it_refreshed_since() {
    let s = Setup::new(Some("v1")).await;
    let seeded = s.seeded().await;
    s.refresh("v2").await;
    // the collection gives v2 back; the record's seed moves to v2 with it
    give_back(s.sandbox.as_ref()).await;
    assert_eq!(s.shared().as_deref(), Some("v2"));
    let kept = s.kept().await;
    assert_eq!(kept.len(), 1);
    assert_ne!(kept[0].sha256, seeded[0].sha256, "the seed moved to v2");
    assert_eq!(kept[0].in_box, seeded[0].in_box);
    // an answered run refreshes again before its box is killed: v3 goes back over v2 (against
    // the old seed it would read as another writer's refresh and be dropped)
    s.refresh("v3").await;
    s.provider.kill(s.sandbox.id()).await.expect("kill");
    assert_eq!(s.shared().as_deref(), Some("v3"));
}

#[tokio::test]
async fn a_teardown_after_the_host_refreshed_keeps_the_hosts_login() {
    let s = Setup::new(Some("v1")).await;
    s.seeded().await;
    s.refresh("box-refresh").await;
    std::fs::write(s.login().join(LOGIN), "host-refresh").expect("another seat refreshed");
    s.provider.kill(s.sandbox.id()).await.expect("kill");
    assert!(s.box_gone());
    assert_eq!(s.shared().as_deref(), Some("host-refresh"));
}

#[tokio::test]
async fn an_unusable_login_record_costs_only_the_write_back() {
    let s = Setup::new(Some("v1")).await;
    s.seeded().await;
    s.refresh("v2").await;
    // the record is made a link: it is refused where it lies, never followed
    let records = s.provider.box_dir(s.sandbox.id()).join("records");
    let outside = s.dir.path().join("outside.json");
    std::fs::write(&outside, "[]").expect("write");
    std::fs::remove_file(records.join("logins.json")).expect("rm");
    std::os::unix::fs::symlink(&outside, records.join("logins.json")).expect("link");
    assert!(s.sandbox.login_record().await.is_err());
    s.provider
        .kill(s.sandbox.id())
        .await
        .expect("the kill goes on");
    assert!(s.box_gone());
    assert_eq!(s.shared().as_deref(), Some("v1"));
}

#[tokio::test]
async fn a_fake_box_gives_back_on_kill_as_a_local_box_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let login = dir.path().join("login");
    std::fs::create_dir_all(&login).expect("mkdir");
    std::fs::write(login.join(LOGIN), "v1").expect("write");
    let provider = boxfleet_sandbox::FakeProvider::default();
    let sandbox = provider.create(&spec()).await.expect("create");
    seed(sandbox.as_ref(), &login, &[LOGIN], "~/.claude")
        .await
        .expect("seed");
    sandbox
        .write_file("~/.claude/.credentials.json", b"v2")
        .await
        .expect("refresh");
    provider.kill(sandbox.id()).await.expect("kill");
    assert_eq!(
        std::fs::read_to_string(login.join(LOGIN)).ok().as_deref(),
        Some("v2")
    );
}
