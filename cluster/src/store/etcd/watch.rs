//! A watch on one member, as our [`WatchStream`]: it ends with an `Err` when the watch breaks
//! (the member died or lost its leader, history compacted), and the member it ran on is passed
//! over, so the caller's re-watch from its last revision goes to a live one.

use etcd_client as etcd;
use futures::StreamExt;

use super::classify::{Failure, classify};
use super::convert::key_value;
use super::members::SharedMembers;
use crate::store::{Error, Revision, WatchEvent, WatchStream};

/// Turns etcd's watch stream from member `member` into ours.
pub(super) fn events(
    stream: etcd::WatchStream,
    from_revision: Revision,
    members: SharedMembers,
    member: usize,
) -> WatchStream {
    let events = futures::stream::unfold((stream, false), move |(mut stream, done)| {
        let members = members.clone();
        async move {
            if done {
                return None;
            }
            let batch = next_batch(&mut stream, from_revision).await;
            let ends = batch.iter().any(Result::is_err);
            if ends {
                members.passed_over(member);
            }
            Some((futures::stream::iter(batch), (stream, ends)))
        }
    })
    .flatten();
    Box::pin(events)
}

async fn next_batch(
    stream: &mut etcd::WatchStream,
    requested: Revision,
) -> Vec<Result<WatchEvent, Error>> {
    match stream.message().await {
        Ok(Some(response)) if response.compact_revision() > 0 => vec![Err(Error::Compacted {
            requested,
            oldest: response.compact_revision(),
        })],
        Ok(Some(response)) if response.canceled() => vec![Err(Error::Unavailable(format!(
            "watch canceled: {}",
            response.cancel_reason()
        )))],
        Ok(Some(response)) => response
            .events()
            .iter()
            .filter_map(|event| {
                let kv = event.kv()?;
                Some(Ok(match event.event_type() {
                    etcd::EventType::Put => WatchEvent::Put(key_value(kv)),
                    etcd::EventType::Delete => WatchEvent::Delete {
                        key: String::from_utf8_lossy(kv.key()).into_owned(),
                        revision: kv.mod_revision(),
                    },
                }))
            })
            .collect(),
        Ok(None) => vec![Err(Error::Unavailable("watch stream closed".into()))],
        Err(error) => vec![Err(match classify(error) {
            Failure::Final(error) => error,
            Failure::NotSent(message) | Failure::Lost(message) => Error::Unavailable(message),
        })],
    }
}
