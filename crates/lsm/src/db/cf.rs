//! Column families as the engine holds them: each has its own memtables and
//! LSM tree (one [`Installer`] publishing its read state), and all share the
//! WAL, the sequence numbers and the manifest.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use super::options::ColumnFamilyOptions;
use crate::column_family::ColumnFamilyId;
use crate::compaction::{BlobOutput, GcPolicy};
use crate::error::{Error, Result};
use crate::read_state::Installer;

/// Longest column-family name, in bytes.
pub const COLUMN_FAMILY_NAME_MAX: usize = 255;

/// Name of the column family every database has and none can drop.
pub const DEFAULT_COLUMN_FAMILY_NAME: &str = "default";

/// Checks a column-family name: 1 to 255 bytes.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > COLUMN_FAMILY_NAME_MAX {
        return Err(Error::InvalidArgument(format!(
            "column family name of {} bytes: must be 1 to {COLUMN_FAMILY_NAME_MAX}",
            name.len()
        )));
    }
    Ok(())
}

/// One column family's state.
pub(crate) struct CfState {
    pub id: ColumnFamilyId,
    pub name: String,
    pub options: ColumnFamilyOptions,
    pub installer: Installer,
    /// Set when the family is dropped: writes to it fail, its background
    /// work stops, and its files go once the last handle and reader let go.
    pub dropped: AtomicBool,
    /// The compaction debt of the last persisted version, which writers pace
    /// themselves by: computed once per install, not once per write.
    pub compaction_debt: AtomicU64,
    /// Values of at least this many bytes go to blob files when flushed or
    /// compacted; [`SEPARATION_OFF`] keeps them inline. Set at open from
    /// the options, changed online by `Db::set_min_blob_size`.
    pub min_blob_size: AtomicU64,
    /// Value bytes the blob collections dearer than `garbage_ratio` may
    /// still relocate ([`GcCredit`]).
    pub gc_credit: GcCredit,
}

/// What the dearer blob collections may spend: [`GC_CREDIT_PER_BYTE`]
/// bytes relocated per value byte a flush writes to blob files, earned as
/// flushes install and spent by each in-place rewrite below
/// `garbage_ratio` (its relocated value bytes); the dear collections run
/// only while it is positive. At most the family's value bytes in blob
/// files are banked (one rewrite of them all), so a long load with no
/// garbage does not pay for dear collections long after.
///
/// Why: a space target that would cost more (an overwrite in bursts with
/// pauses between spreads garbage thinly over every file, and collecting
/// files a twentieth garbage rewrites 19 bytes per byte freed) is let slip
/// until later writes pay for the next collection, rather than rewriting
/// values over and over; a one-off overwrite is collected down to the
/// target.
#[derive(Debug)]
pub(crate) struct GcCredit(AtomicI64);

/// Value bytes the dearer blob collections may relocate per value byte
/// flushed into blob files: collecting at `1 - 1/3` garbage costs 2 bytes
/// per byte freed, so under bursts the files gather about a third of
/// garbage before the collections keep up, and the value bytes written
/// stay within 3 per byte flushed.
pub(crate) const GC_CREDIT_PER_BYTE: i64 = 2;

impl GcCredit {
    /// The credit at open: as if the writes that left `garbage_bytes` of
    /// value bytes unreferenced in blob files had just been flushed, at
    /// most `cap` (the family's value bytes in blob files).
    pub fn new(garbage_bytes: u64, cap: u64) -> GcCredit {
        let credit = signed(garbage_bytes).saturating_mul(GC_CREDIT_PER_BYTE);
        GcCredit(AtomicI64::new(credit.min(signed(cap))))
    }

    /// A flush wrote `value_bytes` into blob files; the family now holds
    /// `cap` value bytes in them, the most the credit may reach.
    pub fn earn(&self, value_bytes: u64, cap: u64) {
        let earned = signed(value_bytes).saturating_mul(GC_CREDIT_PER_BYTE);
        let cap = signed(cap);
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                // A credit over a cap that shrank is kept, not cut.
                Some(c.saturating_add(earned).min(cap.max(c)))
            });
    }

    /// An in-place rewrite below `garbage_ratio` relocated `value_bytes`.
    pub fn spend(&self, value_bytes: u64) {
        let spent = signed(value_bytes);
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                Some(c.saturating_sub(spent))
            });
    }

    /// True while the dearer collections may run.
    pub fn available(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

/// A byte count as the credit's signed type (saturating).
fn signed(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// `CfState::min_blob_size` when separation is off.
pub(crate) const SEPARATION_OFF: u64 = u64::MAX;

/// The initial `CfState::min_blob_size` of a family with `options`.
pub(crate) fn min_blob_size_cell(options: &ColumnFamilyOptions) -> AtomicU64 {
    AtomicU64::new(options.blob.min_blob_size.unwrap_or(SEPARATION_OFF))
}

impl fmt::Debug for CfState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CfState")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl CfState {
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// When blob files are collected, as of now: with writers paused for
    /// `writers_idle`, the dearer collections run while the family has
    /// credit for them.
    pub fn gc_policy(&self, writers_idle: bool) -> GcPolicy {
        let writers_idle = writers_idle && self.gc_credit.available();
        GcPolicy {
            garbage_ratio: self.options.blob.garbage_ratio,
            space_amp_target: self.options.blob.space_amp_target,
            space_amp_limit: self.options.blob.space_amp_limit,
            max_relocate_bytes: self.options.blob.max_relocate_bytes,
            writers_idle,
            all: self.blob_output().is_none(),
        }
    }

    /// How a flush or compaction starting now separates values.
    pub fn blob_output(&self) -> Option<BlobOutput> {
        let min = self.min_blob_size.load(Ordering::Acquire);
        (min != SEPARATION_OFF).then(|| BlobOutput {
            min_value_bytes: min,
            writer_options: self.options.blob.writer_options(),
            target_file_bytes: self.options.blob.target_file_bytes,
            column_family: self.id,
        })
    }
}

/// The live column families, published as a whole behind an `ArcSwap`:
/// writers look ids up without a lock; create and drop publish a new set.
#[derive(Debug, Clone, Default)]
pub(crate) struct CfSet {
    pub by_id: HashMap<ColumnFamilyId, Arc<CfState>>,
    pub by_name: BTreeMap<String, ColumnFamilyId>,
}

impl CfSet {
    pub fn get(&self, id: ColumnFamilyId) -> Option<&Arc<CfState>> {
        self.by_id.get(&id)
    }

    pub fn with(&self, cf: Arc<CfState>) -> CfSet {
        let mut next = self.clone();
        next.by_name.insert(cf.name.clone(), cf.id);
        next.by_id.insert(cf.id, cf);
        next
    }

    pub fn without(&self, id: ColumnFamilyId) -> CfSet {
        let mut next = self.clone();
        if let Some(cf) = next.by_id.remove(&id) {
            next.by_name.remove(&cf.name);
        }
        next
    }
}

/// A handle on a column family, for reads and for filling batches. Cheap
/// to clone. A handle of a dropped family gets `InvalidArgument` from every
/// call.
#[derive(Clone)]
pub struct ColumnFamily {
    pub(crate) state: Arc<CfState>,
}

impl fmt::Debug for ColumnFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ColumnFamily")
            .field("id", &self.state.id)
            .field("name", &self.state.name)
            .finish()
    }
}

impl ColumnFamily {
    /// The family's id, which `WriteBatch` methods take.
    pub fn id(&self) -> ColumnFamilyId {
        self.state.id
    }

    /// The family's name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// The family's options.
    pub fn options(&self) -> &ColumnFamilyOptions {
        &self.state.options
    }

    pub(crate) fn live(&self) -> Result<&Arc<CfState>> {
        if self.state.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "column family {:?} was dropped",
                self.state.name
            )));
        }
        Ok(&self.state)
    }
}
