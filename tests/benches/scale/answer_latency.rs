//! The scale bench's answer latency end to end: a release node on the embedded store or on
//! etcd, an engine attached to it over gRPC for seat `eng`, and a job that asks (`boxfleet-ask`
//! in a `direct` box). Each sample launches the job, waits for the engine to hear it parked,
//! answers it through `Runs.Answer` as the person it asked, and times the call until the
//! engine's stream brings the resume; the engine then takes it and settles the turn, and the
//! next sample launches again on the same seat.

use std::time::{Duration, Instant};

use boxfleet_proto::v1 as pb;
use boxfleet_tests::engine::{ScriptedEngine, engine_token, finished, launch, settle, take};
use boxfleet_tests::node::NodeProcess;

/// One agent seat served by an external engine, and the person its questions go to.
const CHART: &str = "company:\n  providers:\n    sandbox: { local: {}, default_run_in: direct }\n  roles:\n    - { name: worker, sandbox: { enabled: true } }\n  seats:\n    - { handle: eng, kind: agent, role: worker, engine: external, manager: alice }\n    - { handle: alice, kind: person }\n";

const JOB: &str = r#"boxfleet-ask "which region?" --to alice"#;

/// Where the node keeps its store.
pub enum Backing {
    Embedded,
    Etcd,
}

/// `samples` answers' latencies from `Runs.Answer` to the resume on the engine's stream.
pub async fn measure(backing: Backing, samples: usize) -> Vec<Duration> {
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = dir.path().join("chart.yaml");
    std::fs::write(&chart, CHART).expect("chart");
    let etcd = boxfleet_tests::EtcdServer::shared().client_url();
    let prefix = boxfleet_tests::unique_prefix("answer-latency");
    let mut args = vec!["--config", chart.to_str().expect("utf-8")];
    if matches!(backing, Backing::Etcd) {
        args.extend(["--etcd", etcd.as_str(), "--prefix", prefix.as_str()]);
    }
    let node = NodeProcess::start_with_env("answers", dir.path(), &args, &[]);
    let addr = node.addr();
    let token = engine_token(dir.path(), "engine-bench", &["eng"]);
    let mut engine = ScriptedEngine::attach(&addr, &token, &["eng"])
        .await
        .expect("attach");
    let mut runs = boxfleet_tests::grpc::runs(&addr).await.expect("connect");
    let mut took = Vec::new();
    for _ in 0..samples {
        let turn_id = launch_when_free(&node).await;
        let parked = engine
            .next_where(Duration::from_secs(60), |m| match m {
                pb::engine_down::Msg::Parked(p) if p.turn_id == turn_id => Some(p.clone()),
                _ => None,
            })
            .await;
        let began = Instant::now();
        let reply = runs
            .answer(pb::AnswerRequest {
                turn_id: turn_id.clone(),
                launch_id: parked.launch_id.clone(),
                text: "eu-west".into(),
                as_whom: "alice".into(),
            })
            .await
            .expect("the answer")
            .into_inner();
        let resume = engine.resume(pb::resume::Kind::Answer).await;
        took.push(began.elapsed());
        assert_eq!(resume.turn_id, turn_id);
        assert_eq!(resume.answer, "eu-west");
        assert_eq!(reply.outcome, "recorded", "an idle seat's run: {reply:?}");
        // the engine's turn: it takes the answer, then settles the turn
        engine.send(take(&turn_id, &resume.launch_id)).await;
        engine
            .send(settle(
                &turn_id,
                &resume.launch_id,
                finished("eu-west it is"),
            ))
            .await;
    }
    took
}

/// Launches the asking job on `eng` once the seat's last run let it go.
async fn launch_when_free(node: &NodeProcess) -> String {
    let addr = node.addr();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let request = pb::LaunchRequest {
            seat: "eng".into(),
            command: JOB.into(),
            requester: "alice".into(),
            ..pb::LaunchRequest::default()
        };
        match launch(&addr, request).await {
            pb::launch_reply::Outcome::Launched(launched) => return launched.turn_id,
            pb::launch_reply::Outcome::Refused(refused) if Instant::now() < deadline => {
                assert!(
                    refused.reason.contains("busy"),
                    "only a busy seat is retried: {refused:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            pb::launch_reply::Outcome::Refused(refused) => {
                panic!("the seat stayed busy for 15 s: {refused:?}\n{}", node.log())
            }
        }
    }
}
