//! What the ingestion tests share: writing external SST files as the
//! convention wants them (every entry at seqno 0).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use strata_fs::FileSystem;
use strata_lsm::{InternalKey, SstWriter, SstWriterOptions, ValueKind};

/// Options for small external files: several blocks from little data.
pub fn external_options() -> SstWriterOptions {
    SstWriterOptions {
        block_size_bytes: 256,
        ..SstWriterOptions::default()
    }
}

/// Writes an external file at `path` holding `entries` (sorted, unique
/// keys; `None` is a deletion), all at seqno 0.
pub fn write_external(fs: &dyn FileSystem, path: &Path, entries: &[(Vec<u8>, Option<Vec<u8>>)]) {
    let mut w = SstWriter::create(fs, path, external_options()).expect("create external");
    for (k, v) in entries {
        match v {
            Some(v) => w
                .add(InternalKey::new(k, 0, ValueKind::Put).encoded(), v)
                .expect("add put"),
            None => w
                .add(InternalKey::new(k, 0, ValueKind::Delete).encoded(), b"")
                .expect("add delete"),
        }
    }
    w.finish().expect("finish external");
}

/// The puts of `keys`, each with a value naming `tag`.
pub fn puts(keys: impl IntoIterator<Item = Vec<u8>>, tag: &str) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    keys.into_iter()
        .map(|k| {
            let v = format!("{tag}:{}", String::from_utf8_lossy(&k)).into_bytes();
            (k, Some(v))
        })
        .collect()
}

/// A path for an external file outside the database directory.
pub fn external_path(name: &str) -> PathBuf {
    PathBuf::from(format!("/external/{name}.sst"))
}
