//! A compaction job: runs a picked [`Compaction`] and describes its result
//! as a [`VersionEdit`] for the engine to install.
//!
//! The inputs of both levels are merged and written through
//! [`write_sorted_run_with_stats`] to the output level. The edit deletes
//! every input and adds every output (blob files included, when the run
//! separates values); a trivial move deletes and re-adds
//! the one input file at the output level, reading and writing nothing.
//!
//! Sources: one per L0 file (they overlap), one per sorted level (L1+),
//! which opens its files one at a time as the merge reaches them. With one
//! source per file, a manual compaction of a 10,000-file level held 10,000
//! files open (`EMFILE` beside a table cache of that size) and picked each
//! entry among 10,000 cursors: 535 s for 320 MiB. Range tombstones are read
//! up front from every file that may hold them, since they cover keys of
//! the other sources.
//!
//! Nothing here touches the current version: the engine installs the edit
//! (or, on error, deletes nothing: the run removed its own outputs).

use std::sync::Arc;

use super::output::{write_sorted_run_with_stats, OutputContext};
use super::picker::Compaction;
use crate::error::{Error, Result};
use crate::iter::{FileOpener, InternalIterator, LevelIterator, MergingIterator, RangeTombstone};
use crate::sst::{SstIter, SstReader};
use crate::version::{FileMeta, Level, VersionEdit};

/// One merged source of a compaction.
type Source<'a> = Box<dyn InternalIterator + 'a>;

/// Opens a compaction's input files as the merge reaches them; their
/// blocks do not fill the block cache (they would evict what readers use).
struct InputOpener<'a> {
    open_table: &'a dyn Fn(&FileMeta) -> Result<SstReader>,
}

impl FileOpener for InputOpener<'_> {
    type Iter = SstIter;

    fn open(&self, file: &Arc<FileMeta>) -> Result<Option<SstIter>> {
        Ok(Some((self.open_table)(file)?.iter_without_filling_cache()))
    }
}

/// The merge sources of `c` and the range tombstones of all its files.
fn open_inputs<'a>(
    c: &Compaction,
    open_table: &'a dyn Fn(&FileMeta) -> Result<SstReader>,
) -> Result<(Vec<Source<'a>>, Vec<RangeTombstone>)> {
    let mut children: Vec<Source<'a>> = Vec::new();
    let mut tombstones = Vec::new();
    let mut add_tombstones = |reader: &SstReader| {
        tombstones.extend(reader.range_tombstones().iter().map(|t| RangeTombstone {
            start: t.start.clone(),
            end: t.end.clone(),
            seqno: t.seqno,
        }));
    };
    for (level, files) in [(c.input_level, &c.inputs), (c.output_level, &c.overlapping)] {
        if files.is_empty() {
            continue;
        }
        if level == 0 {
            for f in files {
                let reader = open_table(f)?;
                add_tombstones(&reader);
                children.push(Box::new(reader.iter_without_filling_cache()));
            }
            continue;
        }
        let mut run = Level::sorted();
        for f in files {
            if f.desc().range_tombstones {
                add_tombstones(&open_table(f)?);
            }
            // A version's sorted level never overlaps; inputs that do mean
            // its metadata is damaged.
            run.insert(level, f.clone())
                .map_err(|e| Error::Corruption {
                    path: super::output::sst_file_name(f.number()).into(),
                    offset: 0,
                    reason: format!("compaction input of L{level} overlaps another: {e}"),
                })?;
        }
        children.push(Box::new(LevelIterator::new(
            run,
            None,
            None,
            InputOpener { open_table },
        )));
    }
    Ok((children, tombstones))
}

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
    let (children, tombstones) = open_inputs(c, open_table)?;
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
