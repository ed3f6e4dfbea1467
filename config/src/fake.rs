//! `providers.sandbox.fake`: the in-process stand-in cell (spec line 144). `fake: true` wires
//! it with instant operations and an instant job; the block form tunes it for benchmarks and
//! for trying boxfleet without a sandbox:
//!
//! ```yaml
//! providers:
//!   sandbox:
//!     fake:
//!       latency_ms: { create: 200, poll: 50, read: 5, write: 5, exec: 20, kill: 50 }
//!       job: { seconds: 30, exit_code: 0, report: "Fixed the flaky test." }
//! ```
//!
//! A latency is how long each call of that kind takes (an E2B round trip is tens of
//! milliseconds, a box's creation hundreds). The job is what every agent run in a fake box
//! does: it runs `seconds` (0: it has finished by the first poll), then exits `exit_code`
//! having written `report` as its report. With `until_file` it runs on until that file exists
//! on the node's host (a benchmark ends ten thousand jobs at once by creating it).

use serde::Deserialize;

/// The fake cell's settings; `enabled` is false when the block is absent or `fake: false`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeSection {
    pub enabled: bool,
    pub latency_ms: FakeLatency,
    pub job: FakeJob,
}

/// How long each kind of box call takes, in milliseconds; 0 answers at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FakeLatency {
    /// making a box
    #[serde(default)]
    pub create: u64,
    /// asking whether a box's job still runs (the completion poll's call)
    #[serde(default)]
    pub poll: u64,
    /// reading a file or a stream's tail
    #[serde(default)]
    pub read: u64,
    /// writing a file
    #[serde(default)]
    pub write: u64,
    /// running a command, or starting a job
    #[serde(default)]
    pub exec: u64,
    /// killing, pausing, attaching to or connecting to a box
    #[serde(default)]
    pub kill: u64,
}

/// What every job in a fake box does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FakeJob {
    /// how long the job runs, in seconds; 0 has it finished by the first poll
    #[serde(default)]
    pub seconds: u64,
    /// the exit status it ends with
    #[serde(default)]
    pub exit_code: i32,
    /// what it leaves as its report; absent: a line naming the fake
    #[serde(default)]
    pub report: Option<String>,
    /// a path on the node's host: the job runs on (past its `seconds`) until a file is there
    /// — `touch` it to end every fake job at its next poll
    #[serde(default)]
    pub until_file: Option<std::path::PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Block {
    #[serde(default)]
    latency_ms: FakeLatency,
    #[serde(default)]
    job: FakeJob,
}

impl<'de> Deserialize<'de> for FakeSection {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_yaml::Value::deserialize(deserializer)? {
            serde_yaml::Value::Bool(enabled) => Ok(FakeSection {
                enabled,
                ..FakeSection::default()
            }),
            block @ serde_yaml::Value::Mapping(_) => {
                let Block { latency_ms, job } = Block::deserialize(block).map_err(|error| {
                    D::Error::custom(format!(
                        "fake: {error} (the block takes latency_ms: {{create, poll, read, write, exec, kill}} in milliseconds and job: {{seconds, exit_code, report, until_file}})"
                    ))
                })?;
                Ok(FakeSection {
                    enabled: true,
                    latency_ms,
                    job,
                })
            }
            _ => Err(D::Error::custom(
                "fake is true, false, or a block of latency_ms: and job:",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> Result<FakeSection, String> {
        serde_yaml::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn true_false_and_a_block_are_read() {
        assert!(read("true").expect("true").enabled);
        assert!(!read("false").expect("false").enabled);
        let block = read("{ latency_ms: { poll: 50 }, job: { seconds: 3, report: done } }")
            .expect("a block");
        assert!(block.enabled);
        assert_eq!(block.latency_ms.poll, 50);
        assert_eq!(block.latency_ms.create, 0);
        assert_eq!(block.job.seconds, 3);
        assert_eq!(block.job.report.as_deref(), Some("done"));
        assert!(read("{}").expect("an empty block").enabled);
    }

    #[test]
    fn a_wrong_key_is_named() {
        let error = read("{ latency: { poll: 50 } }").expect_err("refused");
        assert!(error.contains("unknown field `latency`"), "{error}");
        assert!(error.contains("latency_ms"), "{error}");
        let error = read("{ latency_ms: { pol: 50 } }").expect_err("refused");
        assert!(error.contains("pol"), "{error}");
        let error = read("yes please").expect_err("refused");
        assert!(error.contains("fake is true, false, or a block"), "{error}");
    }
}
