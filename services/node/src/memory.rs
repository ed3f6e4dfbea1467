//! The node's memory: its allocator, and giving memory back.
//!
//! The allocator is mimalloc (`lib.rs`'s `#[global_allocator]`), not glibc's malloc. On a node
//! holding 10,000 seats glibc's heap was large and fragmented, and its malloc spent a third of
//! a launch walking free lists and waiting on its arenas' locks (issue 20's scale bench:
//! `_int_malloc`, `malloc_consolidate` and `unlink_chunk` at 19% of the node's samples against
//! 6% on a fresh node); with mimalloc both nodes launch ~40% faster.
//!
//! mimalloc gives a freed page back to the system [`PURGE_DELAY_MS`] after it was freed; its
//! own default (a second) kept a burst's pages: 570 MB resident with 10,000 runs active against
//! 450 MB with none (the scale bench's goal is 500 MB). Every [`TRIM_EVERY`] the node also
//! asks it to collect what its threads hold free ([`trim`]); the runtime's idle blocking
//! threads end after [`BLOCKING_THREAD_KEEP_ALIVE`]. `cargo bench --bench soak` measures the
//! result.

use std::time::Duration;

/// How long an idle thread of the runtime's blocking pool lives (tokio's default is 10 s). The
/// store's reads and writes, and file I/O, run there; a node's periodic work (the lease
/// reaper, the trim, the polls) kept every thread a burst started busy often enough to live on
/// — fourteen more threads, each with its stack and its cache of freed blocks, after a soak.
pub const BLOCKING_THREAD_KEEP_ALIVE: Duration = Duration::from_secs(2);

/// How often the allocator is asked to give free memory back.
pub const TRIM_EVERY: Duration = Duration::from_secs(30);

/// How long mimalloc keeps a freed page before it gives it back to the system.
pub const PURGE_DELAY_MS: std::ffi::c_long = 0;

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_e` (the same in mimalloc 2 and
/// 3), which `libmimalloc-sys` names no constant for.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Trims the allocator every [`TRIM_EVERY`] until the task is aborted.
pub fn trim_periodically() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        let mut every = tokio::time::interval(TRIM_EVERY);
        every.tick().await;
        loop {
            every.tick().await;
            trim();
        }
    })
}

/// Sets the allocator up for a long-lived node; called once, before the node's threads start.
/// `MIMALLOC_PURGE_DELAY` in the environment, which mimalloc reads itself, is left to decide.
#[allow(unsafe_code)]
pub fn configure_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set takes an option's number and a value and touches no memory of
        // ours; it is called before the runtime's threads exist (mimalloc's options are not
        // synchronised).
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
        }
    }
}

/// Returns the allocator's free memory to the system.
#[allow(unsafe_code)]
pub fn trim() {
    // SAFETY: mi_collect takes a flag and touches no memory of ours; mimalloc synchronises it
    // with the other threads' allocations itself.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option's number is mimalloc's: before it is set, it holds mimalloc 3's default
    /// purge delay (1000 ms), which no option next to it has.
    #[test]
    #[allow(unsafe_code)]
    fn the_purge_delay_option_is_mimallocs_and_is_set() {
        // SAFETY: as in configure_allocator; reading an option touches no memory of ours
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(
                default, 1000,
                "option {MI_OPTION_PURGE_DELAY} is not purge_delay"
            );
        }
        configure_allocator();
        // SAFETY: as above
        let now = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(now, PURGE_DELAY_MS);
        }
    }
}
