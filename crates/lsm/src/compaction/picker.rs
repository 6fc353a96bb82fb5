//! The compaction picker: which files to compact next, for leveled
//! compaction with dynamic level sizes.
//!
//! The rule (as RocksDB's `level_compaction_dynamic_level_bytes`):
//! - The last level's size sets the targets. Going up from the last level,
//!   each level's target is the one below divided by
//!   `level_size_multiplier`, until a target would fall to
//!   `base_level_bytes` or below: that level is the *base level*, the one L0
//!   compacts into. Levels between L0 and the base level are unused (target
//!   0) and stay empty. The base level never sits below the first non-empty
//!   level; in an empty tree it is the last level, so the first flushes
//!   compact straight to the bottom and the tree grows upward as data
//!   accumulates. No target of a used level is below `base_level_bytes /
//!   level_size_multiplier` (RocksDB's floor too).
//! - Without dynamic sizes, L1 is the base level with target
//!   `base_level_bytes`, and each level's target multiplies the one above.
//! - Scores (a level is due at 1 or above): L0's is its (idle) file count over `level0_compaction_trigger`,
//!   or its bytes over `base_level_bytes` if larger; a level L1+ (but the
//!   last) scores its idle bytes over its target. The level with the highest
//!   score compacts first; the last level never compacts for size.
//! - L0 compacts all its files that overlap the oldest idle file's range,
//!   widened until no file outside overlaps the inputs (a clean cut), with
//!   the base-level files that overlap them. Any busy file among them (in
//!   another compaction) makes L0 wait: a newer L0 file must never reach
//!   the base level before an older one over the same keys.
//! - A level L1+ compacts one file into the next level: of the idle files,
//!   the one whose overlap in the next level is smallest relative to its
//!   size (RocksDB's `kMinOverlappingRatio`: the least rewriting per byte
//!   moved down), with every next-level file that overlaps it. Files of an
//!   L1+ level never share a user key (the version refuses an overlap), so
//!   one file is already a clean cut.
//! - No pick includes a busy file, nor one whose output range meets a busy
//!   file of the output level (its output would overlap that compaction's).
//! - A single input file with nothing overlapping in the output level is a
//!   *trivial move*: the edit moves it without rewriting, unless it is a
//!   manual compaction into the bottommost data, which is asked to drop
//!   garbage.
//! - `bottommost`: no level below the output level holds a file overlapping
//!   the compaction's key range, so point deletions and range tombstones
//!   older than every snapshot may be dropped.

use std::sync::Arc;

use super::options::CompactionOptions;
use crate::column_family::ColumnFamilyId;
use crate::version::{FileMeta, FileNumber, Version};

/// Why a compaction was picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// L0 holds too many files (or bytes).
    Level0Files,
    /// A level L1+ is over its target size.
    LevelSize,
    /// A caller asked for a range to be compacted.
    Manual,
    /// An SST is rewritten in place to move its values out of a blob file
    /// with too much garbage (or back inline, separation off).
    BlobGc,
}

/// One compaction: the files to merge and where the output goes.
#[derive(Debug, Clone)]
pub struct Compaction {
    /// The column family whose files these are.
    pub column_family: ColumnFamilyId,
    /// The level the inputs come from.
    pub input_level: u8,
    /// The level the outputs go to (the input level itself for a manual
    /// compaction of the last level).
    pub output_level: u8,
    /// Files of `input_level`: for L0, oldest first; for L1+, by key.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Files of `output_level` that overlap the inputs, by key.
    pub overlapping: Vec<Arc<FileMeta>>,
    /// Files of the level below `output_level` that overlap the key range,
    /// by key: outputs are cut at their boundaries (`grandparents.rs`).
    pub grandparents: Vec<Arc<FileMeta>>,
    /// No level below `output_level` holds a file overlapping the key range.
    pub bottommost: bool,
    /// Why it was picked.
    pub reason: CompactionReason,
    /// The score of the input level when picked (1 or more is due); 0 for
    /// manual compactions.
    pub score: f64,
    /// The single input moves to the output level without being rewritten.
    pub trivial_move: bool,
}

impl Compaction {
    /// Iterates every file the compaction reads or moves.
    pub fn files(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(&self.overlapping)
    }

    /// Returns the bytes of the input files of both levels.
    pub fn input_bytes(&self) -> u64 {
        self.files().map(|f| f.size()).sum()
    }

    /// Returns the smallest and largest user key of the input files.
    pub fn key_range(&self) -> (Vec<u8>, Vec<u8>) {
        range_of(self.files()).unwrap_or_default()
    }
}

/// Returns the user-key range `[smallest, largest]` of `files`.
fn range_of<'a>(files: impl Iterator<Item = &'a Arc<FileMeta>>) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut range: Option<(&[u8], &[u8])> = None;
    for f in files {
        let (s, l) = (f.smallest().user_key(), f.largest().user_key());
        range = Some(match range {
            None => (s, l),
            Some((rs, rl)) => (rs.min(s), rl.max(l)),
        });
    }
    range.map(|(s, l)| (s.to_vec(), l.to_vec()))
}

/// Returns the level L0 compacts into; see the module doc.
pub fn base_level(version: &Version, opts: &CompactionOptions) -> usize {
    shape(version, opts).0
}

/// Returns the target bytes of each level (0 for L0, whose trigger is a file
/// count, and for unused levels above the base level); see the module doc.
pub fn level_targets(version: &Version, opts: &CompactionOptions) -> Vec<u64> {
    shape(version, opts).1
}

/// Computes the base level and the targets of every level.
fn shape(version: &Version, opts: &CompactionOptions) -> (usize, Vec<u64>) {
    let levels = version.num_levels();
    let mut targets = vec![0u64; levels];
    if levels < 2 {
        return (0, targets);
    }
    let mult = opts.level_size_multiplier.max(2);
    let base_bytes = opts.base_level_bytes.max(1);
    if !opts.dynamic_level_bytes {
        let mut t = base_bytes;
        for target in targets.iter_mut().skip(1) {
            *target = t;
            t = t.saturating_mul(mult);
        }
        return (1, targets);
    }
    let last = levels - 1;
    let first_non_empty = (1..levels).find(|&l| version.level_len(l) > 0);
    let max_bytes = (1..levels)
        .map(|l| version.level_bytes(l))
        .max()
        .unwrap_or(0);
    let (base, base_target) = match first_non_empty {
        None => (last, base_bytes),
        Some(first) => {
            // The size the first non-empty level would have if the
            // biggest level's size were divided down to it.
            let mut size = max_bytes;
            for _ in first..last {
                size /= mult;
            }
            let mut base = first;
            while base > 1 && size > base_bytes {
                base -= 1;
                size /= mult;
            }
            (base, size.min(base_bytes).max(1))
        }
    };
    let mut t = base_target;
    // No used level below base_level_bytes / level_size_multiplier (a
    // tenth at the default): a tree whose upper levels are tiny would
    // compact them for every few flushes. The floor was base_level_bytes itself until a
    // 1 KiB overwrite of 2 GiB (`docs/bench/lsm-vs-peers.md`) showed what it
    // cost: the base level held at 256 MiB where the last level's size
    // asked for about 110, every compaction out of L0 rewrote all of it,
    // each took seconds, and L0 reached the writers' slowdown.
    let floor = (base_bytes / mult).max(1);
    for (l, target) in targets.iter_mut().enumerate().skip(base) {
        if l > base {
            t = t.saturating_mul(mult);
        }
        *target = t.max(floor);
    }
    (base, targets)
}

/// Returns the estimated compaction debt in bytes: what compactions would
/// rewrite to bring every level within its target (RocksDB's
/// `EstimateCompactionBytesNeeded`). The engine paces writes by it.
pub fn pending_compaction_bytes(version: &Version, opts: &CompactionOptions) -> u64 {
    let (base, targets) = shape(version, opts);
    let levels = version.num_levels();
    let mut pending: u64 = 0;
    let l0 = version.level_bytes(0);
    let l0_due = version.level_len(0) >= opts.level0_compaction_trigger.max(1)
        || l0 >= opts.base_level_bytes;
    // Bytes flowing down into the next level by the compactions counted.
    let mut inflow = 0u64;
    if l0_due {
        // L0 merges with (about) the whole base level, even the last.
        pending = l0.saturating_add(version.level_bytes(base));
        inflow = l0;
    }
    for (l, &target) in targets.iter().enumerate().take(levels - 1).skip(base) {
        let own = version.level_bytes(l);
        let size = own.saturating_add(inflow);
        inflow = 0;
        if size > target {
            let excess = size - target;
            inflow = excess;
            let below = version.level_bytes(l + 1);
            if below > 0 {
                // Moving `excess` down rewrites the overlap below too, in
                // proportion of the two levels' sizes.
                let fanout = below as f64 / size as f64 + 1.0;
                pending = pending.saturating_add((excess as f64 * fanout) as u64);
            }
        }
    }
    pending
}

/// Returns the score of each level (0 for levels that cannot compact).
fn scores(
    version: &Version,
    opts: &CompactionOptions,
    base: usize,
    targets: &[u64],
    busy: &dyn Fn(FileNumber) -> bool,
) -> Vec<f64> {
    let levels = version.num_levels();
    let mut scores = vec![0.0; levels];
    let idle = |l: usize| -> (usize, u64) {
        version.level(l).map_or((0, 0), |level| {
            level
                .iter()
                .filter(|f| !busy(f.number()))
                .fold((0, 0), |(n, b), f| (n + 1, b + f.size()))
        })
    };
    let (files, bytes) = idle(0);
    if files > 0 {
        let by_files = files as f64 / opts.level0_compaction_trigger.max(1) as f64;
        let by_bytes = bytes as f64 / opts.base_level_bytes.max(1) as f64;
        scores[0] = by_files.max(by_bytes);
    }
    for l in base.max(1)..levels - 1 {
        let (_, bytes) = idle(l);
        if targets[l] > 0 {
            scores[l] = bytes as f64 / targets[l] as f64;
        }
    }
    scores
}

/// Picks the most urgent compaction, if any level is due (score 1 or more)
/// and a compaction of it can run beside the busy files; see the module
/// doc. `busy` says which files other compactions hold.
pub fn pick(
    version: &Version,
    opts: &CompactionOptions,
    busy: &dyn Fn(FileNumber) -> bool,
) -> Option<Compaction> {
    if version.num_levels() < 2 {
        return None;
    }
    let (base, targets) = shape(version, opts);
    let scores = scores(version, opts, base, &targets, busy);
    // At 1 a level is due: L0 compacts when it reaches its trigger.
    let mut order: Vec<usize> = (0..scores.len()).filter(|&l| scores[l] >= 1.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    for level in order {
        let picked = if level == 0 {
            pick_level0(version, base, busy)
        } else {
            pick_level(version, level, busy)
        };
        if let Some((inputs, overlapping, output)) = picked {
            let reason = if level == 0 {
                CompactionReason::Level0Files
            } else {
                CompactionReason::LevelSize
            };
            return Some(build(
                version,
                level,
                output,
                inputs,
                overlapping,
                reason,
                scores[level],
            ));
        }
    }
    None
}

/// Picks the files of `level` overlapping `[start, end]` (user keys, both
/// inclusive, `None` unbounded) for a manual compaction: L0 into the base
/// level (all overlapping L0 files, widened to a clean cut), L1+ into the
/// next level, the last level into itself (to drop garbage). None when the
/// range holds no file of `level`, when a file it needs is busy, or when
/// `level` is past the last level.
pub fn pick_manual(
    version: &Version,
    opts: &CompactionOptions,
    level: u8,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
    busy: &dyn Fn(FileNumber) -> bool,
) -> Option<Compaction> {
    let level = usize::from(level);
    let levels = version.num_levels();
    if level >= levels {
        return None;
    }
    let last = levels - 1;
    let (inputs, output) = if level == 0 {
        let seeds: Vec<Arc<FileMeta>> = version
            .files_in_range(0, start, end)
            .into_iter()
            .cloned()
            .collect();
        if seeds.is_empty() {
            return None;
        }
        (level0_closure(version, seeds), base_level(version, opts))
    } else {
        let inputs: Vec<Arc<FileMeta>> = version
            .files_in_range(level, start, end)
            .into_iter()
            .cloned()
            .collect();
        (inputs, if level == last { last } else { level + 1 })
    };
    if inputs.is_empty() || inputs.iter().any(|f| busy(f.number())) {
        return None;
    }
    let overlapping = if output == level {
        Vec::new()
    } else {
        overlap_in(version, output, &inputs)
    };
    if output_blocked(version, output, &inputs, &overlapping, busy) {
        return None;
    }
    Some(build(
        version,
        level,
        output,
        inputs,
        overlapping,
        CompactionReason::Manual,
        0.0,
    ))
}

/// L0 files, oldest first, widened until no other L0 file overlaps them.
fn level0_closure(version: &Version, seeds: Vec<Arc<FileMeta>>) -> Vec<Arc<FileMeta>> {
    let mut inputs = seeds;
    loop {
        let (lo, hi) = range_of(inputs.iter()).expect("at least one file");
        let wider: Vec<Arc<FileMeta>> = version
            .files_in_range(0, Some(&lo), Some(&hi))
            .into_iter()
            .cloned()
            .collect();
        if wider.len() == inputs.len() {
            break;
        }
        inputs = wider;
    }
    // The level lists newest first; compactions read oldest first.
    inputs.sort_by_key(|f| (f.desc().largest_seqno, f.number()));
    inputs
}

/// The files of `level` overlapping the range of `inputs`.
fn overlap_in(version: &Version, level: usize, inputs: &[Arc<FileMeta>]) -> Vec<Arc<FileMeta>> {
    match range_of(inputs.iter()) {
        Some((lo, hi)) => version
            .files_in_range(level, Some(&lo), Some(&hi))
            .into_iter()
            .cloned()
            .collect(),
        None => Vec::new(),
    }
}

/// Returns true when the output would meet a busy file of the output level.
fn output_blocked(
    version: &Version,
    output: usize,
    inputs: &[Arc<FileMeta>],
    overlapping: &[Arc<FileMeta>],
    busy: &dyn Fn(FileNumber) -> bool,
) -> bool {
    if overlapping.iter().any(|f| busy(f.number())) {
        return true;
    }
    let Some((lo, hi)) = range_of(inputs.iter().chain(overlapping)) else {
        return false;
    };
    version
        .files_in_range(output, Some(&lo), Some(&hi))
        .iter()
        .any(|f| busy(f.number()))
}

type Picked = (Vec<Arc<FileMeta>>, Vec<Arc<FileMeta>>, usize);

fn pick_level0(
    version: &Version,
    base: usize,
    busy: &dyn Fn(FileNumber) -> bool,
) -> Option<Picked> {
    let l0 = version.level(0)?;
    // The oldest idle file seeds the pick: L0 drains oldest first.
    let oldest = l0.iter().filter(|f| !busy(f.number())).last()?.clone();
    let inputs = level0_closure(version, vec![oldest]);
    if inputs.iter().any(|f| busy(f.number())) {
        return None;
    }
    let overlapping = overlap_in(version, base, &inputs);
    if output_blocked(version, base, &inputs, &overlapping, busy) {
        return None;
    }
    Some((inputs, overlapping, base))
}

fn pick_level(
    version: &Version,
    level: usize,
    busy: &dyn Fn(FileNumber) -> bool,
) -> Option<Picked> {
    let output = level + 1;
    let mut candidates: Vec<(f64, Arc<FileMeta>, Vec<Arc<FileMeta>>)> = version
        .level(level)?
        .iter()
        .filter(|f| !busy(f.number()))
        .map(|f| {
            let inputs = std::slice::from_ref(f);
            let overlapping = overlap_in(version, output, inputs);
            let over: u64 = overlapping.iter().map(|o| o.size()).sum();
            (over as f64 / f.size().max(1) as f64, f.clone(), overlapping)
        })
        .collect();
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
    candidates.into_iter().find_map(|(_, f, overlapping)| {
        let inputs = vec![f];
        (!output_blocked(version, output, &inputs, &overlapping, busy)).then_some((
            inputs,
            overlapping,
            output,
        ))
    })
}

/// Completes a pick: bottommost detection and the trivial-move decision.
pub(super) fn build(
    version: &Version,
    input: usize,
    output: usize,
    inputs: Vec<Arc<FileMeta>>,
    overlapping: Vec<Arc<FileMeta>>,
    reason: CompactionReason,
    score: f64,
) -> Compaction {
    let (lo, hi) = range_of(inputs.iter().chain(&overlapping)).unwrap_or_default();
    let below = |l: usize| version.files_in_range(l, Some(&lo), Some(&hi));
    // The files of the level below the output, read once for both uses.
    let mut grandparents: Vec<Arc<FileMeta>> = if output + 1 < version.num_levels() {
        below(output + 1).into_iter().cloned().collect()
    } else {
        Vec::new()
    };
    let bottommost =
        grandparents.is_empty() && (output + 2..version.num_levels()).all(|l| below(l).is_empty());
    if output == 0 {
        // An output to L0 (an in-place rewrite) stays one file, as a
        // flush's does: L0 is ordered by seqno, not cut by key.
        grandparents.clear();
    }
    let trivial_move = input != output
        && inputs.len() == 1
        && overlapping.is_empty()
        && !(reason == CompactionReason::Manual && bottommost);
    Compaction {
        column_family: version.column_family(),
        input_level: input as u8,
        output_level: output as u8,
        inputs,
        overlapping,
        grandparents,
        bottommost,
        reason,
        score,
        trivial_move,
    }
}
