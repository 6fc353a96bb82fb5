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
//! of garbage ratio `g` rewrites `1 - g` live bytes to free `g`, so a
//! compaction collects only files at least `garbage_ratio` (0.5) garbage.
//! When the family's blob space amplification (value bytes in blob files
//! over live ones) passes `space_amp_target` (1.25) and no compaction is
//! due, [`pick_blob_gc`] rewrites in place an L1+ SST referencing the file
//! with the most garbage (any file whose garbage alone would break the
//! target, `1 - 1 / target`, 0.2), until the family is back under it; so a
//! file pinned by cold SSTs is still collected.
//! With separation off, every referenced blob file is a candidate and the
//! rewrites move values back inline. All of it runs as ordinary
//! compactions: rate-limited, never on the write path.

use std::collections::HashSet;
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
    pub files: HashSet<FileNumber>,
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

/// The value bytes in `version`'s blob files over the live ones (1 when
/// it has none; infinite when none is live).
pub fn blob_space_amp(version: &Version) -> f64 {
    let (mut total, mut live) = (0u64, 0u64);
    for b in version.blob_files() {
        total += b.desc().value_bytes;
        live += version
            .blob_live(b.number())
            .bytes
            .min(b.desc().value_bytes);
    }
    match (total, live) {
        (0, _) => 1.0,
        (_, 0) => f64::INFINITY,
        _ => total as f64 / live as f64,
    }
}

/// When blob files are collected (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GcPolicy {
    /// A compaction collects a file at least this much garbage while the
    /// space amplification is within the target.
    pub garbage_ratio: f64,
    /// Blob value bytes over live ones that GC keeps the family under.
    pub space_amp_target: f64,
    /// Separation is off: every referenced file is collected (re-inlined).
    pub all: bool,
}

impl GcPolicy {
    /// The garbage ratio from which compaction `c` collects a file: 0 when
    /// separation is off; for an in-place rewrite picked to collect
    /// ([`pick_blob_gc`]), the ratio it was picked at, so that it always
    /// moves what it was picked for; for any other compaction
    /// `garbage_ratio`, whatever the space amplification. Those ride on
    /// work that is due anyway, and a blob file leaves only once every SST
    /// that references it is rewritten, so the amplification they see lags
    /// what they have already relocated: a lower bar for them while over
    /// the target over-collects (measured: write amplification 2.2 on a
    /// uniform overwrite, the family held at 1.06 for a 1.25 target).
    pub fn threshold(&self, c: &Compaction) -> f64 {
        if self.all {
            0.0
        } else if c.reason == CompactionReason::BlobGc {
            self.over_target_ratio()
        } else {
            self.garbage_ratio
        }
    }

    fn over_target_ratio(&self) -> f64 {
        (1.0 - 1.0 / self.space_amp_target).min(self.garbage_ratio)
    }
}

/// The blob files referenced by the inputs of `c` that it should relocate
/// out of, under `policy`.
pub fn blob_gc_candidates(
    version: &Version,
    c: &Compaction,
    policy: &GcPolicy,
) -> HashSet<FileNumber> {
    let threshold = policy.threshold(c);
    c.files()
        .flat_map(|f| f.desc().blob_refs.iter().map(|&(b, _)| b))
        .filter(|&b| policy.all || garbage_ratio(version, b) >= threshold)
        .collect()
}

/// A compaction that rewrites, in place, one L1+ SST referencing the blob
/// file with the most garbage, when the family is over its space target
/// (or separation is off: any referenced file); `None` when there is
/// nothing to collect or every candidate SST is `busy`.
pub fn pick_blob_gc(
    version: &Version,
    policy: &GcPolicy,
    busy: &dyn Fn(FileNumber) -> bool,
) -> Option<Compaction> {
    let all = policy.all;
    if !all && blob_space_amp(version) <= policy.space_amp_target {
        return None;
    }
    let ratio = policy.over_target_ratio();
    let mut worst: Vec<(f64, FileNumber)> = version
        .blob_files()
        .map(|b| (garbage_ratio(version, b.number()), b.number()))
        .filter(|&(g, _)| all || g >= ratio)
        .collect();
    if worst.is_empty() {
        return None;
    }
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, blob) in worst {
        let found = version.iter().find(|(level, f)| {
            *level > 0 && !busy(f.number()) && f.desc().blob_refs.iter().any(|&(b, _)| b == blob)
        });
        if let Some((level, f)) = found {
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
