use std::sync::Mutex;

use super::*;
use crate::ports::Followed as Read;

/// A box per launch id: `slow…` never answers inside the test, `paused…` is paused,
/// `quiet…` has written only to its error stream, anything else has written `lines`.
#[derive(Debug, Default)]
struct Boxes {
    lines: Mutex<String>,
}

#[async_trait]
impl JobOutput for Boxes {
    async fn follow(
        &self,
        run: &RunRecord,
        stream: TailStream,
        from: u64,
    ) -> Result<Followed, FollowError> {
        let id = run.launch_id.as_str();
        if id.starts_with("slow") {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        if id.starts_with("paused") {
            return Err(FollowError::Paused("box sbx-1 is paused".into()));
        }
        let (text, stream) = if id.starts_with("quiet") {
            ("cli: cannot start\n".to_owned(), TailStream::Errors)
        } else {
            let _ = stream;
            (
                self.lines.lock().expect("lines").clone(),
                TailStream::Output,
            )
        };
        let end = text.len() as u64;
        let from = (from as usize).min(text.len());
        Ok(Followed {
            followed: Read {
                text: text[from..].to_owned(),
                start: from as u64,
                end,
            },
            stream,
        })
    }
}

fn record(launch_id: &str) -> Box<RunRecord> {
    Box::new(RunRecord::launching(
        "turn-1",
        launch_id,
        "eng",
        "command",
        boxfleet_cluster::clock::now(),
    ))
}

async fn owner(boxes: Arc<Boxes>) -> ActorRef<TailMsg> {
    let args = TailArgs {
        output: boxes,
        read_bound: Duration::from_secs(30),
    };
    let (owner, _) = Actor::spawn(None, TailOwner, args)
        .await
        .expect("tail owner");
    owner
}

async fn ask(
    owner: &ActorRef<TailMsg>,
    launch_id: &str,
    holding: Holding,
    wait: Duration,
) -> Result<TailView, FollowError> {
    match owner
        .call(
            |reply| TailMsg::Read {
                record: record(launch_id),
                holding,
                wait,
                reply,
            },
            Some(wait * 4),
        )
        .await
        .expect("the owner answers")
    {
        ractor::rpc::CallResult::Success(answer) => answer,
        other => panic!("no answer inside the asker's budget: {other:?}"),
    }
}

#[tokio::test]
async fn a_box_that_stalls_delays_only_its_own_viewers() {
    let boxes = Arc::new(Boxes::default());
    *boxes.lines.lock().expect("lines") = "one\ntwo\n".into();
    let owner = owner(boxes).await;
    let wait = Duration::from_millis(400);
    let began = Instant::now();
    let stalled = tokio::spawn({
        let owner = owner.clone();
        async move { ask(&owner, "slow-1", Holding::default(), wait).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let quick = ask(&owner, "fast-1", Holding::default(), wait)
        .await
        .expect("the quick box");
    assert!(
        began.elapsed() < wait,
        "the quick box's viewer waited on the stalled one: {:?}",
        began.elapsed()
    );
    assert_eq!(quick.text, "one\ntwo\n");
    assert!(quick.stale_ms.is_none());
    let stalled = stalled.await.expect("joined").expect("an answer");
    assert!(began.elapsed() >= wait);
    assert!(
        stalled.stale_ms.is_some(),
        "a timed-out ask is given the last reading, stamped with its age"
    );
    assert_eq!((stalled.text.as_str(), stalled.end), ("", 0));
    owner.stop(None);
}

#[tokio::test]
async fn a_holding_whose_digest_does_not_match_is_reset_and_a_matching_one_continues() {
    let boxes = Arc::new(Boxes::default());
    *boxes.lines.lock().expect("lines") = "alpha\nbeta\n".into();
    let owner = owner(boxes.clone()).await;
    let wait = Duration::from_millis(500);
    let first = ask(&owner, "job-1", Holding::default(), wait)
        .await
        .expect("first");
    assert!(!first.reset);
    assert_eq!(first.text, "alpha\nbeta\n");
    let held = Holding {
        epoch: first.epoch,
        after: first.end,
        digest: first.digest.clone(),
    };
    // inside one reuse: the same reading answers, with nothing new
    let again = ask(&owner, "job-1", held.clone(), wait)
        .await
        .expect("again");
    assert!(!again.reset);
    assert_eq!((again.text.as_str(), again.start), ("", first.end));
    let wrong = Holding {
        digest: "0000".into(),
        ..held.clone()
    };
    let reset = ask(&owner, "job-1", wrong, wait).await.expect("reset");
    assert!(reset.reset, "a digest that does not match resets");
    assert_eq!((reset.text.as_str(), reset.start), ("alpha\nbeta\n", 0));
    let other_epoch = Holding {
        epoch: first.epoch + 1,
        ..held
    };
    assert!(
        ask(&owner, "job-1", other_epoch, wait)
            .await
            .expect("r")
            .reset
    );
    owner.stop(None);
}

#[tokio::test]
async fn a_paused_box_is_said_and_a_quiet_output_shows_the_error_stream() {
    let owner = owner(Arc::new(Boxes::default())).await;
    let wait = Duration::from_millis(500);
    assert!(matches!(
        ask(&owner, "paused-1", Holding::default(), wait).await,
        Err(FollowError::Paused(_))
    ));
    let errors = ask(&owner, "quiet-1", Holding::default(), wait)
        .await
        .expect("errors");
    assert_eq!(errors.stream, TailStream::Errors);
    assert_eq!(errors.text, "cli: cannot start\n");
    assert_eq!(errors.epoch, epoch_of("quiet-1", TailStream::Errors, 0));
    owner.stop(None);
}
