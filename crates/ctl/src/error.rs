//! The tool's typed errors: what stops a command (exit code 2), as opposed to
//! damage in the directory, which commands report and carry on past.

use std::io;
use std::path::PathBuf;

/// Why a command could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// Reading the directory or a file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What the tool was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// Writing the report to standard output failed.
    #[error("writing the output: {0}")]
    Output(#[from] io::Error),
}

impl CtlError {
    /// Returns a closure that wraps an `io::Error` of `op` on `path`, for `map_err`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> CtlError {
        let path = path.into();
        move |source| CtlError::Io { op, path, source }
    }
}
