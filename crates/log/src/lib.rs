//! The pieces Strata's log-structured engines share. raftlog's log files and
//! the lsm's write-ahead log both serve many concurrent writers with one
//! append and one sync per group of them: [`group_commit::WriteQueue`].

pub mod group_commit;

pub use group_commit::{Served, WriteQueue, Writer};
