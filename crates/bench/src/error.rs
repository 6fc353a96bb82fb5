//! The bench's errors: each names what failed, so the one line `main` prints
//! is enough to act on.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::engines::EngineError;

/// Everything that can stop a subcommand.
#[derive(Debug)]
pub enum BenchError {
    /// An engine operation failed.
    Engine(EngineError),
    /// The bench's own file or `/proc` access failed.
    Io {
        /// What the bench was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The arguments do not make a runnable workload.
    Usage(String),
    /// Data read back is not what was written.
    Verify(String),
    /// A worker thread panicked; the message is the panic's.
    Panic(String),
    /// The run stopped short of what was asked, after reporting what it
    /// measured.
    Incomplete(String),
}

impl BenchError {
    /// Returns a closure that wraps an `io::Error` of `op` on `path`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> BenchError {
        let path = path.into();
        move |source| BenchError::Io { op, path, source }
    }

    /// Turns a thread's panic payload into an error.
    pub fn from_panic(payload: Box<dyn std::any::Any + Send>) -> BenchError {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a worker thread panicked".to_string());
        BenchError::Panic(msg)
    }
}

impl From<EngineError> for BenchError {
    fn from(e: EngineError) -> Self {
        BenchError::Engine(e)
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Engine(e) => write!(f, "{e}"),
            BenchError::Io { op, path, source } => {
                write!(f, "{op} {}: {source}", path.display())
            }
            BenchError::Usage(msg) => write!(f, "invalid arguments: {msg}"),
            BenchError::Verify(msg) => write!(f, "verification failed: {msg}"),
            BenchError::Panic(msg) => write!(f, "worker thread panicked: {msg}"),
            BenchError::Incomplete(msg) => write!(f, "run incomplete: {msg}"),
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BenchError::Engine(e) => Some(e),
            BenchError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
