//! Oracles for the lsm's record files: the WAL's replay and the manifest's
//! record decoder. Each takes any bytes; nothing may panic, and what is
//! accepted must hold together across the recovery modes.

use std::path::Path;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_lsm::wal::{replay, wal_file_name};
use strata_lsm::RecoveryMode;

const DIR: &str = "/db";

/// Splits `data` into the bytes of one or two WAL files: byte 0 even, one
/// file (`data[1..]`); odd, two, the first `u16 LE` at `data[1..3]` long
/// (clamped), the second the rest.
pub fn wal_files(data: &[u8]) -> Vec<&[u8]> {
    let Some((&pick, rest)) = data.split_first() else {
        return vec![];
    };
    if pick & 1 == 0 || rest.len() < 2 {
        return vec![rest];
    }
    let len = u16::from_le_bytes([rest[0], rest[1]]) as usize;
    let rest = &rest[2..];
    let (a, b) = rest.split_at(len.min(rest.len()));
    vec![a, b]
}

/// Builds a directory holding `files` as WAL files 1, 2, ...
pub fn wal_dir(files: &[&[u8]]) -> Arc<MemFs> {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new(DIR)).unwrap();
    for (i, bytes) in files.iter().enumerate() {
        let path = Path::new(DIR).join(wal_file_name(i as u64 + 1));
        fs.create(&path).unwrap().write_at(0, bytes).unwrap();
    }
    fs
}

/// Replays `data` (see [`wal_files`]) in every mode: none panics;
/// `TolerateAnyCorruption` always opens; a mode that opens replays the same
/// records as every more tolerant one, since they all stop at the first
/// damage they meet.
pub fn wal_replay(data: &[u8]) {
    let fs = wal_dir(&wal_files(data));
    let run = |mode| {
        let mut got = Vec::new();
        let r = replay(&*fs, Path::new(DIR), 0, mode, |n, p| {
            got.push((n, p.to_vec()));
            Ok(())
        });
        r.map(|r| {
            assert_eq!(r.records, got.len() as u64);
            assert!(r.files.windows(2).all(|w| w[0] < w[1]));
            (got, r.cuts.len())
        })
    };
    let absolute = run(RecoveryMode::AbsoluteConsistency);
    let tail = run(RecoveryMode::TolerateTailCorruption);
    let any = run(RecoveryMode::TolerateAnyCorruption).expect("the tolerant mode opens");
    if let Ok((got, cuts)) = &tail {
        assert_eq!(got, &any.0);
        assert_eq!(*cuts, any.1);
    }
    if let Ok((got, _)) = &absolute {
        assert_eq!(got, &any.0);
        assert!(tail.is_ok());
    }
}

/// Decodes `data` as one manifest record's payload: what is accepted
/// re-encodes to exactly `data` (the encoding is canonical) and every name
/// is within its bounds. Then reads `data` as a whole manifest named by
/// `CURRENT`: no panic, and what opens decodes records the same way.
pub fn manifest_decode(data: &[u8]) {
    use strata_lsm::manifest::{
        decode_records, encode_records, manifest_file_name, read_current, ManifestRecord,
        COLUMN_FAMILY_NAME_BYTES_MAX, CURRENT_FILE_NAME,
    };
    if let Ok(records) = decode_records(data) {
        for r in &records {
            if let ManifestRecord::CreateColumnFamily { name, .. } = r {
                assert!(!name.is_empty() && name.len() <= COLUMN_FAMILY_NAME_BYTES_MAX);
            }
        }
        assert_eq!(decode_records(&encode_records(&records)).unwrap(), records);
    }
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(DIR)).unwrap();
    let name = manifest_file_name(1);
    let current = Path::new(DIR).join(CURRENT_FILE_NAME);
    fs.create(&current)
        .unwrap()
        .write_at(0, format!("{name}\n").as_bytes())
        .unwrap();
    fs.create(&Path::new(DIR).join(&name))
        .unwrap()
        .write_at(0, data)
        .unwrap();
    if let Ok(Some(c)) = read_current(&fs, Path::new(DIR)) {
        assert_eq!(c.number, 1);
    }
}
