//! The README's first commands, as a user on a fresh machine types them: `cargo run --release
//! -- demo` must name one binary and its demo must observe every step. (The test command itself
//! is what runs this file.)

use std::process::Command;

use boxfleet_tests::node::boxfleet_bin;

/// `cargo run` at the top of the workspace builds and runs the default members' one binary; a
/// second binary there makes it refuse ("could not determine which binary to run").
#[test]
fn cargo_run_at_the_top_names_the_boxfleet_binary_alone() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let defaults: Vec<&str> = metadata["workspace_default_members"]
        .as_array()
        .expect("workspace_default_members")
        .iter()
        .filter_map(|id| id.as_str())
        .collect();
    let mut bins = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        if !defaults.contains(&package["id"].as_str().unwrap_or_default()) {
            continue;
        }
        for target in package["targets"].as_array().expect("targets") {
            let kinds = target["kind"].as_array().expect("kind");
            if kinds.iter().any(|k| k == "bin") {
                bins.push(target["name"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    assert_eq!(
        bins,
        vec!["boxfleet".to_owned()],
        "the default members' binaries"
    );
}

/// `boxfleet demo`: the whole lifecycle on one node on embedded defaults, exit 0 only when
/// every step was observed.
#[test]
fn the_demo_observes_every_step() {
    let output = Command::new(boxfleet_bin())
        .arg("demo")
        .output()
        .expect("run boxfleet demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "demo exited {:?}\n{stdout}\n{stderr}",
        output.status.code()
    );
    assert!(stdout.contains("every step observed"), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Delivered") || stdout.contains("fix/"),
        "{stdout}"
    );
}
