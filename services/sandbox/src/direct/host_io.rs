//! Host file work for a local box, bounded: a blocking file operation runs off the async
//! threads and answers as unreachable past its bound, and an I/O failure names what failed.

use std::io;
use std::time::Duration;

use boxfleet_actors::ports::BoxError;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The largest output `exec` keeps of each stream (the rest is read and dropped).
const EXEC_OUTPUT_BOUND: usize = 32 * 1024 * 1024;
/// How long a file operation on the host may take before it is answered as unreachable.
const FILE_OP_BOUND: Duration = Duration::from_secs(60);

/// An I/O failure, naming what was being done.
pub(crate) fn io_failed(what: &str, error: &io::Error) -> BoxError {
    BoxError::Failed(format!("{what}: {error}"))
}

/// Runs blocking file work off the async threads, bounded.
pub(crate) async fn blocking<T, F>(what: &str, work: F) -> Result<T, BoxError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, BoxError> + Send + 'static,
{
    match tokio::time::timeout(FILE_OP_BOUND, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(BoxError::Failed(format!("{what}: {join}"))),
        Err(_) => Err(BoxError::Unreachable(format!(
            "{what}: no answer within {}s",
            FILE_OP_BOUND.as_secs()
        ))),
    }
}

/// A child's output stream read to its end, keeping at most `EXEC_OUTPUT_BOUND` bytes.
pub(crate) async fn read_bounded<R: AsyncRead + Unpin>(mut stream: R) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = EXEC_OUTPUT_BOUND.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    kept
}
