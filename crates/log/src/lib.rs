//! The pieces Strata's log-structured engines share.
//!
//! - [`record`]: segmented record files, the on-disk format of raftlog's log
//!   files and of the lsm's write-ahead log and manifest: a file header, then
//!   checksummed records ended by an end marker; the scanner that reads them
//!   back and the appender that writes them.
//! - [`group_commit::WriteQueue`]: one append and one sync serve a group of
//!   concurrent writers.

pub mod group_commit;
pub mod record;

pub use group_commit::{Served, WriteQueue, Writer};
pub use record::RecoveryMode;
