//! Group commit: writes that arrive while a commit is being made to disk wait together and
//! are committed together, in one redb write transaction and one fsync, each at its own
//! revision, in the order they arrived — as etcd batches its raft entries.
//!
//! A writer queues its txn, then takes the commit lock. Whoever holds the lock takes every txn
//! queued so far (its own among them, unless an earlier holder committed it already), applies
//! them one after another — each sees the writes of those before it, exactly as if it had been
//! committed alone just after them — commits once, broadcasts each revision's changes in order,
//! and hands each writer its answer. A writer is answered only after the commit that holds its
//! write is durable, so every acknowledged write survives a crash, as before.
//!
//! A txn refused before anything of it is written (its branch cannot apply) is answered with
//! its error and the others go on. A failure while a txn's changes are being written leaves the
//! whole transaction unfinished: it is dropped, and each txn of the batch is committed alone,
//! so a fault of one writer's fails only that writer. A failure to commit fails every writer
//! of the batch with an indeterminate outcome, as it failed the one writer before.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::inner::Inner;
use super::layout::Tables;
use crate::store::{Error, Revision, Txn, TxnResponse, WatchEvent};

/// A writer's answer, filled by whoever commits its txn.
type Slot = Arc<Mutex<Option<Result<TxnResponse, Error>>>>;

/// A txn waiting for the next commit.
pub(super) struct Queued {
    txn: Txn,
    answer: Slot,
}

/// Why a batch could not be committed as one.
enum BatchError {
    /// writing one txn's changes failed: the batch is committed txn by txn instead
    Applying(Error),
    /// the transaction could not begin or be committed: every writer gets this
    Whole(Error),
}

fn take(answer: &Slot) -> Option<Result<TxnResponse, Error>> {
    answer.lock().unwrap_or_else(PoisonError::into_inner).take()
}

fn give(answer: &Slot, result: Result<TxnResponse, Error>) {
    *answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
}

impl Inner {
    fn lock_queue(&self) -> MutexGuard<'_, Vec<Queued>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A txn that may write: committed with the others queued beside it, durable (fsync)
    /// before it is answered.
    pub(super) fn write_txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        let answer: Slot = Arc::new(Mutex::new(None));
        self.lock_queue().push(Queued {
            txn,
            answer: answer.clone(),
        });
        let _commits = self.lock_commits();
        if let Some(result) = take(&answer) {
            // the holder before us committed it
            return result;
        }
        let batch = std::mem::take(&mut *self.lock_queue());
        self.commit_batch(&batch);
        take(&answer).unwrap_or_else(|| {
            Err(Error::Indeterminate(format!(
                "embedded store at {}: a queued write was neither committed nor refused",
                self.path.display()
            )))
        })
    }

    /// Commits the batch and answers each of its writers; the commit lock is held.
    fn commit_batch(&self, batch: &[Queued]) {
        match self.commit_together(batch) {
            Ok(results) => {
                for (queued, result) in batch.iter().zip(results) {
                    give(&queued.answer, result);
                }
            }
            Err(BatchError::Applying(error)) if batch.len() == 1 => {
                give(&batch[0].answer, Err(error));
            }
            Err(BatchError::Applying(_)) => {
                // one writer's fault: each is committed alone, and only that one fails
                for queued in batch {
                    self.commit_batch(std::slice::from_ref(queued));
                }
            }
            Err(BatchError::Whole(error)) => {
                for queued in batch {
                    give(&queued.answer, Err(error.clone()));
                }
            }
        }
    }

    /// Applies the batch's txns in order in one write transaction and commits it once: per
    /// txn, its answer, or the error that refused it before anything of it was written.
    fn commit_together(
        &self,
        batch: &[Queued],
    ) -> Result<Vec<Result<TxnResponse, Error>>, BatchError> {
        let write = self.begin_write().map_err(BatchError::Whole)?;
        let mut answers = Vec::with_capacity(batch.len());
        let mut changes: Vec<(Revision, Vec<WatchEvent>)> = Vec::new();
        {
            let mut tables = Tables::open(self, &write).map_err(BatchError::Whole)?;
            let mut head = self.revision(&tables.meta).map_err(BatchError::Whole)?;
            for queued in batch {
                let txn = &queued.txn;
                // refused before anything of it is written: the others go on
                let picked = self.compares_hold(&tables.kv, txn).and_then(|succeeded| {
                    let ops = if succeeded {
                        &txn.success
                    } else {
                        &txn.failure
                    };
                    self.check_ops(&tables, ops).map(|()| (succeeded, ops))
                });
                let (succeeded, ops) = match picked {
                    Ok(picked) => picked,
                    Err(error) => {
                        answers.push(Err(error));
                        continue;
                    }
                };
                let revision = head + 1;
                let mut results = Vec::with_capacity(ops.len());
                let mut events = Vec::new();
                for op in ops {
                    let result = tables
                        .apply(self, op, revision, &mut events)
                        .map_err(BatchError::Applying)?;
                    results.push(result);
                }
                if events.is_empty() {
                    answers.push(Ok(TxnResponse {
                        succeeded,
                        revision: head,
                        results,
                    }));
                    continue;
                }
                tables
                    .record(self, revision, &events)
                    .map_err(BatchError::Applying)?;
                head = revision;
                changes.push((revision, events));
                answers.push(Ok(TxnResponse {
                    succeeded,
                    revision,
                    results,
                }));
            }
        }
        if changes.is_empty() {
            write
                .abort()
                .map_err(|e| BatchError::Whole(self.disk("abort a txn that changed nothing", e)))?;
            return Ok(answers);
        }
        write
            .commit()
            .map_err(|e| BatchError::Whole(self.commit_failed("commit a txn", e)))?;
        self.commits_made
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (revision, events) in changes {
            self.announce(revision, events);
        }
        self.compact_if_trimmed();
        Ok(answers)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::store::embedded::EmbeddedStore;
    use crate::store::{Compare, CompareOp, Op, Store, Txn};

    const WRITERS: usize = 32;
    const EACH: usize = 20;

    /// Adds one to the shared counter by compare-and-set, retrying when another won: the
    /// revision it landed at.
    async fn increment(store: &EmbeddedStore) -> i64 {
        loop {
            let now = store.get("counter").await.expect("read the counter");
            let value: u64 = now.as_ref().map_or(0, |kv| {
                String::from_utf8_lossy(&kv.value).parse().unwrap_or(0)
            });
            let compare = match &now {
                Some(kv) => Compare::value("counter", CompareOp::Equal, kv.value.clone()),
                None => Compare::absent("counter"),
            };
            let response = store
                .txn(
                    Txn::new()
                        .when([compare])
                        .and_then([Op::put("counter", (value + 1).to_string())]),
                )
                .await
                .expect("a txn");
            if response.succeeded {
                return response.revision;
            }
        }
    }

    /// Many writers at once: every acknowledged write is there, each at its own revision of
    /// one gapless sequence, a compare sees the writes committed beside it, a refused txn
    /// fails alone — and the writes shared commits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn writers_at_once_share_commits_and_each_lands_once_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path()).await.expect("open");
        let start = store
            .txn(Txn::new().and_then([Op::put("start", "1")]))
            .await
            .expect("first write")
            .revision;
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut revisions = Vec::new();
                for i in 0..EACH {
                    let own = store
                        .txn(Txn::new().and_then([Op::put(format!("w/{writer}"), i.to_string())]))
                        .await
                        .expect("an own write");
                    revisions.push(own.revision);
                    revisions.push(increment(&store).await);
                    // a txn whose branch cannot apply (a put on a lease that does not exist) is
                    // refused, and nothing of it lands
                    let refused = store
                        .txn(Txn::new().and_then([
                            Op::put(format!("never/{writer}"), "x"),
                            Op::put_on_lease(format!("never/{writer}/lease"), "x", 0x5eed),
                        ]))
                        .await;
                    assert!(refused.is_err(), "{refused:?}");
                }
                revisions
            }));
        }
        let mut revisions = Vec::new();
        for task in tasks {
            revisions.extend(task.await.expect("a writer"));
        }
        revisions.sort_unstable();
        let writes = (WRITERS * EACH * 2) as i64;
        let expected: Vec<i64> = (start + 1..=start + writes).collect();
        assert_eq!(
            revisions, expected,
            "one revision per write, none shared, no gap"
        );
        let counter = store.get("counter").await.expect("read").expect("counter");
        assert_eq!(counter.value, (WRITERS * EACH).to_string().into_bytes());
        for writer in 0..WRITERS {
            let own = store
                .get(&format!("w/{writer}"))
                .await
                .expect("read")
                .expect("own");
            assert_eq!(own.value, (EACH - 1).to_string().into_bytes());
            assert!(
                store
                    .get(&format!("never/{writer}"))
                    .await
                    .expect("read")
                    .is_none()
            );
        }
        let commits = store.inner.commits_made.load(Ordering::Relaxed) as i64;
        println!("{writes} writes (and their retries) in {commits} commits");
        assert!(
            commits < writes,
            "no two writes shared a commit ({commits} for {writes})"
        );
        // and all of it is on disk: the reopened store holds the same
        drop(store);
        let store = EmbeddedStore::open(dir.path()).await.expect("reopen");
        let counter = store.get("counter").await.expect("read").expect("counter");
        assert_eq!(counter.value, (WRITERS * EACH).to_string().into_bytes());
        assert!(counter.mod_revision <= start + writes);
    }
}
