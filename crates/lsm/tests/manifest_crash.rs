//! The manifest under power cuts and damage: every acknowledged append
//! survives every `MemFs` crash mode and a torn one is whole or absent; a
//! crash between writing a new manifest and switching `CURRENT` leaves the
//! old one in use, whole; a bit flip is `Corruption` or (in the last record,
//! which no later record places in synced data) a cut, never a different set
//! of records; the engine's unsynced vouching marker costs no sync and a
//! power cut that loses it loses nothing.

use std::path::Path;
use std::sync::Arc;

use strata_fs::{CrashMode, FaultFs, FileSystem, MemFs, Op};
use strata_lsm::manifest::{
    manifest_file_name, read_current, ManifestRecord, ManifestWriter, CURRENT_FILE_NAME,
};
use strata_lsm::{Error, VersionEdit};

const DIR: &str = "/db";

fn record(i: u64) -> Vec<ManifestRecord> {
    let mut edit = VersionEdit::new();
    edit.log_number = Some(i);
    edit.next_file_number = Some(i + 100);
    let mut out = vec![ManifestRecord::Edit(edit)];
    if i % 3 == 1 {
        out.push(ManifestRecord::CreateColumnFamily {
            id: i as u32,
            name: format!("cf-{i}"),
        });
    }
    out
}

fn snapshot() -> Vec<ManifestRecord> {
    vec![ManifestRecord::CreateColumnFamily {
        id: 0,
        name: "default".into(),
    }]
}

fn mem() -> Arc<MemFs> {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new(DIR)).unwrap();
    fs
}

fn contents(fs: &dyn FileSystem) -> Vec<ManifestRecord> {
    read_current(fs, Path::new(DIR)).unwrap().unwrap().records
}

#[test]
fn round_trip_and_no_current_is_none() {
    let fs = mem();
    assert!(read_current(&*fs, Path::new(DIR)).unwrap().is_none());
    let mut w = ManifestWriter::create(fs.clone(), Path::new(DIR), 7, &snapshot()).unwrap();
    let mut want = snapshot();
    for i in 1..6 {
        w.append(&record(i)).unwrap();
        want.extend(record(i));
    }
    let c = read_current(&*fs, Path::new(DIR)).unwrap().unwrap();
    assert_eq!(c.records, want);
    assert_eq!(c.number, 7);
    assert_eq!(c.path, Path::new(DIR).join(manifest_file_name(7)));
    assert_eq!(c.cut, None);
    assert_eq!(w.number(), 7);
    assert!(w.bytes() > 0);
    // A new manifest takes over; the old one stays until the caller removes it.
    let w2 = ManifestWriter::create(fs.clone(), Path::new(DIR), 9, &want).unwrap();
    assert_eq!(contents(&*fs), want);
    assert!(fs.exists(w.path()) && fs.exists(w2.path()));
    // A bad name is refused before anything is written.
    let bad = [ManifestRecord::CreateColumnFamily {
        id: 1,
        name: String::new(),
    }];
    let mut w2 = w2;
    assert!(matches!(w2.append(&bad), Err(Error::InvalidArgument(_))));
    assert_eq!(contents(&*fs), want);
}

/// One power-cut case: a new manifest, `appends` acknowledged appends (with
/// `vouch`, the engine's unsynced marker after the snapshot and after each
/// append, checked to cost no sync of its own), then, if given, an append
/// whose sync fails (never acknowledged), then `crash`. Returns what the
/// manifest reads back, what was acknowledged, and that plus the torn
/// append.
fn power_cut(
    crash: CrashMode,
    appends: u64,
    vouch: bool,
    torn: Option<Vec<ManifestRecord>>,
) -> (
    Vec<ManifestRecord>,
    Vec<ManifestRecord>,
    Vec<ManifestRecord>,
) {
    let fs = mem();
    let faulty = Arc::new(FaultFs::new(fs.clone()));
    let mut w = ManifestWriter::create(faulty.clone(), Path::new(DIR), 3, &snapshot()).unwrap();
    if vouch {
        let syncs = fs.sync_count();
        w.vouch().unwrap();
        assert_eq!(fs.sync_count(), syncs, "vouch must not sync");
    }
    let mut want = snapshot();
    for i in 0..appends {
        let syncs = fs.sync_count();
        w.append(&record(i)).unwrap();
        if vouch {
            w.vouch().unwrap();
        }
        assert_eq!(fs.sync_count(), syncs + 1, "one sync per append");
        want.extend(record(i));
    }
    let mut whole = want.clone();
    if let Some(torn) = torn {
        faulty.fail_once_after(Op::SyncData, 0, 5);
        assert!(w.append(&torn).is_err());
        whole.extend(torn);
    }
    fs.crash(crash);
    let got = read_current(&*fs, Path::new(DIR))
        .unwrap_or_else(|e| panic!("{crash:?}: {e}"))
        .unwrap()
        .records;
    (got, want, whole)
}

fn crash_modes(seed: u64) -> [CrashMode; 3] {
    [
        CrashMode::DropUnsynced,
        CrashMode::KeepRandomPrefix { seed },
        CrashMode::KeepRandomPages { seed },
    ]
}

#[test]
fn every_acknowledged_append_survives_and_a_torn_one_is_whole_or_absent() {
    let (mut absent, mut whole_seen) = (false, false);
    for seed in 0..60u64 {
        for crash in crash_modes(seed) {
            // The torn append: written, but the power goes before its sync.
            // Large enough, for some seeds, to span pages.
            let torn: Vec<ManifestRecord> = (0..1 + seed * 7).flat_map(record).collect();
            let (got, want, whole) = power_cut(crash, seed % 5, false, Some(torn));
            assert!(
                got == want || got == whole,
                "seed {seed}, {crash:?}: {} records",
                got.len()
            );
            absent |= got == want;
            whole_seen |= got == whole;
        }
    }
    assert!(absent && whole_seen);
}

#[test]
fn a_crash_before_current_switches_leaves_the_old_manifest_in_use() {
    // Fail each step of the switch in turn, then cut the power.
    for (op, skip) in [
        (Op::Create, 1),
        (Op::SyncAll, 1),
        (Op::Rename, 0),
        (Op::SyncDir, 1),
    ] {
        for seed in 0..20u64 {
            for crash in crash_modes(seed) {
                let fs = mem();
                let faulty = Arc::new(FaultFs::new(fs.clone()));
                let mut w =
                    ManifestWriter::create(faulty.clone(), Path::new(DIR), 4, &snapshot()).unwrap();
                w.append(&record(1)).unwrap();
                let mut old = snapshot();
                old.extend(record(1));
                let new: Vec<ManifestRecord> = old.iter().cloned().chain(record(2)).collect();
                // `skip` successes of `op` before the one that fails: the new
                // manifest's own create / sync_all / dir sync come first.
                faulty.fail_once_after(op, skip, 5);
                let made = ManifestWriter::create(faulty.clone(), Path::new(DIR), 6, &new);
                let case = format!("{op:?} after {skip}, seed {seed}, {crash:?}: {made:?}");
                fs.crash(crash);
                let c = read_current(&*fs, Path::new(DIR))
                    .unwrap_or_else(|e| panic!("{case}: {e}"))
                    .unwrap();
                match c.number {
                    4 => assert_eq!(c.records, old, "{case}"),
                    6 => {
                        assert!(made.is_ok() || op == Op::SyncDir, "{case}");
                        assert_eq!(c.records, new, "{case}");
                    }
                    n => panic!("{case}: CURRENT names {n}"),
                }
            }
        }
    }
}

#[test]
fn a_bit_flip_is_corruption_or_a_cut_of_the_last_record_never_other_records() {
    let fs = mem();
    let mut w = ManifestWriter::create(fs.clone(), Path::new(DIR), 2, &snapshot()).unwrap();
    let mut appends = vec![snapshot()];
    for i in 0..3 {
        w.append(&record(i)).unwrap();
        appends.push(record(i));
    }
    let all: Vec<ManifestRecord> = appends.iter().flatten().cloned().collect();
    let without_last: Vec<ManifestRecord> = appends[..appends.len() - 1]
        .iter()
        .flatten()
        .cloned()
        .collect();
    let path = w.path().to_path_buf();
    let len = fs.open(&path, false).unwrap().len().unwrap();
    let last_len = 32 + strata_lsm::manifest::encode_records(&record(2)).len() as u64;
    let last_start = len - 32 - last_len;
    for offset in 0..len {
        fs.corrupt(&path, offset, 1 << (offset % 8)).unwrap();
        match read_current(&*fs, Path::new(DIR)) {
            Ok(Some(c)) => {
                assert!(offset >= last_start, "offset {offset}: opened");
                assert!(c.cut.is_some(), "offset {offset}");
                let want = if offset >= len - 32 {
                    &all
                } else {
                    &without_last
                };
                assert_eq!(&c.records, want, "offset {offset}");
            }
            Err(Error::Corruption { path: p, .. }) => {
                assert_eq!(p, path);
                assert!(offset < last_start, "offset {offset}: refused");
            }
            other => panic!("offset {offset}: {other:?}"),
        }
        fs.corrupt(&path, offset, 1 << (offset % 8)).unwrap();
    }
    assert_eq!(contents(&*fs), all);
}

#[test]
fn a_bad_current_is_corruption() {
    let fs = mem();
    ManifestWriter::create(fs.clone(), Path::new(DIR), 2, &snapshot()).unwrap();
    let current = Path::new(DIR).join(CURRENT_FILE_NAME);
    for content in [
        &b"MANIFEST-0000000000000002"[..],
        b"MANIFEST-0000000000000002\n\n",
        b"MANIFEST-000000000000002\n",
        b"MANIFEST-000000000000000X\n",
        b"MANIFEST-0000000000000003\n",
        b"",
        b"\xff\xfe",
    ] {
        fs.remove(&current).unwrap();
        fs.create(&current).unwrap().write_at(0, content).unwrap();
        let r = read_current(&*fs, Path::new(DIR));
        assert!(
            matches!(r, Err(Error::Corruption { .. })),
            "{content:?}: {r:?}"
        );
    }
}

/// The engine's vouching marker is written unsynced (one sync per install):
/// an append followed by `vouch` syncs once, and a power cut that keeps any
/// subset of the unsynced pages (the markers', a torn append's) loses no
/// acknowledged append and is never reported as corruption.
#[test]
fn an_unsynced_vouching_marker_costs_no_sync_and_a_power_cut_loses_nothing() {
    let (mut absent, mut whole_seen) = (false, false);
    for seed in 0..60u64 {
        for crash in crash_modes(seed) {
            // Half the cases end on a marker; the others on a torn append
            // after it.
            let tear = seed % 2 == 1;
            let torn = tear.then(|| (0..1 + seed * 5).flat_map(record).collect());
            let (got, want, whole) = power_cut(crash, 1 + seed % 4, true, torn);
            assert!(
                got == want || (tear && got == whole),
                "seed {seed}, {crash:?}: {} records",
                got.len()
            );
            absent |= tear && got == want;
            whole_seen |= tear && got == whole;
        }
    }
    assert!(absent && whole_seen);
}
