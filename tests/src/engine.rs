//! An engine under a test's control, attached over `Engine.Attach` to a node it started: what
//! it sends up and what comes down to it, and the messages an engine sends (take, settle), as
//! the Engine API (`docs/engine.md`) gives them. The engine conformance test (t17) and the
//! scale bench's answer figures drive a node through it.

use std::time::{Duration, Instant};

use boxfleet_auth::{Keyring, Role};
use boxfleet_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::transport::Endpoint;

use crate::grpc::Bearer;

const DAY: Duration = Duration::from_secs(86_400);

/// A credential for engine `subject` scoped to `seats`, from the node's own keyring.
pub fn engine_token(dir: &std::path::Path, subject: &str, seats: &[&str]) -> String {
    let keyring = Keyring::load(&dir.join("keyring.json")).expect("the node's keyring");
    let seats: Vec<String> = seats.iter().map(|s| (*s).to_owned()).collect();
    keyring.issue(subject, Role::Engine, &seats, DAY, chrono::Utc::now())
}

/// An engine under the test's control: what it sends up, and what comes down to it.
#[allow(missing_debug_implementations)]
pub struct ScriptedEngine {
    up: mpsc::Sender<pb::EngineUp>,
    down: tonic::Streaming<pb::EngineDown>,
}

impl ScriptedEngine {
    /// Attaches as `token` for `seats`; the node's refusal of the attach is returned.
    pub async fn attach(addr: &str, token: &str, seats: &[&str]) -> Result<Self, tonic::Status> {
        let channel = Endpoint::from_shared(addr.to_owned())
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let mut client =
            pb::engine_client::EngineClient::with_interceptor(channel, Bearer::new(token));
        let (up, rx) = mpsc::channel::<pb::EngineUp>(64);
        let hello = pb::Hello {
            engine: "scripted".into(),
            seats: seats.iter().map(|s| (*s).to_owned()).collect(),
            ..pb::Hello::default()
        };
        up.send(pb::EngineUp {
            msg: Some(pb::engine_up::Msg::Hello(hello)),
        })
        .await
        .expect("hello");
        let down = client
            .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(Self { up, down })
    }

    /// Sends an `EngineUp` as given (an empty one too, which the node refuses).
    pub async fn send_raw(&self, up: pb::EngineUp) {
        self.up.send(up).await.expect("the engine's stream is open");
    }

    pub async fn send(&self, msg: pb::engine_up::Msg) {
        self.up
            .send(pb::EngineUp { msg: Some(msg) })
            .await
            .expect("the engine's stream is open");
    }

    /// The next message down, within `within`.
    pub async fn next(&mut self, within: Duration) -> pb::engine_down::Msg {
        tokio::time::timeout(within, self.down.next())
            .await
            .expect("a message down in time")
            .expect("the stream is open")
            .expect("a message, not an error")
            .msg
            .expect("a message with something in it")
    }

    /// The next message down for which `pick` gives something; the others are skipped.
    pub async fn next_where<T>(
        &mut self,
        within: Duration,
        mut pick: impl FnMut(&pb::engine_down::Msg) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.next(left).await;
            if let Some(found) = pick(&msg) {
                return found;
            }
            println!("    (skipped {msg:?})");
        }
    }

    pub async fn turn(&mut self) -> pb::Turn {
        self.next_where(Duration::from_secs(30), |m| match m {
            pb::engine_down::Msg::Turn(t) => Some(t.clone()),
            _ => None,
        })
        .await
    }

    pub async fn resume(&mut self, kind: pb::resume::Kind) -> pb::Resume {
        self.next_where(Duration::from_secs(60), |m| match m {
            pb::engine_down::Msg::Resume(r) if r.kind == kind as i32 => Some(r.clone()),
            _ => None,
        })
        .await
    }

    /// Sends `msg` and returns the refusal it gets.
    pub async fn refused(&mut self, msg: pb::engine_up::Msg) -> pb::Refused {
        self.send(msg).await;
        self.next_where(Duration::from_secs(10), |m| match m {
            pb::engine_down::Msg::Refused(r) => Some(r.clone()),
            _ => None,
        })
        .await
    }

    /// Nothing comes down for `quiet`.
    pub async fn nothing_for(&mut self, quiet: Duration) {
        if let Ok(Some(message)) = tokio::time::timeout(quiet, self.down.next()).await {
            panic!("expected nothing down, got {message:?}");
        }
    }
}

pub fn take(turn_id: &str, launch_id: &str) -> pb::engine_up::Msg {
    pb::engine_up::Msg::Take(pb::Take {
        turn_id: turn_id.into(),
        launch_id: launch_id.into(),
    })
}

pub fn settle(
    turn_id: &str,
    launch_id: &str,
    outcome: Option<pb::settle::Outcome>,
) -> pb::engine_up::Msg {
    pb::engine_up::Msg::Settle(pb::Settle {
        turn_id: turn_id.into(),
        launch_id: launch_id.into(),
        outcome,
    })
}

pub fn finished(reply: &str) -> Option<pb::settle::Outcome> {
    Some(pb::settle::Outcome::Finished(pb::Finished {
        reply: reply.into(),
    }))
}

pub async fn launch(addr: &str, request: pb::LaunchRequest) -> pb::launch_reply::Outcome {
    let mut runs = crate::grpc::runs(addr).await.expect("connect");
    runs.launch(request)
        .await
        .expect("launch")
        .into_inner()
        .outcome
        .expect("an outcome")
}

pub fn launched(outcome: pb::launch_reply::Outcome) -> pb::Launched {
    match outcome {
        pb::launch_reply::Outcome::Launched(launched) => launched,
        pb::launch_reply::Outcome::Refused(refused) => panic!("refused: {refused:?}"),
    }
}
