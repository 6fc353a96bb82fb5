//! Blob garbage collection by relocation, inside compaction.
//!
//! A blob file's garbage is the value bytes no SST of the current version
//! references any more (`Version::blob_live`, exact). Rather than reading a
//! blob file to find its live values and then looking each key up (Titan's
//! foreground GC), the values are moved by the compactions that rewrite the
//! SSTs referencing them: a compaction whose inputs reference a blob file
//! with enough garbage reads each surviving reference into it and writes
//! the value again, into the run's own blob file (or inline, when it is now
//! under the threshold or separation is off). Values whose entries the
//! compaction drops are never read. Once the last SST referencing the old
//! file is rewritten, the file leaves the version.
//!
//! How much is enough is a matter of cost ([`GcPolicy`]): relocating a file
//! of garbage `g` rewrites `1 - g` live bytes to free `g`. A compaction
//! collects only files at least `garbage_ratio` (0.5) garbage, at most one
//! byte written per byte freed. When the family's blob space amplification
//! (value bytes in blob files over live ones) passes `space_amp_target`
//! (1.05) and no compaction is due, [`pick_blob_gc`] rewrites in place the
//! L1+ SST holding most of the file with the most garbage. Under writes it
//! collects only files at `garbage_ratio` too: a file a fifth garbage costs
//! four bytes per byte freed now, and less once the writes go on
//! overwriting it. Once writers pause (while the family has credit for it:
//! `db/cf.rs`, `GcCredit`, 2 value bytes relocated per byte flushed), or
//! past `space_amp_limit` (2), it collects any file whose garbage alone
//! breaks the target (`1 - 1 / target`, about 0.05), until the family is
//! back under it; so a file pinned by cold SSTs is still collected. Each run relocates at most
//! `max_relocate_bytes`, worst files first, so it holds its SSTs (and the L0
//! compaction waiting for them) a bounded time; an in-place rewrite while
//! writers pause relocates four times that, since it rewrites its whole SST
//! whatever it moves.
//! With separation off, every referenced blob file is a candidate and the
//! rewrites move values back inline. All of it runs as ordinary
//! compactions: rate-limited, never on the write path.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::picker::{build, Compaction, CompactionReason};
use crate::blob::BlobRef;
use crate::error::{Error, Result};
use crate::version::{FileNumber, Version};

/// Reads a separated value: `(user key, its reference) -> value`.
pub type ReadBlobValue<'a> = dyn Fn(&[u8], &BlobRef) -> Result<Vec<u8>> + 'a;

/// What a run relocates: the references into `files`, read with `read`.
pub struct BlobGc<'a> {
    /// The blob files whose referenced values the run rewrites.
    pub files: BTreeSet<FileNumber>,
    /// Reads a value.
    pub read: &'a ReadBlobValue<'a>,
}

impl std::fmt::Debug for BlobGc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobGc")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl BlobGc<'_> {
    /// The value of a `BlobIndex` entry of the run writing into `dir` when
    /// it must move, else `None`.
    pub fn relocate(
        &self,
        dir: &Path,
        user_key: &[u8],
        reference: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let r = BlobRef::decode(reference).map_err(|e| {
            Error::corruption(dir, 0, format!("blob reference of key {user_key:?}: {e}"))
        })?;
        if !self.files.contains(&r.file_number) {
            return Ok(None);
        }
        (self.read)(user_key, &r).map(Some)
    }
}

/// The share of blob file `number`'s value bytes no SST of `version`
/// references (0 for a file the version lacks or an empty one).
pub fn garbage_ratio(version: &Version, number: FileNumber) -> f64 {
    let Some(b) = version.blob_file(number) else {
        return 0.0;
    };
    let total = b.desc().value_bytes;
    if total == 0 {
        return 0.0;
    }
    let live = version.blob_live(number).bytes.min(total);
    1.0 - live as f64 / total as f64
}

/// The value bytes in `version`'s blob files, garbage included, and the
/// live ones among them (each file's live bytes at most its own).
pub fn blob_value_and_live_bytes(version: &Version) -> (u64, u64) {
    version.blob_files().fold((0, 0), |(total, live), b| {
        let value = b.desc().value_bytes;
        let l = version.blob_live(b.number()).bytes.min(value);
        (total + value, live + l)
    })
}

/// The value bytes in `version`'s blob files over the live ones (1 when
/// it has none; infinite when none is live).
pub fn blob_space_amp(version: &Version) -> f64 {
    match blob_value_and_live_bytes(version) {
        (0, _) => 1.0,
        (_, 0) => f64::INFINITY,
        (total, live) => total as f64 / live as f64,
    }
}

/// How many times `max_relocate_bytes` an in-place rewrite relocates
/// while writers pause ([`GcPolicy::relocate_budget`]).
pub const IDLE_RELOCATE_FACTOR: u64 = 4;

/// When blob files are collected (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GcPolicy {
    /// A file at least this much garbage is always worth collecting: at
    /// most one byte rewritten per byte freed.
    pub garbage_ratio: f64,
    /// Blob value bytes over live ones that GC brings the family back
    /// under, with the cheap collections at any time and the dearer ones
    /// (files `1 - 1 / target` garbage) when writers pause.
    pub space_amp_target: f64,
    /// Over this, the dearer collections run under writes too.
    pub space_amp_limit: f64,
    /// The most referenced value bytes one compaction relocates: it holds
    /// its SSTs busy (an L0 compaction waits for them) while it copies.
    pub max_relocate_bytes: u64,
    /// Writers have paused: collections dearer than `garbage_ratio` may run.
    pub writers_idle: bool,
    /// Separation is off: every referenced file is collected (re-inlined).
    pub all: bool,
}

impl GcPolicy {
    /// The garbage ratio from which compaction `c` of a family with blob
    /// space amplification `amp` collects a file: 0 when separation is
    /// off; for an in-place rewrite ([`pick_blob_gc`]) the ratio it is
    /// picked at; for any other compaction `garbage_ratio`. Those ride on
    /// work that is due anyway, and a blob file leaves only once every SST
    /// that references it is rewritten, so the amplification they see lags
    /// what they have already relocated.
    pub fn threshold(&self, c: &Compaction, amp: f64) -> f64 {
        if self.all {
            0.0
        } else if c.reason == CompactionReason::BlobGc {
            self.in_place_ratio(amp)
        } else {
            self.garbage_ratio
        }
    }

    /// The garbage ratio an in-place rewrite collects from, at blob space
    /// amplification `amp`: deferring a dear collection while writes go on
    /// lets the files gather garbage and the collection cheapen (measured
    /// on a uniform overwrite: collecting at 0.2 garbage as soon as the
    /// family passed 1.25 wrote 2.2x the user bytes, the same file rewritten
    /// three times).
    pub fn in_place_ratio(&self, amp: f64) -> f64 {
        if self.writers_idle || amp > self.space_amp_limit {
            self.over_target_ratio()
        } else {
            self.garbage_ratio
        }
    }

    /// The most referenced value bytes compaction `c` relocates:
    /// `max_relocate_bytes`, and [`IDLE_RELOCATE_FACTOR`] times that for an
    /// in-place rewrite while writers pause. Such a rewrite reads and writes
    /// every entry of its SST whatever it relocates (at 1 KiB values an SST
    /// of references covers about 1.4 GB of values), so a small budget makes
    /// the settle after an overwrite rewrite the same SSTs again and again;
    /// with no writes, no L0 compaction waits for them.
    pub fn relocate_budget(&self, c: &Compaction) -> u64 {
        if self.writers_idle && c.reason == CompactionReason::BlobGc {
            self.max_relocate_bytes.saturating_mul(IDLE_RELOCATE_FACTOR)
        } else {
            self.max_relocate_bytes
        }
    }

    fn over_target_ratio(&self) -> f64 {
        (1.0 - 1.0 / self.space_amp_target).min(self.garbage_ratio)
    }
}

/// The blob files referenced by the inputs of `c` that it should relocate
/// out of, under `policy`: those at its threshold, most garbage first, as
/// many as fit in `max_relocate_bytes` of the inputs' references (the first
/// always).
pub fn blob_gc_candidates(
    version: &Version,
    c: &Compaction,
    policy: &GcPolicy,
) -> BTreeSet<FileNumber> {
    let threshold = policy.threshold(c, blob_space_amp(version));
    let mut referenced: HashMap<FileNumber, u64> = HashMap::new();
    for f in c.files() {
        for &(b, bytes) in &f.desc().blob_refs {
            *referenced.entry(b).or_insert(0) += bytes;
        }
    }
    let mut eligible: Vec<(f64, FileNumber, u64)> = referenced
        .into_iter()
        .map(|(b, bytes)| (garbage_ratio(version, b), b, bytes))
        .filter(|&(g, _, _)| policy.all || g >= threshold)
        .collect();
    eligible.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut chosen = BTreeSet::new();
    let mut budget = policy.relocate_budget(c);
    for (_, b, bytes) in eligible {
        if !chosen.is_empty() && bytes > budget {
            continue;
        }
        budget = budget.saturating_sub(bytes);
        chosen.insert(b);
    }
    chosen
}

/// A compaction that rewrites, in place, the L1+ SST referencing most bytes
/// of the blob file with the most garbage, when the family is over its
/// space target (or separation is off: any referenced file) and a file is
/// at [`GcPolicy::in_place_ratio`]; `None` when there is nothing to collect
/// or every candidate SST is `busy`.
pub fn pick_blob_gc(
    version: &Version,
    policy: &GcPolicy,
    busy: &dyn Fn(FileNumber) -> bool,
) -> Option<Compaction> {
    let all = policy.all;
    let amp = blob_space_amp(version);
    if !all && amp <= policy.space_amp_target {
        return None;
    }
    let ratio = policy.in_place_ratio(amp);
    let mut worst: Vec<(f64, FileNumber)> = version
        .blob_files()
        .map(|b| (garbage_ratio(version, b.number()), b.number()))
        .filter(|&(g, _)| all || g >= ratio)
        .collect();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, blob) in worst {
        let referencing = |f: &crate::version::FileMeta| {
            f.desc()
                .blob_refs
                .iter()
                .find(|&&(b, _)| b == blob)
                .map(|&(_, bytes)| bytes)
        };
        let found = version
            .iter()
            .filter(|(level, f)| *level > 0 && !busy(f.number()))
            .filter_map(|(level, f)| referencing(f).map(|bytes| (bytes, level, f)))
            .max_by_key(|&(bytes, level, f)| (bytes, std::cmp::Reverse((level, f.number()))));
        if let Some((_, level, f)) = found {
            let level = usize::from(level);
            return Some(build(
                version,
                level,
                level,
                vec![f.clone()],
                Vec::new(),
                CompactionReason::BlobGc,
                0.0,
            ));
        }
    }
    None
}
