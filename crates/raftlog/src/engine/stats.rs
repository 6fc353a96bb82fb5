//! Counts of the index and of the files, for metrics pollers and tests.

use std::path::Path;

use crate::format::{FileId, Queue};
use crate::Engine;

/// Counts of the index's contents and memory.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IndexStats {
    /// Groups with any entry or key.
    pub groups: u64,
    /// Live entries over all groups.
    pub entries: u64,
    /// Keys over all groups.
    pub keys: u64,
    /// Approximate heap bytes used by the index, from the real sizes and
    /// capacities of its parts: the shard maps' tables, each group's shared
    /// cell, runs and keys, keys' values included.
    pub memory_bytes: u64,
    /// Index bytes per live entry, counting only entry locations: the
    /// buffers of the groups' runs (24 bytes a run, with slack) and their
    /// side tables of wide runs.
    pub entry_bytes_per_entry: f64,
}

/// Counts of the files on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileStats {
    /// Files of the append queue, the active one included.
    pub append_files: u64,
    /// Files of the rewrite queue.
    pub rewrite_files: u64,
    /// Bytes written into the append queue's files (record ends, not file sizes).
    pub append_bytes: u64,
    /// Sequence number of the oldest append file.
    pub first_append_seq: u64,
    /// Sequence number of the active append file.
    pub active_append_seq: u64,
    /// Purged files kept for reuse.
    pub recycled_files: u64,
}

impl Engine {
    /// Returns the ids of all groups, sorted.
    pub fn groups(&self) -> Vec<u64> {
        let mut ids = self.index.group_ids();
        ids.sort_unstable();
        ids
    }

    /// Returns counts and memory of the index.
    pub fn index_stats(&self) -> IndexStats {
        self.index.stats()
    }

    /// Returns the directory the engine keeps its files in.
    pub fn path(&self) -> &Path {
        &self.pipe.dir
    }

    /// Returns the bytes the log files of both queues (append and rewrite,
    /// the active files included) take on disk: the sum of their lengths, so
    /// a preallocated file counts its whole size from its creation. The
    /// engine's disk usage for a store's capacity report, like raft-engine's
    /// `get_used_size`, and, like it, without the purged files kept for reuse
    /// (`FileStats::recycled_files`): they are space set aside for the next
    /// files, not log. It falls once `purge` deletes files.
    pub fn used_bytes(&self) -> u64 {
        // Handles are cloned out so that no lock is held across the calls.
        let files: Vec<_> = self.pipe.files.read().values().cloned().collect();
        files
            .iter()
            // A length query on an open handle does not fail on any real file
            // system; if it did, the size files are made to reach stands in.
            .map(|f| f.len().unwrap_or(self.pipe.config.target_file_size_bytes))
            .sum()
    }

    /// Returns counts of the files on disk.
    pub fn file_stats(&self) -> FileStats {
        // The append lock before `files`, as rotation takes them.
        let active = self.pipe.append.lock();
        let files = self.pipe.files.read();
        let sizes = self.append_sizes.lock();
        let append: Vec<u64> = files
            .keys()
            .filter(|id| id.queue == Queue::Append)
            .map(|id| id.seq)
            .collect();
        FileStats {
            append_files: append.len() as u64,
            rewrite_files: files.keys().filter(|id| id.queue == Queue::Rewrite).count() as u64,
            append_bytes: sizes
                .iter()
                .filter(|(seq, _)| {
                    files.contains_key(&FileId {
                        queue: Queue::Append,
                        seq: **seq,
                    })
                })
                .map(|(_, b)| *b)
                .sum::<u64>()
                + active.offset,
            first_append_seq: append.first().copied().unwrap_or(active.id.seq),
            active_append_seq: active.id.seq,
            recycled_files: self.pipe.recycled.lock().len() as u64,
        }
    }
}
