//! Damage to a written file never yields a wrong value or a panic: every
//! single-bit flip anywhere in the file (data, filter, range-deletion, index
//! partition, top-level index, properties and meta-index blocks, their
//! trailers, the footer) is reported as `Error::Corruption` naming the file,
//! either by `open` or by the first read of the damaged block; every
//! truncation is refused at `open`; flips seen only on read (`FaultFs`) are
//! caught the same way.

mod sst_common;

use std::path::Path;

use sst_common::*;
use strata_fs::{FaultFs, FileSystem};
use strata_lsm::{Compression, Error, SstReader};

/// Opens the file and reads all of it: scans both ways and looks up every
/// user key at its newest version. Returns the first error, after checking
/// that everything read before it matched the model.
fn read_all(fs: &dyn FileSystem, path: &Path, m: &Model) -> Result<(), Error> {
    let r = SstReader::open(fs, path, 9, None)?;
    let list = m.list();
    let fwd = scan_forward(&mut r.iter())?;
    assert_eq!(fwd, list, "forward scan returned wrong entries");
    let back = scan_backward(&mut r.iter())?;
    assert_eq!(back, list, "backward scan returned wrong entries");
    for k in m.entries.keys() {
        let got = r.get(k.user_key(), k.seqno())?;
        assert_eq!(
            got,
            m.get(k.user_key(), k.seqno()),
            "get returned a wrong value"
        );
    }
    let want: Vec<_> = m.range_deletions.clone();
    assert_eq!(r.range_tombstones().len(), want.len());
    assert_eq!(r.properties().num_entries, m.entries.len() as u64);
    Ok(())
}

fn assert_corruption(e: Error, path: &Path, what: &str) {
    match e {
        Error::Corruption { path: p, .. } => assert_eq!(p, path, "{what}"),
        other => panic!("{what}: expected corruption, got {other:?}"),
    }
}

#[test]
fn every_bit_flip_is_detected_in_every_compression() {
    let m = sample_model(60);
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let (fs, path) = memfs_with(&m, tiny(compression));
        read_all(&*fs, &path, &m).unwrap();
        let r = open(&*fs, &path).unwrap();
        assert!(
            r.properties().index_partitions > 1,
            "want a partitioned index"
        );
        let size = fs.open(&path, false).unwrap().len().unwrap();
        for offset in 0..size {
            let bit = (offset % 8) as u8;
            fs.corrupt(&path, offset, 1 << bit).unwrap();
            match read_all(&*fs, &path, &m) {
                Ok(()) => panic!("{compression:?}: flip at {offset} of {size} went unnoticed"),
                Err(e) => assert_corruption(e, &path, &format!("flip at {offset}")),
            }
            fs.corrupt(&path, offset, 1 << bit).unwrap();
        }
        read_all(&*fs, &path, &m).unwrap();
    }
}

#[test]
fn flips_on_read_are_detected() {
    let m = sample_model(40);
    let (mem, path) = memfs_with(&m, tiny(Compression::Lz4));
    let size = mem.open(&path, false).unwrap().len().unwrap();
    for offset in (0..size).step_by(37) {
        let fs = FaultFs::new(mem.clone());
        fs.flip_bit_on_read(&path, offset, 3);
        match read_all(&fs, &path, &m) {
            Ok(()) => panic!("flip on read at {offset} went unnoticed"),
            Err(e) => assert_corruption(e, &path, &format!("flip on read at {offset}")),
        }
    }
}

#[test]
fn truncated_files_are_refused() {
    let m = sample_model(30);
    let (fs, path) = memfs_with(&m, tiny(Compression::Zstd));
    let size = fs.open(&path, false).unwrap().len().unwrap();
    let original = {
        let f = fs.open(&path, false).unwrap();
        let mut b = vec![0u8; size as usize];
        f.read_exact_at(0, &mut b).unwrap();
        b
    };
    for len in 0..size {
        fs.set_len_raw(&path, len).unwrap();
        let e = SstReader::open(&*fs, &path, 1, None).unwrap_err();
        assert_corruption(e, &path, &format!("truncated to {len}"));
    }
    // Restoring the bytes restores the file.
    fs.set_len_raw(&path, size).unwrap();
    let f = fs.open(&path, true).unwrap();
    f.write_at(0, &original).unwrap();
    read_all(&*fs, &path, &m).unwrap();
}

#[test]
fn other_versions_and_magics_are_refused_by_name() {
    let m = sample_model(5);
    let (fs, path) = memfs_with(&m, tiny(Compression::None));
    let size = fs.open(&path, false).unwrap().len().unwrap();
    // The footer's version field is at footer + 36, its magic at footer + 44.
    let footer = size - 52;
    fs.corrupt(&path, footer + 36, 0x03).unwrap();
    let e = open(&*fs, &path).unwrap_err().to_string();
    assert!(e.contains("version 2 is not supported"), "{e}");
    fs.corrupt(&path, footer + 36, 0x03).unwrap();
    fs.corrupt(&path, footer + 44, 0x20).unwrap();
    let e = open(&*fs, &path).unwrap_err().to_string();
    assert!(e.contains("not an SST file"), "{e}");
}

/// `open` reads every index partition with one read; a damaged one is not
/// kept, and fails the lookups that need it (read again on first use), not
/// the open or the lookups served by other partitions.
#[test]
fn a_damaged_index_partition_fails_the_lookups_that_need_it_not_the_open() {
    let m = sample_model(60);
    let (fs, path) = memfs_with(&m, tiny(Compression::None));
    let r = open(&*fs, &path).unwrap();
    assert!(
        r.properties().index_partitions > 2,
        "want a partitioned index"
    );
    let index_at = r.footer().index.offset;
    let partitions_at = r
        .meta_index()
        .blocks
        .values()
        .filter(|h| h.offset < index_at)
        .map(|h| h.end().unwrap())
        .max()
        .unwrap();
    fs.corrupt(&path, (partitions_at + index_at) / 2, 0x10)
        .unwrap();
    let r = open(&*fs, &path).expect("a damaged partition does not fail the open");
    let (mut failed, mut found) = (0, 0);
    for k in m.entries.keys() {
        match r.get(k.user_key(), k.seqno()) {
            Ok(got) => {
                assert_eq!(got, m.get(k.user_key(), k.seqno()), "a wrong value");
                found += 1;
            }
            Err(e) => {
                assert_corruption(e, &path, "lookup through the damaged partition");
                failed += 1;
            }
        }
    }
    assert!(failed > 0 && found > 0, "failed {failed}, found {found}");
}
