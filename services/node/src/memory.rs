//! Giving memory back: glibc's allocator keeps the pages a burst of large outputs freed (a
//! 50 MB report read, bounded and published leaves its buffers' pages in the heap's arenas),
//! so a node's resident size only ever grew. The node holds glibc to [`ARENAS`] arenas (its
//! default is eight per core, each keeping its own freed pages: measured, 79 MiB after a burst
//! of twelve 4 MB reports against 48 MiB with two), and every [`TRIM_EVERY`] asks it to return
//! what it holds free (`malloc_trim(0)`); `cargo bench --bench soak` measures the result.

use std::time::Duration;

/// The allocator's arenas: the node's threads share two.
pub const ARENAS: i32 = 2;

/// How often the allocator is asked to give free memory back.
pub const TRIM_EVERY: Duration = Duration::from_secs(30);

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

/// Holds the allocator to [`ARENAS`] arenas; called once, before the node's threads start
/// allocating (an environment's `MALLOC_ARENA_MAX` is left to win).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn limit_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    // SAFETY: mallopt takes two integers and touches no memory of ours; M_ARENA_MAX only
    // bounds how many arenas glibc creates from now on.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Other allocators keep their own arenas.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_arenas() {}

/// Returns the allocator's free memory to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn trim() {
    // SAFETY: malloc_trim takes a size and touches no memory of ours; glibc serialises it
    // against every other allocation by its arenas' own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators give memory back on their own.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() {}
