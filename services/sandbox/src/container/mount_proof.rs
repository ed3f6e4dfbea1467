//! The proof that a new box's bind mount is the engine's own directory, run before the box
//! is used ([`prove_mount`]): the engine writes a token the box reads back, and the box makes
//! a directory the engine writes into and removes. A runtime pointed at a daemon on another
//! host mounts that host's filesystem, and a container running as a user the engine cannot
//! manage leaves files the engine cannot clean up; both fail here, not in a run.

use std::collections::BTreeMap;
use std::fs;

use super::argv::quote;
use super::runtime::CONTROL_BOUND;
use super::sandbox::ContainerSandbox;
use crate::direct::blocking;
use crate::direct::files;

/// Proves the mount: the engine's token read back by the box, and a directory the box
/// made that the engine writes into and removes.
pub(super) async fn prove_mount(sandbox: &ContainerSandbox) -> Result<(), String> {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let token_name = format!(".boxfleet-mount-proof-{tag}");
    let dir_name = format!("{token_name}.d");
    let host_home = sandbox.paths.home.clone();
    let token_file = host_home.join(&token_name);
    let written = {
        let (home, file, tag) = (host_home.clone(), token_file.clone(), tag.clone());
        blocking("write the mount proof", move || {
            files::write_whole(&home, &file, "mount proof", tag.as_bytes(), 0o644)
        })
        .await
    };
    written.map_err(|e| format!("the engine could not write its token: {e}"))?;
    let script = format!(
        "cat {t} && mkdir {d} && printf box >{d}/from-box",
        t = quote(&token_name),
        d = quote(&dir_name)
    );
    let out = sandbox
        .exec_raw(&script, &BTreeMap::new(), CONTROL_BOUND)
        .await
        .map_err(|e| format!("the box could not be asked: {e}"))?;
    let token_seen = String::from_utf8_lossy(&out.stdout).trim() == tag;
    let checked = {
        let (home, dir_name) = (host_home.clone(), dir_name.clone());
        blocking("check the mount proof", move || {
            let _ = fs::remove_file(home.join(&token_name));
            let dir = home.join(&dir_name);
            let seen = fs::read(dir.join("from-box")).ok();
            let wrote = fs::write(dir.join("from-engine"), b"engine");
            let removed = fs::remove_dir_all(&dir);
            Ok((seen, wrote, removed))
        })
        .await
    };
    let (seen, wrote, removed) =
        checked.map_err(|e| format!("the engine could not inspect its side: {e}"))?;
    if out.exit_code != 0 || !token_seen {
        return Err(format!(
            "the box did not read back the engine's token (exit {}: {})",
            out.exit_code,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if seen.as_deref() != Some(&b"box"[..]) {
        return Err("the directory the box created is not on the engine's side".into());
    }
    if let Err(e) = wrote {
        return Err(format!(
            "the engine cannot write into the directory the box created ({e}): the container runs as a user the engine cannot manage"
        ));
    }
    if let Err(e) = removed {
        return Err(format!(
            "the engine cannot remove the directory the box created ({e}): the container runs as a user the engine cannot manage"
        ));
    }
    Ok(())
}
