//! Live reload (the spec's lines 40 and 81–85): the node's config file read again — on a
//! change to the file, on SIGHUP, or on an admin's `Ops.Reload` — validated whole by the very
//! code `boxfleet validate` and the node's start run ([`Loader`]), its sandbox cells built, and
//! only then put in force: the company document swapped whole ([`LiveCompany`]) and the cells
//! applied ([`Access::apply_cells`]: a dropped cell kept retired for the runs still in it, an
//! unchanged one keeping its running backend). A document that cannot be built is refused
//! before anything on the node changes. Each outcome is logged and announced once per
//! document (`config_applied`, `config_refused`).
//!
//! What a reload does not change: the `node:`, `store:` and `auth:` sections take effect at
//! the next start (a reload that changes them says so). The coordinator and the completion
//! poll are up from the node's start whatever the company, so there is no runtime to bring
//! up and no held seat to prepare: the poll asks for a run's backend on every tick, and so
//! follows the swap.
//!
//! [`LiveCompany`]: boxfleet_config::live::LiveCompany
//! [`Access::apply_cells`]: boxfleet_actors::lifecycle::access::Access::apply_cells

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boxfleet_actors::lifecycle::Coordinator;
use boxfleet_config::NodeConfig;
use sha2::{Digest, Sha256};
use tracing::{info, warn};

/// Builds the node's configuration from its file as the node's start did (the same overrides
/// from the command line, the same validation).
pub type Loader = Arc<dyn Fn() -> anyhow::Result<NodeConfig> + Send + Sync>;

/// What set a reload off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    File,
    Signal,
    Rpc,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::File => "file",
            Trigger::Signal => "sighup",
            Trigger::Rpc => "rpc",
        }
    }
}

/// How a reload came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub applied: bool,
    /// what changed (applied), or why nothing did (refused)
    pub summary: String,
    /// each problem of a refused document, at its location
    pub problems: Vec<String>,
}

/// How often the config file is looked at for a change.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// The node's reloads: one at a time.
pub struct Reloader {
    coordinator: Arc<Coordinator>,
    /// the file and how to build from it; none: the node was started with no config file
    source: Mutex<Option<(PathBuf, Loader)>>,
    /// the configuration in force (its node, store and auth sections are the start's)
    in_force: Mutex<NodeConfig>,
    /// the digest of the file as last read, by the watcher or a reload
    last_read: Mutex<Option<[u8; 32]>>,
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").finish_non_exhaustive()
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Reloader {
    pub fn new(coordinator: Arc<Coordinator>, config: NodeConfig) -> Self {
        Reloader {
            coordinator,
            source: Mutex::new(None),
            in_force: Mutex::new(config),
            last_read: Mutex::new(None),
            one_at_a_time: tokio::sync::Mutex::new(()),
        }
    }

    /// Names the file the node was started from and how its configuration is built.
    pub fn set_source(&self, file: PathBuf, loader: Loader) {
        *lock(&self.last_read) = std::fs::read(&file).ok().map(|b| digest(&b));
        *lock(&self.source) = Some((file, loader));
    }

    /// Reads the file again and puts it in force if it builds; else changes nothing.
    pub async fn reload(&self, trigger: Trigger) -> Outcome {
        let _one = self.one_at_a_time.lock().await;
        let Some((file, loader)) = lock(&self.source).clone() else {
            return Outcome {
                applied: false,
                summary: "this node was started with no config file, so there is nothing to read again: start it with --config FILE".into(),
                problems: Vec::new(),
            };
        };
        let bytes = std::fs::read(&file).unwrap_or_default();
        let read = digest(&bytes);
        *lock(&self.last_read) = Some(read);
        let outcome = match self.build(&loader) {
            Ok((config, cells)) => self.apply(config, cells),
            Err(problems) => Outcome {
                applied: false,
                summary: format!(
                    "{} was not applied: nothing on the node changed",
                    file.display()
                ),
                problems,
            },
        };
        self.announce(trigger, &file, &read, &outcome).await;
        outcome
    }

    /// The configuration and the cells of the file as it is now, or every problem with it.
    fn build(
        &self,
        loader: &Loader,
    ) -> Result<(NodeConfig, boxfleet_actors::lifecycle::cells::Cells), Vec<String>> {
        let config =
            loader().map_err(|error| match error.downcast::<boxfleet_config::Error>() {
                Ok(boxfleet_config::Error::Many(problems)) => {
                    problems.iter().map(ToString::to_string).collect()
                }
                Ok(other) => vec![other.to_string()],
                Err(other) => vec![format!("{other:#}")],
            })?;
        let cells = crate::cells::build(&config).map_err(|error| vec![format!("{error:#}")])?;
        Ok((config, cells))
    }

    /// Puts `config`'s company and `cells` in force.
    fn apply(
        &self,
        config: NodeConfig,
        cells: boxfleet_actors::lifecycle::cells::Cells,
    ) -> Outcome {
        let mut in_force = lock(&self.in_force);
        let mut restart = Vec::new();
        let (mut old, mut new) = (in_force.clone(), config.clone());
        old.company = Default::default();
        new.company = Default::default();
        if old != new {
            restart.push("the node:, store: and auth: sections take effect at the next start");
        }
        let before = self.coordinator.company();
        let seats = |c: &boxfleet_config::company::Company| {
            c.seats.iter().map(|s| s.handle.clone()).collect::<Vec<_>>()
        };
        let (was, now) = (seats(&before), seats(&config.company));
        let added: Vec<&String> = now.iter().filter(|s| !was.contains(s)).collect();
        let removed: Vec<&String> = was.iter().filter(|s| !now.contains(s)).collect();
        self.coordinator.live_company().set(config.company.clone());
        self.coordinator
            .runs
            .set_clock(config.company.budgets.offset());
        let change = self.coordinator.access.apply_cells(cells);
        // a seat the budget park held is asked again under the new caps
        let coordinator = self.coordinator.clone();
        tokio::spawn(async move {
            for seat in coordinator.budget_parked_seats() {
                coordinator.pump(&seat).await;
            }
        });
        in_force.company = config.company;
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.join(",")
            }
        };
        let seat_list = |v: &[&String]| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
            }
        };
        let (active, retired) = self.coordinator.access.cell_names();
        let mut summary = format!(
            "applied: cells {} (added {}, rebuilt {}, retired {}{}); seats added {}, removed {}",
            list(&active),
            list(&change.added),
            list(&change.rebuilt),
            list(&change.retired),
            if retired.is_empty() {
                String::new()
            } else {
                format!("; kept for their runs: {}", retired.join(","))
            },
            seat_list(&added),
            seat_list(&removed),
        );
        for note in restart {
            summary.push_str("; ");
            summary.push_str(note);
        }
        Outcome {
            applied: true,
            summary,
            problems: Vec::new(),
        }
    }

    /// Logs the outcome and announces it once per document and outcome.
    async fn announce(
        &self,
        trigger: Trigger,
        file: &std::path::Path,
        read: &[u8; 32],
        outcome: &Outcome,
    ) {
        let document: String = read.iter().take(8).map(|b| format!("{b:02x}")).collect();
        if outcome.applied {
            info!(trigger = trigger.as_str(), file = %file.display(), document, summary = %outcome.summary, "config_applied");
        } else {
            warn!(trigger = trigger.as_str(), file = %file.display(), document, problems = %outcome.problems.join(" | "), "config_refused");
        }
        self.coordinator
            .announce_config(
                outcome.applied,
                &document,
                &outcome.summary,
                &outcome.problems,
            )
            .await;
    }

    /// Whether the file differs from what was last read of it.
    fn file_changed(&self) -> bool {
        let Some((file, _)) = lock(&self.source).clone() else {
            return false;
        };
        let Ok(bytes) = std::fs::read(&file) else {
            return false;
        };
        let now = digest(&bytes);
        let mut last = lock(&self.last_read);
        if last.as_ref() == Some(&now) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// Reloads whenever the file's content changes (looked at every [`WATCH_INTERVAL`]), and
    /// on every SIGHUP; runs until the node stops it.
    pub fn watch(self: &Arc<Self>) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        let me = self.clone();
        Ok(tokio::spawn(async move {
            let mut tick = tokio::time::interval(WATCH_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let trigger = tokio::select! {
                    _ = hangup.recv() => Trigger::Signal,
                    _ = tick.tick() => {
                        if !me.file_changed() {
                            continue;
                        }
                        Trigger::File
                    }
                };
                me.reload(trigger).await;
            }
        }))
    }
}
