//! A bit flipped at every offset of small synced WAL files, in every
//! recovery mode: replay never returns a wrong payload. The flip is
//! `Corruption` naming the file and offset, except where the rules allow a
//! cut: in `TolerateTailCorruption`, damage in the last file that no later
//! record places in synced data (the last append, its end marker); in
//! `TolerateAnyCorruption`, anywhere, replay stopping at the damaged record.

use std::path::Path;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_log::record::scan_file;
use strata_lsm::wal::{replay, wal_file_name, WalWriter, WAL_FORMAT};
use strata_lsm::{Error, RecoveryMode};

const DIR: &str = "/db";
const NUMBERS: [u64; 2] = [4, 9];

/// Two files of three appends each, every append synced; the first closed
/// durably (its marker, an empty batch, last), as the engine closes every
/// file before the last.
fn setup() -> (Arc<MemFs>, Vec<(u64, Vec<u8>)>) {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new(DIR)).unwrap();
    let dyn_fs: Arc<dyn FileSystem> = fs.clone();
    let mut all = Vec::new();
    for number in NUMBERS {
        let mut w = WalWriter::create(dyn_fs.clone(), Path::new(DIR), number).unwrap();
        for i in 0..3u8 {
            let p = vec![i + number as u8; 5 + i as usize];
            w.append(&[&p]).unwrap();
            w.sync().unwrap();
            all.push((number, p));
        }
        if number != NUMBERS[NUMBERS.len() - 1] {
            w.close_durably().unwrap();
            all.push((number, strata_lsm::WriteBatch::new().payload().to_vec()));
        }
    }
    (fs, all)
}

fn read(fs: &MemFs, path: &Path) -> Vec<u8> {
    let f = fs.open(path, false).unwrap();
    let mut buf = vec![0; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut buf).unwrap();
    buf
}

#[test]
fn a_flip_anywhere_is_corruption_or_an_allowed_cut_never_a_wrong_payload() {
    let (fs, all) = setup();
    for (file_index, number) in NUMBERS.into_iter().enumerate() {
        let is_last = file_index + 1 == NUMBERS.len();
        let path = Path::new(DIR).join(wal_file_name(number));
        let clean = read(&fs, &path);
        let scan = scan_file(&WAL_FORMAT, &clean, |_| Ok(())).unwrap();
        // Records of earlier files, and where this file's records start.
        let before = all.iter().filter(|(n, _)| *n < number).count();
        let starts: Vec<u64> = scan.records.iter().map(|r| r.offset).collect();
        let last_start = *starts.last().unwrap();
        for offset in 0..clean.len() as u64 {
            let mask = 1u8 << (offset % 8);
            fs.corrupt(&path, offset, mask).unwrap();
            // The records of this file wholly before the flip.
            let kept = scan
                .records
                .iter()
                .filter(|r| r.offset + r.len as u64 <= offset)
                .count();
            let damaged_at = if offset < 24 {
                0
            } else {
                scan.records.get(kept).map_or(scan.valid_end, |r| r.offset)
            };
            for mode in [
                RecoveryMode::AbsoluteConsistency,
                RecoveryMode::TolerateTailCorruption,
                RecoveryMode::TolerateAnyCorruption,
            ] {
                let case = format!("file {number}, offset {offset}, {mode:?}");
                let mut got = Vec::new();
                let r = replay(&*fs, Path::new(DIR), 0, mode, |n, p| {
                    got.push((n, p.to_vec()));
                    Ok(())
                });
                // Whatever was applied is a prefix of what was written.
                assert_eq!(got[..], all[..got.len()], "{case}");
                let cut_allowed = match mode {
                    RecoveryMode::AbsoluteConsistency => false,
                    RecoveryMode::TolerateTailCorruption => is_last && offset >= last_start,
                    RecoveryMode::TolerateAnyCorruption => true,
                };
                match r {
                    Ok(rep) => {
                        assert!(cut_allowed, "{case}: opened");
                        assert_eq!(got.len(), before + kept, "{case}");
                        assert_eq!(rep.cuts.len(), 1, "{case}");
                        assert_eq!(rep.cuts[0].path, path, "{case}");
                        assert_eq!(rep.cuts[0].offset, damaged_at, "{case}");
                    }
                    Err(Error::Corruption {
                        path: p,
                        offset: at,
                        ..
                    }) => {
                        assert!(!cut_allowed, "{case}: refused");
                        assert_eq!(p, path, "{case}");
                        assert_eq!(at, damaged_at, "{case}");
                    }
                    Err(e) => panic!("{case}: {e}"),
                }
            }
            fs.corrupt(&path, offset, mask).unwrap();
        }
    }
}
