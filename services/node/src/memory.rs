//! Giving memory back: glibc's allocator keeps the pages a burst of large outputs freed (a
//! 50 MB report read, bounded and published leaves its buffers' pages in the heap's arenas),
//! so a node's resident size only ever grew. Every [`TRIM_EVERY`] the node asks the
//! allocator to return what it holds free (`malloc_trim(0)`), and its resident size comes back
//! near its idle level after the burst (measured by `cargo bench --bench soak`).

use std::time::Duration;

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
