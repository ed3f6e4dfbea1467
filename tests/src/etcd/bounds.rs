//! The harness's bounds on etcd, and how a sync caller waits on async work.

use std::time::Duration;

/// How long a started etcd has to answer a get before the harness gives up on it.
pub const ETCD_UP_WITHIN: Duration = Duration::from_secs(30);
/// The call timeout of the stores the harness hands out.
pub const STORE_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `future` to its end from a sync caller, which may itself be on a tokio runtime: on a
/// thread of its own with a runtime of its own.
pub(crate) fn block_on_own_runtime<T: Send>(
    future: impl std::future::Future<Output = T> + Send,
) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap_or_else(|error| panic!("could not build a runtime: {error}"));
                runtime.block_on(future)
            })
            .join()
            .unwrap_or_else(|_| panic!("the harness's own runtime panicked"))
    })
}
