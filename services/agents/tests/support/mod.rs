//! A real `direct` box for the runner tests, and the shells they run under.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use boxfleet_actors::ports::{
    BoxSpec, Collected, JobHandle, JobState, LaunchSpec, Provider, Runner, Sandbox,
};
use boxfleet_sandbox::DirectProvider;

pub struct TestBox {
    pub dir: tempfile::TempDir,
    provider: DirectProvider,
    pub sandbox: Arc<dyn Sandbox>,
}

impl TestBox {
    pub async fn new() -> TestBox {
        let dir = tempfile::tempdir().expect("tempdir");
        let provider = DirectProvider::new(dir.path());
        let spec = BoxSpec {
            turn_id: "t-1".into(),
            seat: "ada".into(),
            env: Default::default(),
            timeout_seconds: 900,
            sandbox_id: None,
            launch_id: String::new(),
            coding_agent: String::new(),
        };
        let sandbox = provider.create(&spec).await.expect("create");
        TestBox {
            dir,
            provider,
            sandbox,
        }
    }

    pub fn home(&self) -> &str {
        self.sandbox.home()
    }

    /// A directory outside the box for a fake CLI's records.
    pub fn record_dir(&self) -> PathBuf {
        let path = self.dir.path().join("fake-record");
        std::fs::create_dir_all(&path).expect("mkdir");
        path
    }
}

impl Drop for TestBox {
    fn drop(&mut self) {
        let provider = self.provider.clone();
        let id = self.sandbox.id().to_owned();
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                let _ = rt.block_on(provider.kill(&id));
            }
        })
        .join();
    }
}

pub fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// Copies a fixture script into `dir` as an executable file and returns its path.
pub fn install_fake(name: &str, dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let to = dir.join(name);
    std::fs::copy(fixture(name), &to).expect("copy the fake");
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    to.display().to_string()
}

pub fn launch(launch_id: &str, brief: &str) -> LaunchSpec {
    LaunchSpec {
        turn_id: "t-1".into(),
        launch_id: launch_id.into(),
        seat: "ada".into(),
        brief: brief.into(),
        ..LaunchSpec::default()
    }
}

pub async fn wait_done(runner: &dyn Runner, sandbox: &dyn Sandbox, job: &JobHandle) -> JobState {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match runner.poll(sandbox, job).await.expect("poll") {
            JobState::Running if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(25)).await
            }
            JobState::Running => panic!("the job did not finish"),
            done => return done,
        }
    }
}

pub async fn run(runner: &dyn Runner, b: &TestBox, spec: &LaunchSpec) -> (JobState, Collected) {
    runner.install(b.sandbox.as_ref()).await.expect("install");
    let job = runner.start(b.sandbox.as_ref(), spec).await.expect("start");
    let state = wait_done(runner, b.sandbox.as_ref(), &job).await;
    let collected = runner
        .collect(b.sandbox.as_ref(), &job)
        .await
        .expect("collect");
    (state, collected)
}

pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Whether a shell is installed here (skipped, said, when not).
pub fn have_shell(shell: &[&str]) -> bool {
    let program = shell[0];
    let found = if Path::new(program).is_absolute() {
        Path::new(program).is_file()
    } else {
        which(program).is_some()
    };
    if !found {
        eprintln!("{program} is not installed: skipped");
    }
    found
}

pub const SHELLS: [&[&str]; 3] = [&["/bin/dash"], &["bash", "--posix"], &["busybox", "ash"]];
