//! Power cuts during WAL writes, in every crash mode of `MemFs` over many
//! seeds: every record appended before a `sync()` survives, what replay
//! returns is a prefix of what was appended, and the default mode opens.

use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use strata_fs::{CrashMode, FileSystem, MemFs};
use strata_lsm::wal::{replay, wal_file_name, WalWriter, POOL_FILE_NAME};
use strata_lsm::RecoveryMode;

const DIR: &str = "/db";

/// Appends random payloads over a few files (numbers with gaps), syncing
/// now and then; returns every payload appended and how many were synced.
/// With `recycle`, a switch may make the new file out of the oldest closed
/// one, as the engine does once a flush no longer needs it: that file's
/// records leave what replay must return.
fn write(fs: &Arc<MemFs>, seed: u64, recycle: bool) -> (Vec<(u64, Vec<u8>)>, usize, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dyn_fs: Arc<dyn FileSystem> = fs.clone();
    let mut number = 1 + rng.gen_range(0..3);
    let mut w = WalWriter::create(dyn_fs.clone(), Path::new(DIR), number).unwrap();
    let mut all = Vec::new();
    let mut synced = 0;
    // Files left behind and not yet closed durably: the engine's WAL thread
    // closes them (sync, marker, sync) in order, some time after the
    // switch, and always before a later file is synced.
    let mut retired: Vec<WalWriter> = Vec::new();
    // Files closed durably, oldest first.
    let mut closed: Vec<u64> = Vec::new();
    let mut recycled = 0;
    let close_retired =
        |retired: &mut Vec<WalWriter>, all: &mut Vec<(u64, Vec<u8>)>, closed: &mut Vec<u64>| {
            for mut old in retired.drain(..) {
                old.close_durably().unwrap();
                closed.push(old.number());
                // The marker is the file's last record: after its payloads,
                // before every later file's (`all` is in file order).
                let at = all
                    .iter()
                    .position(|(n, _)| *n > old.number())
                    .unwrap_or(all.len());
                all.insert(
                    at,
                    (
                        old.number(),
                        strata_lsm::WriteBatch::new().payload().to_vec(),
                    ),
                );
            }
        };
    for step in 0..rng.gen_range(1..14) {
        if rng.gen_bool(0.15) {
            number += 1 + rng.gen_range(0..4);
            let next = if recycle && !closed.is_empty() && rng.gen_bool(0.6) {
                let old = closed.remove(0);
                recycled += 1;
                let gone = all.iter().take_while(|(n, _)| *n == old).count();
                all.drain(..gone);
                synced -= gone;
                let pool = Path::new(DIR).join(POOL_FILE_NAME);
                let old_path = Path::new(DIR).join(wal_file_name(old));
                dyn_fs.rename(&old_path, &pool).unwrap();
                WalWriter::recycle(dyn_fs.clone(), Path::new(DIR), &pool, number).unwrap()
            } else {
                WalWriter::create(dyn_fs.clone(), Path::new(DIR), number).unwrap()
            };
            retired.push(std::mem::replace(&mut w, next));
        }
        if !retired.is_empty() && rng.gen_bool(0.3) {
            close_retired(&mut retired, &mut all, &mut closed);
            synced = synced.max(all.iter().filter(|(n, _)| *n < number).count());
        }
        let n = rng.gen_range(1..4);
        let payloads: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let len = if rng.gen_bool(0.2) {
                    rng.gen_range(4096..9000)
                } else {
                    rng.gen_range(0..300)
                };
                // Compressible for some, random for others.
                if rng.gen_bool(0.5) {
                    vec![(step * 7 + i) as u8; len]
                } else {
                    (0..len).map(|_| rng.gen()).collect()
                }
            })
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_slice()).collect();
        w.append(&refs).unwrap();
        all.extend(payloads.into_iter().map(|p| (number, p)));
        if rng.gen_bool(0.4) {
            // A sync waits for every earlier file's close.
            close_retired(&mut retired, &mut all, &mut closed);
            w.sync().unwrap();
            synced = all.len();
        }
    }
    (all, synced, recycled)
}

fn replayed(fs: &MemFs, mode: RecoveryMode) -> strata_lsm::Result<Vec<(u64, Vec<u8>)>> {
    let mut got = Vec::new();
    replay(fs, Path::new(DIR), 0, mode, |n, p| {
        got.push((n, p.to_vec()));
        Ok(())
    })?;
    Ok(got)
}

#[test]
fn every_synced_record_survives_every_power_cut() {
    power_cuts(false);
}

/// As above, with files made out of older ones: a recycled file's old
/// records never come back, whatever the cut kept of the new ones.
#[test]
fn every_synced_record_of_recycled_files_survives_every_power_cut() {
    power_cuts(true);
}

fn power_cuts(recycle: bool) {
    // Whether the crashes lost unsynced records, and kept some: both must
    // happen, or the test proves less than it says.
    let (mut lost, mut kept, mut recycled) = (false, false, 0);
    for seed in 0..150u64 {
        for crash in [
            CrashMode::DropUnsynced,
            CrashMode::KeepRandomPrefix { seed },
            CrashMode::KeepRandomPages { seed },
        ] {
            let fs = Arc::new(MemFs::new());
            fs.create_dir_all(Path::new(DIR)).unwrap();
            let (all, synced, r) = write(&fs, seed, recycle);
            recycled += r;
            fs.crash(crash);
            let case = format!("seed {seed}, {crash:?}");
            let got = replayed(&fs, RecoveryMode::TolerateTailCorruption)
                .unwrap_or_else(|e| panic!("{case}: the default mode refused: {e}"));
            assert!(
                got.len() >= synced,
                "{case}: {} of {synced} synced records",
                got.len()
            );
            assert_eq!(got[..], all[..got.len()], "{case}: not a prefix");
            lost |= got.len() < all.len();
            kept |= got.len() > synced;
            let any = replayed(&fs, RecoveryMode::TolerateAnyCorruption).unwrap();
            assert_eq!(any, got, "{case}");
            if let Ok(strict) = replayed(&fs, RecoveryMode::AbsoluteConsistency) {
                assert_eq!(strict, got, "{case}");
            }
        }
    }
    assert!(lost && kept);
    assert_eq!(recycled > 0, recycle, "{recycled} files recycled");
}

#[test]
fn a_clean_shutdown_replays_everything_in_every_mode() {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new(DIR)).unwrap();
    let (all, ..) = write(&fs, 7, true);
    for mode in [
        RecoveryMode::AbsoluteConsistency,
        RecoveryMode::TolerateTailCorruption,
        RecoveryMode::TolerateAnyCorruption,
    ] {
        assert_eq!(replayed(&fs, mode).unwrap(), all);
    }
}
