//! The Engine API's conformance test (`docs/engine.md`): a scripted external engine, attached
//! over `Engine.Attach` to the built `boxfleet` binary, is driven through every message and
//! edge the contract names — routing by configuration, the error channel, what a resume
//! carries, relaunches that carry the answer, notices, spaced and bounded retries, dead
//! letters, and the node's closing word.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use boxfleet_proto::v1 as pb;
use boxfleet_tests::engine::{
    ScriptedEngine, engine_token, finished, launch, launched, settle, take,
};
use boxfleet_tests::node::NodeProcess;
use futures::StreamExt;
use tonic::Code;

/// Two agent seats served by external engines, one by the built-in engine, and a person.
const CHART: &str = "company:\n  providers:\n    sandbox: { local: {}, default_run_in: direct }\n  roles:\n    - { name: worker, sandbox: { enabled: true } }\n  seats:\n    - { handle: eng, kind: agent, role: worker, engine: external, manager: alice }\n    - { handle: ops, kind: agent, role: worker, engine: external, manager: alice }\n    - { handle: local, kind: agent, role: worker }\n    - { handle: alice, kind: person }\n";

fn start(name: &str, dir: &std::path::Path, env: &[(&str, &str)]) -> NodeProcess {
    let chart = dir.join("chart.yaml");
    std::fs::write(&chart, CHART).expect("chart");
    NodeProcess::start_with_env(
        name,
        dir,
        &["--config", chart.to_str().expect("utf-8")],
        env,
    )
}

async fn events(addr: &str) -> Vec<serde_json::Value> {
    let mut runs = boxfleet_tests::grpc::runs(addr).await.expect("connect");
    let mut stream = runs
        .events(pb::EventsRequest {
            from_revision: 0,
            follow: false,
        })
        .await
        .expect("events")
        .into_inner();
    let mut all = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.expect("event");
        all.push(serde_json::from_str(&event.json).expect("event JSON"));
    }
    all
}

async fn deliver(addr: &str, seat: &str, text: &str) -> String {
    let mut runs = boxfleet_tests::grpc::runs(addr).await.expect("connect");
    runs.deliver(pb::DeliverRequest {
        seat: seat.into(),
        from: "alice".into(),
        text: text.into(),
        conversation_key: format!("c-{seat}"),
        ..pb::DeliverRequest::default()
    })
    .await
    .expect("deliver")
    .into_inner()
    .delivery_id
}

/// A turn, its launch under the turn's own id, the findings resume and every refusal a take or
/// a settle can get; the reply the engine settles with is the turn's reply event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_engine_works_a_turn_and_is_told_of_every_message_the_node_refuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start("contract", dir.path(), &[]);
    let addr = node.addr();
    let token = engine_token(dir.path(), "engine-a", &["eng"]);
    let mut engine = ScriptedEngine::attach(&addr, &token, &["eng"])
        .await
        .expect("attach for eng");

    println!("--- phase: a second Hello and an empty message are refused by name");
    let hello = pb::engine_up::Msg::Hello(pb::Hello {
        engine: "scripted".into(),
        seats: vec![],
        ..pb::Hello::default()
    });
    assert_eq!(engine.refused(hello).await.reason, "hello_again");
    engine.send_raw(pb::EngineUp { msg: None }).await;
    let empty = engine
        .next_where(Duration::from_secs(10), |m| match m {
            pb::engine_down::Msg::Refused(r) => Some(r.clone()),
            _ => None,
        })
        .await;
    assert_eq!(empty.reason, "empty");

    println!("--- phase: a message becomes a Turn carrying the turn id to launch under");
    let delivery_id = deliver(&addr, "eng", "please fix the retry loop").await;
    let turn = engine.turn().await;
    assert_eq!(turn.delivery_id, delivery_id);
    assert!(turn.turn_id.starts_with("turn-"), "{turn:?}");
    assert_eq!(turn.attempt, 1);

    println!("--- phase: the launch under that id is idempotent; another turn is refused busy");
    let job =
        r#"sleep 2; printf 'All green.\nDelivered: feature/retry-backoff\n' > "$BOXFLEET_REPORT""#;
    let request = pb::LaunchRequest {
        seat: "eng".into(),
        turn_id: turn.turn_id.clone(),
        brief: turn.text.clone(),
        command: job.into(),
        ..pb::LaunchRequest::default()
    };
    let first = launched(launch(&addr, request.clone()).await);
    let again = launched(launch(&addr, request).await);
    assert_eq!(
        first.launch_id, again.launch_id,
        "a repeat is the first launch"
    );
    let other = launch(
        &addr,
        pb::LaunchRequest {
            seat: "eng".into(),
            command: "true".into(),
            ..pb::LaunchRequest::default()
        },
    )
    .await;
    match other {
        pb::launch_reply::Outcome::Refused(refused) => {
            assert_eq!(
                refused.class,
                pb::refusal::Class::Busy as i32,
                "{refused:?}"
            )
        }
        other => panic!("a second job on a busy seat: {other:?}"),
    }

    println!("--- phase: ack; an ack twice, or of another seat, is refused");
    let ack = |seat: &str, delivery: &str| {
        pb::engine_up::Msg::Ack(pb::Ack {
            seat: seat.into(),
            delivery_id: delivery.into(),
        })
    };
    engine.send(ack("eng", &delivery_id)).await;
    assert_eq!(
        engine.refused(ack("eng", &delivery_id)).await.reason,
        "not_sent"
    );
    assert_eq!(engine.refused(ack("ops", "d-x")).await.reason, "not_yours");

    println!("--- phase: the findings resume carries the job's command, refs and attempt");
    let resume = engine.resume(pb::resume::Kind::Findings).await;
    assert_eq!(resume.turn_id, turn.turn_id);
    assert_eq!(resume.launch_id, first.launch_id);
    assert!(resume.reply.contains("All green"), "{resume:?}");
    assert_eq!(resume.refs, vec!["feature/retry-backoff".to_owned()]);
    assert_eq!(resume.command, job);
    assert_eq!(resume.attempt, 1);
    assert!(resume.answer.is_empty());

    println!("--- phase: every wrong take and settle is refused, and says why");
    let (turn_id, launch_id) = (resume.turn_id.clone(), resume.launch_id.clone());
    let refusal = engine.refused(take(&turn_id, "launch-wrong")).await;
    assert_eq!(refusal.reason, "wrong_launch", "{refusal:?}");
    assert_eq!(refusal.turn_id, turn_id);
    assert_eq!(refusal.up, "take");
    let refusal = engine
        .refused(settle(&turn_id, &launch_id, finished("x")))
        .await;
    assert_eq!(refusal.reason, "not_taken", "{refusal:?}");
    let refusal = engine.refused(settle(&turn_id, &launch_id, None)).await;
    assert_eq!(refusal.reason, "no_outcome", "{refusal:?}");
    let refusal = engine.refused(take("turn-nobody", "launch-x")).await;
    assert_eq!(refusal.reason, "unknown_turn", "{refusal:?}");
    engine.send(take(&turn_id, &launch_id)).await;
    let refusal = engine.refused(take(&turn_id, &launch_id)).await;
    assert_eq!(refusal.reason, "already_taken", "{refusal:?}");

    println!("--- phase: Finished.reply is published as the turn's reply");
    engine
        .send(settle(
            &turn_id,
            &launch_id,
            finished("fixed: the loop backs off now"),
        ))
        .await;
    let refusal = engine
        .refused(settle(&turn_id, &launch_id, finished("again")))
        .await;
    assert!(
        ["not_sent", "unknown_turn"].contains(&refusal.reason.as_str()),
        "{refusal:?}"
    );
    boxfleet_tests::wait_until(
        "the turn's reply event",
        Duration::from_secs(20),
        async || {
            events(&addr).await.iter().any(|e| {
                e["type"] == "turn_replied"
                    && e["turn_id"] == turn_id.as_str()
                    && e["body"]["reply"] == "fixed: the loop backs off now"
            })
        },
    )
    .await;

    hand_back_until_broken(&mut engine, &addr).await;
}

/// A findings resume the engine hands back every time is offered at most 10 times, each with
/// its count, and the run then ends `resume_broken`, told to the engine as a FAILED resume.
async fn hand_back_until_broken(engine: &mut ScriptedEngine, addr: &str) {
    println!("--- phase: a findings resume the engine keeps handing back is bounded");
    let looping = launched(
        launch(
            addr,
            pb::LaunchRequest {
                seat: "eng".into(),
                command: "echo done > \"$BOXFLEET_REPORT\"".into(),
                ..pb::LaunchRequest::default()
            },
        )
        .await,
    );
    let mut attempts = Vec::new();
    let ended = loop {
        let msg = engine
            .next_where(Duration::from_secs(60), |m| match m {
                pb::engine_down::Msg::Resume(r) if r.turn_id == looping.turn_id => Some(r.clone()),
                _ => None,
            })
            .await;
        if msg.kind == pb::resume::Kind::Failed as i32 {
            break msg;
        }
        attempts.push(msg.attempt);
        let retry = Some(pb::settle::Outcome::Retry(pb::Retry {
            error: "not now".into(),
        }));
        engine
            .send(settle(&msg.turn_id, &msg.launch_id, retry))
            .await;
    };
    assert_eq!(
        attempts,
        (1..=10).collect::<Vec<u32>>(),
        "one count per offer"
    );
    assert_eq!(ended.ending, "resume_broken", "{ended:?}");
    assert!(ended.reply.contains("10 times"), "{ended:?}");
}

/// A job that parks: the engine hears of it, the answer comes back in `answer`, and a relaunch
/// with an empty command reruns the job with the answer exported, so it does not ask again.
/// An engine that takes a resume and leaves: the run ends, and the next engine hears of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relaunch_carries_the_answer_and_a_run_lost_to_an_ending_is_noticed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start("answers", dir.path(), &[]);
    let addr = node.addr();
    let token = engine_token(dir.path(), "engine-a", &["eng"]);
    let mut engine = ScriptedEngine::attach(&addr, &token, &["eng"])
        .await
        .expect("attach");

    println!("--- phase: a job asks; the engine is told it parked");
    let job = r#"if [ -n "$BOXFLEET_ANSWER" ]; then echo "region=$BOXFLEET_ANSWER asked=$BOXFLEET_QUESTION extra=$EXTRA" > "$BOXFLEET_REPORT"; else boxfleet-ask "which region?" --to alice; fi"#;
    let run = launched(
        launch(
            &addr,
            pb::LaunchRequest {
                seat: "eng".into(),
                command: job.into(),
                requester: "alice".into(),
                ..pb::LaunchRequest::default()
            },
        )
        .await,
    );
    let parked = engine
        .next_where(Duration::from_secs(30), |m| match m {
            pb::engine_down::Msg::Parked(p) => Some(p.clone()),
            _ => None,
        })
        .await;
    assert_eq!(parked.turn_id, run.turn_id);
    assert_eq!(parked.question, "which region?");
    assert_eq!(parked.audience, "alice");

    println!("--- phase: answered; the resume carries the answer in `answer`");
    let (code, out, err) = node.cli(&[
        "answer",
        &run.turn_id,
        "--launch",
        &parked.launch_id,
        "--text",
        "eu-west",
        "--as",
        "alice",
    ]);
    assert_eq!(code, 0, "{out} {err}");
    let resume = engine.resume(pb::resume::Kind::Answer).await;
    assert_eq!(resume.answer, "eu-west");
    assert_eq!(resume.question, "which region?");
    assert_eq!(resume.command, job);
    assert_eq!(resume.attempt, 1);

    println!("--- phase: a relaunch may not set the node's own variables");
    let relaunch = |env: HashMap<String, String>| {
        Some(pb::settle::Outcome::Relaunched(pb::Relaunched {
            brief: "go on".into(),
            conversation: b"conv-2".to_vec(),
            command: String::new(),
            env,
        }))
    };
    let bad = HashMap::from([("BOXFLEET_ANSWER".to_owned(), "forged".to_owned())]);
    let refusal = engine
        .refused(settle(&resume.turn_id, &resume.launch_id, relaunch(bad)))
        .await;
    assert_eq!(refusal.reason, "bad_input", "{refusal:?}");
    assert!(refusal.message.contains("BOXFLEET_ANSWER"), "{refusal:?}");

    println!("--- phase: the relaunch reruns the job with the answer: it does not ask again");
    let extra = HashMap::from([("EXTRA".to_owned(), "1".to_owned())]);
    engine
        .send(settle(&resume.turn_id, &resume.launch_id, relaunch(extra)))
        .await;
    let findings = engine.resume(pb::resume::Kind::Findings).await;
    assert_eq!(findings.turn_id, run.turn_id);
    assert!(
        findings
            .reply
            .contains("region=eu-west asked=which region? extra=1"),
        "{findings:?}"
    );

    println!("--- phase: the engine takes the findings and goes away without settling");
    engine
        .send(take(&findings.turn_id, &findings.launch_id))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(engine);

    println!("--- phase: the next engine is told the run ended abandoned_tail");
    let mut next = ScriptedEngine::attach(&addr, &token, &["eng"])
        .await
        .expect("attach again");
    let failed = next.resume(pb::resume::Kind::Failed).await;
    assert_eq!(failed.turn_id, run.turn_id);
    assert_eq!(failed.ending, "abandoned_tail", "{failed:?}");
    assert!(!failed.succeeded);
}

/// Routing is configuration: work for an external seat waits for its engine (never the
/// built-in one), engines serve disjoint seats, a replaced engine is told why and its turn
/// goes to its successor, a Defer is spaced and counted and ends as a listed, announced dead
/// letter, and a stopping node says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_waits_for_its_engine_and_a_deferred_message_is_spaced_then_dead_lettered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("ran-as-shell");
    let mut node = start(
        "routing",
        dir.path(),
        &[("BOXFLEET_DEFER_SPACING_MS", "20")],
    );
    let addr = node.addr();

    println!("--- phase: with no engine attached, a message for an external seat waits");
    let text = format!("touch {}", marker.display());
    let delivery_id = deliver(&addr, "eng", &text).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!marker.exists(), "the built-in engine ran the chat text");
    let (code, out, _) = node.cli(&["runs", "--json"]);
    assert_eq!(code, 0);
    assert!(!out.contains("\"eng\""), "a run started for eng: {out}");

    println!("--- phase: engines attach for disjoint seats; an overlapping one is refused");
    let a = engine_token(dir.path(), "engine-a", &["eng"]);
    let b = engine_token(dir.path(), "engine-b", &["ops"]);
    let c = engine_token(dir.path(), "engine-c", &["eng", "ops"]);
    let mut first = ScriptedEngine::attach(&addr, &a, &["eng"])
        .await
        .expect("a");
    let _other = ScriptedEngine::attach(&addr, &b, &["ops"])
        .await
        .expect("b");
    let overlap = ScriptedEngine::attach(&addr, &c, &["eng"]).await;
    let overlap = overlap.err().expect("eng is engine-a's");
    assert_eq!(overlap.code(), Code::FailedPrecondition, "{overlap}");
    assert!(overlap.message().contains("already serves"), "{overlap}");
    let local = ScriptedEngine::attach(&addr, &c, &["local"]).await;
    assert!(local.is_err(), "local is the built-in engine's");
    let turn = first.turn().await;
    assert_eq!(turn.delivery_id, delivery_id);

    println!("--- phase: attached again, the old stream is told why; the turn moves");
    let mut second = ScriptedEngine::attach(&addr, &a, &["eng"])
        .await
        .expect("a again");
    let closing = first
        .next_where(Duration::from_secs(10), |m| match m {
            pb::engine_down::Msg::Closing(c) => Some(c.clone()),
            _ => None,
        })
        .await;
    assert_eq!(closing.reason, "replaced", "{closing:?}");
    let moved = second.turn().await;
    assert_eq!(moved.delivery_id, delivery_id);
    assert_eq!(moved.attempt, 2, "the hand-back counted the delivery");

    println!("--- phase: each Defer spaces the next delivery, and counts it");
    let defer = |t: &pb::Turn| {
        pb::engine_up::Msg::Defer(pb::Defer {
            seat: t.seat.clone(),
            delivery_id: t.delivery_id.clone(),
        })
    };
    let mut current = moved;
    let mut gaps = Vec::new();
    loop {
        second.send(defer(&current)).await;
        let sent = Instant::now();
        let got = second
            .next_where(Duration::from_secs(30), |m| match m {
                pb::engine_down::Msg::Turn(t) => Some(t.clone()),
                _ => None,
            })
            .await;
        if got.delivery_id != delivery_id {
            panic!("another message overtook the deferred one: {got:?}");
        }
        gaps.push((got.attempt, sent.elapsed()));
        assert_eq!(got.attempt, current.attempt + 1);
        current = got;
        if current.attempt == 26 {
            break;
        }
    }
    // 20 ms doubling: the 2nd spacing at least 40 ms, the 6th and later at least 600 ms
    let gap = |attempt: u32| gaps.iter().find(|(a, _)| *a == attempt).expect("gap").1;
    assert!(gap(4) >= Duration::from_millis(40), "{gaps:?}");
    assert!(gap(10) >= Duration::from_millis(600), "{gaps:?}");

    println!("--- phase: deferred past its bound, it is dead-lettered, listed and announced");
    second.send(defer(&current)).await;
    second.nothing_for(Duration::from_secs(2)).await;
    let (code, out, err) = node.cli(&["seats", "--dead-letters", "--json"]);
    assert_eq!(code, 0, "{err}");
    let listed: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let letters = listed["dead_letters"].as_array().expect("a list");
    assert_eq!(letters.len(), 1, "{listed}");
    assert_eq!(letters[0]["delivery_id"], delivery_id.as_str());
    assert_eq!(letters[0]["seat"], "eng");
    let (code, table, _) = node.cli(&["seats", "--dead-letters", "--seat", "eng"]);
    assert_eq!(code, 0);
    assert!(table.contains(&delivery_id), "{table}");
    let announced = events(&addr).await;
    assert!(
        announced
            .iter()
            .any(|e| e["type"] == "seat_message_dead_lettered"
                && e["body"]["delivery_id"] == delivery_id.as_str()),
        "no dead-letter event"
    );
    assert!(!marker.exists());

    println!("--- phase: a stopping node tells its engines");
    node.terminate();
    let closing = second
        .next_where(Duration::from_secs(30), |m| match m {
            pb::engine_down::Msg::Closing(c) => Some(c.clone()),
            _ => None,
        })
        .await;
    assert_eq!(closing.reason, "node_stopping", "{closing:?}");
}

/// The hand-back to an engine's crash point (`crash::ROUTES`, "hand-back to an engine"): the
/// node dies right after an external engine's take of an answer was written
/// (`answer.after_take`). The take spent the answer, so the node that comes back never resumes
/// the run with it a second time: it reaps the run as `abandoned_tail` (spec: a claim whose
/// resumed turn had already taken the answer is reaped as spent), and tells the engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_after_an_engines_take_of_an_answer_never_resumes_it_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let once = dir.path().join("crash");
    let once_path = once.display().to_string();
    let env = [
        ("BOXFLEET_CRASH_AT", "answer.after_take"),
        ("BOXFLEET_CRASH_ONCE", once_path.as_str()),
    ];
    let mut node = start("taken", dir.path(), &env);
    let addr = node.addr();
    let token = engine_token(dir.path(), "engine-a", &["eng"]);
    let mut engine = ScriptedEngine::attach(&addr, &token, &["eng"])
        .await
        .expect("attach");
    let job = r#"if [ -n "$BOXFLEET_ANSWER" ]; then echo done > "$BOXFLEET_REPORT"; else boxfleet-ask "which region?" --to alice; fi"#;
    let run = launched(
        launch(
            &addr,
            pb::LaunchRequest {
                seat: "eng".into(),
                command: job.into(),
                requester: "alice".into(),
                ..pb::LaunchRequest::default()
            },
        )
        .await,
    );
    let parked = engine
        .next_where(Duration::from_secs(30), |m| match m {
            pb::engine_down::Msg::Parked(p) => Some(p.clone()),
            _ => None,
        })
        .await;
    let (code, out, err) = node.cli(&[
        "answer",
        &run.turn_id,
        "--launch",
        &parked.launch_id,
        "--text",
        "eu-west",
        "--as",
        "alice",
    ]);
    assert_eq!(code, 0, "{out} {err}");
    let resume = engine.resume(pb::resume::Kind::Answer).await;
    assert_eq!(resume.answer, "eu-west");

    println!("--- phase: the engine takes the answer; the node dies right after writing it");
    engine.send(take(&resume.turn_id, &resume.launch_id)).await;
    let died_by = Instant::now() + Duration::from_secs(15);
    while !node.has_exited() {
        assert!(
            Instant::now() < died_by,
            "the node died at answer.after_take"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(engine);
    node.start_again();

    println!("--- phase: the node comes back: the run is reaped as spent, never resumed again");
    let mut next = ScriptedEngine::attach(&node.addr(), &token, &["eng"])
        .await
        .expect("attach again");
    let failed = next.resume(pb::resume::Kind::Failed).await;
    assert_eq!(failed.turn_id, run.turn_id);
    assert_eq!(failed.ending, "abandoned_tail", "{failed:?}");
    let events = events(&node.addr()).await;
    let resumed = events
        .iter()
        .filter(|e| {
            e["type"] == "sandbox_run_answered"
                && e["turn_id"] == run.turn_id.as_str()
                && e["body"]["became"] == "resumed"
        })
        .count();
    assert_eq!(resumed, 1, "the answer resumed its run once: {events:#?}");
}
