//! Writing sorted runs: the one place where flush and compaction turn a
//! sorted stream of internal keys into SST files, dropping what no reader
//! can see any more.
//!
//! Garbage collection (snapshot stripes). The live snapshots `s1 < s2 < ..
//! < sk` cut the seqno space into stripes `[0, s1]`, `(s1, s2]`, ..,
//! `(sk, MAX]`; every reader (each snapshot, and the latest view) sees
//! either all of a stripe or none of it. So, for each user key:
//! - in each stripe only the newest version is kept: the others are hidden
//!   from every reader by it;
//! - a version covered by a range tombstone newer than it in the same
//!   stripe is dropped (every reader that sees the version sees the
//!   tombstone);
//! - a point deletion in the oldest stripe is dropped when the output is
//!   `bottommost` (nothing below can hold an older version for it to hide);
//!   the older versions it hid are in that stripe too, and go with it;
//! - the compaction filter sees a key's newest version only when it is a
//!   `Put` newer than every snapshot (in the top stripe, which with no
//!   snapshots is the whole history): no snapshot can see that version, so
//!   removing or changing it changes nothing a snapshot reads. `Remove`
//!   turns the version into a point deletion, which then follows the rule
//!   above (dropped only at bottommost in the oldest stripe);
//! - a kept `BlobIndex` whose blob file blob GC collects has its value read
//!   and written again as a `Put` (then separated or inline by the usual
//!   rule); the filter has seen it as a reference;
//! - nothing is ever reordered, and sequence numbers are kept.
//!
//! Range tombstones travel beside the point stream. One older than every
//! snapshot is dropped at bottommost (what it covered is dropped with it,
//! and nothing lies below); every other one is carried into each output
//! file whose key range it meets, truncated to that range. The outputs
//! partition the user-key space: file `j` covers `[lo_j, hi_j)` where
//! `hi_j = lo_{j+1}` is the immediate successor (`key ++ 0x00`) of file
//! `j`'s last user key, the first file starts at the bottom and the last
//! ends at the top. So a tombstone over a gap between two files' keys
//! stays in the file after the gap, where a reader consulting the files
//! for a key in the gap (of a lower level) finds it, and the files' ranges
//! stay disjoint. A file's smallest and largest keys cover the tombstones
//! it holds: a tombstone start is `(start, seqno, RangeDelete)`; an end not
//! cut at `hi_j` is the sentinel `(end, MAX_SEQNO, RangeDelete)`, which the
//! version reads as an inclusive bound one key wider than needed (harmless:
//! a compaction of that range takes the neighbour that starts at `end`).
//!
//! Output cutting: a file is closed once its estimated size reaches
//! `target_file_bytes`, or earlier at a boundary of the files of the level
//! below the output (`grandparents.rs`), always at a change of user key: two
//! versions of one user key are never split between files, so that L1+ files
//! never share a user key. Each file is synced by the SST writer; the directory is synced
//! once after the last. On any error the files already written are removed
//! and the error returned.

use std::path::Path;
use std::sync::Arc;

use strata_fs::FileSystem;

use super::blob_gc::BlobGc;
use super::outputs::Outputs;
use super::rate_limiter::RateLimiter;
use super::separate::BlobOutput;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, RangeTombstone, RangeTombstoneSet};
use crate::key::{self, SeqNo, ValueKind, MAX_SEQNO};
use crate::sst::SstWriterOptions;
use crate::version::{BlobFileDesc, FileDesc, FileMeta, FileNumber};

/// Decides the fate of a key's newest value during compaction (the user's
/// hook, e.g. TiKV's MVCC garbage collection); see the module doc for which
/// versions it is shown.
pub trait CompactionFilter: Send + Sync {
    /// The filter's name, for logs.
    fn name(&self) -> &str;
    /// Returns what to do with `value` of `user_key`, being written to
    /// `level`.
    fn filter(&self, level: u8, user_key: &[u8], value: &[u8]) -> FilterDecision;
}

/// What a compaction filter decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterDecision {
    /// Write the version unchanged.
    Keep,
    /// Delete the key: a point deletion is written at the version's seqno
    /// (nothing at all when that deletion may itself be dropped).
    Remove,
    /// Write this value instead, at the same seqno.
    ChangeValue(Vec<u8>),
}

/// Where and how a sorted run is written.
#[derive(Clone)]
pub struct OutputContext<'a> {
    /// The file system of the outputs.
    pub fs: &'a dyn FileSystem,
    /// The directory of the outputs (synced once after them).
    pub dir: &'a Path,
    /// The layout of each output file.
    pub writer_options: SstWriterOptions,
    /// Size at which an output file is closed (at the next user key).
    pub target_file_bytes: u64,
    /// Files of the level below the output level over the run's key range,
    /// by key (empty for flushes and the last level): outputs past half the
    /// target size close at their boundaries (`grandparents.rs`).
    pub grandparents: &'a [Arc<FileMeta>],
    /// Allocates the number of each output file.
    pub new_file_number: &'a dyn Fn() -> FileNumber,
    /// The live snapshots' seqnos (any order; sorted here).
    pub snapshots: &'a [SeqNo],
    /// No level below the output holds data in the run's key range.
    pub bottommost: bool,
    /// The compaction filter, if any.
    pub filter: Option<&'a dyn CompactionFilter>,
    /// The level the outputs go to (shown to the filter).
    pub output_level: u8,
    /// Paces the bytes written, if set.
    pub rate_limiter: Option<&'a RateLimiter>,
    /// Makes the properties collectors of each output file (user
    /// properties: TiKV's MVCC and range statistics live there).
    pub collectors: Option<&'a CollectorFactory>,
    /// Key-value separation: which values go to blob files, and how (None:
    /// every value stays inline; references already in the input stay
    /// references either way).
    pub blob: Option<BlobOutput>,
    /// Blob GC: the references whose values the run moves (through `blob`,
    /// or inline). None: every reference is copied as it is.
    pub blob_gc: Option<&'a BlobGc<'a>>,
}

/// Makes a fresh set of properties collectors for one file.
pub type CollectorFactory = dyn Fn() -> Vec<Box<dyn crate::sst::PropertiesCollector>> + Send + Sync;

impl std::fmt::Debug for OutputContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputContext")
            .field("dir", &self.dir)
            .field("target_file_bytes", &self.target_file_bytes)
            .field("snapshots", &self.snapshots)
            .field("bottommost", &self.bottommost)
            .field("filter", &self.filter.map(|x| x.name().to_string()))
            .field("output_level", &self.output_level)
            .finish_non_exhaustive()
    }
}

/// Counts of one sorted run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Point entries read from the input.
    pub entries_in: u64,
    /// Point entries written.
    pub entries_out: u64,
    /// Point entries dropped (hidden, covered, deleted or filtered out).
    pub entries_dropped: u64,
    /// Range tombstones given.
    pub range_tombstones_in: u64,
    /// Range tombstones dropped at bottommost.
    pub range_tombstones_dropped: u64,
    /// Bytes of the output files (blob files included).
    pub bytes_written: u64,
    /// Bytes of the blob files among them.
    pub blob_bytes_written: u64,
    /// The blob files written, with the SSTs whose references point there.
    pub blob_files: Vec<BlobFileDesc>,
    /// Separated values read back by blob GC and written again.
    pub blob_values_relocated: u64,
    /// Their bytes.
    pub blob_bytes_relocated: u64,
}

/// Returns the name of SST file `number` in its directory.
pub fn sst_file_name(number: FileNumber) -> String {
    format!("{number:016x}.sst")
}

/// Returns the name of blob file `number` in its directory.
pub fn blob_file_name(number: FileNumber) -> String {
    format!("{number:016x}.blob")
}

/// Writes the entries of `input` (positioned anywhere; it is rewound) and
/// `range_tombstones` as a sorted run of SST files, applying the rules of
/// the module doc, and returns the files' descriptions in key order.
pub fn write_sorted_run(
    input: &mut dyn InternalIterator,
    range_tombstones: Vec<RangeTombstone>,
    ctx: &OutputContext,
) -> Result<Vec<FileDesc>> {
    write_sorted_run_with_stats(input, range_tombstones, ctx).map(|(files, _)| files)
}

/// [`write_sorted_run`], with the run's counts.
pub fn write_sorted_run_with_stats(
    input: &mut dyn InternalIterator,
    range_tombstones: Vec<RangeTombstone>,
    ctx: &OutputContext,
) -> Result<(Vec<FileDesc>, RunStats)> {
    let mut out = Outputs::new(ctx);
    match run(input, range_tombstones, ctx, &mut out) {
        Ok(stats) => Ok((out.done, stats)),
        Err(e) => {
            out.abandon();
            Err(e)
        }
    }
}

fn run(
    input: &mut dyn InternalIterator,
    range_tombstones: Vec<RangeTombstone>,
    ctx: &OutputContext,
    out: &mut Outputs,
) -> Result<RunStats> {
    if ctx.target_file_bytes == 0 {
        return Err(Error::InvalidArgument(
            "sorted run: target_file_bytes must be above 0".into(),
        ));
    }
    ctx.writer_options.validate()?;
    let mut stats = RunStats {
        range_tombstones_in: range_tombstones.len() as u64,
        ..RunStats::default()
    };
    let stripes = Stripes::new(ctx.snapshots);
    // One fragmented view per stripe: a version is covered in its stripe
    // when the newest tombstone at or below the stripe's top is newer.
    let covering: Vec<RangeTombstoneSet> = stripes
        .uppers
        .iter()
        .map(|&u| RangeTombstoneSet::new(&range_tombstones, u))
        .collect();
    let mut kept: Vec<RangeTombstone> = range_tombstones
        .into_iter()
        .filter(|t| t.start < t.end && !(ctx.bottommost && stripes.of(t.seqno) == 0))
        .collect();
    kept.sort_by(|a, b| (&a.start, b.seqno, &a.end).cmp(&(&b.start, a.seqno, &b.end)));
    kept.dedup();
    stats.range_tombstones_dropped = stats.range_tombstones_in - kept.len() as u64;
    out.tombstones = kept;

    let mut user_key: Vec<u8> = Vec::new();
    let mut seen_stripe: Option<usize> = None;
    input.seek_to_first()?;
    while input.valid() {
        stats.entries_in += 1;
        let (uk, seqno, kind) = key::parse(input.key()).map_err(|e| {
            Error::corruption(
                ctx.dir,
                0,
                format!("sorted run input: bad internal key: {e}"),
            )
        })?;
        if kind == ValueKind::RangeDelete {
            return Err(Error::corruption(
                ctx.dir,
                0,
                "sorted run input: a range tombstone in the point stream",
            ));
        }
        let newest = seen_stripe.is_none() || uk != user_key.as_slice();
        if newest {
            user_key.clear();
            user_key.extend_from_slice(uk);
            seen_stripe = None;
        }
        let stripe = stripes.of(seqno);
        // An older version in a stripe already seen is hidden by the newer.
        let hidden = seen_stripe == Some(stripe);
        seen_stripe = Some(stripe);
        if hidden || covering[stripe].covers(uk, seqno) {
            stats.entries_dropped += 1;
            input.next()?;
            continue;
        }
        let mut kind = kind;
        let changed;
        let mut value: &[u8] = input.value();
        if let (Some(filter), ValueKind::Put, true) = (ctx.filter, kind, newest) {
            if stripe == stripes.top() {
                match filter.filter(ctx.output_level, uk, value) {
                    FilterDecision::Keep => {}
                    FilterDecision::Remove => {
                        kind = ValueKind::Delete;
                        value = &[];
                    }
                    FilterDecision::ChangeValue(v) => {
                        changed = v;
                        value = &changed;
                    }
                }
            }
        }
        let relocated;
        if let (ValueKind::BlobIndex, Some(gc)) = (kind, ctx.blob_gc) {
            if let Some(v) = gc.relocate(ctx.dir, uk, value)? {
                relocated = v;
                value = &relocated;
                kind = ValueKind::Put;
                stats.blob_values_relocated += 1;
                stats.blob_bytes_relocated += value.len() as u64;
            }
        }
        if kind == ValueKind::Delete && ctx.bottommost && stripe == 0 {
            stats.entries_dropped += 1;
            input.next()?;
            continue;
        }
        // At the bottom, the version every reader sees (stripe 0: the newest
        // at or below the oldest snapshot, with nothing older below it) is
        // stored at seqno 0, as RocksDB does: no reader can tell, and a
        // block's trailers of zeros compress (about 3 bytes an entry, 0.6%
        // of the files after a fill of 1 KiB values). Every range tombstone above it is
        // newer than its real seqno, so above 0 as well.
        let seqno = if ctx.bottommost && stripe == 0 {
            0
        } else {
            seqno
        };
        out.put(uk, seqno, kind, value)?;
        stats.entries_out += 1;
        input.next()?;
    }
    out.finish()?;
    if let Some(blob) = &mut out.blob {
        stats.blob_bytes_written = blob.bytes_written;
        stats.blob_files = std::mem::take(&mut blob.done);
    }
    stats.bytes_written = out.done.iter().map(|d| d.size).sum::<u64>() + stats.blob_bytes_written;
    Ok(stats)
}

/// The snapshot stripes; stripe 0 is the oldest.
struct Stripes {
    /// The top seqno of each stripe: the sorted snapshots, then MAX_SEQNO.
    uppers: Vec<SeqNo>,
}

impl Stripes {
    fn new(snapshots: &[SeqNo]) -> Stripes {
        let mut uppers: Vec<SeqNo> = snapshots
            .iter()
            .copied()
            .filter(|&s| s < MAX_SEQNO)
            .collect();
        uppers.sort_unstable();
        uppers.dedup();
        uppers.push(MAX_SEQNO);
        Stripes { uppers }
    }

    fn of(&self, seqno: SeqNo) -> usize {
        self.uppers.partition_point(|&u| u < seqno).min(self.top())
    }

    fn top(&self) -> usize {
        self.uppers.len() - 1
    }
}
