//! The supervisor's policy types: which children go down with one that exited
//! ([`Strategy`]), when a child that exited is started again ([`Restart`], read against how it
//! ended, `Exit`), and how a child is stopped ([`Shutdown`]). The restart budget is
//! [`Intensity`](super::Intensity), beside its window.

use std::time::Duration;

use ractor::{ActorCell, SupervisionEvent};
use serde::Serialize;

/// Which children go down with one that exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Restart only the child that exited.
    OneForOne,
    /// Restart the child that exited and every running child started after it.
    RestForOne,
}

/// When a child that exited is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Restart {
    /// Always, whatever the exit.
    Permanent,
    /// Only after an abnormal exit (panic, `Err` from a handler, kill); a normal stop is final.
    Transient,
    /// Never.
    Temporary,
}

impl Restart {
    pub(super) fn restarts_after(self, exit: &Exit) -> bool {
        match self {
            Self::Permanent => true,
            Self::Transient => matches!(exit, Exit::Abnormal(_)),
            Self::Temporary => false,
        }
    }
}

/// The restart budget: at most `max_restarts` restarts within any `period`. One more and the
/// How a child is stopped when its supervisor shuts it down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Ask it to stop; kill it if it has not stopped within the duration (workers).
    Timeout(Duration),
    /// Ask it to stop and wait as long as it takes (supervisors, which bound their own children).
    Infinity,
}

impl Default for Shutdown {
    /// 5 s, then a kill.
    fn default() -> Self {
        Self::Timeout(Duration::from_secs(5))
    }
}

/// How a child ended.
#[derive(Debug)]
pub(super) enum Exit {
    /// stopped by itself or by a stop request
    Normal,
    /// panicked, returned `Err` from a handler, or was killed
    Abnormal(String),
}

impl Exit {
    pub(super) fn of(event: SupervisionEvent) -> Option<(ActorCell, Self)> {
        match event {
            SupervisionEvent::ActorFailed(cell, err) => {
                Some((cell, Self::Abnormal(err.to_string())))
            }
            // ractor reports a kill (and a runtime that dropped the actor's task) as a
            // termination; only these reason texts tell it from a stop
            SupervisionEvent::ActorTerminated(cell, _state, reason) => {
                let exit = match reason {
                    Some(reason) if reason == "killed" || reason == "actor_task_cancelled" => {
                        Self::Abnormal(reason)
                    }
                    _ => Self::Normal,
                };
                Some((cell, exit))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_restart_type_reads_the_exit_as_the_spec_says() {
        let normal = Exit::Normal;
        let abnormal = Exit::Abnormal("boom".into());
        assert!(Restart::Permanent.restarts_after(&normal));
        assert!(Restart::Permanent.restarts_after(&abnormal));
        assert!(!Restart::Transient.restarts_after(&normal));
        assert!(Restart::Transient.restarts_after(&abnormal));
        assert!(!Restart::Temporary.restarts_after(&normal));
        assert!(!Restart::Temporary.restarts_after(&abnormal));
    }

    #[test]
    fn policies_serialise_in_snake_case() {
        let json = |value: &str| format!("{value:?}");
        assert_eq!(
            serde_json::to_string(&Strategy::RestForOne).ok(),
            Some(json("rest_for_one"))
        );
        assert_eq!(
            serde_json::to_string(&Restart::Transient).ok(),
            Some(json("transient"))
        );
    }
}
