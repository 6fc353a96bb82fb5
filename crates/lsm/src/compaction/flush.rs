//! Flush: immutable memtables become L0 files.
//!
//! The memtables are merged (newest first) with their range tombstones and
//! written through [`write_sorted_run_with_stats`], so a flush drops what the snapshot
//! stripes allow, as compaction does, but never a deletion: L0 is never
//! bottommost (older files below may hold what a deletion hides).

use std::sync::Arc;

use super::output::{write_sorted_run_with_stats, OutputContext};
use crate::error::Result;
use crate::iter::MergingIterator;
use crate::key::MAX_SEQNO;
use crate::memtable::Memtable;
use crate::version::{BlobFileDesc, FileDesc};

/// Writes `memtables` (newest first) to L0 files and returns their
/// descriptions, and those of the blob files their separated values went
/// to (when `ctx.blob` separates). `ctx` names the directory, the writer's options, the file
/// numbers, the snapshots, the rate limiter and the filter (None not to
/// filter at flush, as RocksDB does by default); its `bottommost` is
/// ignored (false), and its `target_file_bytes` too: a flush writes one
/// file, so that L0 gains one sorted run per flush.
pub fn flush_memtables(
    memtables: &[Arc<Memtable>],
    ctx: &OutputContext,
) -> Result<(Vec<FileDesc>, Vec<BlobFileDesc>)> {
    let mut children = Vec::with_capacity(memtables.len());
    let mut tombstones = Vec::new();
    for m in memtables {
        children.push(m.iter());
        tombstones.extend(m.range_tombstones(MAX_SEQNO));
    }
    let mut input = MergingIterator::new(children);
    let ctx = OutputContext {
        bottommost: false,
        target_file_bytes: u64::MAX,
        grandparents: &[],
        output_level: 0,
        ..ctx.clone()
    };
    let (files, stats) = write_sorted_run_with_stats(&mut input, tombstones, &ctx)?;
    Ok((files, stats.blob_files))
}
