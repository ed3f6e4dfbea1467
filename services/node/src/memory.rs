//! Giving memory back: glibc's allocator keeps the pages a burst of large outputs freed (a
//! 50 MB report read, bounded and published leaves its buffers' pages in the heap's arenas),
//! so a node's resident size only ever grew. The node holds glibc to [`ARENAS`] arenas (its
//! default is eight per core, each keeping its own freed pages: measured, 79 MiB after a burst
//! of twelve 4 MB reports against 48 MiB with two), maps every block of [`MMAP_THRESHOLD`] or
//! more on its own (unmapped when freed), and every [`TRIM_EVERY`] asks it to return what it
//! holds free (`malloc_trim(0)`); the runtime's idle blocking threads end after
//! [`BLOCKING_THREAD_KEEP_ALIVE`]. `cargo bench --bench soak` measures the result.

use std::time::Duration;

/// The allocator's arenas: the node's threads share two.
pub const ARENAS: i32 = 2;

/// The size from which the allocator maps a block on its own (glibc's starting threshold,
/// held there).
pub const MMAP_THRESHOLD: i32 = 128 * 1024;

/// How long an idle thread of the runtime's blocking pool lives (tokio's default is 10 s). The
/// store's reads and writes, and file I/O, run there; a node's periodic work (the lease
/// reaper, the trim, the polls) kept every thread a burst started busy often enough to live on
/// — fourteen more threads, each with its stack and its cache of freed blocks, after a soak.
pub const BLOCKING_THREAD_KEEP_ALIVE: Duration = Duration::from_secs(2);

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

/// Sets the allocator up for a long-lived node; called once, before the node's threads start
/// allocating. Each setting is left to an environment that sets it (`MALLOC_ARENA_MAX`,
/// `MALLOC_MMAP_THRESHOLD_`):
///
/// - [`ARENAS`] arenas;
/// - a fixed [`MMAP_THRESHOLD`]: a block that large is mapped on its own and unmapped when it is
///   freed. glibc's own threshold starts there but rises to the size of each mapped block
///   freed (up to 32 MiB), so after the first large report every later one was carved out of
///   the heap, and the heap kept the pages the small blocks allocated beside it pinned
///   (measured: 6.3 MiB of free heap a trim could not give back after a soak's burst).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn configure_allocator() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt takes two integers and touches no memory of ours; M_ARENA_MAX only
        // bounds how many arenas glibc creates from now on.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
    }
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: as above; M_MMAP_THRESHOLD sets the size from which a block is mapped on its
        // own, and fixing it turns glibc's sliding threshold off.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}

/// Other allocators keep their own arenas and thresholds.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn configure_allocator() {}

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
