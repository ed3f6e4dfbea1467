//! The box contract against the `container` backend, and the checks particular to it.
//!
//! Three cells run the contract:
//! - `standin_box` against `tests/support/fake-runtime`, a stand-in that speaks the docker CLI
//!   subset the backend calls by running processes on this host (it is not a container
//!   runtime). The exact-argv and environment checks use its record of every invocation.
//! - `podman_box` against real podman, with `CONTAINERS_CONF` from
//!   `BOXFLEET_CONTAINER_TEST_CONF` (handed to the runtime through `runtime_env`);
//! - `docker_box` against a real dockerd, whose socket `BOXFLEET_DOCKER_TEST_HOST` names
//!   (`DOCKER_HOST` through `runtime_env`).
//!
//! Both real cells run the image `BOXFLEET_CONTAINER_TEST_IMAGE`. `.ci/containers` (sourced by
//! the README's test command, `bash .ci/run`, as root) readies all of it and sets
//! `BOXFLEET_CONTAINER_TESTS=required`, under which a real cell that finds its runtime unset
//! fails; without it such a cell says so and runs on the stand-in. The checks only a real
//! runtime can answer (the job under the runtime's init, a pause that freezes, rootless
//! podman as a plain user) are in `container_contract/real.rs`.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_actors::ports::{BoxError, BoxSpec, JobHandle, Provider, Sandbox};
use boxfleet_sandbox::container::{Runtime, RuntimeKind};
use boxfleet_sandbox::contract::{Harness, spec};
use boxfleet_sandbox::{ContainerConfig, ContainerProvider};

boxfleet_sandbox::box_contract!(standin_box, ContainerHarness::standin(&[]));
boxfleet_sandbox::box_contract!(podman_box, ContainerHarness::real(RuntimeKind::Podman));
boxfleet_sandbox::box_contract!(docker_box, ContainerHarness::real(RuntimeKind::Docker));

#[path = "container_contract/real.rs"]
mod real;

const IMAGE: &str = "localhost/boxfleet-test:1";

fn standin_binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake-runtime")
}

struct ContainerHarness {
    dir: tempfile::TempDir,
    provider: ContainerProvider,
    binary: PathBuf,
    /// the environment the harness's own runtime calls get
    cli_env: BTreeMap<String, String>,
    real: bool,
}

impl Drop for ContainerHarness {
    /// Kills every box a failed check left behind.
    fn drop(&mut self) {
        let provider = self.provider.clone();
        let boxes = self.dir.path().join("state/boxes");
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            for entry in std::fs::read_dir(boxes).into_iter().flatten().flatten() {
                if let Some(id) = entry.file_name().to_str() {
                    let _ = rt.block_on(provider.kill(id));
                }
            }
        })
        .join();
    }
}

impl ContainerHarness {
    /// Against the stand-in; `extra` goes into runtime_env (STANDIN_ROOTLESS, …).
    fn standin(extra: &[(&str, &str)]) -> Self {
        Self::standin_with(extra, |_| {})
    }

    fn standin_with(extra: &[(&str, &str)], tune: impl FnOnce(&mut ContainerConfig)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut runtime_env = BTreeMap::new();
        runtime_env.insert(
            "STANDIN_STATE".to_owned(),
            dir.path().join("runtime").display().to_string(),
        );
        for (k, v) in extra {
            runtime_env.insert((*k).to_owned(), (*v).to_owned());
        }
        let mut config = ContainerConfig::new(IMAGE, dir.path().join("state"));
        config.runtime = Runtime::Binary {
            path: standin_binary(),
            kind: RuntimeKind::Docker,
        };
        config.runtime_env = runtime_env.clone();
        tune(&mut config);
        let mut cli_env: BTreeMap<String, String> = std::env::vars().collect();
        cli_env.extend(runtime_env);
        ContainerHarness {
            provider: ContainerProvider::new(config),
            binary: standin_binary(),
            cli_env,
            real: false,
            dir,
        }
    }

    /// Against the real runtime `kind` when this machine was readied for it (see the
    /// module's head), else the stand-in — or a failure, where real runtimes are required.
    fn real(kind: RuntimeKind) -> Self {
        match RealRuntime::from_env(kind) {
            Ok(real) => Self::on(real),
            Err(unset) if real_runtimes_required() => panic!(
                "the {} cell needs {unset}; `bash .ci/run` (as root) readies real podman and \
                 dockerd and sets it (BOXFLEET_CONTAINER_TESTS=required is set)",
                kind_name(kind)
            ),
            Err(unset) => {
                eprintln!(
                    "{unset} unset: the {} cell runs on the stand-in runtime",
                    kind_name(kind)
                );
                Self::standin(&[])
            }
        }
    }

    fn on(real: RealRuntime) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = ContainerConfig::new(real.image, dir.path().join("state"));
        config.runtime = match real.kind {
            RuntimeKind::Docker => Runtime::Docker,
            RuntimeKind::Podman => Runtime::Podman,
        };
        config.runtime_env = real.runtime_env;
        config.network = real.network;
        let mut cli_env: BTreeMap<String, String> = std::env::vars().collect();
        cli_env.extend(config.runtime_env.clone());
        ContainerHarness {
            provider: ContainerProvider::new(config),
            binary: PathBuf::from(kind_name(real.kind)),
            cli_env,
            real: true,
            dir,
        }
    }

    fn host_home(&self, sandbox: &dyn Sandbox) -> PathBuf {
        self.provider.box_dir(sandbox.id()).join("home")
    }

    fn cli(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(&self.binary)
            .args(args)
            .env_clear()
            .envs(&self.cli_env)
            .output()
            .expect("the runtime runs")
    }

    fn status(&self, container: &str) -> Option<String> {
        let out = self.cli(&["inspect", "--format", "{{.State.Status}}", container]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Every invocation the stand-in recorded: (argv, environment), oldest first.
    fn log(&self) -> Vec<(Vec<String>, BTreeMap<String, String>)> {
        let dir = self.dir.path().join("runtime/log");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("the stand-in's log")
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| n.ends_with(".argv"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|name| {
                let split = |bytes: Vec<u8>| -> Vec<String> {
                    bytes
                        .split(|b| *b == 0)
                        .filter(|s| !s.is_empty())
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                        .collect()
                };
                let argv = split(std::fs::read(dir.join(name)).expect("argv"));
                let env =
                    split(std::fs::read(dir.join(name.replace(".argv", ".env"))).expect("env"))
                        .into_iter()
                        .filter_map(|kv| {
                            kv.split_once('=')
                                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        })
                        .collect();
                (argv, env)
            })
            .collect()
    }
}

/// A real runtime this machine was readied for: its image and the runtime CLI's environment.
struct RealRuntime {
    kind: RuntimeKind,
    image: String,
    runtime_env: BTreeMap<String, String>,
    /// `--network` (`BOXFLEET_CONTAINER_TEST_NETWORK`), else the runtime's default
    network: Option<String>,
}

impl RealRuntime {
    /// From the environment `.ci/containers` sets; `Err` names the variable that is unset.
    fn from_env(kind: RuntimeKind) -> Result<Self, &'static str> {
        let image = std::env::var("BOXFLEET_CONTAINER_TEST_IMAGE")
            .map_err(|_| "BOXFLEET_CONTAINER_TEST_IMAGE")?;
        let mut runtime_env = BTreeMap::new();
        match kind {
            RuntimeKind::Podman => {
                if let Ok(conf) = std::env::var("BOXFLEET_CONTAINER_TEST_CONF") {
                    runtime_env.insert("CONTAINERS_CONF".to_owned(), conf);
                }
            }
            RuntimeKind::Docker => {
                let host = std::env::var("BOXFLEET_DOCKER_TEST_HOST")
                    .map_err(|_| "BOXFLEET_DOCKER_TEST_HOST")?;
                runtime_env.insert("DOCKER_HOST".to_owned(), host);
            }
        }
        Ok(RealRuntime {
            kind,
            image,
            runtime_env,
            network: std::env::var("BOXFLEET_CONTAINER_TEST_NETWORK").ok(),
        })
    }
}

/// Whether a real cell that finds no runtime fails (`BOXFLEET_CONTAINER_TESTS=required`).
fn real_runtimes_required() -> bool {
    std::env::var("BOXFLEET_CONTAINER_TESTS").as_deref() == Ok("required")
}

fn kind_name(kind: RuntimeKind) -> &'static str {
    match kind {
        RuntimeKind::Docker => "docker",
        RuntimeKind::Podman => "podman",
    }
}

fn container_of(job: &JobHandle) -> (String, i64, u64) {
    let mut parts = job.id.rsplitn(3, ':');
    let start = parts.next().expect("start").parse().expect("start time");
    let pid = parts.next().expect("pid").parse().expect("pid");
    (parts.next().expect("container").to_owned(), pid, start)
}

#[async_trait]
impl Harness for ContainerHarness {
    fn provider(&self) -> Arc<dyn Provider> {
        Arc::new(self.provider.clone())
    }
    fn long_job(&self) -> String {
        "echo started; sleep 30 & wait".into()
    }
    fn short_job(&self, dir: &str, exit: i32) -> String {
        // relative to the box's working directory, its home: the same in a real container
        // and on the stand-in
        let dir = dir.strip_prefix("/home/user/").unwrap_or(dir);
        format!(
            "sleep 0.2; printf 'hello\\n' >'{dir}/stdout.log'; printf '%s\\n' {exit} >'{dir}/done'; exit {exit}"
        )
    }
    async fn put_symlink(&self, sandbox: &dyn Sandbox, path: &str, target: &str) {
        std::os::unix::fs::symlink(target, self.host_home(sandbox).join(path)).expect("symlink");
    }
    async fn put_fifo(&self, sandbox: &dyn Sandbox, path: &str) {
        let status = std::process::Command::new("mkfifo")
            .arg(self.host_home(sandbox).join(path))
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
    }
    async fn put_dir(&self, sandbox: &dyn Sandbox, path: &str) {
        std::fs::create_dir_all(self.host_home(sandbox).join(path)).expect("mkdir");
    }
    async fn put_sparse(&self, sandbox: &dyn Sandbox, path: &str, len: u64) {
        let file = self.host_home(sandbox).join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::File::create(&file)
            .expect("create")
            .set_len(len)
            .expect("set_len");
    }
    async fn job_stopped(&self, _sandbox: &dyn Sandbox, job: &JobHandle) -> bool {
        let (container, _, _) = container_of(job);
        self.status(&container).as_deref() == Some("paused")
    }
    async fn recorded_paused(&self, sandbox_id: &str) -> bool {
        match self.provider.records(sandbox_id).await {
            Ok(record) => record.paused,
            Err(_) => false,
        }
    }
    async fn keepalive(&self, sandbox_id: &str) -> (u64, String) {
        let record = self.provider.records(sandbox_id).await.expect("records");
        (
            record.timeout_seconds,
            record
                .keepalive_at
                .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        )
    }
    fn recycled(&self, job: &JobHandle) -> JobHandle {
        let (container, pid, start) = container_of(job);
        JobHandle {
            id: format!("{container}:{pid}:{}", start + 1),
            dir: job.dir.clone(),
        }
    }
    async fn no_process_left(&self, job: &JobHandle) -> bool {
        let (container, pid, _) = container_of(job);
        let script = format!(
            "n=0; for f in /proc/[0-9]*/stat; do s=$(cat $f 2>/dev/null) || continue; s=${{s##*) }}; set -- $s; \
             if [ \"$4\" = {pid} ] && [ \"$1\" != Z ]; then n=$((n+1)); fi; done; echo $n"
        );
        for _ in 0..80 {
            if self.status(&container).is_none() {
                return true;
            }
            let out = self.cli(&["exec", &container, "sh", "-c", &script]);
            if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "0" {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }
}

fn engine_ids() -> String {
    let meta = std::fs::metadata("/proc/self").expect("/proc/self");
    format!("{}:{}", meta.uid(), meta.gid())
}

// ---------------------------------------------------------------------------------------------
// exact argv, on the stand-in

#[tokio::test]
async fn run_argv_is_exact_and_carries_no_secret() {
    let h = ContainerHarness::standin_with(&[("RUNTIME_ONLY", "rt-secret-4711")], |config| {
        config.network = Some("none".into());
        config.run_args = vec![
            "--cpus".into(),
            "2".into(),
            "-e".into(),
            "RUNTIME_ONLY".into(),
        ];
    });
    let mut box_spec = spec();
    box_spec
        .env
        .insert("SEAT_LLM_KEY".into(), "sk-live-secret-0815".into());
    let sandbox = h.provider.create(&box_spec).await.expect("create");
    let id = sandbox.id().to_owned();
    let name = format!("boxfleet-{id}");
    let root = h.provider.box_dir(&id);
    let env_file = root.join("records/env");
    let log = h.log();
    let runs: Vec<&Vec<String>> = log
        .iter()
        .map(|(argv, _)| argv)
        .filter(|argv| argv.first().map(String::as_str) == Some("run"))
        .collect();
    assert_eq!(runs.len(), 1);
    let expected: Vec<String> = [
        "run",
        "-d",
        "--init",
        "--name",
        &name,
        "--env-file",
        &env_file.display().to_string(),
        "-v",
        &format!("{}:/home/user", root.join("home").display()),
        "-w",
        "/home/user",
        "--user",
        &engine_ids(),
        "--network",
        "none",
        "--cpus",
        "2",
        "-e",
        "RUNTIME_ONLY",
        IMAGE,
        "sleep",
        "infinity",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(runs[0], &expected);
    // the env file: in records, 0600, the seat's key in it and never the runtime's
    let meta = std::fs::metadata(&env_file).expect("env file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&env_file).expect("env file");
    assert!(
        text.contains("SEAT_LLM_KEY=sk-live-secret-0815\n"),
        "{text}"
    );
    assert!(text.contains("HOME=/home/user\n"), "{text}");
    assert!(!text.contains("RUNTIME_ONLY"), "{text}");
    // the box sees its key and not the runtime's environment
    let out = sandbox
        .exec(
            "env",
            &BTreeMap::from([("PER_EXEC".to_owned(), "exec-secret-99".to_owned())]),
            Duration::from_secs(20),
        )
        .await
        .expect("exec");
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.contains("SEAT_LLM_KEY=sk-live-secret-0815"), "{seen}");
    assert!(seen.contains("PER_EXEC=exec-secret-99"), "{seen}");
    assert!(!seen.contains("rt-secret-4711"), "{seen}");
    assert!(!seen.contains("CARGO_PKG_NAME"), "{seen}");
    h.provider.kill(&id).await.expect("kill");
    // every invocation: no value on argv; runtime_env reached the runtime, the engine's own
    // environment did not
    let log = h.log();
    assert!(log.len() >= 4, "{} invocations", log.len());
    for (argv, env) in &log {
        for arg in argv {
            for secret in ["sk-live-secret-0815", "rt-secret-4711", "exec-secret-99"] {
                assert!(!arg.contains(secret), "{secret} on argv {argv:?}");
            }
        }
        assert_eq!(
            env.get("RUNTIME_ONLY").map(String::as_str),
            Some("rt-secret-4711")
        );
        assert!(
            !env.contains_key("CARGO_PKG_NAME"),
            "{argv:?} got the engine's env"
        );
        assert!(
            !env.contains_key("SEAT_LLM_KEY"),
            "{argv:?} got the box's env"
        );
        if argv.first().map(String::as_str) == Some("exec") {
            assert_eq!(argv[1], "--env-file", "{argv:?}");
            assert!(
                argv[2].starts_with(&root.join("records/").display().to_string()),
                "{argv:?}"
            );
        }
    }
    let info = &log[0].0;
    assert_eq!(info, &["info", "--format", "{{json .SecurityOptions}}"]);
}

#[tokio::test]
async fn a_rootless_runtime_gets_no_user_flag() {
    let h = ContainerHarness::standin(&[("STANDIN_ROOTLESS", "1")]);
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let log = h.log();
    let run = log
        .iter()
        .find(|(argv, _)| argv[0] == "run")
        .expect("a run");
    assert!(!run.0.iter().any(|a| a == "--user"), "{:?}", run.0);
    assert!(!run.0.iter().any(|a| a == "--network"), "{:?}", run.0);
    assert_eq!(
        h.provider
            .records(sandbox.id())
            .await
            .expect("records")
            .user,
        None
    );
    h.provider.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn pause_unpause_and_rm_are_the_runtimes() {
    let h = ContainerHarness::standin(&[]);
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let id = sandbox.id().to_owned();
    let name = format!("boxfleet-{id}");
    sandbox.pause().await.expect("pause");
    assert_eq!(h.status(&name).as_deref(), Some("paused"));
    let attached = h.provider.attach(&id).await.expect("attach");
    match attached
        .exec("true", &BTreeMap::new(), Duration::from_secs(5))
        .await
    {
        Err(BoxError::Unreachable(why)) => assert!(why.contains("attach never wakes"), "{why}"),
        other => panic!("a paused box's exec is unreachable: {other:?}"),
    }
    assert_eq!(
        h.status(&name).as_deref(),
        Some("paused"),
        "attach never unpauses"
    );
    h.provider.connect(&id).await.expect("connect");
    assert_eq!(h.status(&name).as_deref(), Some("running"));
    h.provider.kill(&id).await.expect("kill");
    h.provider.kill(&id).await.expect("a gone box is killed");
    let verbs: Vec<Vec<String>> = h
        .log()
        .into_iter()
        .map(|(argv, _)| argv)
        .filter(|argv| ["pause", "unpause", "rm"].contains(&argv[0].as_str()))
        .collect();
    assert_eq!(
        verbs,
        vec![
            vec!["pause".to_owned(), name.clone()],
            vec!["unpause".to_owned(), name.clone()],
            vec!["rm".to_owned(), "-f".to_owned(), name.clone()],
            vec!["rm".to_owned(), "-f".to_owned(), name.clone()],
        ]
    );
    assert!(!h.provider.box_dir(&id).exists());
    assert!(matches!(
        h.provider.attach(&id).await,
        Err(BoxError::Gone(_))
    ));
}

#[tokio::test]
async fn a_failed_mount_proof_names_the_bind_mount_and_leaves_no_container() {
    let h = ContainerHarness::standin(&[("STANDIN_NO_SHARE", "1")]);
    let error = h
        .provider
        .create(&spec())
        .await
        .expect_err("a box whose home is not shared is refused");
    let text = error.to_string();
    assert!(text.contains("bind mount"), "{text}");
    assert!(text.contains("another host"), "{text}");
    let containers = h.dir.path().join("runtime/containers");
    assert_eq!(
        std::fs::read_dir(&containers).expect("containers").count(),
        0,
        "the container was removed"
    );
    assert_eq!(
        std::fs::read_dir(h.dir.path().join("state/boxes"))
            .expect("boxes")
            .count(),
        0,
        "the box directory was removed"
    );
    assert!(h.log().iter().any(|(argv, _)| argv[0] == "rm"));
}

#[tokio::test]
async fn exec_is_bounded_and_kills_what_it_started() {
    let h = ContainerHarness::real(RuntimeKind::Podman);
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let started = std::time::Instant::now();
    let result = sandbox
        .exec(
            "(sleep 2; touch late) & sleep 30",
            &BTreeMap::new(),
            Duration::from_millis(800),
        )
        .await;
    assert!(matches!(result, Err(BoxError::Failed(_))), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !h.host_home(sandbox.as_ref()).join("late").exists(),
        "the background child was killed too"
    );
    let out = sandbox
        .exec(
            "echo out; echo err >&2; exit 7",
            &BTreeMap::new(),
            Duration::from_secs(20),
        )
        .await
        .expect("exec");
    assert_eq!(
        (out.exit_code, out.stdout.as_slice(), out.stderr.as_slice()),
        (7, &b"out\n"[..], &b"err\n"[..])
    );
    eprintln!("real runtime: {}", h.real);
    h.provider.kill(sandbox.id()).await.expect("kill");
}

/// A crash-orphaned container box is reaped on the next create only when its container is
/// gone and nothing touched it for its timeout; one whose container still exists is kept.
#[tokio::test]
async fn only_a_box_whose_container_is_gone_and_untouched_is_reaped() {
    let h = ContainerHarness::standin(&[]);
    let short = BoxSpec {
        timeout_seconds: 1,
        ..spec()
    };
    let orphan = h.provider.create(&short).await.expect("create");
    let living = h.provider.create(&short).await.expect("create");
    let removed = h.cli(&["rm", "-f", &format!("boxfleet-{}", orphan.id())]);
    assert!(
        removed.status.success(),
        "the runtime removed the container"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let reaped = h.provider.reap_orphans().await;
    assert_eq!(reaped, vec![orphan.id().to_owned()]);
    assert!(!h.provider.box_dir(orphan.id()).exists());
    assert!(
        h.provider.box_dir(living.id()).exists(),
        "its container exists"
    );
    h.provider.kill(living.id()).await.expect("kill");
}

#[tokio::test]
async fn a_killed_container_box_gives_back_the_login_its_run_refreshed() {
    let h = ContainerHarness::standin(&[]);
    let login = h.dir.path().join("login");
    std::fs::create_dir_all(&login).expect("mkdir");
    std::fs::write(login.join(".credentials.json"), "v1").expect("write");
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let id = sandbox.id().to_owned();
    boxfleet_actors::credentials::seed(
        sandbox.as_ref(),
        &login,
        &[".credentials.json"],
        "~/.claude",
    )
    .await
    .expect("seed");
    // the run refreshes its login inside the container, through the bind-mounted home
    let out = sandbox
        .exec(
            "printf v2-in-the-box > ~/.claude/.credentials.json",
            &BTreeMap::new(),
            Duration::from_secs(10),
        )
        .await
        .expect("exec");
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert!(
        h.provider
            .box_dir(&id)
            .join("records/logins.json")
            .is_file(),
        "the seeds are kept in the box's records, outside the mount"
    );
    h.provider.kill(&id).await.expect("kill");
    assert!(!h.provider.box_dir(&id).exists());
    assert_eq!(
        std::fs::read_to_string(login.join(".credentials.json"))
            .ok()
            .as_deref(),
        Some("v2-in-the-box")
    );
}
