//! Opening: read the manifest CURRENT names and rebuild each family's
//! version; check that every file it names is there; replay the WAL from
//! the oldest log number into memtables; flush those into L0; write a
//! fresh manifest (one snapshot record) with every log number past the old
//! WAL files; start a new WAL; delete everything no version names.
//!
//! Crash safety of open itself: the recovered L0 files are synced before
//! the new manifest names them, and CURRENT switches to it atomically. A
//! crash before the switch leaves the old manifest and the old WAL, which
//! the next open replays again (the new files are then leftovers); a crash
//! after it leaves old WAL files below every log number, which are skipped
//! and deleted.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use strata_fs::FileSystem;
use strata_log::group_commit::WriteQueue;

use super::background::Background;
use super::cf::{CfSet, CfState, GcCredit, DEFAULT_COLUMN_FAMILY_NAME};
use super::manifest_log::{snapshot_records, ManifestLog};
use super::options::Options;
use super::snapshot::SnapshotList;
use super::stats::Counters;
use super::{DbInner, Hooks};
use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::column_family::{ColumnFamilyId, DEFAULT_COLUMN_FAMILY};
use crate::compaction::{self, BlobOutput, OutputContext, RateLimiter};
use crate::error::{Error, Result};
use crate::manifest::{self, ManifestWriter, CURRENT_FILE_NAME};
use crate::memtable::{Memtable, MemtableList};
use crate::read_state::{Installer, ReadState};
use crate::seq::SeqAllocator;
use crate::version::{ObsoleteFiles, Version, VersionBuilder, VersionEdit};
use crate::wal::{self, WalCut, WalKeeper, WalWriter};

/// Name of the lock file held while the database is open.
pub const LOCK_FILE_NAME: &str = "LOCK";

/// What recovery found and did at open.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// True when open created a new database.
    pub created: bool,
    /// WAL files replayed, and the records in them.
    pub wal_files: Vec<u64>,
    /// Records replayed.
    pub wal_records: u64,
    /// Damage the recovery mode tolerated (a power cut's torn tail).
    pub wal_cuts: Vec<WalCut>,
    /// L0 files written from the replayed records.
    pub flushed_files: usize,
    /// Files deleted because no version named them (leftovers of a crash).
    pub removed_leftovers: Vec<String>,
}

struct Family {
    name: String,
    version: Arc<Version>,
}

fn is_engine_file(name: &str) -> bool {
    name.ends_with(".sst")
        || name.ends_with(".blob")
        || wal::parse_wal_file_name(name).is_some()
        || name == wal::POOL_FILE_NAME
        || manifest::parse_manifest_file_name(name).is_some()
}

/// Parses the number of an SST file name.
fn parse_sst_file_name(name: &str) -> Option<u64> {
    parse_numbered(name, ".sst")
}

/// Parses the number of a blob file name.
fn parse_blob_file_name(name: &str) -> Option<u64> {
    parse_numbered(name, ".blob")
}

fn parse_numbered(name: &str, suffix: &str) -> Option<u64> {
    let hex = name.strip_suffix(suffix)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

pub(super) fn open(
    fs: Arc<dyn FileSystem>,
    dir: &Path,
    options: Options,
    hooks: Hooks,
) -> Result<DbInner> {
    if !fs.exists(dir) && !options.create_if_missing {
        return Err(Error::InvalidArgument(format!(
            "{} does not exist (create_if_missing is off)",
            dir.display()
        )));
    }
    fs.create_dir_all(dir)
        .map_err(Error::io("create directory", dir))?;
    let lock_path = dir.join(LOCK_FILE_NAME);
    let lock = fs.lock(&lock_path).map_err(Error::io("lock", &lock_path))?;
    let mut report = RecoveryReport::default();
    let (queue, obsolete) = ObsoleteFiles::channel();
    let names = fs.list(dir).map_err(Error::io("list", dir))?;

    let manifest = super::inspect::replay_manifest(&*fs, dir, &options, &queue)?;
    let mut next_file = manifest.as_ref().map_or(1, |m| m.next_file_number);
    let mut last_seqno = manifest.as_ref().map_or(0, |m| m.last_seqno);
    let mut families: BTreeMap<ColumnFamilyId, Family> = BTreeMap::new();
    match manifest {
        None => {
            if let Some(name) = names.iter().find(|n| is_engine_file(n)) {
                return Err(Error::corruption(
                    dir.join(CURRENT_FILE_NAME),
                    0,
                    format!("missing, yet the directory holds {name}"),
                ));
            }
            if !options.create_if_missing {
                return Err(Error::InvalidArgument(format!(
                    "no database in {} (create_if_missing is off)",
                    dir.display()
                )));
            }
            report.created = true;
        }
        Some(m) => {
            if options.error_if_exists {
                return Err(Error::InvalidArgument(format!(
                    "a database exists in {} (error_if_exists is on)",
                    dir.display()
                )));
            }
            for f in m.families {
                families.insert(
                    f.id,
                    Family {
                        name: f.name,
                        version: f.version,
                    },
                );
            }
        }
    }
    if let std::collections::btree_map::Entry::Vacant(slot) = families.entry(DEFAULT_COLUMN_FAMILY)
    {
        if !report.created {
            return Err(Error::corruption(
                dir.join(CURRENT_FILE_NAME),
                0,
                "the manifest has no default column family",
            ));
        }
        let levels = options.default_column_family.compaction.num_levels;
        slot.insert(Family {
            name: DEFAULT_COLUMN_FAMILY_NAME.to_string(),
            version: Arc::new(Version::new(DEFAULT_COLUMN_FAMILY, levels, queue.clone())?),
        });
    }

    // Every file a version names must be there; numbers must not be reused.
    let present: HashSet<&str> = names.iter().map(String::as_str).collect();
    for f in families.values() {
        for (_, file) in f.version.iter() {
            let name = compaction::sst_file_name(file.number());
            if !present.contains(name.as_str()) {
                return Err(Error::corruption(
                    dir.join(name),
                    0,
                    "the manifest names this file, but it is missing",
                ));
            }
            last_seqno = last_seqno.max(file.desc().largest_seqno);
        }
        for blob in f.version.blob_files() {
            let name = compaction::blob_file_name(blob.number());
            if !present.contains(name.as_str()) {
                return Err(Error::corruption(
                    dir.join(name),
                    0,
                    "the manifest names this blob file, but it is missing",
                ));
            }
        }
        next_file = next_file.max(f.version.next_file_number());
    }
    for name in &names {
        let n = parse_sst_file_name(name)
            .or_else(|| parse_blob_file_name(name))
            .or_else(|| wal::parse_wal_file_name(name))
            .or_else(|| manifest::parse_manifest_file_name(name));
        if let Some(n) = n {
            next_file = next_file.max(n.saturating_add(1));
        }
    }

    // The WAL, into one memtable per family.
    let next_memtable = AtomicU64::new(1);
    let mut memtables: BTreeMap<ColumnFamilyId, Arc<Memtable>> = BTreeMap::new();
    let min_log = families
        .values()
        .map(|f| f.version.log_number())
        .min()
        .unwrap_or(0);
    let replay = wal::replay(
        &*fs,
        dir,
        min_log,
        options.recovery_mode,
        |number, payload| {
            let batch = WriteBatch::decode(payload).map_err(|e| {
                Error::corruption(
                    dir.join(wal::wal_file_name(number)),
                    0,
                    format!("batch: {e}"),
                )
            })?;
            if batch.first_seqno == 0 && !batch.items.is_empty() {
                return Err(Error::corruption(
                    dir.join(wal::wal_file_name(number)),
                    0,
                    "a logged batch without sequence numbers",
                ));
            }
            for (i, item) in batch.items.iter().enumerate() {
                let seqno = batch.first_seqno + i as u64;
                last_seqno = last_seqno.max(seqno);
                let Some(f) = families.get(&item.cf) else {
                    continue; // a dropped family
                };
                if number < f.version.log_number() {
                    continue; // already flushed
                }
                let mem = memtables.entry(item.cf).or_insert_with(|| {
                    Arc::new(Memtable::new(next_memtable.fetch_add(1, Ordering::Relaxed)))
                });
                mem.insert(item.key, seqno, item.kind, item.value)?;
            }
            Ok(())
        },
    )?;
    report.wal_files = replay.files;
    report.wal_records = replay.records;
    report.wal_cuts = replay.cuts;

    // Flush what was replayed; every family then logs into a new WAL.
    let next = AtomicU64::new(next_file);
    let new_file = || next.fetch_add(1, Ordering::Relaxed);
    let wal_number = new_file();
    for (id, mem) in &memtables {
        let f = families
            .get_mut(id)
            .expect("memtables exist for live families only");
        let cf_options = options.column_family(&f.name);
        let ctx = OutputContext {
            fs: &*fs,
            dir,
            writer_options: cf_options.table.clone(),
            target_file_bytes: u64::MAX,
            grandparents: &[],
            new_file_number: &new_file,
            snapshots: &[],
            bottommost: false,
            filter: None,
            output_level: 0,
            rate_limiter: None,
            collectors: None,
            blob: cf_options.blob.min_blob_size.map(|min| BlobOutput {
                min_value_bytes: min,
                writer_options: cf_options.blob.writer_options(),
                target_file_bytes: cf_options.blob.target_file_bytes,
                column_family: *id,
            }),
            blob_gc: None,
        };
        let (files, blob_files) = compaction::flush_memtables(std::slice::from_ref(mem), &ctx)?;
        report.flushed_files += files.len();
        let mut edit = VersionEdit {
            column_family: *id,
            ..VersionEdit::default()
        };
        for file in files {
            edit.add_file(0, file);
        }
        for blob in blob_files {
            edit.add_blob_file(blob);
        }
        edit.next_file_number = Some(next.load(Ordering::Relaxed));
        let mut b = VersionBuilder::new(&f.version);
        b.apply(&edit)
            .map_err(|e| Error::InvalidArgument(format!("recovered files: {e}")))?;
        f.version = b.build().version;
    }
    for f in families.values_mut() {
        let edit = VersionEdit {
            column_family: f.version.column_family(),
            log_number: Some(wal_number),
            next_file_number: Some(next.load(Ordering::Relaxed) + 1),
            ..VersionEdit::default()
        };
        let mut b = VersionBuilder::new(&f.version);
        b.apply(&edit)
            .map_err(|e| Error::InvalidArgument(format!("recovered log number: {e}")))?;
        f.version = b.build().version;
    }

    let manifest_number = new_file();
    let persisted: BTreeMap<ColumnFamilyId, (String, Arc<Version>)> = families
        .iter()
        .map(|(id, f)| (*id, (f.name.clone(), f.version.clone())))
        .collect();
    let records = snapshot_records(&persisted, next.load(Ordering::Relaxed), last_seqno);
    let mut writer = ManifestWriter::create(fs.clone(), dir, manifest_number, &records)?;
    // The marker vouches for the snapshot (see `append_vouched`).
    writer.vouch()?;
    let wal_writer = WalWriter::create(fs.clone(), dir, wal_number)?;

    // Leftovers: files no version names, old manifests and WAL files.
    let live: HashSet<String> = families
        .values()
        .flat_map(|f| {
            let tables = f
                .version
                .iter()
                .map(|(_, file)| compaction::sst_file_name(file.number()));
            let blobs = f
                .version
                .blob_files()
                .map(|b| compaction::blob_file_name(b.number()));
            tables.chain(blobs).collect::<Vec<_>>()
        })
        .collect();
    let names = fs.list(dir).map_err(Error::io("list", dir))?;
    for name in names {
        let stale = match () {
            _ if parse_sst_file_name(&name).is_some() => !live.contains(&name),
            _ if parse_blob_file_name(&name).is_some() => !live.contains(&name),
            _ if wal::parse_wal_file_name(&name).is_some() => {
                wal::parse_wal_file_name(&name) != Some(wal_number)
            }
            _ if manifest::parse_manifest_file_name(&name).is_some() => {
                manifest::parse_manifest_file_name(&name) != Some(manifest_number)
            }
            // The WAL pool holds an obsolete file only.
            _ => name.ends_with(".tmp") || name == wal::POOL_FILE_NAME,
        };
        if stale {
            let path = dir.join(&name);
            fs.remove(&path).map_err(Error::io("remove", &path))?;
            report.removed_leftovers.push(name);
        }
    }
    fs.sync_dir(dir).map_err(Error::io("sync directory", dir))?;
    // Started after the leftovers went: the file it makes ahead is not one.
    let next_file = Arc::new(AtomicU64::new(next.load(Ordering::Relaxed)));
    // A WAL file holds about one memtable's writes (plus an eighth for
    // record headers), at most 256 MiB reserved.
    let prealloc = (options.default_column_family.write_buffer_bytes / 8 * 9).min(256 << 20);
    let wal_keeper = WalKeeper::start(fs.clone(), dir.to_path_buf(), next_file.clone(), prealloc)?;

    let cache = (options.block_cache_bytes > 0)
        .then(|| Arc::new(BlockCache::new(options.block_cache_bytes)));
    let counters = Counters::default();
    let mut set = CfSet::default();
    for (id, f) in &families {
        let cf_options = options.column_family(&f.name).clone();
        let debt = crate::compaction::pending_compaction_bytes(&f.version, &cf_options.compaction);
        let min_blob_size = super::cf::min_blob_size_cell(&cf_options);
        let state = Arc::new(CfState {
            id: *id,
            name: f.name.clone(),
            options: cf_options,
            installer: Installer::with_times(
                ReadState {
                    version: f.version.clone(),
                    active: Arc::new(Memtable::with_log_number(
                        next_memtable.fetch_add(1, Ordering::Relaxed),
                        wal_number,
                    )),
                    immutables: MemtableList::new(),
                    visible: last_seqno,
                },
                counters.install_times.clone(),
            ),
            dropped: AtomicBool::new(false),
            compaction_debt: AtomicU64::new(debt),
            min_blob_size,
            gc_credit: {
                let (value, live) = crate::compaction::blob_value_and_live_bytes(&f.version);
                GcCredit::new(value - live, value)
            },
        });
        set = set.with(state);
    }
    let rate = options
        .default_column_family
        .compaction
        .rate_limit_bytes_per_sec;
    let dir: Arc<Path> = Arc::from(dir);
    let table_access = Arc::new(super::read::TableAccess {
        tables: super::table_cache::TableCache::new(options.max_open_files),
        fs: fs.clone(),
        dir: dir.clone(),
        cache: cache.clone(),
    });
    Ok(DbInner {
        fs,
        dir,
        table_access,
        hooks,
        cfs: ArcSwap::from_pointee(set),
        seq: SeqAllocator::new(last_seqno)?,
        queue: WriteQueue::new(),
        wal: Mutex::new(wal_writer),
        wal_keeper,
        manifest: Mutex::new(ManifestLog::new(writer, persisted)),
        manifest_sync: Mutex::new(()),
        next_file,
        next_memtable,
        cache,
        obsolete_queue: queue,
        obsolete,
        rate_limiter: Arc::new(RateLimiter::new(rate)),
        snapshots: Arc::new(SnapshotList::default()),
        latches: Default::default(),
        bg: Background::new(options.background_threads),
        error: Mutex::new(None),
        stopped: AtomicBool::new(false),
        no_space: AtomicBool::new(false),
        last_resume: Mutex::new(None),
        closed: AtomicBool::new(false),
        counters,
        recovery: report,
        options,
        _lock: lock,
    })
}
