//! Scenario: the embedded store survives `kill -9` at any moment.
//!
//! A child process (this test binary re-executed to run `crash_child_writes_until_killed`)
//! opens the embedded store in a shared data dir and writes txns in a loop. Txn `n` puts three
//! keys `crash/{n:08}/{0,1,2}`, each carrying `n`, guarded by "`crash/{n}/0` is absent"; once
//! the store acknowledges it, the child prints `T02-ACK n revision`. The parent reads those
//! lines and, after a few hundred acks and a random few milliseconds more (so the kill lands
//! anywhere, also inside a commit), SIGKILLs the child. It then reopens the store and checks:
//!
//! - every acknowledged txn is present (durability: the fsync happened before the ack);
//! - every txn present is whole: all three keys, all carrying `n`, all at one revision (no torn
//!   txn), and the txns present are exactly `0..=m` with `m` at most one past the last ack
//!   (only the txn in flight at the kill may have landed unacknowledged);
//! - the store's revision is exactly one per txn (nothing half-counted).
//!
//! The cycle repeats, each child resuming where the store says the last one stopped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use boxfleet_cluster::Error;
use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::store::{Compare, KeyValue, Op, Store, StoreExt, Txn};

/// Names the data dir to the child; the child does nothing without it.
const DATA_DIR_ENV: &str = "BOXFLEET_T02_DATA_DIR";
/// The child test, run by its exact name.
const CHILD_TEST: &str = "crash_child_writes_until_killed";
/// What the child prints for each acknowledged txn, before `n revision`.
const ACK: &str = "T02-ACK ";
const PREFIX: &str = "crash/";
const KEYS_PER_TXN: u64 = 3;
const CYCLES: usize = 4;
/// Padding per value, so a txn spans several pages of the file.
const PADDING: usize = 1500;

fn key(txn: u64, part: u64) -> String {
    format!("{PREFIX}{txn:08}/{part}")
}

fn value(txn: u64, part: u64) -> Vec<u8> {
    let mut value = format!("{txn}:{part}:").into_bytes();
    value.resize(value.len() + PADDING, b'.');
    value
}

/// A random number from the OS (through uuid's generator).
fn random_below(bound: u64) -> u64 {
    let random = uuid::Uuid::new_v4().as_u128();
    u64::try_from(random % u128::from(bound)).unwrap_or(0)
}

/// Opens the store, waiting out a previous holder that is still letting go.
async fn must_open(dir: &Path) -> EmbeddedStore {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match EmbeddedStore::open(dir).await {
            Ok(store) => return store,
            Err(error @ Error::Disk { .. }) if Instant::now() < deadline => {
                eprintln!("store not free yet, retrying: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("opening the embedded store in {}: {error}", dir.display()),
        }
    }
}

/// The txns found in the store, each checked whole; panics on a torn one.
async fn must_read_whole_txns(store: &EmbeddedStore) -> BTreeMap<u64, Vec<KeyValue>> {
    let range = store.range(PREFIX).await.expect("read the crash keys");
    let mut txns: BTreeMap<u64, Vec<KeyValue>> = BTreeMap::new();
    for kv in range.kvs {
        let txn: u64 = kv.key[PREFIX.len()..PREFIX.len() + 8]
            .parse()
            .unwrap_or_else(|error| panic!("key {}: {error}", kv.key));
        txns.entry(txn).or_default().push(kv);
    }
    for (txn, kvs) in &txns {
        let parts: Vec<String> = (0..KEYS_PER_TXN).map(|part| key(*txn, part)).collect();
        let found: Vec<&str> = kvs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(found, parts, "txn {txn} is torn: keys {found:?}");
        let revision = kvs[0].mod_revision;
        for (part, kv) in (0..KEYS_PER_TXN).zip(kvs) {
            assert_eq!(
                kv.value,
                value(*txn, part),
                "txn {txn}: {kv:?} carries another txn"
            );
            assert_eq!(
                (kv.mod_revision, kv.create_revision, kv.version),
                (revision, revision, 1),
                "txn {txn} is torn across revisions: {kv:?}"
            );
        }
    }
    txns
}

/// A child test process writing until it is killed, and the lines it prints.
struct Writing {
    child: Child,
    lines: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

/// Starts this test binary's child test `test`, naming it the data dir in `env`.
fn spawn_writing(exe: &Path, test: &str, env: &str, dir: &Path) -> Writing {
    let mut child = Command::new(exe)
        .args(["--exact", test, "--nocapture", "--include-ignored"])
        .env(env, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("child stdout");
    let (sender, lines) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    Writing {
        child,
        lines,
        reader,
    }
}

impl Writing {
    /// A few more milliseconds of writing, so the kill lands at a random point of a commit,
    /// then SIGKILL: its exit status, and the lines it printed that were not read yet (acks
    /// printed before the kill were acknowledged too).
    fn kill(mut self) -> (std::process::ExitStatus, Vec<String>) {
        std::thread::sleep(Duration::from_micros(random_below(5_000)));
        self.child.kill().expect("SIGKILL the child");
        let status = self.child.wait().expect("reap the child");
        assert!(!status.success(), "the child was killed: {status}");
        self.reader.join().expect("stdout reader");
        (status, self.lines.try_iter().collect())
    }
}

/// Reopens the store in `dir`, reads it with `read`, and closes it again (the store and its
/// lease reaper end with the runtime, freeing the file for the next child): what `read` found,
/// and the store's revision.
fn reopen<T>(dir: &Path, read: impl AsyncFnOnce(&EmbeddedStore) -> T) -> (T, i64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let store = must_open(dir).await;
        let found = read(&store).await;
        let revision = store.revision().await.expect("read the revision");
        (found, revision)
    })
}

/// Run as a child only: writes txns until killed, printing an ack line for each.
#[test]
#[ignore = "the child of embedded_store_survives_sigkill; does nothing on its own"]
fn crash_child_writes_until_killed() {
    let Ok(dir) = std::env::var(DATA_DIR_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let store = must_open(Path::new(&dir)).await;
        let mut next = must_read_whole_txns(&store)
            .await
            .last_key_value()
            .map_or(0, |(txn, _)| txn + 1);
        let stdout = std::io::stdout();
        loop {
            let txn = Txn::new().when([Compare::absent(key(next, 0))]).and_then(
                (0..KEYS_PER_TXN).map(|part| Op::put(key(next, part), value(next, part))),
            );
            let response = store.txn(txn).await.expect("write a txn");
            assert!(response.succeeded, "txn {next} was already there");
            let mut out = stdout.lock();
            writeln!(out, "{ACK}{next} {}", response.revision).expect("print an ack");
            out.flush().expect("flush an ack");
            next += 1;
        }
    });
}

#[test]
fn embedded_store_survives_sigkill() {
    let dir = tempfile::tempdir().expect("temp dir");
    let exe = std::env::current_exe().expect("this test binary");
    let mut last_acked: Option<u64> = None;

    for cycle in 1..=CYCLES {
        let kill_after = 200 + random_below(300);
        println!("--- phase {cycle}.1: child writes; SIGKILL after {kill_after} acks");
        let writing = spawn_writing(&exe, CHILD_TEST, DATA_DIR_ENV, dir.path());
        let received = &writing.lines;

        let mut acks_this_cycle = 0;
        let mut take_ack = |line: &str, last_acked: &mut Option<u64>| {
            let Some((_, ack)) = line.split_once(ACK) else {
                return false;
            };
            let txn: u64 = ack
                .split_whitespace()
                .next()
                .and_then(|txn| txn.parse().ok())
                .unwrap_or_else(|| panic!("unreadable ack line {line:?}"));
            let expected = last_acked.map_or(0, |last| last + 1);
            // the child resumes after what the store holds, which may be one past the last ack
            assert!(
                txn == expected || txn == expected + 1 && acks_this_cycle == 0,
                "ack {txn} out of order (expected {expected})"
            );
            *last_acked = Some(txn);
            acks_this_cycle += 1;
            true
        };
        let mut counted = 0;
        while counted < kill_after {
            match received.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    if take_ack(&line, &mut last_acked) {
                        counted += 1;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = writing.kill();
                    panic!("the child acknowledged nothing for 60s");
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let (status, _) = writing.kill();
                    panic!("the child ended early ({status}) after {counted} acks");
                }
            }
        }
        let (status, unread) = writing.kill();
        for line in unread {
            take_ack(&line, &mut last_acked);
        }
        let last = last_acked.expect("some acks");
        println!(
            "--- phase {cycle}.2: killed ({status}) after {acks_this_cycle} acks, last acked txn {last}"
        );

        println!("--- phase {cycle}.3: reopen and check every acked txn is there, whole");
        let (present, revision) = reopen(dir.path(), must_read_whole_txns);
        let highest = *present.keys().last().expect("txns present");
        assert_eq!(
            present.keys().copied().collect::<Vec<_>>(),
            (0..=highest).collect::<Vec<_>>(),
            "txns missing between 0 and {highest}"
        );
        assert!(
            highest >= last,
            "acked txn {last} lost: the store ends at {highest}"
        );
        assert!(
            highest <= last + 1,
            "txn {highest} landed, but only {last} was acked and one was in flight"
        );
        assert_eq!(
            revision,
            i64::try_from(highest).expect("small") + 2,
            "one revision per txn"
        );
        println!(
            "--- phase {cycle}.4: ok: txns 0..={highest} whole (last ack {last}, {} in flight landed), revision {revision}",
            highest - last
        );
    }
}

// ----- many writers at once: their txns share commits (group commit) -----

/// Names the data dir to the many-writers child.
const WRITERS_DIR_ENV: &str = "BOXFLEET_T02_WRITERS_DIR";
const WRITERS_CHILD_TEST: &str = "crash_child_writers_until_killed";
/// What the many-writers child prints for each acknowledged txn, before `writer n revision`.
const WRITER_ACK: &str = "T02-WACK ";
const WRITERS_PREFIX: &str = "crashw/";
const WRITERS: u64 = 8;

fn writer_key(writer: u64, txn: u64, part: u64) -> String {
    format!("{WRITERS_PREFIX}{writer:02}/{txn:08}/{part}")
}

/// Each writer's txns found in the store, each checked whole; panics on a torn one.
async fn must_read_writers_txns(store: &EmbeddedStore) -> BTreeMap<(u64, u64), i64> {
    let range = store
        .range(WRITERS_PREFIX)
        .await
        .expect("read the crash keys");
    let mut txns: BTreeMap<(u64, u64), Vec<KeyValue>> = BTreeMap::new();
    for kv in range.kvs {
        let rest = &kv.key[WRITERS_PREFIX.len()..];
        let writer: u64 = rest[..2].parse().expect("a writer");
        let txn: u64 = rest[3..11].parse().expect("a txn");
        txns.entry((writer, txn)).or_default().push(kv);
    }
    let mut revisions = BTreeMap::new();
    for (&(writer, txn), kvs) in &txns {
        let parts: Vec<String> = (0..KEYS_PER_TXN)
            .map(|part| writer_key(writer, txn, part))
            .collect();
        let found: Vec<&str> = kvs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(
            found, parts,
            "writer {writer}'s txn {txn} is torn: {found:?}"
        );
        let revision = kvs[0].mod_revision;
        for (part, kv) in (0..KEYS_PER_TXN).zip(kvs) {
            assert_eq!(kv.value, value(txn, part), "{kv:?} carries another txn");
            assert_eq!(
                (kv.mod_revision, kv.version),
                (revision, 1),
                "writer {writer}'s txn {txn} is torn across revisions: {kv:?}"
            );
        }
        revisions.insert((writer, txn), revision);
    }
    revisions
}

/// Run as a child only: [`WRITERS`] writers at once, each writing its own txns until killed,
/// printing an ack line for each.
#[test]
#[ignore = "the child of the store_survives_sigkill_with_writers_at_once; does nothing on its own"]
fn crash_child_writers_until_killed() {
    let Ok(dir) = std::env::var(WRITERS_DIR_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let store = must_open(Path::new(&dir)).await;
        let present = must_read_writers_txns(&store).await;
        let mut writers = Vec::new();
        for writer in 0..WRITERS {
            let store = store.clone();
            let mut next = present
                .keys()
                .filter(|(w, _)| *w == writer)
                .map(|(_, txn)| txn + 1)
                .max()
                .unwrap_or(0);
            writers.push(tokio::spawn(async move {
                loop {
                    let txn = Txn::new()
                        .when([Compare::absent(writer_key(writer, next, 0))])
                        .and_then((0..KEYS_PER_TXN).map(|part| {
                            Op::put(writer_key(writer, next, part), value(next, part))
                        }));
                    let response = store.txn(txn).await.expect("write a txn");
                    assert!(response.succeeded, "writer {writer}'s txn {next} was there");
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{WRITER_ACK}{writer} {next} {}", response.revision)
                        .expect("print an ack");
                    out.flush().expect("flush an ack");
                    next += 1;
                }
            }));
        }
        // the writers write until the child is killed; one that panics ends the child
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Some(ended) = writers.iter().position(|writer| writer.is_finished()) {
                panic!("writer {ended} stopped: {:?}", writers.remove(ended).await);
            }
        }
    });
}

/// The embedded store survives `kill -9` while many writers' txns share commits: every
/// acknowledged txn of every writer is there and whole, each writer lost at most its one txn
/// in flight, and each txn present has a revision of its own, one per txn.
#[test]
fn embedded_store_survives_sigkill_with_writers_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let exe = std::env::current_exe().expect("this test binary");
    let mut last_acked: BTreeMap<u64, u64> = BTreeMap::new();
    for cycle in 1..=CYCLES {
        let kill_after = 400 + random_below(400);
        println!("--- phase {cycle}.1: {WRITERS} writers; SIGKILL after {kill_after} acks");
        let writing = spawn_writing(&exe, WRITERS_CHILD_TEST, WRITERS_DIR_ENV, dir.path());
        let take_ack = |line: &str, last_acked: &mut BTreeMap<u64, u64>| {
            let Some((_, ack)) = line.split_once(WRITER_ACK) else {
                return false;
            };
            let mut fields = ack.split_whitespace().map(|f| f.parse::<u64>().ok());
            let (Some(Some(writer)), Some(Some(txn))) = (fields.next(), fields.next()) else {
                panic!("unreadable ack line {line:?}");
            };
            let last = last_acked.insert(writer, txn);
            assert!(
                last.is_none_or(|last| txn == last + 1 || txn == last + 2),
                "writer {writer}'s ack {txn} out of order after {last:?}"
            );
            true
        };
        let mut counted = 0;
        while counted < kill_after {
            match writing.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => counted += usize::from(take_ack(&line, &mut last_acked)) as u64,
                Err(error) => {
                    let _ = writing.kill();
                    panic!("the child stopped acknowledging after {counted} acks: {error:?}");
                }
            }
        }
        let (status, unread) = writing.kill();
        for line in unread {
            take_ack(&line, &mut last_acked);
        }
        println!("--- phase {cycle}.2: killed ({status}); last acks {last_acked:?}");

        let (present, revision) = reopen(dir.path(), must_read_writers_txns);
        for writer in 0..WRITERS {
            let mine: Vec<u64> = present
                .keys()
                .filter(|(w, _)| *w == writer)
                .map(|(_, txn)| *txn)
                .collect();
            let Some(&last) = last_acked.get(&writer) else {
                assert!(mine.len() <= 1, "writer {writer} acked nothing: {mine:?}");
                continue;
            };
            let highest = *mine.last().expect("the writer's txns");
            assert_eq!(
                mine,
                (0..=highest).collect::<Vec<_>>(),
                "writer {writer}: a gap"
            );
            assert!(
                highest >= last,
                "writer {writer}'s acked txn {last} lost ({highest})"
            );
            assert!(
                highest <= last + 1,
                "writer {writer}'s txn {highest} landed, but only {last} was acked"
            );
        }
        let mut revisions: Vec<i64> = present.values().copied().collect();
        revisions.sort_unstable();
        let expected: Vec<i64> = (2..2 + present.len() as i64).collect();
        assert_eq!(
            revisions, expected,
            "one revision per txn, none shared, no gap"
        );
        assert_eq!(revision, 1 + present.len() as i64, "the store's revision");
        println!(
            "--- phase {cycle}.3: ok: {} txns whole, each at its own revision, up to {revision}",
            present.len()
        );
    }
}
