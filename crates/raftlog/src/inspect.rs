//! Replaying records into the engine's own index without opening the engine,
//! for tools (`strata-ctl`) that must tell which entries and keys recovery
//! would keep.
//!
//! The replay is recovery's, not a copy of it: the same `Index`, the same
//! apply function with replay semantics (a hole that purge left in a group's
//! log is kept until a later record fills it), and the same end of replay (a
//! hole still open means the log restarted there; see `docs/format/raftlog.md`,
//! "Replay semantics"). So what a tool counts is what [`crate::Engine`] holds
//! after opening the same files. Only the source of the records differs: the
//! caller scans the files ([`crate::reader::scan_file`]) and chooses which
//! records to apply, since judging damage is its own business.
//!
//! Nothing here touches a file: no lock, no writes.
//!
//! Use: sort the files with [`sort_in_log_order`]; give every valid record of
//! each, in file order, to [`IndexReplay::apply`]; then
//! [`IndexReplay::finish`] and query the [`ReplayedIndex`].

use strata_codec::DecodeError;

use crate::format::{FileId, Queue};
use crate::index::{FileRef, GroupIndex, Index, RecordLoc};
use crate::log_batch::{decode_items, Item};
use crate::reader::ScannedRecord;
use crate::IndexStats;

/// The rewrite files recovery removes unread: an old or unfinished
/// generation of a rewrite-queue compaction (`docs/raftlog.md`, "Purge and
/// the rewrite queue").
pub use crate::generation::unreplayed as rewrite_files_not_replayed;

/// Sorts files in log order, the order replay applies them in: the rewrite
/// queue first (it holds copies of the oldest data), then the append queue,
/// each by sequence number.
pub fn sort_in_log_order(ids: &mut [FileId]) {
    ids.sort_by_key(|id| log_position(*id));
}

/// A file's place in log order.
fn log_position(id: FileId) -> (bool, u64) {
    (id.queue != Queue::Rewrite, id.seq)
}

/// The append files below the last hole in the append queue, which replay
/// leaves out until it knows whether a purge removed the missing ones.
///
/// Purge removes dead append files with no directory sync between them, after
/// logging (durably) the first append file it keeps; a power cut may keep any
/// subset of the removals. A dead file that comes back below a removed one
/// must not be replayed (its records' effects were undone in the removed
/// file), so the files below the last hole are set aside; once replay has
/// read every purge floor, [`PurgeHole::covered_by`] tells whether a purge
/// removed the missing files (the set-aside files are then dead) or data was
/// lost. Recovery and tools apply this one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeHole {
    /// The first missing append file.
    pub missing: FileId,
    /// The first append file after the last hole: replay starts there.
    pub first_kept: u64,
    /// The append files below it, left out of the replay.
    pub set_aside: Vec<FileId>,
}

impl PurgeHole {
    /// Whether a replay whose highest purge floor is `purged_below` shows
    /// the hole to be a purge's: every missing file is below the floor.
    pub fn covered_by(&self, purged_below: u64) -> bool {
        purged_below >= self.first_kept
    }
}

/// Takes the append files below the last hole of the append queue out of
/// `ids` (sorted by [`sort_in_log_order`]) and returns the hole, if there is
/// one. A hole in the rewrite queue is always lost data (purge removes its
/// files one durable step at a time): its first missing file is the error.
pub fn set_aside_below_hole(ids: &mut Vec<FileId>) -> Result<Option<PurgeHole>, FileId> {
    let mut hole: Option<(FileId, usize)> = None;
    for (i, pair) in ids.windows(2).enumerate() {
        if pair[0].queue == pair[1].queue && pair[1].seq != pair[0].seq + 1 {
            let missing = FileId {
                queue: pair[0].queue,
                seq: pair[0].seq + 1,
            };
            if missing.queue != Queue::Append {
                return Err(missing);
            }
            let first_missing = hole.map_or(missing, |(m, _)| m);
            hole = Some((first_missing, i + 1));
        }
    }
    let Some((missing, after)) = hole else {
        return Ok(None);
    };
    let first_kept = ids[after].seq;
    let below = |id: &FileId| id.queue == Queue::Append && id.seq < first_kept;
    let set_aside: Vec<FileId> = ids.iter().filter(|id| below(id)).copied().collect();
    ids.retain(|id| !below(id));
    Ok(Some(PurgeHole {
        missing,
        first_kept,
        set_aside,
    }))
}

/// The recycled file that recovery would adopt as the append file after the
/// last: a file made ahead and renamed into place by a rotation whose rename
/// a crash lost (`docs/raftlog.md`, "Rotation off the leader's path"). Its
/// position in `recycled` and the id it takes. Reads, never writes.
pub fn prepared_to_adopt(
    fs: &dyn strata_fs::FileSystem,
    dir: &std::path::Path,
    ids: &[FileId],
    recycled: &[String],
) -> Option<(usize, FileId)> {
    crate::prepare::prepared_to_adopt(fs, dir, ids, recycled)
}

/// Why a record cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The record's payload does not decode into items. A record from
    /// [`crate::reader::scan_file`] always decodes.
    #[error("{file} at offset {offset}: the record's items do not decode: {source}")]
    Undecodable {
        /// The record's file.
        file: FileId,
        /// The record's offset in the file.
        offset: u64,
        /// What is wrong with the payload.
        #[source]
        source: DecodeError,
    },
    /// The file's sequence number or the record's offset is beyond what the
    /// index can locate (31 and 32 bits): the engine never writes such a file.
    #[error("{file} at offset {offset}: beyond what the index can locate")]
    Unaddressable {
        /// The record's file.
        file: FileId,
        /// The record's offset in the file.
        offset: u64,
    },
    /// The record does not come after the last one applied in log order: the
    /// result would not be what recovery rebuilds.
    #[error(
        "{file} at offset {offset} does not come after {last_file} at offset \
         {last_offset} in log order"
    )]
    OutOfOrder {
        /// The record's file.
        file: FileId,
        /// The record's offset in the file.
        offset: u64,
        /// The file of the record applied last.
        last_file: FileId,
        /// The offset of the record applied last.
        last_offset: u64,
    },
}

/// An index being rebuilt from records, as recovery rebuilds it.
#[derive(Debug)]
pub struct IndexReplay {
    index: Index,
    /// The last record applied: the next must come after it in log order.
    last: Option<(FileId, u64)>,
    /// The highest purge floor applied (0: none).
    purged_below: u64,
}

impl Default for IndexReplay {
    fn default() -> Self {
        Self::new()
    }
}

impl IndexReplay {
    /// Starts with an empty index.
    pub fn new() -> IndexReplay {
        IndexReplay {
            index: Index::new(),
            last: None,
            purged_below: 0,
        }
    }

    /// The highest purge floor the records applied so far logged (0: none),
    /// for [`PurgeHole::covered_by`].
    pub fn purged_below(&self) -> u64 {
        self.purged_below
    }

    /// Applies one record of `file`. Records must come in log order: files as
    /// [`sort_in_log_order`] sorts them, each file's records by offset. A
    /// record that fails is not applied; later ones may still be.
    pub fn apply(&mut self, file: FileId, record: &ScannedRecord) -> Result<(), ReplayError> {
        let offset = record.offset;
        if let Some((last_file, last_offset)) = self.last {
            if (log_position(last_file), last_offset) >= (log_position(file), offset) {
                return Err(ReplayError::OutOfOrder {
                    file,
                    offset,
                    last_file,
                    last_offset,
                });
            }
        }
        self.last = Some((file, offset));
        let unaddressable = ReplayError::Unaddressable { file, offset };
        if file.seq >= u64::from(FileRef::REWRITE_BIT) {
            return Err(unaddressable);
        }
        let loc = RecordLoc {
            file: FileRef::new(file),
            offset: u32::try_from(offset).map_err(|_| unaddressable)?,
            len: record.len,
        };
        let items = decode_items(&record.payload).map_err(|source| ReplayError::Undecodable {
            file,
            offset,
            source,
        })?;
        for item in &items {
            if let Item::PurgedBelow { seq } = *item {
                self.purged_below = self.purged_below.max(seq);
            }
        }
        // Recovery's apply, with its replay semantics.
        self.index.apply_record(&items, loc, true);
        Ok(())
    }

    /// Ends the replay as recovery ends it (closing the holes still open) and
    /// returns the index.
    pub fn finish(self) -> ReplayedIndex {
        self.index.finish_replay();
        ReplayedIndex { index: self.index }
    }
}

/// The index a replay rebuilt: what the engine would hold after opening the
/// same records.
#[derive(Debug)]
pub struct ReplayedIndex {
    index: Index,
}

/// One group of a [`ReplayedIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSummary {
    /// The group.
    pub group: u64,
    /// Its first live entry, if it has entries.
    pub first_index: Option<u64>,
    /// Its last live entry, if it has entries.
    pub last_index: Option<u64>,
    /// Its live entries.
    pub entries: u64,
    /// Its keys.
    pub keys: u64,
}

/// Consecutive live entries of one group that sit in one entries item of one
/// record: where to read them back from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveRun {
    /// The group.
    pub group: u64,
    /// Index of the first live entry.
    pub first_index: u64,
    /// Number of live entries.
    pub count: u32,
    /// The record's file.
    pub file: FileId,
    /// The record's offset in its file.
    pub record_offset: u64,
    /// Offset of the item's length table in the record's payload.
    pub body_offset: u32,
    /// Number of entries in the whole item.
    pub item_count: u32,
    /// Position of the first live entry in the item (those before it were
    /// compacted or replaced): entry `first_index + k` is at position
    /// `first_position + k`, for [`crate::entry_at`].
    pub first_position: u32,
}

impl ReplayedIndex {
    /// Returns the counts [`crate::Engine::index_stats`] gives for the same
    /// index, computed by the same code.
    pub fn stats(&self) -> IndexStats {
        self.index.stats()
    }

    /// Returns every group holding an entry or a key, by id.
    pub fn groups(&self) -> Vec<GroupSummary> {
        groups_of(&self.index)
    }

    /// Returns every live run, by file in log order, then by record offset.
    pub fn live_runs(&self) -> Vec<LiveRun> {
        live_runs_of(&self.index)
    }
}

fn summary(group: u64, g: &GroupIndex) -> GroupSummary {
    GroupSummary {
        group,
        first_index: g.first_index(),
        last_index: g.last_index(),
        entries: g.entry_count(),
        keys: g.kvs.len() as u64,
    }
}

fn groups_of(index: &Index) -> Vec<GroupSummary> {
    let mut groups = Vec::new();
    index.for_each(|group, g| {
        if !g.is_empty() {
            groups.push(summary(group, g));
        }
    });
    groups.sort_unstable_by_key(|g| g.group);
    groups
}

fn live_runs_of(index: &Index) -> Vec<LiveRun> {
    let mut runs = Vec::new();
    index.for_each(|group, g| {
        runs.extend(g.runs.iter().map(|r| LiveRun {
            group,
            first_index: r.first,
            count: r.count,
            file: r.record.file.id(),
            record_offset: r.record.offset as u64,
            body_offset: r.body_offset,
            item_count: r.item_count,
            first_position: r.skip,
        }));
    });
    runs.sort_unstable_by_key(|r| {
        (
            log_position(r.file),
            r.record_offset,
            r.group,
            r.first_index,
        )
    });
    runs
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use rand::{rngs::StdRng, Rng, SeedableRng};
    use strata_fs::{FileSystem, MemFs};

    use super::*;
    use crate::reader::scan_file;
    use crate::{Config, Engine, LogBatch, RecoveryMode};

    const DIR: &str = "/db";

    /// Replays every file of `fs`'s directory, as a tool would; also returns
    /// whether a group's runs had a hole after some file.
    fn replay_dir(fs: &MemFs) -> (ReplayedIndex, bool) {
        let dir = Path::new(DIR);
        let mut ids: Vec<FileId> = fs
            .list(dir)
            .unwrap()
            .iter()
            .filter_map(|n| FileId::parse_file_name(n))
            .collect();
        sort_in_log_order(&mut ids);
        let mut replay = IndexReplay::new();
        let mut hole = false;
        for id in ids {
            let file = fs.open(&dir.join(id.file_name()), false).unwrap();
            let mut bytes = vec![0u8; file.len().unwrap() as usize];
            file.read_exact_at(0, &mut bytes).unwrap();
            let scan = scan_file(&bytes).unwrap();
            assert_eq!(scan.id, id);
            for record in &scan.records {
                replay.apply(id, record).unwrap();
            }
            replay.index.for_each(|_, g| {
                hole |= g
                    .runs
                    .iter()
                    .zip(g.runs.iter().skip(1))
                    .any(|(a, b)| b.first != a.first + a.count as u64);
            });
        }
        (replay.finish(), hole)
    }

    /// Opens the engine on a copy of `fs`, scanning every record.
    fn reopen(fs: &MemFs, config: &Config) -> Engine {
        let config = Config {
            recovery_mode: RecoveryMode::AbsoluteConsistency,
            ..config.clone()
        };
        Engine::open_with_fs(DIR, config, Arc::new(fs.deep_clone())).unwrap()
    }

    fn assert_same_as_engine(replayed: &ReplayedIndex, engine: &Engine, what: &str) {
        assert_eq!(replayed.groups(), groups_of(&engine.index), "{what}");
        assert_eq!(replayed.live_runs(), live_runs_of(&engine.index), "{what}");
        let (a, b) = (replayed.stats(), engine.index_stats());
        assert_eq!((a.groups, a.entries, a.keys), (b.groups, b.entries, b.keys));
    }

    fn config() -> Config {
        Config {
            target_file_size_bytes: 64 << 10,
            compression_threshold_bytes: 512,
            purge_threshold_bytes: 1 << 20,
            preallocate: false,
            ..Config::default()
        }
    }

    /// Purge deletes the record holding group 1's entry 10 (replaced later)
    /// while entries 1..=9 live on in the rewrite queue and 11..=18 in a file
    /// it keeps: replay meets a hole at 10 that the last file fills.
    #[test]
    fn keeps_the_entries_before_a_hole_purge_left() {
        let fs = MemFs::new();
        let config = Config {
            target_file_size_bytes: 8 << 20,
            compression_threshold_bytes: 0,
            ..config()
        };
        let session = || Engine::open_with_fs(DIR, config.clone(), Arc::new(fs.clone())).unwrap();
        let mut b = LogBatch::new();
        let engine = session();
        let entries: Vec<Vec<u8>> = (1..=10u8).map(|i| vec![i; 8]).collect();
        b.add_entries(1, 1, &entries);
        engine.write(&mut b, true).unwrap();
        for i in 1..=12u64 {
            b.add_entries(3, i, &[vec![i as u8; 100 << 10]]);
            engine.write(&mut b, true).unwrap();
        }
        engine.close().unwrap();
        let engine = session();
        let entries: Vec<Vec<u8>> = (11..=18u8).map(|i| vec![i; 8]).collect();
        b.add_entries(1, 11, &entries);
        b.add_entries(2, 1, &[b"pin"]);
        engine.write(&mut b, true).unwrap();
        engine.close().unwrap();
        let engine = session();
        b.add_entries(1, 10, &[b"new"]);
        engine.write(&mut b, true).unwrap();
        engine.compact_to(3, 13).unwrap();
        let purged = engine.purge().unwrap();
        assert_eq!((purged.files_purged, purged.entries_rewritten), (1, 9));
        engine.close().unwrap();

        let (replayed, hole) = replay_dir(&fs);
        assert!(hole, "the files make no hole");
        let engine = reopen(&fs, &config);
        assert_eq!(
            (engine.first_index(1), engine.last_index(1)),
            (Some(1), Some(10))
        );
        assert_same_as_engine(&replayed, &engine, "hole");
        assert_eq!(
            replayed.groups()[0],
            GroupSummary {
                group: 1,
                first_index: Some(1),
                last_index: Some(10),
                entries: 10,
                keys: 0,
            }
        );
    }

    /// A hole still open after the last file means the log restarted there:
    /// the runs before it go, as in recovery.
    #[test]
    fn closes_a_hole_left_open_at_the_end() {
        let record = |first_index: u64, count: u32, offset: u64| {
            let mut b = LogBatch::new();
            let entries: Vec<Vec<u8>> = (0..count).map(|_| b"e".to_vec()).collect();
            b.add_entries(7, first_index, &entries);
            ScannedRecord {
                offset,
                len: 100,
                header: crate::format::RecordHeader {
                    file_id: 0,
                    stored_len: 0,
                    raw_len: 0,
                    payload_crc: 0,
                    synced_end: 0,
                    codec: 0,
                },
                payload: b.payload.clone(),
            }
        };
        let file = |seq| FileId {
            queue: Queue::Append,
            seq,
        };
        let mut replay = IndexReplay::new();
        replay.apply(file(1), &record(1, 5, 24)).unwrap();
        replay.apply(file(2), &record(9, 2, 24)).unwrap();
        let replayed = replay.finish();
        let group = replayed.groups()[0];
        assert_eq!((group.first_index, group.entries), (Some(9), 2));
        let runs = replayed.live_runs();
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].file, runs[0].record_offset), (file(2), 24));
    }

    #[test]
    fn refuses_records_out_of_log_order_or_beyond_the_index() {
        let mut b = LogBatch::new();
        b.put(1, b"k", b"v");
        let record = |offset| ScannedRecord {
            offset,
            len: 40,
            header: crate::format::RecordHeader {
                file_id: 0,
                stored_len: 0,
                raw_len: 0,
                payload_crc: 0,
                synced_end: 0,
                codec: 0,
            },
            payload: b.payload.clone(),
        };
        let rewrite = FileId {
            queue: Queue::Rewrite,
            seq: 5,
        };
        let append = FileId {
            queue: Queue::Append,
            seq: 1,
        };
        let mut replay = IndexReplay::new();
        replay.apply(rewrite, &record(24)).unwrap();
        replay.apply(append, &record(24)).unwrap();
        for (file, offset) in [(append, 24), (append, 10), (rewrite, 100)] {
            let e = replay.apply(file, &record(offset)).unwrap_err();
            assert!(matches!(e, ReplayError::OutOfOrder { .. }), "{e}");
        }
        let mut bad = record(100);
        bad.payload.truncate(3);
        let e = replay.apply(append, &bad).unwrap_err();
        assert!(matches!(e, ReplayError::Undecodable { .. }), "{e}");
        let e = replay.apply(append, &record(1 << 32)).unwrap_err();
        assert!(matches!(e, ReplayError::Unaddressable { .. }), "{e}");
        let far = FileId {
            queue: Queue::Append,
            seq: 1 << 31,
        };
        let e = replay.apply(far, &record(24)).unwrap_err();
        assert!(matches!(e, ReplayError::Unaddressable { .. }), "{e}");
        assert_eq!(replay.finish().stats().keys, 1);
    }

    /// Whatever mix of appends, Raft replacements, compactions, keys, removals,
    /// rotations and purges wrote the files, holes included, the replay
    /// rebuilds exactly the index the engine rebuilds when it opens them.
    #[test]
    fn rebuilds_what_recovery_rebuilds() {
        let (mut purged, mut holes) = (0, 0);
        for seed in 0..16u64 {
            let fs = MemFs::new();
            let config = config();
            let mut rng = StdRng::seed_from_u64(seed);
            let engine = Engine::open_with_fs(DIR, config.clone(), Arc::new(fs.clone())).unwrap();
            let mut last = [0u64; 8];
            for step in 0..8000u32 {
                let mut b = LogBatch::new();
                // Group 7 writes rarely and is never compacted: purge copies
                // its old entries out, and a new leader's replacement may
                // leave a hole behind.
                let g = if rng.gen_bool(0.03) {
                    7
                } else {
                    rng.gen_range(0..7usize)
                };
                match rng.gen_range(0..100) {
                    0..=64 => {
                        // Sometimes a new leader replaces a suffix, short or long.
                        let first = if last[g] > 3 && rng.gen_bool(0.2) {
                            rng.gen_range(last[g] / 2..=last[g])
                        } else {
                            last[g] + 1
                        };
                        let n = rng.gen_range(1..4u64);
                        let entries: Vec<Vec<u8>> = (0..n)
                            .map(|_| {
                                let len = rng.gen_range(1..900);
                                (0..len).map(|_| rng.gen::<u8>() & 0x3f).collect()
                            })
                            .collect();
                        b.add_entries(g as u64, first, &entries);
                        last[g] = first + n - 1;
                    }
                    65..=84 => b.put(
                        g as u64,
                        &[b'k', rng.gen_range(0..3u8)],
                        &step.to_le_bytes(),
                    ),
                    85..=89 => b.delete(g as u64, &[b'k', rng.gen_range(0..3u8)]),
                    90..=98 if g < 7 => {
                        b.compact_to(g as u64, last[g].saturating_sub(rng.gen_range(0..40)))
                    }
                    99 => {
                        b.remove_group(g as u64);
                        last[g] = 0;
                    }
                    _ => {}
                }
                // The engine refuses a gap (a replacement below a compaction):
                // take its word for where each group ends.
                if !b.is_empty() && engine.write(&mut b, false).is_err() {
                    for (g, l) in last.iter_mut().enumerate() {
                        *l = engine.last_index(g as u64).unwrap_or(0);
                    }
                }
                if step % 97 == 0 {
                    purged += engine.purge().unwrap().files_purged;
                }
            }
            engine.close().unwrap();
            let (replayed, hole) = replay_dir(&fs);
            holes += u32::from(hole);
            assert_same_as_engine(&replayed, &reopen(&fs, &config), &format!("seed {seed}"));
        }
        eprintln!("{purged} files purged, {holes} seeds with a hole");
        assert!(
            purged > 0 && holes > 0,
            "{purged} files purged, {holes} holes"
        );
    }
}
