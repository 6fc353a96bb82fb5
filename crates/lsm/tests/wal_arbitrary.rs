//! Arbitrary bytes, and valid WAL files with damage, fed to replay as WAL
//! files: no panic in any mode, and the modes agree (the oracle of
//! `fuzz/src/log_files.rs`, which the `wal_replay` fuzz target runs).

#[path = "../fuzz/src/log_files.rs"]
#[allow(dead_code, reason = "the manifest oracle is another test's")]
mod log_files;

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::Index;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::wal::{wal_file_name, WalWriter};

/// The bytes of a valid WAL file `number` holding `payloads`, one append
/// each; every other append synced; closed durably (its marker last) as
/// the engine closes every file before the last.
fn valid_file(number: u64, payloads: &[Vec<u8>]) -> Vec<u8> {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new("/w")).unwrap();
    let mut w = WalWriter::create(fs.clone(), Path::new("/w"), number).unwrap();
    for (i, p) in payloads.iter().enumerate() {
        w.append(&[p]).unwrap();
        if i % 2 != 1 {
            w.sync().unwrap();
        }
    }
    w.close_durably().unwrap();
    let f = fs
        .open(&Path::new("/w").join(wal_file_name(number)), false)
        .unwrap();
    let mut buf = vec![0; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut buf).unwrap();
    buf
}

/// A two-file input for the oracle (see `log_files::wal_files`).
fn two_files(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut data = vec![1u8];
    data.extend_from_slice(&(a.len() as u16).to_le_bytes());
    data.extend_from_slice(a);
    data.extend_from_slice(b);
    data
}

fn payloads() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            (any::<u8>(), 4096..6000usize).prop_map(|(b, n)| vec![b; n]),
        ],
        0..5,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        log_files::wal_replay(&data);
    }

    #[test]
    fn damaged_files_never_panic(
        a in payloads(),
        b in payloads(),
        flips in prop::collection::vec((any::<Index>(), 1..=255u8), 1..4),
        cut in any::<Option<Index>>(),
    ) {
        let mut first = valid_file(1, &a);
        let mut second = valid_file(2, &b);
        for (i, (at, mask)) in flips.iter().enumerate() {
            let target = if i % 2 != 1 { &mut second } else { &mut first };
            let at = at.index(target.len());
            target[at] ^= mask;
        }
        if let Some(c) = cut {
            let len = c.index(second.len() + 1);
            second.truncate(len);
        }
        log_files::wal_replay(&two_files(&first, &second));
    }
}

#[test]
fn valid_files_replay_whole() {
    let a = vec![b"one".to_vec(), vec![7; 5000]];
    let b = vec![b"two".to_vec()];
    let data = two_files(&valid_file(1, &a), &valid_file(2, &b));
    log_files::wal_replay(&data);
    let fs = log_files::wal_dir(&log_files::wal_files(&data));
    let mut n = 0;
    strata_lsm::wal::replay(
        &*fs,
        Path::new("/db"),
        0,
        strata_lsm::RecoveryMode::AbsoluteConsistency,
        |_, _| {
            n += 1;
            Ok(())
        },
    )
    .unwrap();
    // Three payloads and the two close markers (empty batches).
    assert_eq!(n, 5);
}

/// Writes the `wal_replay` fuzz target's seeds (valid one- and two-file
/// inputs) into `fuzz/corpus/wal_replay/`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/wal_replay");
    std::fs::create_dir_all(&dir).unwrap();
    let a = vec![b"one".to_vec(), vec![7; 5000], b"three".to_vec()];
    let b = vec![b"four".to_vec(), b"five".to_vec()];
    let mut one = vec![0u8];
    one.extend_from_slice(&valid_file(1, &a));
    std::fs::write(dir.join("one_file"), one).unwrap();
    std::fs::write(
        dir.join("two_files"),
        two_files(&valid_file(1, &a), &valid_file(2, &b)),
    )
    .unwrap();
}
