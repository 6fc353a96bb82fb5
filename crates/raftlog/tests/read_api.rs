//! The read-side API a Raft store needs: `fetch_entries_to`, `get_entry`,
//! `scan_keys_in`, `used_bytes` and `path`.
//!
//! Proves, with a file system that records every read and one that flips bits
//! on read:
//! - `fetch_entries_to` stops at its byte budget without reading the record
//!   after the one holding the first entry over it (reads counted, and a bit
//!   flipped in that next record is never seen), appends to the caller's vector
//!   and leaves it as it was on an error;
//! - `get_entry` reads exactly its entry's record, no byte more, and verifies
//!   the whole of it: a flipped bit anywhere in the record's payload, in its
//!   entry or another, gives `Error::Corruption`, never wrong bytes (why it
//!   does not read only the entry's bytes: `docs/raftlog.md`, "Read path");
//! - `fetch_entries_to` and `get_entry` agree with a `BTreeMap` model over
//!   random logs (overwrites, compactions, compressed and plain records,
//!   several files) for random ranges and budgets, errors included;
//! - `scan_keys_in` agrees with filtering a `BTreeMap` for random bounds,
//!   inverted (`InvalidArgument`), empty and unbounded ones included, stops
//!   when its callback says so, and lets the callback write to the engine;
//! - `used_bytes` grows as files are added and falls after a purge;
//! - hostile arguments to every read method give typed errors at once.

use std::collections::BTreeMap;
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use proptest::prelude::*;
use strata_fs::{FaultFs, File, FileLock, FileSystem, MemFs};
use strata_raftlog::reader::scan_file;
use strata_raftlog::{Config, Engine, Error, LogBatch};

const DIR: &str = "/db";

/// Small files and no compression, so records are plain and easy to locate.
fn config() -> Config {
    Config {
        target_file_size_bytes: 64 << 10,
        compression_threshold_bytes: 0,
        recovery_threads: 1,
        ..Config::default()
    }
}

/// One read: the file's path, the offset and the bytes asked for.
type ReadLog = Arc<Mutex<Vec<(PathBuf, u64, usize)>>>;

/// A file system that records every `read_at` of the files it opens.
#[derive(Debug)]
struct RecordingFs {
    inner: Arc<dyn FileSystem>,
    reads: ReadLog,
}

#[derive(Debug)]
struct RecordingFile {
    inner: Arc<dyn File>,
    path: PathBuf,
    reads: ReadLog,
}

impl RecordingFs {
    fn wrap(&self, path: &Path, inner: Arc<dyn File>) -> Arc<dyn File> {
        Arc::new(RecordingFile {
            inner,
            path: path.to_path_buf(),
            reads: self.reads.clone(),
        })
    }
}

impl FileSystem for RecordingFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        Ok(self.wrap(path, self.inner.create(path)?))
    }
    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn File>> {
        Ok(self.wrap(path, self.inner.open(path, writable)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.link(from, to)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

impl File for RecordingFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.reads
            .lock()
            .push((self.path.clone(), offset, buf.len()));
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn write_vectored_at(&self, offset: u64, bufs: &[io::IoSlice<'_>]) -> io::Result<()> {
        self.inner.write_vectored_at(offset, bufs)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

/// An engine over `RecordingFs` over `FaultFs` over `MemFs`.
struct Harness {
    mem: MemFs,
    fault: FaultFs,
    reads: ReadLog,
    engine: Engine,
}

impl Harness {
    fn new(config: Config) -> Harness {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let reads = ReadLog::default();
        let fs = RecordingFs {
            inner: Arc::new(fault.clone()),
            reads: reads.clone(),
        };
        let engine = Engine::open_with_fs(DIR, config, Arc::new(fs)).expect("open");
        Harness {
            mem,
            fault,
            reads,
            engine,
        }
    }

    /// The records of the active append file: `(offset, len)` each.
    fn records(&self) -> (PathBuf, Vec<(u64, u64)>) {
        let mut names: Vec<String> = self
            .mem
            .list(Path::new(DIR))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".raftlog") && !n.starts_with("recycle-"))
            .collect();
        names.sort();
        let path = Path::new(DIR).join(names.last().expect("an append file"));
        let f = self.mem.open(&path, false).unwrap();
        let mut bytes = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(0, &mut bytes).unwrap();
        let scan = scan_file(&bytes).expect("an undamaged file");
        let records = scan
            .records
            .iter()
            .map(|r| (r.offset, r.len as u64))
            .collect();
        (path, records)
    }

    /// Returns the reads made since the last call.
    fn take_reads(&self) -> Vec<(PathBuf, u64, usize)> {
        std::mem::take(&mut *self.reads.lock())
    }
}

fn entry(index: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (index as usize * 31 + i * 7) as u8)
        .collect()
}

/// Writes `records` batches of `per_record` entries of `len` bytes into
/// group 1, from index 1: one record each.
fn write_records(engine: &Engine, records: u64, per_record: u64, len: usize) {
    for r in 0..records {
        let first = 1 + r * per_record;
        let entries: Vec<Vec<u8>> = (first..first + per_record).map(|i| entry(i, len)).collect();
        let mut batch = LogBatch::new();
        batch.add_entries(1, first, &entries);
        engine.write(&mut batch, false).unwrap();
    }
}

#[test]
fn fetch_entries_to_stops_at_the_budget_without_reading_the_next_record() {
    let h = Harness::new(config());
    // Ten records of four 100-byte entries: record r holds 4r+1..=4r+4.
    write_records(&h.engine, 10, 4, 100);
    let (path, records) = h.records();
    assert_eq!(records.len(), 10);
    h.take_reads();

    // (budget, entries appended, records read): the record holding the first
    // entry over the budget is read, to learn its size, and none after it.
    for (budget, want, read) in [
        (Some(950), 9, 3),
        (Some(900), 9, 3),
        (Some(800), 8, 3),
        (Some(799), 7, 2),
        (Some(0), 1, 1),
        (Some(1), 1, 1),
        (None, 40, 10),
    ] {
        let mut out = vec![b"kept".to_vec()];
        let n = h
            .engine
            .fetch_entries_to(1, 1, 41, budget, &mut out)
            .unwrap();
        assert_eq!(n, want, "budget {budget:?}");
        assert_eq!(out.len(), 1 + want, "budget {budget:?}");
        assert_eq!(out[0], b"kept", "the caller's entries stay");
        for (k, e) in out[1..].iter().enumerate() {
            assert_eq!(*e, entry(1 + k as u64, 100), "budget {budget:?}");
        }
        let reads = h.take_reads();
        let expected: Vec<_> = records[..read]
            .iter()
            .map(|&(offset, len)| (path.clone(), offset, len as usize))
            .collect();
        assert_eq!(reads, expected, "budget {budget:?}: one read per record");
    }

    // From the middle of a record: entries 3..=10 span records 0, 1 and 2.
    let mut out = Vec::new();
    let n = h
        .engine
        .fetch_entries_to(1, 3, 41, Some(500), &mut out)
        .unwrap();
    assert_eq!(n, 5);
    assert_eq!(out[0], entry(3, 100));
    assert_eq!(h.take_reads().len(), 2);

    // The wrapper keeps its meaning.
    assert_eq!(h.engine.fetch_entries(1, 1, 41, 950).unwrap().len(), 9);
}

#[test]
fn a_flipped_bit_after_the_budget_is_never_seen() {
    let h = Harness::new(config());
    write_records(&h.engine, 6, 4, 100);
    let (path, records) = h.records();
    // Damage the fourth record's payload, as read from now on.
    let (offset, len) = records[3];
    h.fault.flip_bit_on_read(&path, offset + len - 10, 3);

    let mut out = Vec::new();
    let n = h
        .engine
        .fetch_entries_to(1, 1, 25, Some(1_150), &mut out)
        .unwrap();
    assert_eq!(
        n, 11,
        "entry 12 goes over the budget; record 3 is never read"
    );

    // The flip is real: a fetch that reaches the record sees it.
    let mut out = vec![b"kept".to_vec()];
    let err = h
        .engine
        .fetch_entries_to(1, 1, 25, Some(1_300), &mut out)
        .unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    assert_eq!(
        out,
        vec![b"kept".to_vec()],
        "an error leaves `out` as it was"
    );
    assert!(matches!(
        h.engine.get_entry(1, 13),
        Err(Error::Corruption { .. })
    ));
    assert_eq!(h.engine.get_entry(1, 12).unwrap(), Some(entry(12, 100)));
}

#[test]
fn get_entry_reads_exactly_its_record_and_verifies_all_of_it() {
    let h = Harness::new(config());
    write_records(&h.engine, 5, 8, 1_000);
    let (path, records) = h.records();
    let (offset, len) = records[2];
    h.take_reads();

    // Entry 21 is the fifth of the third record.
    assert_eq!(h.engine.get_entry(1, 21).unwrap(), Some(entry(21, 1_000)));
    let reads = h.take_reads();
    assert_eq!(reads, vec![(path.clone(), offset, len as usize)]);
    let file_len = h.mem.open(&path, false).unwrap().len().unwrap();
    assert!(len < file_len, "one record of a {file_len}-byte file");

    // A flip in another entry of the record: the payload checksum catches it.
    let payload_end = offset + len;
    h.fault.flip_bit_on_read(&path, payload_end - 10, 0);
    assert!(matches!(
        h.engine.get_entry(1, 21),
        Err(Error::Corruption { .. })
    ));
    h.fault.clear_faults();
    // A flip in the entry's own bytes would be returned as data by a read of
    // only those bytes; the whole-record check refuses it.
    let fifth = payload_end - 4 * 1_000 + 500;
    h.fault.flip_bit_on_read(&path, fifth, 5);
    let got = h.engine.get_entry(1, 21);
    assert!(matches!(got, Err(Error::Corruption { .. })), "{got:?}");
    h.fault.clear_faults();
    assert_eq!(h.engine.get_entry(1, 21).unwrap(), Some(entry(21, 1_000)));
    // The records around it were never in question.
    assert_eq!(h.engine.get_entry(1, 16).unwrap(), Some(entry(16, 1_000)));
}

#[test]
fn used_bytes_grows_with_writes_and_falls_after_purge() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), config()).unwrap();
    assert_eq!(engine.path(), dir.path());
    let empty = engine.used_bytes();
    assert!(empty > 0, "the active file is on disk");

    // About twenty files of entries.
    write_records(&engine, 320, 4, 1_000);
    let full = engine.used_bytes();
    let stats = engine.file_stats();
    assert!(stats.append_files > 10, "{stats:?}");
    assert!(full > empty, "{full} after writes, {empty} before");
    assert!(full >= stats.append_bytes, "{full} vs {stats:?}");
    assert_eq!(
        full,
        on_disk(dir.path()),
        "every log file, recycled ones aside"
    );

    engine.compact_to(1, engine.last_index(1).unwrap()).unwrap();
    let purged = engine.purge().unwrap();
    assert!(purged.files_purged > 10, "{purged:?}");
    let after = engine.used_bytes();
    assert!(after < full / 4, "{after} after purge, {full} before");
    assert_eq!(after, on_disk(dir.path()));
    assert_eq!(engine.get_entry(1, 1280).unwrap(), Some(entry(1280, 1_000)));
}

/// Bytes of the directory's log files, leaving out recycled ones.
fn on_disk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            !name.starts_with("recycle-")
                && (name.ends_with(".raftlog") || name.ends_with(".rewrite"))
        })
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// A range of a model log: the answer `fetch_entries_to` owes.
fn expected_fetch(
    log: &BTreeMap<u64, Vec<u8>>,
    begin: u64,
    end: u64,
    budget: Option<usize>,
) -> Result<Vec<Vec<u8>>, String> {
    if begin > end {
        return Err("invalid".into());
    }
    if begin == end {
        return Ok(Vec::new());
    }
    let (Some(&first), Some(&last)) = (log.keys().next(), log.keys().next_back()) else {
        return Err(format!("unavailable {begin}"));
    };
    if begin < first {
        return Err(format!("compacted {first}"));
    }
    if end - 1 > last {
        return Err(format!("unavailable {}", begin.max(last + 1)));
    }
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for e in log.range(begin..end).map(|(_, e)| e) {
        if !out.is_empty() && bytes + e.len() > budget.unwrap_or(usize::MAX) {
            break;
        }
        bytes += e.len();
        out.push(e.clone());
    }
    Ok(out)
}

fn describe(r: strata_raftlog::Result<Vec<Vec<u8>>>) -> Result<Vec<Vec<u8>>, String> {
    r.map_err(|e| match e {
        Error::InvalidArgument(_) => "invalid".into(),
        Error::Compacted { first, .. } => format!("compacted {first}"),
        Error::Unavailable { index, .. } => format!("unavailable {index}"),
        other => panic!("unexpected error {other}"),
    })
}

/// A step of a random log.
#[derive(Clone, Debug)]
enum Step {
    /// Entries of these lengths, from `back` entries before the end (a Raft
    /// conflict replaces them), with entries of group 2 in the same record
    /// when `shared`.
    Append {
        back: u64,
        lens: Vec<usize>,
        shared: bool,
    },
    /// Compacts the first `ahead` entries away.
    Compact { ahead: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..3, prop::collection::vec(prop_oneof![0usize..40, 200usize..3_000], 1..8), any::<bool>())
            .prop_map(|(back, lens, shared)| Step::Append { back, lens, shared }),
        1 => (1u64..6).prop_map(|ahead| Step::Compact { ahead }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn fetch_and_get_agree_with_a_btreemap_model(
        steps in prop::collection::vec(step(), 1..40),
        queries in prop::collection::vec((0u64..120, 0u64..120, prop::option::of(0usize..6_000)), 1..24),
    ) {
        // Compression from 128 bytes mixes plain and LZ4 records.
        let config = Config { compression_threshold_bytes: 128, ..config() };
        let engine = Engine::open_with_fs(DIR, config, Arc::new(MemFs::new())).unwrap();
        let mut log: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        let mut next = 1u64;
        let mut next_other = 1u64;
        for (n, s) in steps.iter().enumerate() {
            match s {
                Step::Append { back, lens, shared } => {
                    let first = next.saturating_sub(*back).max(1);
                    let entries: Vec<Vec<u8>> = lens
                        .iter()
                        .enumerate()
                        .map(|(k, len)| entry(n as u64 * 100 + k as u64, *len))
                        .collect();
                    let mut batch = LogBatch::new();
                    if *shared {
                        batch.add_entries(2, next_other, &[b"other".as_slice()]);
                        next_other += 1;
                    }
                    batch.add_entries(1, first, &entries);
                    engine.write(&mut batch, false).unwrap();
                    log.retain(|i, _| *i < first);
                    for (k, e) in entries.into_iter().enumerate() {
                        log.insert(first + k as u64, e);
                    }
                    next = first + lens.len() as u64;
                }
                Step::Compact { ahead } => {
                    let Some(&first) = log.keys().next() else { continue };
                    let to = (first + ahead).min(next - 1);
                    engine.compact_to(1, to).unwrap();
                    log.retain(|i, _| *i >= to);
                }
            }
        }
        for (begin, end, budget) in queries {
            let mut out = Vec::new();
            let got = engine
                .fetch_entries_to(1, begin, end, budget, &mut out)
                .map(|n| { assert_eq!(n, out.len()); out });
            prop_assert_eq!(describe(got), expected_fetch(&log, begin, end, budget),
                "fetch {}..{} budget {:?}", begin, end, budget);
            prop_assert_eq!(engine.get_entry(1, begin).unwrap(), log.get(&begin).cloned());
        }
        if let (Some(&first), Some(&last)) = (log.keys().next(), log.keys().next_back()) {
            let all = engine.fetch_entries(1, first, last + 1, usize::MAX).unwrap();
            prop_assert!(all.iter().eq(log.values()));
        }
    }

    #[test]
    fn scan_keys_in_agrees_with_filtering_a_btreemap(
        keys in prop::collection::btree_map(prop::collection::vec(0u8..4, 1..3), prop::collection::vec(any::<u8>(), 0..4), 0..16),
        ranges in prop::collection::vec((bound(), bound(), 0usize..20), 1..24),
    ) {
        let engine = Engine::open_with_fs(DIR, config(), Arc::new(MemFs::new())).unwrap();
        let mut batch = LogBatch::new();
        for (k, v) in &keys {
            batch.put(1, k, v);
        }
        batch.put(2, b"\x01", b"another group");
        engine.write(&mut batch, false).unwrap();
        for (start, end, stop_after) in ranges {
            let range = (as_ref(&start), as_ref(&end));
            let inverted = match range {
                (Bound::Included(lo) | Bound::Excluded(lo), Bound::Included(hi) | Bound::Excluded(hi)) => lo > hi,
                _ => false,
            };
            let want: Vec<(Vec<u8>, Vec<u8>)> = keys
                .iter()
                .filter(|(k, _)| contains(range, k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut got = Vec::new();
            let r = engine.scan_keys_in(1, range, |k, v| {
                got.push((k.to_vec(), v.to_vec()));
                got.len() < stop_after
            });
            if inverted {
                prop_assert!(matches!(r, Err(Error::InvalidArgument(_))), "{:?}: {:?}", range, r);
                prop_assert!(got.is_empty());
                continue;
            }
            r.unwrap();
            let n = want.len().min(stop_after.max(1));
            prop_assert_eq!(&got, &want[..n], "{:?} stopping after {}", range, stop_after);
            // A group without keys has none in any range.
            let mut none = true;
            engine.scan_keys_in(9, range, |_, _| { none = false; true }).unwrap();
            prop_assert!(none);
        }
        let mut all = Vec::new();
        engine.scan_keys_in(1, .., |k, v| { all.push((k.to_vec(), v.to_vec())); true }).unwrap();
        prop_assert_eq!(all, engine.scan_keys(1));
    }
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    let key = prop::collection::vec(0u8..4, 0..3);
    prop_oneof![
        key.clone().prop_map(Bound::Included),
        key.prop_map(Bound::Excluded),
        Just(Bound::Unbounded),
    ]
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(|k| k.as_slice())
}

fn contains(range: (Bound<&[u8]>, Bound<&[u8]>), key: &[u8]) -> bool {
    let above = match range.0 {
        Bound::Included(lo) => key >= lo,
        Bound::Excluded(lo) => key > lo,
        Bound::Unbounded => true,
    };
    let below = match range.1 {
        Bound::Included(hi) => key <= hi,
        Bound::Excluded(hi) => key < hi,
        Bound::Unbounded => true,
    };
    above && below
}

#[test]
fn scan_keys_in_callback_may_write_to_the_group() {
    let engine = Engine::open_with_fs(DIR, config(), Arc::new(MemFs::new())).unwrap();
    let mut batch = LogBatch::new();
    for k in [b"a", b"b", b"c"] {
        batch.put(1, k, b"old");
    }
    engine.write(&mut batch, true).unwrap();
    let mut seen = Vec::new();
    engine
        .scan_keys_in(1, &b"a"[..]..&b"c"[..], |k, v| {
            // Runs outside the group's lock: writing the group cannot deadlock.
            let mut batch = LogBatch::new();
            batch.put(1, k, b"new");
            engine.write(&mut batch, false).unwrap();
            seen.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
    assert_eq!(
        seen,
        vec![
            (b"a".to_vec(), b"old".to_vec()),
            (b"b".to_vec(), b"old".to_vec())
        ],
        "one view, taken before the callback ran"
    );
    assert_eq!(engine.get(1, b"a").unwrap(), b"new");
    assert_eq!(engine.get(1, b"c").unwrap(), b"old");
}

#[test]
fn hostile_arguments_get_typed_errors_at_once() {
    let engine = Engine::open_with_fs(DIR, config(), Arc::new(MemFs::new())).unwrap();
    write_records(&engine, 5, 4, 10);
    engine.compact_to(1, 5).unwrap();
    let mut batch = LogBatch::new();
    batch.put(7, b"state", b"only keys");
    engine.write(&mut batch, false).unwrap();

    let started = Instant::now();
    let mut out = vec![b"kept".to_vec()];
    let mut fetch = |group, begin, end| {
        let r = engine.fetch_entries_to(group, begin, end, Some(usize::MAX), &mut out);
        assert_eq!(
            out,
            vec![b"kept".to_vec()],
            "{group} {begin}..{end}: out untouched"
        );
        r
    };
    for (begin, end) in [(2, 1), (u64::MAX, 0), (u64::MAX, u64::MAX - 1), (21, 5)] {
        let r = fetch(1, begin, end);
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{begin}..{end}: {r:?}"
        );
    }
    for (begin, end) in [(0, u64::MAX), (1, 2), (4, 21), (0, 1)] {
        let r = fetch(1, begin, end);
        assert!(
            matches!(r, Err(Error::Compacted { group: 1, index, first: 5 }) if index == begin),
            "{begin}..{end}: {r:?}"
        );
    }
    for (begin, end, index) in [
        (5, u64::MAX, 21),
        (5, 22, 21),
        (21, 22, 21),
        (30, 31, 30),
        (u64::MAX - 1, u64::MAX, u64::MAX - 1),
    ] {
        let r = fetch(1, begin, end);
        assert!(
            matches!(r, Err(Error::Unavailable { group: 1, index: i }) if i == index),
            "{begin}..{end}: {r:?}"
        );
    }
    for group in [7, 99, u64::MAX] {
        for (begin, end) in [(0, u64::MAX), (1, 2)] {
            let r = fetch(group, begin, end);
            assert!(
                matches!(r, Err(Error::Unavailable { index, .. }) if index == begin),
                "group {group} {begin}..{end}: {r:?}"
            );
        }
    }
    for (group, at) in [(1, 0), (1, u64::MAX), (99, u64::MAX), (7, 1)] {
        assert!(matches!(fetch(group, at, at), Ok(0)), "an empty range");
    }
    assert_eq!(
        engine.fetch_entries(1, 5, 21, 0).unwrap(),
        vec![entry(5, 10)]
    );
    assert!(matches!(
        engine.fetch_entries(1, 6, 5, usize::MAX),
        Err(Error::InvalidArgument(_))
    ));
    for (group, index) in [(1, 0), (1, 4), (1, 21), (1, u64::MAX), (7, 1), (99, 1)] {
        assert_eq!(engine.get_entry(group, index).unwrap(), None);
    }
    assert_eq!(engine.first_index(u64::MAX), None);
    assert_eq!(engine.get(u64::MAX, &[]), None);
    let never = |_: &[u8], _: &[u8]| -> bool { panic!("called on an empty or refused range") };
    let (b, a): (&[u8], &[u8]) = (b"b", b"a");
    assert!(matches!(
        engine.scan_keys_in(7, b..a, never),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        engine.scan_keys_in(99, b..=a, never),
        Err(Error::InvalidArgument(_))
    ));
    engine
        .scan_keys_in(7, (Bound::Excluded(a), Bound::Excluded(a)), never)
        .unwrap();
    engine.scan_keys_in(7, a..a, never).unwrap();
    engine
        .scan_keys_in(7, (Bound::Excluded(a), Bound::Included(a)), never)
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "hostile arguments took {:?}",
        started.elapsed()
    );
}
