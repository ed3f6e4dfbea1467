//! How long each kind of fake box call takes (`providers.sandbox.fake.latency_ms`): a fake
//! cell that answers at once measures nothing about a fleet whose boxes are a network round
//! trip away, so a benchmark gives each call the time the real one takes.

use std::time::Duration;

/// The kinds of box call, each with its own latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Create,
    /// asking whether a job still runs
    Poll,
    Read,
    Write,
    /// a command, or a job's start
    Exec,
    /// kill, pause, attach, connect, keepalive
    Manage,
}

/// The latency of each kind of call; the default answers every call at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pace {
    pub create: Duration,
    pub poll: Duration,
    pub read: Duration,
    pub write: Duration,
    pub exec: Duration,
    pub manage: Duration,
}

impl Pace {
    fn of(&self, call: Call) -> Duration {
        match call {
            Call::Create => self.create,
            Call::Poll => self.poll,
            Call::Read => self.read,
            Call::Write => self.write,
            Call::Exec => self.exec,
            Call::Manage => self.manage,
        }
    }

    /// Waits as long as a call of this kind takes (a timer: it holds no thread and no lock).
    pub async fn wait(&self, call: Call) {
        let latency = self.of(call);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
    }
}
