//! The wall clock and the ids the lifecycle reads, in one place so a deterministic simulation
//! can drive them (`tests/src/sim`). Outside a simulation [`now`] is `Utc::now()` and
//! [`unique`] is a fresh UUIDv7. A simulation installs a [`Simulated`] clock on its thread
//! (its tokio runtime is current-thread, with paused time, so every task of the simulated
//! fleet runs on it): [`now`] is then the simulation's start plus tokio's paused clock's
//! elapsed time — a pause TTL, a revival window or a lease measured in wall time passes in
//! simulated time — and [`unique`] counts, so the same seed makes the same ids.

use std::cell::{Cell, RefCell};

use chrono::{DateTime, Utc};

thread_local! {
    static SIMULATED: RefCell<Option<(DateTime<Utc>, tokio::time::Instant)>> =
        const { RefCell::new(None) };
    static COUNTER: Cell<u64> = const { Cell::new(0) };
}

/// The wall clock: `Utc::now()`, or the simulated instant on a simulation's thread.
pub fn now() -> DateTime<Utc> {
    SIMULATED.with(|simulated| match *simulated.borrow() {
        Some((base, started)) => {
            let elapsed = tokio::time::Instant::now().saturating_duration_since(started);
            base + chrono::Duration::from_std(elapsed).unwrap_or_default()
        }
        None => Utc::now(),
    })
}

/// 32 hex digits no other id shares: a UUIDv7's (time-ordered), or on a simulation's thread a
/// count, time-ordered the same way.
pub fn unique() -> String {
    let simulated = SIMULATED.with(|simulated| simulated.borrow().is_some());
    if simulated {
        let n = COUNTER.with(|counter| {
            let n = counter.get() + 1;
            counter.set(n);
            n
        });
        format!("{n:032x}")
    } else {
        uuid::Uuid::now_v7().simple().to_string()
    }
}

/// A simulated clock installed on this thread until it drops.
#[derive(Debug)]
pub struct Simulated {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Simulated {
    /// Installs the clock: from now on this thread's [`now`] is `base` plus the time tokio's
    /// clock has advanced since (call it inside the simulation's runtime), and its ids count
    /// from one.
    pub fn install(base: DateTime<Utc>) -> Simulated {
        SIMULATED.with(|simulated| {
            *simulated.borrow_mut() = Some((base, tokio::time::Instant::now()));
        });
        COUNTER.with(|counter| counter.set(0));
        Simulated {
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for Simulated {
    fn drop(&mut self) {
        SIMULATED.with(|simulated| *simulated.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_simulated_clock_moves_with_tokios_and_its_ids_count() {
        let base = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("an instant")
            .with_timezone(&Utc);
        let clock = Simulated::install(base);
        assert_eq!(now(), base);
        tokio::time::sleep(std::time::Duration::from_secs(90)).await;
        assert_eq!(now(), base + chrono::Duration::seconds(90));
        assert_eq!(unique(), format!("{:032x}", 1));
        assert_eq!(unique(), format!("{:032x}", 2));
        drop(clock);
        assert!(
            now() > base + chrono::Duration::days(300),
            "the real clock again"
        );
        assert_ne!(unique(), unique());
    }
}
