//! A compaction job: runs a picked [`Compaction`] and describes its result
//! as a [`VersionEdit`] for the engine to install.
//!
//! The inputs of both levels are merged (one SST iterator per file, and the
//! range tombstones of every file) and written through
//! [`write_sorted_run_with_stats`] to the output level. The edit deletes
//! every input and adds every output (blob files included, when the run
//! separates values); a trivial move deletes and re-adds
//! the one input file at the output level, reading and writing nothing.
//! Nothing here touches the current version: the engine installs the edit
//! (or, on error, deletes nothing: the run removed its own outputs).

use super::output::{write_sorted_run_with_stats, OutputContext};
use super::picker::Compaction;
use crate::error::{Error, Result};
use crate::iter::{MergingIterator, RangeTombstone};
use crate::sst::{SstIter, SstReader};
use crate::version::{FileMeta, VersionEdit};

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Bytes of the input files read (0 for a trivial move).
    pub bytes_read: u64,
    /// Bytes of the output files written.
    pub bytes_written: u64,
    /// Input files (of both levels).
    pub files_in: u64,
    /// Output files.
    pub files_out: u64,
    /// Point entries read.
    pub entries_in: u64,
    /// Point entries written.
    pub entries_out: u64,
    /// Point entries dropped (hidden, covered, deleted or filtered out).
    pub entries_dropped: u64,
    /// Range tombstones dropped at bottommost.
    pub range_tombstones_dropped: u64,
    /// The compaction moved its one file without rewriting it.
    pub trivial_move: bool,
}

/// Runs `c`: opens each input with `open_table`, merges, writes the outputs
/// at `c.output_level` and returns the edit and the counts. `ctx`'s
/// `bottommost` and `output_level` are taken from `c`.
pub fn run_compaction(
    c: &Compaction,
    open_table: &dyn Fn(&FileMeta) -> Result<SstReader>,
    ctx: &OutputContext,
) -> Result<(VersionEdit, CompactionStats)> {
    let mut edit = VersionEdit {
        column_family: c.column_family,
        ..VersionEdit::default()
    };
    for f in &c.inputs {
        edit.delete_file(c.input_level, f.number());
    }
    for f in &c.overlapping {
        edit.delete_file(c.output_level, f.number());
    }
    let files_in = (c.inputs.len() + c.overlapping.len()) as u64;
    if c.trivial_move {
        if c.inputs.len() != 1 || !c.overlapping.is_empty() || c.input_level == c.output_level {
            return Err(Error::InvalidArgument(
                "compaction: a trivial move takes one file to another level, over nothing".into(),
            ));
        }
        edit.add_file(c.output_level, c.inputs[0].desc().clone());
        let stats = CompactionStats {
            files_in,
            files_out: 1,
            trivial_move: true,
            ..CompactionStats::default()
        };
        return Ok((edit, stats));
    }
    let mut children: Vec<SstIter> = Vec::with_capacity(files_in as usize);
    let mut tombstones = Vec::new();
    for f in c.files() {
        let reader = open_table(f)?;
        tombstones.extend(reader.range_tombstones().iter().map(|t| RangeTombstone {
            start: t.start.clone(),
            end: t.end.clone(),
            seqno: t.seqno,
        }));
        children.push(reader.iter_without_filling_cache());
    }
    let mut input = MergingIterator::new(children);
    let ctx = OutputContext {
        bottommost: c.bottommost,
        output_level: c.output_level,
        grandparents: &c.grandparents,
        ..ctx.clone()
    };
    let (outputs, run) = write_sorted_run_with_stats(&mut input, tombstones, &ctx)?;
    edit.next_file_number = outputs
        .iter()
        .map(|d| d.number + 1)
        .chain(run.blob_files.iter().map(|b| b.number + 1))
        .max();
    for b in &run.blob_files {
        edit.add_blob_file(*b);
    }
    let stats = CompactionStats {
        bytes_read: c.input_bytes(),
        bytes_written: run.bytes_written,
        files_in,
        files_out: outputs.len() as u64,
        entries_in: run.entries_in,
        entries_out: run.entries_out,
        entries_dropped: run.entries_dropped,
        range_tombstones_dropped: run.range_tombstones_dropped,
        trivial_move: false,
    };
    for d in outputs {
        edit.add_file(c.output_level, d);
    }
    Ok((edit, stats))
}
