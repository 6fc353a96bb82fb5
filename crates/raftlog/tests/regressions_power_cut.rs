//! Power cuts that keep any subset of the unsynced pages and directory
//! changes (`MemFs::crash_keeping`), each a regression found by reading the
//! recovery and purge code:
//! - a page lost inside an unsynced record while later unsynced records
//!   reached the disk is a torn tail, not corruption: the default mode opens;
//! - damage to bytes that were synced is still refused;
//! - zeros in a sealed file before the end its trailer names are damage, not
//!   a clean end, even in `AbsoluteConsistency`;
//! - purge's removals reach the disk in order: never the removal of an append
//!   file holding a tombstone without the removal of the rewrite file holding
//!   the copy it hides.
//!
//! The cut after a failed write is in `failpoints.rs`
//! (`a_failed_group_never_comes_back_after_a_power_cut`): it needs a fail point
//! to form a group of two writers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use strata_fs::{File, FileLock, FileSystem, MemFs, Unsynced};
use strata_raftlog::{Config, Engine, Error, LogBatch, RecoveryMode};

const DIR: &str = "/db";

fn config() -> Config {
    Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        compression_threshold_bytes: 0,
        ..Config::default()
    }
}

fn open_on(fs: Arc<dyn FileSystem>, config: Config) -> strata_raftlog::Result<Engine> {
    Engine::open_with_fs(DIR, config, fs)
}

fn open(fs: &MemFs) -> strata_raftlog::Result<Engine> {
    open_on(Arc::new(fs.clone()), config())
}

use strata_test_support::noise;

fn write_entry(engine: &Engine, group: u64, index: u64, len: usize, sync: bool) -> u64 {
    let mut batch = LogBatch::new();
    batch.add_entries(group, index, &[noise(group * 1000 + index, len)]);
    engine.write(&mut batch, sync).expect("write") as u64
}

fn first_file() -> PathBuf {
    Path::new(DIR).join("0000000000000001.raftlog")
}

/// The reproduction: one synced write, two unsynced ones, the process dies;
/// one 4 KiB page inside the second record never reached the disk while the
/// third record's pages did. `open` used to fail with "payload checksum
/// mismatch (valid records follow, so this is not a torn write)".
#[test]
fn a_lost_page_inside_an_unsynced_record_is_a_torn_tail() {
    let fs = MemFs::new();
    let engine = open(&fs).unwrap();
    let start = 24u64; // the file header's length
    let first = write_entry(&engine, 1, 1, 1000, true);
    let second = write_entry(&engine, 1, 2, 12_000, false);
    write_entry(&engine, 1, 3, 12_000, false);
    drop(engine);
    let second_at = start + first;
    // A page wholly inside the second record.
    let lost = second_at.div_ceil(MemFs::PAGE_BYTES) + 1;
    assert!((lost + 1) * MemFs::PAGE_BYTES <= second_at + second);
    let unsynced = fs.unsynced_pages(&first_file()).unwrap();
    assert!(unsynced.contains(&lost), "{unsynced:?}");
    fs.crash_keeping(|change| !matches!(change, Unsynced::Page { page, .. } if page == lost));

    let engine = open(&fs).expect("the default mode opens after a power cut");
    assert_eq!(
        engine.last_index(1),
        Some(1),
        "only the synced write is whole"
    );
    assert_eq!(engine.get_entry(1, 1).unwrap(), Some(noise(1001, 1000)));
    assert_eq!(engine.recovery_report().damage.len(), 1);
    // The cut is durable: a second open finds nothing to repair, and writes go on.
    drop(engine);
    let engine = open(&fs).unwrap();
    assert!(engine.recovery_report().damage.is_empty());
    write_entry(&engine, 1, 2, 100, true);
    assert_eq!(engine.last_index(1), Some(2));
}

/// The other side of the rule: a record written after a sync that covered the
/// damage proves the damaged bytes were durable, so the default mode refuses.
#[test]
fn damage_in_synced_bytes_followed_by_records_is_refused() {
    let fs = MemFs::new();
    let engine = open(&fs).unwrap();
    let first = write_entry(&engine, 1, 1, 1000, true);
    write_entry(&engine, 1, 2, 1000, true);
    write_entry(&engine, 1, 3, 1000, true);
    drop(engine);
    // Bit rot in the second record's payload.
    fs.corrupt(&first_file(), 24 + first + 100, 0x40).unwrap();
    match open(&fs) {
        Err(Error::Corruption { reason, .. }) => {
            assert!(reason.contains("synced"), "{reason}")
        }
        other => panic!("synced damage opened: {:?}", other.map(|_| ())),
    }
    let tolerant = Config {
        recovery_mode: RecoveryMode::TolerateAnyCorruption,
        ..config()
    };
    let engine = open_on(Arc::new(fs.clone()), tolerant).expect("TolerateAny opens");
    assert_eq!(engine.last_index(1), Some(1));
    assert_eq!(engine.recovery_report().damage.len(), 1);
}

/// Zeros (or stale bytes) over records of a sealed, non-last file used to read
/// as a clean end of its data, silently dropping what followed, even in
/// `AbsoluteConsistency`. The trailer names the real end.
#[test]
fn zeros_before_a_sealed_files_end_are_damage() {
    for mode in [
        RecoveryMode::AbsoluteConsistency,
        RecoveryMode::TolerateTailCorruption,
    ] {
        let fs = MemFs::new();
        let engine = open(&fs).unwrap();
        let first = write_entry(&engine, 1, 1, 2000, false);
        let mut index = 2;
        // Fill more than one file, so the first is sealed and not the last.
        while engine.file_stats().active_append_seq < 3 {
            write_entry(&engine, 1, index, 2000, false);
            index += 1;
        }
        engine.sync().unwrap();
        drop(engine);
        // Zero the header of the first file's second record.
        zero(&fs, &first_file(), 24 + first, 32);
        let config = Config {
            recovery_mode: mode,
            recovery_reads_index_sections: false,
            ..config()
        };
        match open_on(Arc::new(fs.clone()), config) {
            Err(Error::Corruption { path, reason, .. }) => {
                assert_eq!(path, first_file(), "{mode:?}");
                assert!(reason.contains("sealed"), "{mode:?}: {reason}");
            }
            other => panic!("{mode:?}: opened: {:?}", other.map(|e| e.last_index(1))),
        }
    }
}

/// Sets `len` bytes at `at` to zero, in the durable image too (as bit rot).
fn zero(fs: &MemFs, path: &Path, at: u64, len: usize) {
    let mut bytes = vec![0u8; len];
    fs.open(path, false)
        .unwrap()
        .read_exact_at(at, &mut bytes)
        .unwrap();
    for (i, b) in bytes.iter().enumerate() {
        if *b != 0 {
            fs.corrupt(path, at + i as u64, *b).unwrap();
        }
    }
}

/// Snapshots the in-memory file system each time a directory is synced, as
/// it is just before the sync: the states a power cut could leave.
#[derive(Debug)]
struct SnapshotOnDirSync {
    inner: MemFs,
    snapshots: Mutex<Vec<MemFs>>,
}

impl FileSystem for SnapshotOnDirSync {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> std::io::Result<Arc<dyn File>> {
        self.inner.create(path)
    }
    fn open(&self, path: &Path, writable: bool) -> std::io::Result<Arc<dyn File>> {
        self.inner.open(path, writable)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove(path)
    }
    fn link(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.link(from, to)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.snapshots.lock().unwrap().push(self.inner.deep_clone());
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> std::io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

/// Purge removed the old rewrite generation and the append files holding the
/// tombstones that hide it under one directory sync; a file system that
/// persisted the second removal and not the first brought removed groups
/// back. Every state a power cut could leave during the purge is checked,
/// keeping the append removals and losing the rewrite removals.
#[test]
fn purge_removals_reach_the_disk_in_order() {
    let mem = MemFs::new();
    let fs = Arc::new(SnapshotOnDirSync {
        inner: mem.clone(),
        snapshots: Mutex::new(Vec::new()),
    });
    let engine = open_on(fs.clone(), config()).unwrap();
    // A lagging group, copied into the rewrite queue by a purge.
    let mut batch = LogBatch::new();
    batch.add_entries(7, 1, &[b"lag".as_slice()]);
    batch.put(7, b"state", b"lagging");
    engine.write(&mut batch, true).unwrap();
    let mut busy = 1;
    let mut fill = |engine: &Engine, n: u64| {
        for _ in 0..n {
            write_entry(engine, 2, busy, 1000, false);
            if busy % 50 == 0 {
                engine.compact_to(2, busy - 5).unwrap();
            }
            busy += 1;
        }
        engine.sync().unwrap();
    };
    fill(&engine, 1400);
    let out = engine.purge().unwrap();
    assert!(out.entries_rewritten >= 1, "{out:?}");
    assert_eq!(engine.file_stats().rewrite_files, 1);
    // Remove the group: its tombstone hides the copy in the rewrite queue.
    let mut batch = LogBatch::new();
    batch.remove_group(7);
    engine.write(&mut batch, true).unwrap();
    fill(&engine, 1400);
    fs.snapshots.lock().unwrap().clear();
    let out = engine.purge().unwrap();
    assert!(out.rewrite_queue_compacted, "{out:?}");
    drop(engine);
    let snapshots = std::mem::take(&mut *fs.snapshots.lock().unwrap());
    assert!(!snapshots.is_empty());
    for (i, snap) in snapshots.iter().enumerate() {
        snap.crash_keeping(|change| match change {
            Unsynced::Remove { path } | Unsynced::Rename { from: path, .. } => {
                !path.to_string_lossy().ends_with(".rewrite")
            }
            _ => true,
        });
        let engine = open(snap).unwrap_or_else(|e| panic!("state {i}: open: {e}"));
        assert_eq!(
            engine.last_index(7),
            None,
            "state {i}: a removed group came back"
        );
        assert_eq!(
            engine.get(7, b"state"),
            None,
            "state {i}: a removed key came back"
        );
    }
}

/// Found by the kill -9 loop: a purged, sealed file is recycled by renaming it
/// to the next file's name; a crash before its new header is written leaves
/// the old header and the old, valid trailer. Recovery read that trailer's
/// index section and refused the directory ("header names ... but the file is
/// named ..."), where the file is an unfinished creation to remove.
#[test]
fn a_recycled_file_renamed_but_not_yet_rewritten_is_unfinished() {
    let fs = MemFs::new();
    let engine = open(&fs).unwrap();
    let mut index = 1;
    while engine.file_stats().active_append_seq < 4 {
        write_entry(&engine, 1, index, 2000, false);
        index += 1;
    }
    engine.close().unwrap();
    // Seq 1 plays the purged file that rotation recycled into the next name.
    let last = fs
        .list(Path::new(DIR))
        .unwrap()
        .iter()
        .filter_map(|n| {
            // Log files only, not the recycled ones (a file made ahead).
            n.strip_suffix(".raftlog")
                .filter(|s| s.len() == 16)
                .map(|s| u64::from_str_radix(s, 16).unwrap())
        })
        .max()
        .unwrap();
    let next = Path::new(DIR).join(format!("{:016x}.raftlog", last + 1));
    fs.rename(&first_file(), &next).unwrap();
    let engine = open(&fs).expect("an interrupted creation does not stop the open");
    assert_eq!(engine.recovery_report().unfinished_files, vec![next]);
}

/// Purge removes dead append files with no directory sync between them, so
/// a power cut may keep any subset of the removals: the files that come back
/// below a removed one leave a hole, which recovery used to refuse as a lost
/// file ("missing file"), and whose dead records (a put whose delete was in a
/// removed file, a removed group's entries) it must not replay. Every subset
/// of the removals of one purge is tried, with files kept for reuse and
/// without.
#[test]
fn any_subset_of_a_purges_removals_reopens_without_dead_data() {
    for recycle in [0, 8] {
        let config = Config {
            recycle_files_max: Some(recycle),
            // The preparer's directory syncs would race with the purge's
            // removals; without it every directory sync is on this thread.
            prepare_next_file: false,
            ..config()
        };
        let mem = MemFs::new();
        let engine = open_on(Arc::new(mem.clone()), config.clone()).unwrap();
        // Dead data in the oldest files: a key later deleted, a group later
        // removed, entries later compacted away.
        let mut batch = LogBatch::new();
        batch.put(1, b"k", b"old");
        batch.add_entries(3, 1, &[b"gone".as_slice()]);
        engine.write(&mut batch, true).unwrap();
        let mut index = 1;
        let mut fill = |engine: &Engine, n: u64| {
            for _ in 0..n {
                write_entry(engine, 2, index, 1000, false);
                index += 1;
            }
            engine.compact_to(2, index - 3).unwrap();
            engine.sync().unwrap();
        };
        fill(&engine, 150);
        let mut batch = LogBatch::new();
        batch.delete(1, b"k");
        batch.remove_group(3);
        engine.write(&mut batch, true).unwrap();
        fill(&engine, 150);
        let first = engine.first_index(2).unwrap();
        let last = engine.last_index(2).unwrap();
        let out = engine.purge().unwrap();
        assert!(out.files_purged >= 3, "{out:?}");
        drop(engine);

        let is_log_removal = |change: &Unsynced<'_>| match change {
            Unsynced::Remove { path } | Unsynced::Rename { from: path, .. } => {
                path.to_string_lossy().ends_with(".raftlog")
            }
            _ => false,
        };
        let mut removals = 0;
        mem.deep_clone().crash_keeping(|c| {
            removals += is_log_removal(&c) as u32;
            true
        });
        assert!(
            removals >= 3,
            "recycle {recycle}: {removals} unsynced removals"
        );
        let mut holes = 0;
        for kept in 0u32..1 << removals.min(8) {
            let snap = mem.deep_clone();
            let mut n = 0;
            snap.crash_keeping(|c| {
                if !is_log_removal(&c) {
                    return true;
                }
                n += 1;
                kept & (1 << (n - 1)) != 0
            });
            let state = format!("recycle {recycle}, kept removals {kept:#b}");
            let engine = open_on(Arc::new(snap), config.clone())
                .unwrap_or_else(|e| panic!("{state}: open: {e}"));
            holes += !engine.recovery_report().purged_files_removed.is_empty() as u32;
            assert_eq!(
                engine.get(1, b"k"),
                None,
                "{state}: a deleted key came back"
            );
            assert_eq!(
                engine.last_index(3),
                None,
                "{state}: a removed group came back"
            );
            assert_eq!(engine.first_index(2), Some(first), "{state}");
            assert_eq!(engine.last_index(2), Some(last), "{state}");
            for i in first..=last {
                let want = noise(2 * 1000 + i, 1000);
                assert_eq!(
                    engine.get_entry(2, i).unwrap(),
                    Some(want),
                    "{state}: entry {i}"
                );
            }
        }
        assert!(holes > 0, "recycle {recycle}: no state had a hole");
    }
}

/// A hole no purge accounts for is still lost data: recovery refuses it.
#[test]
fn a_hole_without_a_purge_floor_is_a_missing_file() {
    let fs = MemFs::new();
    let engine = open(&fs).unwrap();
    let mut index = 1;
    while engine.file_stats().active_append_seq < 4 {
        write_entry(&engine, 1, index, 2000, true);
        index += 1;
    }
    engine.close().unwrap();
    let second = Path::new(DIR).join("0000000000000002.raftlog");
    fs.remove(&second).unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
    match open(&fs) {
        Err(Error::MissingFile { path }) => assert_eq!(path, second),
        other => panic!("opened: {:?}", other.map(|e| e.last_index(1))),
    }
}

/// A sealed file's index section is written without a sync (a sync there
/// was a device flush on top of the leader's, right after every rotation).
/// A power cut may keep any subset of its pages: a torn section fails its
/// checksum and the file is scanned, so every synced write is read back.
#[test]
fn a_power_cut_that_tears_an_unsynced_index_section_scans_the_file() {
    let fs = MemFs::new();
    let engine = open(&fs).unwrap();
    let mut written = Vec::new();
    let mut index = 0;
    // Many groups, so that each section spans several pages.
    while engine.metrics().index_sections_written < 3 {
        index += 1;
        for group in 1..=200 {
            write_entry(&engine, group, index, 64, group == 200);
            written.push((group, index));
        }
    }
    let (mut from_sections, mut scanned) = (0, 0);
    for seed in 0..48 {
        let crashed = fs.deep_clone();
        crashed.crash(strata_fs::CrashMode::KeepRandomPages { seed });
        let reopened = open(&crashed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let report = reopened.recovery_report();
        from_sections += report.files_from_sections;
        // The active file has no section: it is always scanned.
        scanned += report.files - 1 - report.files_from_sections;
        for &(group, index) in &written {
            let entry = reopened.get_entry(group, index).unwrap();
            assert_eq!(
                entry.as_deref(),
                Some(&noise(group * 1000 + index, 64)[..]),
                "seed {seed}: group {group} entry {index}"
            );
        }
    }
    // Both outcomes happened: sealed files read from their sections, and
    // sealed files scanned because the cut tore their sections.
    assert!(
        from_sections > 0 && scanned > 0,
        "{from_sections} {scanned}"
    );
}
