//! The store's disk reserve, watched every second. A local box shares its disk with the store,
//! and a job can fill a disk fast (`yes` wrote 6.2 GB in 30 s): the poll's disk watchdog alone
//! would let a job write a whole poll interval (15 s) past the reserve
//! (`providers.sandbox.local.store_reserve_bytes`). So one `statvfs` a second looks, and while
//! the disk holding the store is under its reserve the waiter polls at once, every second:
//! each running local job is then ended by the poll's watchdog with reason `disk_budget`, and
//! the store keeps room to record it.

use std::time::Duration;

use boxfleet_actors::workers::WaiterMsg;
use boxfleet_sandbox::DiskBudget;
use ractor::ActorRef;
use tracing::{debug, info, warn};

/// How often the reserve is looked at.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Watches the reserve of `budget` until the task is aborted, waking the waiter named `waiter`
/// while the disk is under it.
pub fn watch_store_reserve(budget: DiskBudget, waiter: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(WATCH_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut short = false;
        loop {
            every.tick().await;
            let check = budget.clone();
            let free = match tokio::task::spawn_blocking(move || check.store_short()).await {
                Ok(Ok(free)) => free,
                Ok(Err(error)) => {
                    debug!(%error, "store_reserve_unread");
                    continue;
                }
                Err(_) => continue,
            };
            match free {
                Some(free) => {
                    if !short {
                        warn!(
                            free_bytes = free,
                            reserve_bytes = budget.store_reserve_bytes,
                            "store_reserve_breached"
                        );
                    }
                    short = true;
                    if let Some(waiter) = ActorRef::<WaiterMsg>::where_is(waiter.clone()) {
                        let _ = waiter.cast(WaiterMsg::Tick);
                    }
                }
                None if short => {
                    info!("store_reserve_restored");
                    short = false;
                }
                None => {}
            }
        }
    })
}
