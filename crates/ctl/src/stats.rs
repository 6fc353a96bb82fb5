//! `strata-ctl raftlog stats <dir>`: counts what a raftlog directory holds: per
//! queue its files, bytes and records (how many compressed), then the groups,
//! live entries and keys of the index rebuilt by the engine's own replay
//! (`strata_raftlog::inspect`), so they are what the engine would hold.
//!
//! Damage is counted, not described: `check` says where it is.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use strata_fs::FileSystem;
use strata_raftlog::format::{Queue, CODEC_LZ4};
use strata_raftlog::inspect::IndexReplay;
use strata_raftlog::reader::ScanEnd;

use crate::error::CtlError;
use crate::log_dir::{queue_name, Content, Listing, LogFile};
use crate::Verdict;

/// Counts of one queue.
#[derive(Debug, Default)]
struct QueueStats {
    files: u64,
    /// Sum of file sizes (preallocated space included).
    bytes: u64,
    /// Sum of the ends of the valid records.
    data_bytes: u64,
    records: u64,
    compressed_records: u64,
    /// Payload bytes before and after compression.
    raw_bytes: u64,
    stored_bytes: u64,
}

/// Prints the counts of `dir`. Reports, never judges: the verdict is always clean.
pub fn run(fs: &dyn FileSystem, dir: &Path, out: &mut impl Write) -> Result<Verdict, CtlError> {
    let listing = Listing::read(fs, dir)?;
    let mut queues: BTreeMap<Queue, QueueStats> = BTreeMap::new();
    let mut replay = IndexReplay::new();
    let mut damaged = 0u64;
    let mut unfinished = 0u64;
    for &id in &listing.files {
        // Files below a purge's hole are counted but not replayed, as in recovery.
        let replayed = listing.replayed.contains(&id);
        let file = LogFile::load(fs, &listing, id)?;
        let q = queues.entry(id.queue).or_default();
        q.files += 1;
        q.bytes += file.size;
        match &file.content {
            Content::Scanned(scan) => {
                q.data_bytes += scan.valid_end;
                for rec in &scan.records {
                    q.records += 1;
                    q.raw_bytes += rec.header.raw_len as u64;
                    q.stored_bytes += rec.header.stored_len as u64;
                    if rec.header.codec == CODEC_LZ4 {
                        q.compressed_records += 1;
                    }
                    if replayed && replay.apply(id, rec).is_err() {
                        damaged += 1;
                    }
                }
                if matches!(scan.end, ScanEnd::Damaged { .. }) {
                    damaged += 1;
                }
            }
            Content::Unfinished(_) => unfinished += 1,
            Content::BadHeader(_) => damaged += 1,
        }
    }
    for queue in [Queue::Append, Queue::Rewrite] {
        let q = queues.remove(&queue).unwrap_or_default();
        writeln!(
            out,
            "queue {}: files={} bytes={} data_bytes={} records={} compressed_records={} \
             payload_raw_bytes={} payload_stored_bytes={}",
            queue_name(queue),
            q.files,
            q.bytes,
            q.data_bytes,
            q.records,
            q.compressed_records,
            q.raw_bytes,
            q.stored_bytes
        )?;
    }
    writeln!(
        out,
        "other: recycled_files={} unfinished_files={} unknown_names={}",
        listing.recycled.len(),
        unfinished,
        listing.other.len()
    )?;
    damaged += listing.lost(replay.purged_below()).len() as u64;
    let index = replay.finish().stats();
    writeln!(
        out,
        "index: groups={} live_entries={} keys={}",
        index.groups, index.entries, index.keys
    )?;
    let hint = if damaged > 0 {
        " (run `strata-ctl raftlog check` for where)"
    } else {
        ""
    };
    writeln!(out, "damage: {damaged}{hint}")?;
    Ok(Verdict::Clean)
}
