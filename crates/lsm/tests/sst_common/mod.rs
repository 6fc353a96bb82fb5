//! Helpers shared by the `sst_*` tests: a model of a file's contents, a
//! writer of the same contents, and full scans both ways.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_lsm::sst::{lookup_key, SstIter};
use strata_lsm::{
    BlockCache, Compression, Error, InternalKey, SeqNo, SstReader, SstWriter, SstWriterOptions,
    ValueKind,
};

/// What a file holds: internal key -> value, and range tombstones.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub entries: BTreeMap<InternalKey, Vec<u8>>,
    pub range_deletions: Vec<(Vec<u8>, Vec<u8>, SeqNo)>,
}

impl Model {
    /// The newest version of `user_key` at or below `snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
        let from = InternalKey::decode(&lookup_key(user_key, snapshot)).unwrap();
        let (k, v) = self.entries.range(from..).next()?;
        (k.user_key() == user_key).then(|| (k.kind(), v.clone()))
    }

    /// Entries as (encoded key, value), in order.
    pub fn list(&self) -> Entries {
        self.entries
            .iter()
            .map(|(k, v)| (k.encoded().to_vec(), v.clone()))
            .collect()
    }
}

/// Writes `model` to `path` with `options`.
pub fn write(fs: &dyn FileSystem, path: &Path, model: &Model, options: SstWriterOptions) -> u64 {
    let mut w = SstWriter::create(fs, path, options).unwrap();
    for (k, v) in &model.entries {
        w.add(k.encoded(), v).unwrap();
    }
    for (s, e, q) in &model.range_deletions {
        w.add_range_delete(s, e, *q).unwrap();
    }
    w.finish().unwrap().file_size
}

/// Options that make many tiny blocks and a partitioned index.
pub fn tiny(compression: Compression) -> SstWriterOptions {
    SstWriterOptions {
        block_size_bytes: 64,
        restart_interval: 2,
        compression,
        index_partition_bytes: 64,
        prefix_len: Some(2),
        ..SstWriterOptions::default()
    }
}

/// Opens `path` with a fresh cache.
pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<SstReader, Error> {
    SstReader::open(fs, path, 1, Some(Arc::new(BlockCache::new(1 << 20))))
}

/// Entries as (encoded internal key, value).
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every entry from `first()` on.
pub fn scan_forward(it: &mut SstIter) -> Result<Entries, Error> {
    let mut out = Vec::new();
    it.first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

/// Every entry from `last()` back, returned in ascending order.
pub fn scan_backward(it: &mut SstIter) -> Result<Entries, Error> {
    let mut out = Vec::new();
    it.last()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

/// An encoded blob reference into blob file `file`, distinct per `n`: the
/// value a `BlobIndex` entry must carry.
pub fn blob_ref(file: u64, n: u64) -> Vec<u8> {
    strata_lsm::blob::BlobRef {
        file_number: file,
        block_offset: n,
        block_size: 64,
        record_offset: 0,
        value_len: (n % 1000) as u32,
    }
    .encode()
}

/// A model of `n` user keys with a few versions each, every point kind, and
/// two range tombstones.
pub fn sample_model(n: u32) -> Model {
    let mut m = Model::default();
    for i in 0..n {
        let user = format!("key{:05}", i * 7);
        for v in 0..(1 + i % 3) as u64 {
            let seqno = 1 + v * 100 + i as u64;
            let kind = match (i + v as u32) % 4 {
                0 => ValueKind::Delete,
                1 | 2 => ValueKind::Put,
                _ => ValueKind::BlobIndex,
            };
            let value = match kind {
                ValueKind::Delete => Vec::new(),
                ValueKind::BlobIndex => blob_ref(u64::from(i % 3), seqno),
                _ => format!("value-{i}-{v}-{}", "x".repeat((i % 13) as usize)).into_bytes(),
            };
            m.entries
                .insert(InternalKey::new(user.as_bytes(), seqno, kind), value);
        }
    }
    m.range_deletions
        .push((b"key00010".to_vec(), b"key00100".to_vec(), 77));
    m.range_deletions
        .push((b"key00050".to_vec(), b"key00060".to_vec(), 500));
    m
}

/// A MemFs with `model` written to `/sst/000001.sst`.
pub fn memfs_with(model: &Model, options: SstWriterOptions) -> (Arc<MemFs>, std::path::PathBuf) {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new("/sst")).unwrap();
    let path = Path::new("/sst/000001.sst").to_path_buf();
    write(&*fs, &path, model, options);
    (fs, path)
}
