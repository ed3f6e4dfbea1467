//! The completion watch: a box whose home is a directory on this node's host (`direct`,
//! `container`) tells its node the moment its job ends. Each running job's directory is
//! watched with inotify (the `notify` crate); the wrapper's done marker (written to
//! `done.tmp`, renamed to `done`) appearing there wakes the waiter, which polls that run at
//! once instead of at its next tick. The poll stays the backstop: a watch that could not be
//! set up, an event lost to a full inotify queue, a node restarted while its jobs ran, and
//! every remote box are found by the poll on its interval, as before.
//!
//! The watch only ever says "look now": what the job did is read by the poll and the
//! collection, as for a polled run, so a spurious event costs one poll.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tracing::debug;

/// The done marker's file name (the runners' `layout::DONE`).
pub const DONE_MARKER: &str = "done";

/// Who hears of a job's end: the waiter, given the run's turn id.
pub type Listener = Arc<dyn Fn(String) + Send + Sync>;

/// The watched job directories, and who hears of their ends.
#[derive(Default)]
pub struct CompletionWatch {
    shared: Arc<Mutex<Watched>>,
    /// made at the first watch (a node with only remote boxes never opens inotify)
    watcher: Mutex<Option<RecommendedWatcher>>,
}

impl std::fmt::Debug for CompletionWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let watched = self.lock_shared();
        f.debug_struct("CompletionWatch")
            .field("watched", &watched.by_turn.len())
            .finish()
    }
}

#[derive(Default)]
struct Watched {
    /// job directory → the run whose job it is
    by_dir: BTreeMap<PathBuf, String>,
    by_turn: BTreeMap<String, PathBuf>,
    listener: Option<Listener>,
}

impl CompletionWatch {
    /// Makes `listener` the one told of every job's end from now on (the waiter sets itself at
    /// each start, so a restarted waiter is told).
    pub fn listen(&self, listener: Listener) {
        self.lock_shared().listener = Some(listener);
    }

    /// Watches run `turn_id`'s job directory `dir` (on this host) for its done marker. A
    /// marker already there is told at once: the job may end before its watch is set up.
    /// Idempotent; a run's newer job (an answer's relaunch) replaces its older watch.
    pub fn watch(&self, turn_id: &str, dir: PathBuf) {
        {
            let watched = self.lock_shared();
            if watched.by_turn.get(turn_id) == Some(&dir) {
                return;
            }
        }
        self.unwatch(turn_id);
        let added = {
            let mut watcher = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
            if watcher.is_none() {
                match self.make_watcher() {
                    Ok(made) => *watcher = Some(made),
                    Err(error) => {
                        debug!(%error, "completion_watch_unavailable");
                        return;
                    }
                }
            }
            watcher
                .as_mut()
                .map(|watcher| watcher.watch(&dir, RecursiveMode::NonRecursive))
        };
        if let Some(Err(error)) = added {
            // the poll finds this job's end on its interval; a host out of inotify watches
            // (fs.inotify.max_user_watches) is said once a while, the rest quietly
            let present = dir.exists();
            if present
                && crate::streaks::once_per("completion_watch_failed", crate::streaks::WARN_EVERY)
            {
                tracing::warn!(turn_id, dir = %dir.display(), %error, "completion_watch_failed");
            } else {
                debug!(turn_id, dir = %dir.display(), %error, "completion_watch_failed");
            }
            return;
        }
        {
            let mut watched = self.lock_shared();
            watched.by_dir.insert(dir.clone(), turn_id.to_owned());
            watched.by_turn.insert(turn_id.to_owned(), dir.clone());
        }
        if dir.join(DONE_MARKER).exists() {
            self.tell(turn_id);
        }
    }

    /// Stops watching run `turn_id`'s job.
    pub fn unwatch(&self, turn_id: &str) {
        let dir = {
            let mut watched = self.lock_shared();
            let Some(dir) = watched.by_turn.remove(turn_id) else {
                return;
            };
            watched.by_dir.remove(&dir);
            dir
        };
        let mut watcher = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(watcher) = watcher.as_mut() {
            // a directory removed with its box took its watch with it
            let _ = watcher.unwatch(&dir);
        }
    }

    /// Keeps only the watches of `running` (the runs still running on this node's boxes).
    pub fn retain(&self, running: &BTreeSet<String>) {
        let gone: Vec<String> = self
            .lock_shared()
            .by_turn
            .keys()
            .filter(|turn| !running.contains(*turn))
            .cloned()
            .collect();
        for turn in gone {
            self.unwatch(&turn);
        }
    }

    /// How many job directories are watched.
    pub fn watched(&self) -> usize {
        self.lock_shared().by_turn.len()
    }

    fn make_watcher(&self) -> notify::Result<RecommendedWatcher> {
        let shared = self.shared.clone();
        notify::recommended_watcher(move |event: notify::Result<Event>| {
            let Ok(event) = event else {
                return;
            };
            // the marker arriving (renamed into place, or written): not its removal before a
            // job starts, nor the reads of it (a poll's own open and close would tell again)
            if !matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_)) {
                return;
            }
            for path in &event.paths {
                if let Some(turn_id) = ended_job(&shared, path) {
                    tell(&shared, turn_id);
                }
            }
        })
    }

    fn tell(&self, turn_id: &str) {
        tell(&self.shared, turn_id.to_owned());
    }

    fn lock_shared(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The run whose done marker `path` is, if it is a watched job's.
fn ended_job(shared: &Mutex<Watched>, path: &Path) -> Option<String> {
    if path.file_name()? != DONE_MARKER {
        return None;
    }
    let watched = shared.lock().unwrap_or_else(|p| p.into_inner());
    watched.by_dir.get(path.parent()?).cloned()
}

fn tell(shared: &Mutex<Watched>, turn_id: String) {
    let listener = shared
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .listener
        .clone();
    if let Some(listener) = listener {
        debug!(turn_id, "sandbox_job_exit_seen");
        listener(turn_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn heard() -> (Listener, std::sync::mpsc::Receiver<String>) {
        let (send, receive) = std::sync::mpsc::channel();
        let send = Mutex::new(send);
        let listener: Listener = Arc::new(move |turn| {
            let _ = send.lock().expect("lock").send(turn);
        });
        (listener, receive)
    }

    #[test]
    fn a_marker_renamed_into_place_is_told_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let watch = CompletionWatch::default();
        let (listener, heard) = heard();
        watch.listen(listener);
        watch.watch("t1", dir.path().to_path_buf());
        // what a wrapper does: its output, then the marker by rename
        std::fs::write(dir.path().join("stdout.log"), "hi\n").expect("fs");
        assert!(heard.recv_timeout(Duration::from_millis(300)).is_err());
        std::fs::write(dir.path().join("done.tmp"), "0\n").expect("fs");
        std::fs::rename(dir.path().join("done.tmp"), dir.path().join("done")).expect("fs");
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)).expect("told"),
            "t1",
            "the marker's arrival is told"
        );
        // reading the marker (what the poll does) tells nothing more
        while heard.recv_timeout(Duration::from_millis(200)).is_ok() {}
        let _ = std::fs::read(dir.path().join("done")).expect("fs");
        assert!(
            heard.recv_timeout(Duration::from_millis(500)).is_err(),
            "a read of the marker is not its arrival"
        );
    }

    #[test]
    fn a_marker_already_there_is_told_when_the_watch_starts() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("done"), "0\n").expect("fs");
        let watch = CompletionWatch::default();
        let (listener, heard) = heard();
        watch.listen(listener);
        watch.watch("t2", dir.path().to_path_buf());
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)).expect("told"),
            "t2"
        );
    }

    #[test]
    fn an_unwatched_or_retired_run_is_not_told() {
        let dir = tempfile::tempdir().expect("tempdir");
        let watch = CompletionWatch::default();
        let (listener, heard) = heard();
        watch.listen(listener);
        watch.watch("t3", dir.path().to_path_buf());
        assert_eq!(watch.watched(), 1);
        watch.retain(&BTreeSet::new());
        assert_eq!(watch.watched(), 0);
        std::fs::write(dir.path().join("done"), "0\n").expect("fs");
        assert!(heard.recv_timeout(Duration::from_millis(500)).is_err());
        // a directory that cannot be watched is left to the poll, quietly
        watch.watch("t4", dir.path().join("missing"));
        assert_eq!(watch.watched(), 0);
    }
}
