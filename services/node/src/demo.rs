//! `boxfleet demo`: one process walks the whole run lifecycle on embedded defaults — an
//! in-process node (embedded store, `direct` cell, built-in engine) launches a `command` job
//! that prints progress, parks on a question via `boxfleet-ask`, is answered, resumes in the
//! same box and writes a findings report with a `Delivered:` line. Everything goes through
//! the node's gRPC API, as a user's client would. Exits 0 only if every step was observed.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use boxfleet_cluster::events::kind;

use crate::trust::BearerToken;
use boxfleet_proto::v1 as pb;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::cli::DemoArgs;
use crate::node::Node;

const SEAT: &str = "demo-seat";

/// The job: POSIX sh, run by the `command` runner in a `direct` box.
const JOB: &str = r#"set -e
mkdir -p work && cd work
if [ -z "${BOXFLEET_ANSWER:-}" ]; then
  echo "step 1/4: reading the repository"
  echo "cache layer: draft 1" > notes.txt
  sleep 1
  echo "step 2/4: drafted the cache layer (work/notes.txt)"
  sleep 1
  echo "step 3/4: a decision only a person can make: asking"
  sleep 1
  boxfleet-ask "Should the cache write through to PostgreSQL or to SQLite?" --to requester --branch demo/cache-wip
  exit 0
fi
echo "step 4/4: resuming with the answer: $BOXFLEET_ANSWER"
test -f notes.txt
sleep 1
{
  echo "Findings: the cache now writes through to $BOXFLEET_ANSWER."
  echo "The first job's draft was still in the box: $(cat notes.txt)."
  echo "Delivered: demo/cache-write-through"
} > "$BOXFLEET_REPORT"
echo "done"
"#;

struct Steps {
    passed: Vec<(String, bool)>,
}

impl Steps {
    fn check(&mut self, what: &str, ok: bool) {
        println!("{} {what}", if ok { "✓" } else { "✗" });
        self.passed.push((what.to_owned(), ok));
    }
    fn all(&self) -> bool {
        self.passed.iter().all(|(_, ok)| *ok)
    }
}

fn body(json: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(json).unwrap_or_default()
}

/// Runs the demo; the exit code says whether every step was observed.
pub async fn run(args: DemoArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    let temp = tempfile::tempdir().context("make a temporary data dir")?;
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let file = boxfleet_config::File {
        node: boxfleet_config::NodeSection {
            id: Some("demo".into()),
            listen: Some("127.0.0.1:0".into()),
            data_dir: Some(data_dir.clone()),
            lease_ttl_seconds: Some(15),
            poll_interval_seconds: Some(1),
            ..Default::default()
        },
        store: None,
        company: None,
        auth: None,
    };
    let node = Node::start(file.validate()?).await?;
    let addr = format!("http://{}", node.addr);
    println!(
        "boxfleet demo: node 'demo' on {addr}, embedded store and boxes in {}",
        node.config.data_dir.display()
    );
    // the walk calls the node as its admin, with the credential it wrote in its data dir
    let admin = node.config.data_dir.join(crate::trust::ADMIN_TOKEN_FILE);
    let token = BearerToken::new(
        &std::fs::read_to_string(&admin)
            .with_context(|| format!("read the node's admin credential {}", admin.display()))?,
    )?;
    let outcome = walk(&addr, &token).await;
    let tree = tree_text(&addr, &token).await;
    node.stop().await;
    // a data dir the caller named is never removed; only the temporary one needs keeping
    if args.keep && args.data_dir.is_none() {
        let kept = temp.keep();
        println!("kept the data dir at {}", kept.display());
    }
    let steps = outcome?;
    println!("\nsupervision tree:\n{tree}");
    let seconds = started.elapsed().as_secs_f64();
    if steps.all() {
        println!("demo: every step observed in {seconds:.1}s");
        Ok(0)
    } else {
        let failed: Vec<&str> = steps
            .passed
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(s, _)| s.as_str())
            .collect();
        println!(
            "demo: FAILED after {seconds:.1}s — not observed: {}",
            failed.join("; ")
        );
        Ok(1)
    }
}

/// The gRPC client of the node's Runs service the walk goes through.
type Runs = pb::runs_client::RunsClient<Authed>;
/// A channel whose every call carries the node's admin credential.
type Authed =
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, BearerToken>;

/// The job the walk launched first: its turn, its id and its box.
struct FirstJob {
    turn_id: String,
    launch_id: String,
    sandbox_id: String,
}

/// What the resumed run showed: its second job, its phase record, whether the turn replied.
struct Resumed {
    second_launch: String,
    phase: Option<serde_json::Value>,
    replied: bool,
}

/// The walk, step by step; a step that cannot go on ends it with what was observed so far.
async fn walk(addr: &str, token: &BearerToken) -> anyhow::Result<Steps> {
    let mut steps = Steps { passed: Vec::new() };
    let channel = tonic::transport::Endpoint::from_shared(addr.to_owned())?
        .connect()
        .await?;
    let mut runs = pb::runs_client::RunsClient::with_interceptor(channel, token.clone());
    let mut events = subscribe(&mut runs).await?;
    let job = launch(&mut runs, &mut steps).await?;
    let Some(question) = tail_until_asked(&mut runs, &mut events, &job, &mut steps).await? else {
        steps.check("the job parked on a question", false);
        return Ok(steps);
    };
    see_the_question(&mut runs, &question, &job, &mut steps).await?;
    answer(&mut runs, &job, &mut steps).await?;
    let resumed = follow_the_resume(&mut events, &job).await;
    steps.check(
        "a second job started for the same turn",
        !resumed.second_launch.is_empty(),
    );
    let Some(phase) = &resumed.phase else {
        steps.check("the second job's phase record was published", false);
        return Ok(steps);
    };
    check_the_phase_record(phase, &job, &mut steps);
    steps.check(
        "the built-in engine published the turn's reply",
        resumed.replied,
    );
    check_collected(&mut runs, &job, &mut steps).await?;
    Ok(steps)
}

/// Every event of the demo, as a subscriber sees them.
async fn subscribe(runs: &mut Runs) -> anyhow::Result<mpsc::UnboundedReceiver<pb::Event>> {
    let (events_tx, events) = mpsc::unbounded_channel::<pb::Event>();
    let mut stream = runs
        .events(pb::EventsRequest {
            from_revision: 0,
            follow: true,
        })
        .await?
        .into_inner();
    tokio::spawn(async move {
        while let Some(Ok(event)) = stream.next().await {
            if events_tx.send(event).is_err() {
                return;
            }
        }
    });
    Ok(events)
}

/// Step 1: launch the job on the demo seat.
async fn launch(runs: &mut Runs, steps: &mut Steps) -> anyhow::Result<FirstJob> {
    println!("\n--- launch: a command job on seat {SEAT}");
    let reply = runs
        .launch(pb::LaunchRequest {
            seat: SEAT.into(),
            runner: "command".into(),
            command: JOB.into(),
            task: "add a write-through cache".into(),
            requester: "you".into(),
            conversation_key: "demo-conversation".into(),
            conversation: b"the suspended turn".to_vec(),
            ..pb::LaunchRequest::default()
        })
        .await?
        .into_inner();
    let job = match reply.outcome {
        Some(pb::launch_reply::Outcome::Launched(l)) => FirstJob {
            turn_id: l.turn_id,
            launch_id: l.launch_id,
            sandbox_id: l.sandbox_id,
        },
        Some(pb::launch_reply::Outcome::Refused(r)) => {
            anyhow::bail!("the launch was refused: {}", r.reason)
        }
        None => anyhow::bail!("the node answered the launch with nothing"),
    };
    println!(
        "launched {} job {} in box {}",
        job.turn_id, job.launch_id, job.sandbox_id
    );
    steps.check(
        "the job was launched into a direct box",
        !job.sandbox_id.is_empty(),
    );
    Ok(job)
}

/// Step 2: show the job's live output until it parks on a question (the event's JSON).
async fn tail_until_asked(
    runs: &mut Runs,
    events: &mut mpsc::UnboundedReceiver<pb::Event>,
    job: &FirstJob,
    steps: &mut Steps,
) -> anyhow::Result<Option<serde_json::Value>> {
    println!("\n--- live tail while the job runs");
    let mut after = 0;
    let mut epoch = 0;
    let mut digest = String::new();
    let mut tail_lines = 0;
    let mut question = None;
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline && question.is_none() {
        let tail = runs
            .tail(pb::TailRequest {
                turn_id: job.turn_id.clone(),
                launch_id: job.launch_id.clone(),
                epoch,
                after,
                digest: digest.clone(),
                ..pb::TailRequest::default()
            })
            .await?
            .into_inner();
        if tail.outcome == pb::tail_reply::Outcome::Tail as i32
            || tail.outcome == pb::tail_reply::Outcome::Reset as i32
        {
            for line in tail.text.lines() {
                println!("  │ {line}");
                tail_lines += 1;
            }
            after = tail.end;
            epoch = tail.epoch;
            digest = tail.digest;
        }
        while let Ok(event) = events.try_recv() {
            if event.turn_id == job.turn_id && event.kind == kind::CLARIFICATION_REQUESTED {
                question = Some(body(&event.json));
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    steps.check("the live tail showed the job's progress", tail_lines >= 2);
    Ok(question)
}

/// Step 3: the question as its event says it, and the board listing the run as waiting.
async fn see_the_question(
    runs: &mut Runs,
    question: &serde_json::Value,
    job: &FirstJob,
    steps: &mut Steps,
) -> anyhow::Result<()> {
    let text = question["body"]["question"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    println!(
        "\n--- the job asked: {text:?} (to {})",
        question["body"]["audience"]
    );
    steps.check(
        "the job parked on a question via boxfleet-ask",
        !text.is_empty(),
    );

    let board = runs
        .board(pb::BoardRequest {
            audience: "you".into(),
        })
        .await?
        .into_inner();
    steps.check(
        "the board lists the run as waiting on you",
        board
            .runs
            .iter()
            .any(|r| r.turn_id == job.turn_id && r.status == "awaiting_clarification"),
    );
    Ok(())
}

/// Step 4: answer the question by naming the run.
async fn answer(runs: &mut Runs, job: &FirstJob, steps: &mut Steps) -> anyhow::Result<()> {
    println!("\n--- answering it by naming the run");
    let answer = runs
        .answer(pb::AnswerRequest {
            turn_id: job.turn_id.clone(),
            launch_id: job.launch_id.clone(),
            text: "PostgreSQL".into(),
            as_whom: "you".into(),
        })
        .await?
        .into_inner();
    println!("answer: {} ({})", answer.outcome, answer.detail);
    steps.check("the answer was recorded", answer.outcome == "recorded");
    Ok(())
}

/// Step 5: the turn's events while the run resumes, until its second job's phase record and the
/// turn's reply are in (or 40 s pass).
async fn follow_the_resume(
    events: &mut mpsc::UnboundedReceiver<pb::Event>,
    job: &FirstJob,
) -> Resumed {
    println!("\n--- the run resumes in the same box");
    let mut resumed = Resumed {
        second_launch: String::new(),
        phase: None,
        replied: false,
    };
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline && (resumed.phase.is_none() || !resumed.replied) {
        let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(1), events.recv()).await
        else {
            continue;
        };
        if event.turn_id != job.turn_id {
            continue;
        }
        match event.kind.as_str() {
            kind::RUN_STARTED if event.launch_id != job.launch_id => {
                resumed.second_launch = event.launch_id.clone();
                println!("resumed as job {}", resumed.second_launch);
            }
            kind::PHASE_COMPLETED if event.launch_id != job.launch_id => {
                resumed.phase = Some(body(&event.json))
            }
            kind::TURN_REPLIED => resumed.replied = true,
            _ => {}
        }
    }
    resumed
}

/// Step 6: the second job's phase record, printed whole, and what it must say.
fn check_the_phase_record(phase: &serde_json::Value, job: &FirstJob, steps: &mut Steps) {
    let record = &phase["body"]["record"];
    println!("\n--- phase record (agent_phase_completed, phase: sandbox)");
    println!(
        "{}",
        serde_json::to_string_pretty(record).unwrap_or_default()
    );
    steps.check(
        "the job resumed into the same box",
        record["sandbox_id"].as_str() == Some(job.sandbox_id.as_str()),
    );
    steps.check(
        "the run succeeded",
        record["failed"] == serde_json::Value::Bool(false),
    );
    let refs: Vec<&str> = record["delivered_refs"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    steps.check(
        "the report names what it delivered",
        refs.contains(&"demo/cache-write-through"),
    );
    steps.check(
        "the report carries the answer",
        record["response"]
            .as_str()
            .is_some_and(|r| r.contains("PostgreSQL")),
    );
}

/// Step 7: the settled run has no record: its box was reclaimed and its row deleted.
async fn check_collected(runs: &mut Runs, job: &FirstJob, steps: &mut Steps) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut gone = false;
    while Instant::now() < deadline && !gone {
        let got = match runs
            .get(pb::GetRequest {
                turn_id: job.turn_id.clone(),
            })
            .await
        {
            Ok(reply) => reply.into_inner(),
            Err(status) if status.code() == tonic::Code::NotFound => pb::GetReply::default(),
            Err(status) => return Err(status.into()),
        };
        gone = got.record_json.is_empty();
        if !gone {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    steps.check(
        "the settled run's box was reclaimed and its record deleted",
        gone,
    );
    Ok(())
}

async fn tree_text(addr: &str, token: &BearerToken) -> String {
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(addr.to_owned()) else {
        return "(the node could not be reached)".into();
    };
    let Ok(channel) = endpoint.connect().await else {
        return "(the node could not be reached)".into();
    };
    let mut ops = pb::ops_client::OpsClient::with_interceptor(channel, token.clone());
    let Ok(tree) = ops.tree(pb::TreeRequest { fleet: false }).await else {
        return "(the tree could not be read)".into();
    };
    let mut out = String::new();
    fn walk(out: &mut String, actor: &pb::ActorInfo, depth: usize) {
        out.push_str(&format!(
            "{}{}  {}  restarts={}  mailbox={}{}\n",
            "  ".repeat(depth),
            actor.name,
            actor.state,
            actor.restarts,
            actor.mailbox_depth,
            if actor.last_error.is_empty() {
                String::new()
            } else {
                format!("  last_error={}", actor.last_error)
            }
        ));
        for child in &actor.children {
            walk(out, child, depth + 1);
        }
    }
    for root in &tree.into_inner().roots {
        walk(&mut out, root, 0);
    }
    out
}
