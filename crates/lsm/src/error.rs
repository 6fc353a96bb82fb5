//! The engine's typed errors. Every failure a caller can see is one of these:
//! bad bytes on disk, bad arguments, I/O failures; never a panic.

use std::path::PathBuf;

/// The result of every fallible lsm call.
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bytes on disk fail their checks: the file and the offset (of the block,
    /// record or field) name where.
    #[error("corruption in {path} at offset {offset}: {reason}")]
    Corruption {
        /// The damaged file.
        path: PathBuf,
        /// Where in it the damage starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A caller's argument is out of bounds or inconsistent; nothing was done.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A write that asked not to wait (`WriteOptions::no_slowdown`) would
    /// have had to; nothing was written.
    #[error("busy: {0}")]
    Busy(String),
    /// An earlier background error or failed sync stopped writes until the
    /// engine is reopened (or, after ENOSPC, until space is back); reads
    /// still work. Names the first error.
    #[error("read-only after an earlier error: {0}")]
    ReadOnly(String),
    /// The engine is closed, or closing.
    #[error("the engine is closed")]
    Closed,
    /// An operating-system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What the engine was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Maps an I/O error of `op` on `path`, for `map_err`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }

    /// A corruption error for `path` at `offset`.
    pub fn corruption(path: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Error {
        Error::Corruption {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }
}
