//! npm packages the tests run for real (the Claude Code CLI, MCP servers), installed once per
//! target directory: `npm install` of a pinned version into `<target>/{cache}/{version}/`,
//! shared by every later test run. A lock directory keeps parallel test processes from
//! installing it twice; the install lands in a staging directory that is renamed into place
//! once its binary answers, so a half-done install is never used. No npm panics naming the
//! fix: a test that needs a package never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a test process waits for another one's install before giving up.
const INSTALL_WAIT: Duration = Duration::from_secs(600);

/// A pinned npm package and the binary of it a test runs.
#[derive(Debug, Clone, Copy)]
pub struct Package {
    pub name: &'static str,
    pub version: &'static str,
    /// its binary, under `node_modules/.bin/`
    pub bin: &'static str,
    /// the directory under `<target>/` its installs live in
    pub cache: &'static str,
    /// whether an installed binary runs (its version, or why not)
    pub check: fn(&Path) -> Result<String, String>,
    /// the variable that names a binary to use instead (said when npm is missing)
    pub override_env: &'static str,
}

/// The package's binary, installed on first use.
pub fn installed(package: &Package) -> PathBuf {
    let root = cache_root(package.cache);
    let dir = root.join(package.version);
    let bin = dir.join("node_modules/.bin").join(package.bin);
    if bin.exists() {
        return bin;
    }
    std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("create {}: {e}", root.display()));
    let _lock = InstallLock::acquire(
        &root.join(format!("{}.lock", package.version)),
        &bin,
        package,
    );
    if !bin.exists() {
        npm_install(package, &root, &dir);
    }
    assert!(
        bin.exists(),
        "npm installed {} but left no {}",
        package.name,
        bin.display()
    );
    bin
}

/// `<target>/{cache}`, beside the test binary's `target/<profile>/deps`.
fn cache_root(cache: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("the test binary lives in <target>/<profile>/deps");
    target.join(cache)
}

fn npm_install(package: &Package, root: &Path, dir: &Path) {
    let (name, version) = (package.name, package.version);
    let npm = which("npm").unwrap_or_else(|| {
        panic!(
            "the tests need npm to install {name}@{version}, and there is no npm on PATH: \
             install it (Debian: apt-get install nodejs npm), or point {} at its binary",
            package.override_env
        )
    });
    let staging = root.join(format!("{version}.staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .unwrap_or_else(|e| panic!("create {}: {e}", staging.display()));
    eprintln!("npm: install {name}@{version} into {}", dir.display());
    let output = Command::new(&npm)
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--prefix",
        ])
        .arg(&staging)
        .arg(format!("{name}@{version}"))
        .current_dir(&staging)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", npm.display()));
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        panic!(
            "npm install {name}@{version} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let staged = staging.join("node_modules/.bin").join(package.bin);
    if let Err(error) = (package.check)(&staged) {
        let _ = std::fs::remove_dir_all(&staging);
        panic!(
            "npm installed {name}@{version} but its {} does not run (was a postinstall skipped?): {error}",
            package.bin
        );
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir)
        .unwrap_or_else(|e| panic!("move {} to {}: {e}", staging.display(), dir.display()));
}

/// A program on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A lock directory (`mkdir` is atomic) holding its owner's pid; one left by a process that
/// has exited is taken over.
#[derive(Debug)]
struct InstallLock {
    dir: PathBuf,
}

impl InstallLock {
    /// Waits for the lock, or for `done` to appear (another process finished the install).
    fn acquire(dir: &Path, done: &Path, package: &Package) -> Option<InstallLock> {
        let deadline = Instant::now() + INSTALL_WAIT;
        loop {
            match std::fs::create_dir(dir) {
                Ok(()) => {
                    let _ = std::fs::write(dir.join("pid"), std::process::id().to_string());
                    return Some(InstallLock {
                        dir: dir.to_owned(),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if done.exists() {
                        return None;
                    }
                    let owner = std::fs::read_to_string(dir.join("pid")).ok();
                    let alive = owner
                        .as_deref()
                        .map(str::trim)
                        .is_some_and(|pid| Path::new("/proc").join(pid).exists());
                    // no pid yet: the owner is between mkdir and write, or died there
                    let orphaned = owner.is_none()
                        && std::fs::metadata(dir)
                            .and_then(|m| m.modified())
                            .ok()
                            .and_then(|t| t.elapsed().ok())
                            .is_some_and(|age| age > Duration::from_secs(30));
                    if (owner.is_some() && !alive) || orphaned {
                        let _ = std::fs::remove_dir_all(dir);
                        continue;
                    }
                }
                Err(e) => panic!("create the install lock {}: {e}", dir.display()),
            }
            assert!(
                Instant::now() < deadline,
                "waited {INSTALL_WAIT:?} for another test process to install {} (lock {})",
                package.name,
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
