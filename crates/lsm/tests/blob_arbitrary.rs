//! Feeds arbitrary and damaged bytes to the blob file decoders (the
//! reference codec, whole-file open, walk and lookups) and proves that none
//! panics and that a reference only ever answers with the value written
//! under it (the oracles of `fuzz/src/blob.rs`). Damaged files start from a
//! valid one with a flip, cut or insertion, and the damaged block's checksum
//! is not fixed up: the checks behind it are the unit tests' business.
//!
//! The fuzz oracles are included by path, so an input found by `cargo fuzz`
//! replays here; freeze such an input at the end as a named regression test.

#[path = "../fuzz/src/blob.rs"]
mod blob;

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::Index;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::blob::{BlobFileWriter, BlobRef, BlobWriterOptions};
use strata_lsm::Compression;

/// A small valid blob file of `n` records.
fn file_bytes(n: usize, compression: Compression) -> Vec<u8> {
    file_with(n, compression, 0)
}

/// A valid blob file of `n` records that trains a zstd dictionary of at
/// most `dictionary` bytes once `dictionary * 32` bytes of blocks are
/// written (0: none).
fn file_with(n: usize, compression: Compression, dictionary: usize) -> Vec<u8> {
    let fs = MemFs::new();
    let path = Path::new("/f.blob");
    let options = BlobWriterOptions {
        block_size_bytes: 200,
        compression,
        zstd_dictionary_bytes: dictionary,
        ..BlobWriterOptions::default()
    };
    let mut w = BlobFileWriter::create(&fs, path, 1, 0, options).unwrap();
    for i in 0..n {
        let value = format!("{{\"n\":{i},\"fill\":\"{}\"}}", "ab".repeat(i * 37 % 150));
        w.add(
            format!("k{i:03}").as_bytes(),
            i as u64 + 1,
            value.as_bytes(),
        )
        .unwrap();
        if w.block_full() {
            w.seal_block().unwrap();
        }
    }
    w.seal_block().unwrap();
    w.finish().unwrap();
    let f = fs.open(path, false).unwrap();
    let mut bytes = vec![0u8; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut bytes).unwrap();
    bytes
}

proptest! {
    #[test]
    fn arbitrary_references_never_panic(data in proptest::collection::vec(any::<u8>(), 0..48)) {
        blob::blob_ref(&data);
    }

    #[test]
    fn arbitrary_files_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        blob::blob_file(&data);
    }

    #[test]
    fn damaged_files_never_answer_a_wrong_value(
        n in 1usize..20,
        kind in 0u8..3,
        at in any::<Index>(),
        what in 0u8..3,
        byte in 1..=255u8,
    ) {
        let mut bytes = match kind {
            0 => file_bytes(n, Compression::None),
            1 => file_bytes(n, Compression::Lz4),
            _ => dictionary_file(),
        };
        let i = at.index(bytes.len());
        match what {
            0 => bytes[i] ^= byte,
            1 => bytes.truncate(i),
            _ => bytes.insert(i, byte),
        }
        blob::blob_file(&bytes);
    }
}

/// A file whose later blocks are compressed with a trained dictionary.
fn dictionary_file() -> Vec<u8> {
    static FILE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    FILE.get_or_init(|| file_with(160, Compression::Zstd, 512))
        .clone()
}

#[test]
fn valid_files_walk_and_read_back_whole() {
    for compression in [Compression::None, Compression::Lz4] {
        blob::blob_file(&file_bytes(30, compression));
    }
    let bytes = dictionary_file();
    let flags = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
    assert_eq!(flags, 1, "the file trained no dictionary");
    blob::blob_file(&bytes);
}

/// Writes the checked-in fuzz seeds of `blob_ref` and `blob_file`.
/// Run `cargo test -p strata-lsm --test blob_arbitrary -- --ignored`.
#[test]
#[ignore = "regenerates the checked-in fuzz seed corpus"]
fn write_fuzz_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let put = |target: &str, name: &str, bytes: &[u8]| {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    put("blob_file", "none", &file_bytes(8, Compression::None));
    put("blob_file", "lz4", &file_bytes(8, Compression::Lz4));
    put("blob_file", "zstd-dictionary", &dictionary_file());
    let r = BlobRef {
        file_number: 12,
        block_offset: 32,
        block_size: 300,
        record_offset: 40,
        value_len: 100,
    };
    put("blob_ref", "small", &r.encode());
}
