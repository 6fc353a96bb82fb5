//! The engine's typed errors.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file-system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What the engine was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// Bytes on disk are not what the engine wrote.
    #[error("corruption in {path} at offset {offset}: {reason}")]
    Corruption {
        /// The damaged file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A file is missing from the middle of a queue's sequence.
    #[error("{path} is missing: the files before and after it exist")]
    MissingFile {
        /// The path the missing file would have.
        path: PathBuf,
    },
    /// The caller passed something the engine cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A config field is out of bounds.
    #[error("invalid config: {0}")]
    Config(String),
    /// An earlier failure (a failed sync, a panic on the group-commit leader)
    /// left what is durable unknown, so the engine refuses every write until it
    /// is reopened.
    #[error("engine refuses writes after a failure left what is durable unknown: {0}")]
    Poisoned(String),
    /// The entry was compacted away.
    #[error("group {group}: entry {index} is compacted (first index is {first})")]
    Compacted {
        /// The group.
        group: u64,
        /// The entry asked for.
        index: u64,
        /// The group's first index.
        first: u64,
    },
    /// The entry was never written (or the group does not exist).
    #[error("group {group}: entry {index} is unavailable")]
    Unavailable {
        /// The group.
        group: u64,
        /// The entry asked for.
        index: u64,
    },
    /// Another engine holds the directory.
    #[error("{0} is locked by another engine")]
    Locked(PathBuf),
}

impl Error {
    /// Returns true when the error is the disk being full (ENOSPC): the write
    /// may succeed once space is freed.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::StorageFull)
    }

    /// Returns a copy for the other writers of a group commit that failed as a
    /// whole (`io::Error` is not `Clone`, so the copy keeps the kind and message).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption {
                path,
                offset,
                reason,
            } => Error::Corruption {
                path: path.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            Error::MissingFile { path } => Error::MissingFile { path: path.clone() },
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Config(m) => Error::Config(m.clone()),
            Error::Poisoned(m) => Error::Poisoned(m.clone()),
            Error::Compacted {
                group,
                index,
                first,
            } => Error::Compacted {
                group: *group,
                index: *index,
                first: *first,
            },
            Error::Unavailable { group, index } => Error::Unavailable {
                group: *group,
                index: *index,
            },
            Error::Locked(p) => Error::Locked(p.clone()),
        }
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }
}

/// The engine's result type.
pub type Result<T> = std::result::Result<T, Error>;
