//! Watches: every commit is broadcast to the watchers while the commit lock is held; a watch
//! subscribes under the same lock, reads its backlog from `history`, follows the broadcast, and
//! refills from `history` when it falls behind or sees a gap.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use tokio::sync::broadcast;

use super::EmbeddedStore;
use super::inner::{Commit, Inner};
use super::layout::{HISTORY, META, StoredEvent, decode};
use crate::store::{Error, Revision, WatchEvent, WatchStream};

/// How many revisions a watch reads from history at a time while catching up.
pub(super) const BACKLOG_BATCH: i64 = 512;

impl Inner {
    /// Sends a committed revision to the watchers. Called with `commits` held.
    pub(super) fn announce(&self, revision: Revision, events: Vec<WatchEvent>) {
        // no receiver is not an error: nobody watches
        let _ = self.changes.send(Arc::new(Commit { revision, events }));
    }

    /// Subscribes to the commits and reads where they start, with no commit in between.
    /// Returns the receiver, the current revision and the oldest kept revision.
    pub(super) fn subscribe(
        &self,
    ) -> Result<(broadcast::Receiver<Arc<Commit>>, Revision, Revision), Error> {
        let _commits = self.lock_commits();
        let receiver = self.changes.subscribe();
        let read = self.begin_read()?;
        let meta = read
            .open_table(META)
            .map_err(|e| self.disk("open table meta", e))?;
        Ok((receiver, self.revision(&meta)?, self.oldest(&meta)?))
    }

    /// The changes under `prefix` of revisions `from..` (at most [`BACKLOG_BATCH`] of them, up
    /// to the current revision). Returns them, the last revision read, and the current revision.
    pub(super) fn read_history(
        &self,
        prefix: &str,
        from: Revision,
    ) -> Result<(Vec<WatchEvent>, Revision, Revision), Error> {
        let read = self.begin_read()?;
        let meta = read
            .open_table(META)
            .map_err(|e| self.disk("open table meta", e))?;
        let history = read
            .open_table(HISTORY)
            .map_err(|e| self.disk("open table history", e))?;
        let head = self.revision(&meta)?;
        let oldest = self.oldest(&meta)?;
        if from < oldest {
            return Err(Error::Compacted {
                requested: from,
                oldest,
            });
        }
        let upto = head.min(from.saturating_add(BACKLOG_BATCH - 1));
        let mut events = Vec::new();
        if from <= upto {
            for entry in history
                .range(from..=upto)
                .map_err(|e| self.disk("read history", e))?
            {
                let (revision, bytes) = entry.map_err(|e| self.disk("read history", e))?;
                let revision = revision.value();
                let stored: Vec<StoredEvent> =
                    decode(&format!("history revision {revision}"), bytes.value())?;
                events.extend(
                    stored
                        .into_iter()
                        .map(|event| event.into_watch_event(revision))
                        .filter(|event| event.key().starts_with(prefix)),
                );
            }
        }
        Ok((events, upto.max(from - 1), head))
    }
}

impl EmbeddedStore {
    /// A watch of `prefix` from `from_revision` (0: from the next commit), for [`Store::watch`].
    ///
    /// [`Store::watch`]: crate::store::Store::watch
    pub(super) async fn watch_from(
        &self,
        prefix: &str,
        from_revision: Revision,
    ) -> Result<WatchStream, Error> {
        if from_revision < 0 {
            return Err(Error::Invalid(format!(
                "a watch starts at a revision >= 0, not {from_revision}"
            )));
        }
        let (receiver, head, oldest) = self.blocking(false, Inner::subscribe).await?;
        let last = if from_revision == 0 {
            head
        } else if from_revision < oldest {
            return Err(Error::Compacted {
                requested: from_revision,
                oldest,
            });
        } else {
            from_revision - 1
        };
        let watcher = Watcher {
            store: Arc::downgrade(&self.inner),
            receiver,
            prefix: prefix.to_owned(),
            last,
            catch_up_to: head,
            refill: false,
            pending: VecDeque::new(),
            ended: false,
        };
        Ok(Box::pin(futures::stream::unfold(watcher, Watcher::next)))
    }
}

/// A watch's state: it owns no task, only a broadcast receiver and a [`Weak`] to the store,
/// so dropping it (or the store) leaves nothing running.
struct Watcher {
    store: Weak<Inner>,
    receiver: broadcast::Receiver<Arc<Commit>>,
    prefix: String,
    /// every revision up to this one was delivered (or did not touch the prefix)
    last: Revision,
    /// history must be read up to here before the broadcast is followed again
    catch_up_to: Revision,
    /// the broadcast dropped commits: re-read history up to the current revision
    refill: bool,
    /// events read but not yet delivered
    pending: VecDeque<WatchEvent>,
    /// an error was delivered; the stream ends
    ended: bool,
}

impl Watcher {
    async fn next(mut self) -> Option<(Result<WatchEvent, Error>, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if self.ended {
                return None;
            }
            if self.refill || self.last < self.catch_up_to {
                if let Err(error) = self.read_backlog().await {
                    self.ended = true;
                    return Some((Err(error), self));
                }
                continue;
            }
            match self.receiver.recv().await {
                Ok(commit) if commit.revision <= self.last => {}
                Ok(commit) if commit.revision == self.last + 1 => {
                    let prefix = &self.prefix;
                    self.pending.extend(
                        commit
                            .events
                            .iter()
                            .filter(|event| event.key().starts_with(prefix.as_str()))
                            .cloned(),
                    );
                    self.last = commit.revision;
                }
                // a gap: the missing revisions are in history (committed before this was sent)
                Ok(commit) => self.catch_up_to = commit.revision,
                Err(broadcast::error::RecvError::Lagged(_)) => self.refill = true,
                Err(broadcast::error::RecvError::Closed) => {
                    self.ended = true;
                    return Some((Err(closed()), self));
                }
            }
        }
    }

    async fn read_backlog(&mut self) -> Result<(), Error> {
        let store = self.store.upgrade().ok_or_else(closed)?;
        let prefix = self.prefix.clone();
        let from = self.last + 1;
        let (events, upto, head) =
            tokio::task::spawn_blocking(move || store.read_history(&prefix, from))
                .await
                .map_err(|error| {
                    Error::Unavailable(format!("embedded store watch read failed: {error}"))
                })??;
        self.pending.extend(events);
        self.last = self.last.max(upto);
        self.catch_up_to = self.catch_up_to.max(head);
        self.refill = false;
        Ok(())
    }
}

fn closed() -> Error {
    Error::Unavailable("the embedded store was closed; reopen it and watch again".into())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use futures::StreamExt;

    use super::super::test_support::{must_next, open, wait_until};
    use super::*;
    use crate::store::embedded::EmbeddedOptions;
    use crate::store::embedded::inner::BROADCAST_CAPACITY;
    use crate::store::{Op, Store, StoreExt, Txn};

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn watch_delivers_backlog_then_live_without_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        for n in 0..40 {
            store
                .put(&format!("w/{n:03}"), n.to_string().into_bytes())
                .await
                .unwrap();
            store.put("other/x", b"noise".to_vec()).await.unwrap();
        }
        // revisions 2..=81; w/ writes are at even revisions
        let mut watch = store.watch("w/", 10).await.unwrap();
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                for n in 40..400 {
                    store
                        .txn(Txn::new().and_then([
                            Op::put(format!("w/{n:03}"), n.to_string()),
                            Op::put("other/x", "noise"),
                        ]))
                        .await
                        .unwrap();
                }
            })
        };
        let mut expected = Vec::new();
        expected.extend((4..40).map(|n| (2 + 2 * n, format!("w/{n:03}"))));
        expected.extend((40..400).map(|n| (82 + (n - 40), format!("w/{n:03}"))));
        let last_revision = expected.last().unwrap().0;
        let mut seen = Vec::new();
        while seen.len() < expected.len() {
            let event = must_next(&mut watch).await;
            seen.push((event.revision(), event.key().to_owned()));
            // now and then stop reading until the writer is further ahead than the broadcast
            // holds, so the watch must refill from history while the writer goes on
            if seen.len() % 100 == 0 {
                let ahead = store.revision().await.unwrap() + BROADCAST_CAPACITY as i64 + 5;
                let target = ahead.min(last_revision);
                wait_until("the writer got ahead", || async {
                    store.revision().await.unwrap() >= target
                })
                .await;
            }
        }
        writer.await.unwrap();
        assert_eq!(seen, expected);
        // and nothing more
        assert!(
            tokio::time::timeout(Duration::from_millis(300), watch.next())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn watch_lagging_far_behind_refills_from_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        let mut watch = store.watch("", 0).await.unwrap();
        let count = BROADCAST_CAPACITY as i64 * 2 + 17;
        for n in 0..count {
            store.put("k", n.to_string().into_bytes()).await.unwrap();
        }
        for n in 0..count {
            let event = must_next(&mut watch).await;
            assert_eq!(event.revision(), n + 2);
            let WatchEvent::Put(kv) = event else {
                panic!("put expected");
            };
            assert_eq!(kv.value, n.to_string().into_bytes());
            assert_eq!(kv.version, n + 1);
        }
    }

    #[tokio::test]
    async fn watch_below_kept_history_is_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let options = EmbeddedOptions {
            history_revisions: 5,
            ..EmbeddedOptions::default()
        };
        let store = EmbeddedStore::open_with(dir.path(), options).await.unwrap();
        // a fresh store keeps everything; these watches fall behind the kept window below
        let mut backlog = store.watch("", 1).await.unwrap();
        let mut live = store.watch("", 0).await.unwrap();
        store.put("k", vec![0]).await.unwrap();
        assert_eq!(must_next(&mut live).await.revision(), 2);
        for n in 1..20 {
            store.put("k", vec![n]).await.unwrap();
        }
        assert_eq!(store.revision().await.unwrap(), 21);
        match store.watch("", 16).await {
            Err(Error::Compacted { requested, oldest }) => {
                assert_eq!((requested, oldest), (16, 17));
            }
            Err(other) => panic!("expected Compacted, got {other}"),
            Ok(_) => panic!("expected Compacted, got a watch"),
        }
        let mut kept = store.watch("", 17).await.unwrap();
        for revision in 17..=21 {
            assert_eq!(must_next(&mut kept).await.revision(), revision);
        }

        // accepted at revision 1, its backlog was trimmed before it was read
        let end = backlog.next().await;
        assert!(
            matches!(
                end,
                Some(Err(Error::Compacted {
                    requested: 1,
                    oldest: 17
                }))
            ),
            "{end:?}"
        );
        assert!(backlog.next().await.is_none());

        // a live watch that falls further behind than the broadcast holds must refill from
        // history, which is gone too
        for n in 0..BROADCAST_CAPACITY + 10 {
            store.put("k", n.to_le_bytes().to_vec()).await.unwrap();
        }
        let mut delivered = 0;
        let end = loop {
            match live.next().await {
                Some(Ok(_)) => delivered += 1,
                other => break other,
            }
        };
        assert!(
            matches!(end, Some(Err(Error::Compacted { requested, .. })) if requested > 2),
            "{end:?} after {delivered} events"
        );
    }

    #[tokio::test]
    async fn dropping_the_store_ends_its_watches() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        let mut watch = store.watch("", 0).await.unwrap();
        drop(store);
        let end = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .unwrap();
        assert!(matches!(end, Some(Err(Error::Unavailable(_)))), "{end:?}");
        assert!(watch.next().await.is_none());
    }
}
