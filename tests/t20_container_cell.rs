//! Scenario: a node whose seats run `run_in: container`, on real podman and on a real dockerd
//! — the built binary, launched through the CLI. The job runs inside the container under the
//! runtime's init (PID 1 is `podman-init` / `docker-init`, not the job), a question parks the
//! run and the container is really frozen (the runtime says `paused`, and a ticker the job
//! left running writes nothing), the answer thaws it and the same box finishes the job, its
//! report comes back in the phase record, and once the run settles no container, box
//! directory or record is left.
//!
//! The runtimes are the ones `.ci/containers` readies (see `services/sandbox/tests/
//! container_contract.rs` for the variables). Without them each scenario says so and passes,
//! unless `BOXFLEET_CONTAINER_TESTS=required` (set by `bash .ci/run`), where it fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use boxfleet_proto::v1 as pb;
use boxfleet_tests::node::{NodeProcess, launched_turn_and_job};

/// A real runtime the machine was readied for: its CLI, the config's `local` entry for it,
/// and the environment its CLI calls need.
struct Runtime {
    binary: &'static str,
    init: &'static str,
    local: String,
    cli_env: Vec<(String, String)>,
}

fn runtime(binary: &'static str) -> Option<Runtime> {
    let required = std::env::var("BOXFLEET_CONTAINER_TESTS").as_deref() == Ok("required");
    let var = |name: &str| match std::env::var(name) {
        Ok(value) => Some(value),
        Err(_) if required => panic!(
            "the {binary} scenario needs {name}; `bash .ci/run` (as root) readies real podman and dockerd"
        ),
        Err(_) => {
            eprintln!("{name} unset: the {binary} scenario is not run");
            None
        }
    };
    let image = var("BOXFLEET_CONTAINER_TEST_IMAGE")?;
    let (env_name, env_value, init) = match binary {
        "podman" => (
            "CONTAINERS_CONF",
            var("BOXFLEET_CONTAINER_TEST_CONF")?,
            "podman-init",
        ),
        _ => (
            "DOCKER_HOST",
            var("BOXFLEET_DOCKER_TEST_HOST")?,
            "docker-init",
        ),
    };
    Some(Runtime {
        binary,
        init,
        local: format!(
            "{{ image: \"{image}\", runtime: {binary}, runtime_env: {{ {env_name}: \"{env_value}\" }} }}"
        ),
        cli_env: vec![(env_name.to_owned(), env_value)],
    })
}

impl Runtime {
    fn cli(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(self.binary)
            .args(args)
            .envs(self.cli_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .expect("the runtime's CLI runs")
    }

    /// The container's state as the runtime tells it; `None` once it is gone.
    fn status(&self, container: &str) -> Option<String> {
        let out = self.cli(&["inspect", "--format", "{{.State.Status}}", container]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Every container this node's boxes left (they are named `boxfleet-{box}`).
    fn containers_of(&self, boxes: &[String]) -> Vec<String> {
        let out = self.cli(&["ps", "-a", "--format", "{{.Names}}"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|name| boxes.iter().any(|b| name.ends_with(b.as_str())))
            .map(str::to_owned)
            .collect()
    }
}

/// Removes the containers of every box still under `boxes` when a scenario ends, so a
/// failed check leaves no container (paused ones included) behind on the runtime.
struct RemoveLeftovers<'a> {
    rt: &'a Runtime,
    boxes: PathBuf,
}

impl Drop for RemoveLeftovers<'_> {
    fn drop(&mut self) {
        for entry in std::fs::read_dir(&self.boxes)
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Some(id) = entry.file_name().to_str() {
                let _ = self.rt.cli(&["rm", "-f", &format!("boxfleet-{id}")]);
            }
        }
    }
}

/// The job: the first time, it starts a ticker (every 50 ms into `~/ticks`) that outlives it
/// and parks on a question; answered, it lets the thawed ticker run 0.3 s, then reports what
/// PID 1 is, how far the ticker got and the answer, and stops the ticker.
const JOB: &str = r#"if [ -n "${BOXFLEET_ANSWER:-}" ]; then
  sleep 0.3
  ticks=$(wc -l < ~/ticks)
  kill "$(cat ~/ticker.pid)" 2>/dev/null
  { echo "pid1=$(tr '\0' ' ' </proc/1/cmdline)"; echo "job_pid=$$"; echo "ticks=$ticks"; echo "answer=$BOXFLEET_ANSWER"; } > "$BOXFLEET_REPORT"
  exit 0
fi
sh -c 'i=0; while :; do i=$((i+1)); echo $i >> ~/ticks; sleep 0.05; done' </dev/null >/dev/null 2>&1 &
echo $! > ~/ticker.pid
sleep 0.3
boxfleet-ask "carry on?" --to ops"#;

fn ticks(home: &Path) -> usize {
    std::fs::read_to_string(home.join("ticks"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

async fn a_container_seat_runs_parks_frozen_and_settles_clean(rt: Runtime) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("node.yaml");
    std::fs::write(
        &config,
        format!(
            "company:\n  providers:\n    sandbox: {{ default_run_in: container, local: {} }}\n",
            rt.local
        ),
    )
    .expect("write config");
    let node = NodeProcess::start(
        &format!("c-{}", rt.binary),
        dir.path(),
        &["--config", config.to_str().expect("utf-8")],
    );
    let addr = node.addr();
    let boxes = dir.path().join("containers/boxes");
    let _leftovers = RemoveLeftovers {
        rt: &rt,
        boxes: boxes.clone(),
    };

    println!(
        "--- phase: a job launched into a {} container parks",
        rt.binary
    );
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--pause-ttl",
        "600",
        "--command",
        JOB,
    ]);
    assert_eq!(code, 0, "{out}{err}\n{}", node.log());
    let (turn_id, launch_id) = launched_turn_and_job(&out);
    let mut runs = boxfleet_tests::grpc::runs(&addr).await.expect("connect");
    let sandbox_id = boxfleet_tests::wait_for(
        "the run to park on its question",
        Duration::from_secs(60),
        async || {
            let board = runs
                .board(pb::BoardRequest::default())
                .await
                .ok()?
                .into_inner();
            board
                .runs
                .into_iter()
                .find(|r| r.turn_id == turn_id && r.status == "awaiting_clarification")
                .map(|r| r.sandbox_id)
        },
    )
    .await;
    assert!(!sandbox_id.is_empty(), "a parked run keeps its box");
    let container = format!("boxfleet-{sandbox_id}");
    let home: PathBuf = boxes.join(&sandbox_id).join("home");

    println!("--- phase: the parked box is frozen");
    boxfleet_tests::wait_until(
        "the runtime to say the container is paused",
        Duration::from_secs(30),
        async || rt.status(&container).as_deref() == Some("paused"),
    )
    .await;
    let frozen_at = ticks(&home);
    assert!(
        frozen_at > 0,
        "the ticker ran before the park: {:?}",
        std::fs::read_dir(&home).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        ticks(&home),
        frozen_at,
        "nothing in the paused container ran for 1.5 s (its ticker writes every 50 ms)"
    );

    println!("--- phase: answered, the same box finishes the job");
    let (code, out, err) = node.cli(&["answer", &turn_id, "--launch", &launch_id, "--text", "yes"]);
    assert_eq!(code, 0, "{out}{err}");
    boxfleet_tests::wait_until(
        "the answered run to settle",
        Duration::from_secs(60),
        async || {
            runs.get(pb::GetRequest {
                turn_id: turn_id.clone(),
            })
            .await
            .map(|reply| reply.into_inner().record_json.is_empty())
            .unwrap_or(false)
        },
    )
    .await;
    let reply = runs
        .get(pb::GetRequest {
            turn_id: turn_id.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    let phases: Vec<serde_json::Value> = reply
        .phase_records_json
        .iter()
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
        .filter(|e| e["type"] == "agent_phase_completed")
        .collect();
    assert_eq!(phases.len(), 2, "{phases:#?}");
    let last = &phases[1]["body"]["record"];
    assert_eq!(last["failed"], false, "{last:#}");
    assert_eq!(last["sandbox_id"], sandbox_id.as_str(), "the same box");
    let report = last["response"].as_str().unwrap_or_default();
    let pid1 = report
        .lines()
        .find_map(|l| l.strip_prefix("pid1="))
        .unwrap_or_else(|| panic!("the report names PID 1: {last:#}"));
    assert!(
        pid1.contains(rt.init),
        "PID 1 in the box is the runtime's init ({}), not the job: {pid1:?}",
        rt.init
    );
    assert!(!report.contains("job_pid=1\n"), "{report}");
    assert!(report.contains("answer=yes"), "{report}");
    let ticked: usize = report
        .lines()
        .find_map(|l| l.strip_prefix("ticks="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        ticked > frozen_at,
        "the answer thawed the box: its ticker went on from {frozen_at} ({ticked}): {report}"
    );

    println!("--- phase: nothing is left");
    boxfleet_tests::wait_until(
        "the container to be removed",
        Duration::from_secs(30),
        async || rt.status(&container).is_none(),
    )
    .await;
    assert_eq!(
        rt.containers_of(std::slice::from_ref(&sandbox_id)),
        Vec::<String>::new()
    );
    let left = std::fs::read_dir(&boxes).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "no box directory is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_podman_seat_runs_its_job_in_the_container_parks_frozen_and_settles_clean() {
    if let Some(rt) = runtime("podman") {
        a_container_seat_runs_parks_frozen_and_settles_clean(rt).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_seat_runs_its_job_in_the_container_parks_frozen_and_settles_clean() {
    if let Some(rt) = runtime("docker") {
        a_container_seat_runs_parks_frozen_and_settles_clean(rt).await;
    }
}
