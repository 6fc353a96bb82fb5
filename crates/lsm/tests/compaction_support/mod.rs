//! Helpers shared by the `compaction_*` tests: writing input SST files from
//! a list of versions, an output context over a MemFs, and reading what a
//! reader at a snapshot sees through a set of files, consulting for each key
//! only the files whose key range contains it (as a point lookup does).

#![allow(dead_code)]

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_lsm::compaction::OutputContext;
use strata_lsm::{
    Compression, FileDesc, FileMeta, FileNumber, InternalKey, ObsoleteFiles, RangeTombstone,
    RangeTombstoneSet, SeqNo, SstReader, SstWriter, SstWriterOptions, ValueKind, MAX_SEQNO,
};

pub const DIR: &str = "/db";

/// A point version: user key, seqno, kind (Put or Delete), value.
pub type Point = (Vec<u8>, SeqNo, ValueKind, Vec<u8>);

/// A fresh in-memory file system with the database directory.
pub fn mem_fs() -> Arc<MemFs> {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new(DIR)).unwrap();
    fs
}

/// Writer options that make tiny blocks, so a few entries fill a file.
pub fn tiny_options() -> SstWriterOptions {
    SstWriterOptions {
        block_size_bytes: 64,
        restart_interval: 2,
        compression: Compression::None,
        index_partition_bytes: 64,
        ..SstWriterOptions::default()
    }
}

/// The path of file `number` under [`DIR`].
pub fn path_of(number: FileNumber) -> PathBuf {
    Path::new(DIR).join(strata_lsm::compaction::sst_file_name(number))
}

/// Writes `points` (any order) and `tombstones` to SST file `number` and
/// returns its description: its range covers the points and tombstones.
pub fn write_sst(
    fs: &dyn FileSystem,
    number: FileNumber,
    points: &[Point],
    tombstones: &[RangeTombstone],
) -> FileDesc {
    let mut sorted: Vec<(InternalKey, Vec<u8>)> = points
        .iter()
        .map(|(k, s, kind, v)| (InternalKey::new(k, *s, *kind), v.clone()))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut w = SstWriter::create(fs, &path_of(number), tiny_options()).unwrap();
    for (k, v) in &sorted {
        w.add(k.encoded(), v).unwrap();
    }
    let mut smallest = sorted.first().map(|(k, _)| k.clone());
    let mut largest = sorted.last().map(|(k, _)| k.clone());
    for t in tombstones {
        w.add_range_delete(&t.start, &t.end, t.seqno).unwrap();
        let s = InternalKey::new(&t.start, t.seqno, ValueKind::RangeDelete);
        let e = InternalKey::new(&t.end, MAX_SEQNO, ValueKind::RangeDelete);
        if smallest.as_ref().is_none_or(|k| s < *k) {
            smallest = Some(s);
        }
        if largest.as_ref().is_none_or(|k| e > *k) {
            largest = Some(e);
        }
    }
    let info = w.finish().unwrap();
    FileDesc {
        number,
        size: info.file_size,
        smallest: smallest.expect("a file with something in it"),
        largest: largest.unwrap(),
        smallest_seqno: info.properties.smallest_seqno,
        largest_seqno: info.properties.largest_seqno,
        blob_refs: Vec::new(),
        range_tombstones: false,
    }
}

/// Wraps a description in file metadata (for a hand-made compaction).
pub fn meta(desc: FileDesc) -> Arc<FileMeta> {
    let (queue, _rx) = ObsoleteFiles::channel();
    Arc::new(FileMeta::new(desc, queue))
}

/// Allocates file numbers from `next`.
pub struct Numbers(pub Cell<FileNumber>);

impl Numbers {
    pub fn new(first: FileNumber) -> Numbers {
        Numbers(Cell::new(first))
    }
    pub fn next(&self) -> FileNumber {
        let n = self.0.get();
        self.0.set(n + 1);
        n
    }
}

/// An output context writing to [`DIR`] of `fs`.
pub fn context<'a>(
    fs: &'a dyn FileSystem,
    numbers: &'a dyn Fn() -> FileNumber,
    snapshots: &'a [SeqNo],
    bottommost: bool,
    target_file_bytes: u64,
) -> OutputContext<'a> {
    OutputContext {
        fs,
        dir: Path::new(DIR),
        writer_options: tiny_options(),
        target_file_bytes,
        grandparents: &[],
        new_file_number: numbers,
        snapshots,
        bottommost,
        filter: None,
        output_level: 1,
        rate_limiter: None,
        collectors: None,
        blob: None,
        blob_gc: None,
    }
}

/// The contents of one file as a reader finds them.
#[derive(Debug, Clone)]
pub struct Contents {
    pub desc: FileDesc,
    pub points: Vec<Point>,
    pub tombstones: Vec<RangeTombstone>,
}

/// Reads every point and tombstone of the file `desc` describes.
pub fn read_file(fs: &dyn FileSystem, desc: &FileDesc) -> Contents {
    let r = SstReader::open(fs, &path_of(desc.number), desc.number, None).unwrap();
    let mut it = r.iter();
    it.first().unwrap();
    let mut points = Vec::new();
    while it.valid() {
        points.push((
            it.user_key().to_vec(),
            it.seqno(),
            it.kind(),
            it.value().to_vec(),
        ));
        it.next().unwrap();
    }
    let tombstones = r
        .range_tombstones()
        .iter()
        .map(|t| RangeTombstone {
            start: t.start.clone(),
            end: t.end.clone(),
            seqno: t.seqno,
        })
        .collect();
    Contents {
        desc: desc.clone(),
        points,
        tombstones,
    }
}

/// What a reader at `snapshot` sees for `key` through `files`, consulting
/// only the files whose key range contains the key: the newest version at
/// or below the snapshot unless a newer tombstone at or below it covers it.
pub fn visible(files: &[Contents], key: &[u8], snapshot: SeqNo) -> Option<Vec<u8>> {
    let mut newest: Option<(SeqNo, ValueKind, &[u8])> = None;
    let mut tombstones = Vec::new();
    for f in files.iter().filter(|f| f.desc.contains_user_key(key)) {
        for (k, s, kind, v) in &f.points {
            if k.as_slice() == key && *s <= snapshot && newest.is_none_or(|(n, _, _)| *s > n) {
                newest = Some((*s, *kind, v));
            }
        }
        tombstones.extend(f.tombstones.iter().cloned());
    }
    let covering = RangeTombstoneSet::new(&tombstones, snapshot).max_covering_seqno(key);
    match newest {
        Some((s, ValueKind::Put, v)) if covering.is_none_or(|t| t < s) => Some(v.to_vec()),
        _ => None,
    }
}

/// The model: what a reader at `snapshot` sees for `key` after `ops`.
pub fn model_visible(
    points: &[Point],
    tombstones: &[RangeTombstone],
    key: &[u8],
    snapshot: SeqNo,
) -> Option<Vec<u8>> {
    let newest = points
        .iter()
        .filter(|(k, s, _, _)| k.as_slice() == key && *s <= snapshot)
        .max_by_key(|(_, s, _, _)| *s);
    let covering = tombstones
        .iter()
        .filter(|t| t.seqno <= snapshot && t.start.as_slice() <= key && key < t.end.as_slice())
        .map(|t| t.seqno)
        .max();
    match newest {
        Some((_, s, ValueKind::Put, v)) if covering.is_none_or(|t| t < *s) => Some(v.clone()),
        _ => None,
    }
}

/// Checks that `outputs` are in key order with disjoint ranges, and that
/// each file's range covers what it holds.
pub fn check_ranges(outputs: &[Contents]) {
    for w in outputs.windows(2) {
        assert!(
            w[0].desc.largest.user_key() < w[1].desc.smallest.user_key(),
            "outputs {} and {} overlap: {:?} / {:?}",
            w[0].desc.number,
            w[1].desc.number,
            w[0].desc,
            w[1].desc
        );
    }
    for f in outputs {
        for (k, s, kind, _) in &f.points {
            let ik = InternalKey::new(k, *s, *kind);
            assert!(
                f.desc.smallest <= ik && ik <= f.desc.largest,
                "{ik:?} outside {:?}",
                f.desc
            );
        }
        for t in &f.tombstones {
            assert!(
                f.desc.smallest.user_key() <= t.start.as_slice(),
                "{t:?} outside {:?}",
                f.desc
            );
            assert!(t.end.as_slice() > f.desc.smallest.user_key());
            // The last covered key (just below `end`) is within the range:
            // `largest >= end` or end is the successor of `largest`.
            let l = f.desc.largest.user_key();
            let mut succ = l.to_vec();
            succ.push(0);
            assert!(
                t.end.as_slice() <= succ.as_slice(),
                "{t:?} past {:?}",
                f.desc
            );
        }
    }
}

/// Groups versions by user key, newest first.
pub fn by_key(points: &[Point]) -> BTreeMap<Vec<u8>, Vec<(SeqNo, ValueKind)>> {
    let mut m: BTreeMap<Vec<u8>, Vec<(SeqNo, ValueKind)>> = BTreeMap::new();
    for (k, s, kind, _) in points {
        m.entry(k.clone()).or_default().push((*s, *kind));
    }
    for v in m.values_mut() {
        v.sort_by_key(|e| std::cmp::Reverse(e.0));
    }
    m
}
