//! What the embedded store's tests share: opening a store, reopening it once its last handle
//! let go of the file, and waiting for a watch event or a condition with a deadline.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;

use super::{EmbeddedOptions, EmbeddedStore};
use crate::store::{WatchEvent, WatchStream};

pub(super) async fn open(dir: &Path) -> EmbeddedStore {
    EmbeddedStore::open(dir).await.unwrap()
}

/// Reopens after a drop: the lease reaper may hold the file for an instant longer.
pub(super) async fn reopen(dir: &Path, options: EmbeddedOptions) -> EmbeddedStore {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match EmbeddedStore::open_with(dir, options.clone()).await {
            Ok(store) => return store,
            Err(error) if Instant::now() < deadline => {
                tracing::debug!(%error, "store still open, retrying");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("reopen failed: {error}"),
        }
    }
}

pub(super) async fn must_next(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("watch event in time")
        .expect("watch still open")
        .expect("watch event, not an error")
}

pub(super) async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
