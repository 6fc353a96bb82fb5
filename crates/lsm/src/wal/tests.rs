//! The WAL's bytes and names, and replay's judgement of each kind of end.

use std::path::Path;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};

use super::replay::{judge_file, End};
use super::*;
use crate::{Error, RecoveryMode};

const DIR: &str = "/db";

/// Every record replayed: its file's number and its payload.
type Replayed = Vec<(u64, Vec<u8>)>;

fn fs() -> Arc<MemFs> {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new(DIR)).unwrap();
    fs
}

fn read(fs: &MemFs, path: &Path) -> Vec<u8> {
    let f = fs.open(path, false).unwrap();
    let mut buf = vec![0; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut buf).unwrap();
    buf
}

fn collect(
    fs: &dyn FileSystem,
    min: u64,
    mode: RecoveryMode,
) -> Result<(Replayed, WalReplay), Error> {
    let mut got = Vec::new();
    let r = replay(fs, Path::new(DIR), min, mode, |n, p| {
        got.push((n, p.to_vec()));
        Ok(())
    })?;
    Ok((got, r))
}

#[test]
fn the_worked_example_is_what_the_wal_writes() {
    // docs/format/record_file.md, "Worked example".
    let fs = fs();
    let mut w = WalWriter::create(fs.clone(), Path::new(DIR), 5).unwrap();
    w.append(&[b"hello"]).unwrap();
    w.sync().unwrap();
    w.append(&[b"world!"]).unwrap();
    let want = "\
        53 54 52 41 54 41 57 4c 01 00 00 00 05 00 00 00 \
        00 00 00 00 19 5b 8a e9 ef 59 1f 13 05 00 00 00 \
        00 00 00 00 05 00 00 00 05 00 00 00 4c bb 71 9a \
        18 00 00 00 00 00 00 00 68 65 6c 6c 6f 74 4a 5a \
        16 05 00 00 00 00 00 00 00 06 00 00 00 06 00 00 \
        00 96 56 99 6d 3d 00 00 00 00 00 00 00 77 6f 72 \
        6c 64 21 00 00 00 00 00 00 00 00 00 00 00 00 00 \
        00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
        00 00 00";
    let want: Vec<u8> = want
        .split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    assert_eq!(read(&fs, w.path()), want);
    assert_eq!(w.bytes(), want.len() as u64);
    assert_eq!(w.path(), Path::new("/db/0000000000000005.wal"));
    assert_eq!(w.number(), 5);
}

#[test]
fn file_names_round_trip_and_others_are_ignored() {
    assert_eq!(wal_file_name(0xabc), "0000000000000abc.wal");
    assert_eq!(parse_wal_file_name("0000000000000abc.wal"), Some(0xabc));
    assert_eq!(
        parse_wal_file_name(&wal_file_name(u64::MAX)),
        Some(u64::MAX)
    );
    for bad in [
        "0000000000000ABC.wal",
        "+000000000000abc.wal",
        "000000000000abc.wal",
        "00000000000000abc.wal",
        "0000000000000abc.wal.tmp",
        "0000000000000abc.WAL",
        "0000000000000abc",
        ".wal",
        "../0000000000000abc.wal",
        "MANIFEST-0000000000000001",
        "0000000000000abc.sst",
        "ï¿½000000000000ab.wal",
    ] {
        assert_eq!(parse_wal_file_name(bad), None, "{bad}");
    }
}

#[test]
fn round_trip_across_files_with_gaps_in_the_numbers() {
    let fs = fs();
    let big: Vec<u8> = (0..50_000u32).map(|i| (i % 13) as u8).collect();
    let mut want = Vec::new();
    for (number, n) in [(3u64, 2usize), (7, 0), (8, 3), (20, 1)] {
        let mut w = WalWriter::create(fs.clone(), Path::new(DIR), number).unwrap();
        for i in 0..n {
            let p = if i == 1 {
                big.clone()
            } else {
                format!("{number}-{i}").into_bytes()
            };
            w.append(&[&p, b"second in the same write"]).unwrap();
            want.push((number, p));
            want.push((number, b"second in the same write".to_vec()));
        }
        // Files before the last are closed durably, as the WAL thread does.
        w.close_durably().unwrap();
        want.push((number, crate::batch::WriteBatch::new().payload().to_vec()));
    }
    // A file that is not a WAL and hostile names beside them.
    for name in ["0000000000000009.wal.tmp", "LOG", "000000000000000A.wal"] {
        fs.create(&Path::new(DIR).join(name))
            .unwrap()
            .write_at(0, b"junk")
            .unwrap();
    }
    let (got, r) = collect(&*fs, 0, RecoveryMode::AbsoluteConsistency).unwrap();
    assert_eq!(got, want);
    assert_eq!(r.files, vec![3, 7, 8, 20]);
    assert_eq!(r.records, want.len() as u64);
    assert!(r.cuts.is_empty());
    let (got, r) = collect(&*fs, 8, RecoveryMode::AbsoluteConsistency).unwrap();
    assert_eq!(r.files, vec![8, 20]);
    assert!(got.iter().all(|(n, _)| *n >= 8));
    // The large compressible payload was stored compressed.
    let bytes = read(&fs, &Path::new(DIR).join(wal_file_name(8)));
    assert!(bytes.len() < big.len());
}

#[test]
fn errors_of_the_callback_come_back_as_they_are() {
    let fs = fs();
    let mut w = WalWriter::create(fs.clone(), Path::new(DIR), 1).unwrap();
    w.append(&[b"a", b"b"]).unwrap();
    let r = replay(&*fs, Path::new(DIR), 0, RecoveryMode::default(), |_, p| {
        if p == b"b" {
            Err(Error::InvalidArgument("refused by the caller".into()))
        } else {
            Ok(())
        }
    });
    assert!(matches!(r, Err(Error::InvalidArgument(m)) if m == "refused by the caller"));
}

#[test]
fn an_existing_file_is_not_created_over() {
    let fs = fs();
    let mut w = WalWriter::create(fs.clone(), Path::new(DIR), 1).unwrap();
    w.append(&[b"kept"]).unwrap();
    w.sync().unwrap();
    assert!(WalWriter::create(fs.clone(), Path::new(DIR), 1).is_err());
    let (got, _) = collect(&*fs, 0, RecoveryMode::AbsoluteConsistency).unwrap();
    assert_eq!(got, vec![(1, b"kept".to_vec())]);
}

#[test]
fn unfinished_creations_and_foreign_headers() {
    let header = WAL_FORMAT.encode_header(WAL_FILE_KIND, 4);
    let modes = [
        RecoveryMode::AbsoluteConsistency,
        RecoveryMode::TolerateTailCorruption,
        RecoveryMode::TolerateAnyCorruption,
    ];
    for mode in modes {
        // Short or blank last files: a creation a crash cut short.
        for bytes in [Vec::new(), header[..10].to_vec(), vec![0; 56]] {
            let r = judge_file(&bytes, 4, true, mode);
            assert!(matches!(r.end, End::Cut { offset: 0, .. }), "{mode:?}");
            // Not last: the file was synced whole; damage.
            let r = judge_file(&bytes, 4, false, mode);
            let fatal = mode != RecoveryMode::TolerateAnyCorruption;
            assert_eq!(matches!(r.end, End::Fatal { .. }), fatal, "{mode:?}");
        }
        // A whole header with no record: an empty file.
        let r = judge_file(&header, 4, true, mode);
        assert_eq!(r.end, End::Clean);
        // A header that names another file.
        let r = judge_file(&header, 5, true, mode);
        let fatal = mode == RecoveryMode::AbsoluteConsistency;
        assert_eq!(
            matches!(r.end, End::Fatal { offset: 0, .. }),
            fatal,
            "{mode:?}"
        );
        // Only a creation writes so few bytes: a longer file with a bad
        // header is damage.
        let mut long = vec![0u8; 200];
        long[..24].copy_from_slice(&header);
        long[0] ^= 1;
        let r = judge_file(&long, 4, true, mode);
        let fatal = mode != RecoveryMode::TolerateAnyCorruption;
        assert_eq!(matches!(r.end, End::Fatal { .. }), fatal, "{mode:?}");
    }
}

#[test]
fn a_failed_sync_stops_the_writer() {
    use strata_fs::{FaultFs, Op};
    let mem = Arc::new(MemFs::new());
    mem.create_dir_all(Path::new(DIR)).unwrap();
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let mut w = WalWriter::create(ffs.clone(), Path::new(DIR), 1).unwrap();
    w.append(&[b"a"]).unwrap();
    ffs.fail_once_after(Op::SyncData, 0, 5);
    assert!(matches!(w.sync(), Err(Error::Io { op: "sync", .. })));
    assert!(w.append(&[b"b"]).is_err());
    assert!(w.sync().is_err());
}

/// Writes WAL file `number` with `records` appends of one small payload,
/// synced after the first when `sync_first`; closed durably when `close`.
fn write_file(
    fs: &Arc<MemFs>,
    number: u64,
    records: usize,
    sync_first: bool,
    close: bool,
) -> WalWriter {
    let mut w = WalWriter::create(fs.clone(), Path::new(DIR), number).unwrap();
    for i in 0..records {
        w.append(&[format!("{number}-{i}").as_bytes()]).unwrap();
        if i == 0 && sync_first {
            w.sync().unwrap();
        }
    }
    if close {
        w.close_durably().unwrap();
    }
    w
}

const MODES: [RecoveryMode; 3] = [
    RecoveryMode::AbsoluteConsistency,
    RecoveryMode::TolerateTailCorruption,
    RecoveryMode::TolerateAnyCorruption,
];

/// A power cut before the WAL thread closed file 3 (its sync, marker and
/// sync): the file may have lost whole appends at its end without a trace,
/// so replay stops after it, in every mode; file 5 holds no synced write
/// then (a sync of it waits for 3's close).
#[test]
fn a_file_before_the_last_not_closed_durably_ends_replay() {
    let fs = fs();
    let _open = write_file(&fs, 3, 3, true, false);
    write_file(&fs, 5, 2, false, false);
    for mode in MODES {
        let (got, r) = collect(&*fs, 0, mode).unwrap();
        assert_eq!(got.len(), 3, "{mode:?}");
        assert!(got.iter().all(|(n, _)| *n == 3), "{mode:?}");
        assert_eq!(r.files, vec![3], "{mode:?}");
        assert_eq!(r.cuts.len(), 1, "{mode:?}");
    }
}

/// Once closed durably, file 3 is whole: replay goes on into file 5, and
/// damage in 3 is damage to synced data.
#[test]
fn damage_in_a_file_closed_durably_is_corruption() {
    let fs = fs();
    write_file(&fs, 3, 3, true, true);
    write_file(&fs, 5, 2, false, false);
    for mode in MODES {
        let (got, r) = collect(&*fs, 0, mode).unwrap();
        assert_eq!(got.len(), 3 + 1 + 2, "{mode:?}");
        assert_eq!(r.files, vec![3, 5], "{mode:?}");
        assert!(r.cuts.is_empty(), "{mode:?}");
    }
    // A bit flipped in the second record of file 3.
    let path = Path::new(DIR).join(wal_file_name(3));
    let mut bytes = read(&fs, &path);
    let at = bytes
        .windows(3)
        .position(|w| w == b"3-1")
        .expect("record 1");
    bytes[at] ^= 0x10;
    fs.open(&path, true).unwrap().write_at(0, &bytes).unwrap();
    for mode in MODES {
        let r = collect(&*fs, 0, mode);
        let fatal = mode != RecoveryMode::TolerateAnyCorruption;
        assert_eq!(
            matches!(r, Err(Error::Corruption { .. })),
            fatal,
            "{mode:?}: {r:?}"
        );
    }
}

/// Damage in the unsynced tail of a file a power cut caught before its
/// close is a tail, as in the last file: replay keeps what is before it and
/// stops there. Damage in its synced part (before a later record's
/// `synced_end`) is still corruption.
#[test]
fn damage_in_the_unsynced_tail_of_a_file_not_closed_is_a_tail() {
    let fs = fs();
    // Records 0 (synced), 1 and 2 (unsynced).
    let _open = write_file(&fs, 3, 3, true, false);
    write_file(&fs, 5, 2, false, false);
    let path = Path::new(DIR).join(wal_file_name(3));
    let mut torn = read(&fs, &path);
    let at = torn.windows(3).position(|w| w == b"3-2").expect("record 2");
    torn[at] ^= 0x10;
    fs.open(&path, true).unwrap().write_at(0, &torn).unwrap();
    let (got, r) = collect(&*fs, 0, RecoveryMode::TolerateTailCorruption).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(r.files, vec![3]);
    assert_eq!(r.cuts.len(), 1);
    assert!(matches!(
        collect(&*fs, 0, RecoveryMode::AbsoluteConsistency),
        Err(Error::Corruption { .. })
    ));
}

/// A file before the last that looks unclosed (its marker damaged, say) is
/// still whole when a later file was synced after its creation: a sync of a
/// later file waits for every earlier close. Damage there is corruption,
/// not a tail to cut with the later file's synced writes.
#[test]
fn a_later_synced_file_vouches_for_an_earlier_one() {
    let fs = fs();
    write_file(&fs, 3, 3, true, true);
    // Record 0 synced, so records 1 and 2 carry a synced_end past the header.
    write_file(&fs, 5, 3, true, false);
    let path = Path::new(DIR).join(wal_file_name(3));
    let mut bytes = read(&fs, &path);
    let marker = bytes.len() - strata_log::record::END_MARKER.len() - 1;
    bytes[marker] ^= 0x10;
    fs.open(&path, true).unwrap().write_at(0, &bytes).unwrap();
    let r = collect(&*fs, 0, RecoveryMode::TolerateTailCorruption);
    assert!(matches!(r, Err(Error::Corruption { .. })), "{r:?}");
    // Without the later file's sync, the same bytes are a tail.
    fs.remove(&Path::new(DIR).join(wal_file_name(5))).unwrap();
    write_file(&fs, 5, 0, false, false);
    let (got, r) = collect(&*fs, 0, RecoveryMode::TolerateTailCorruption).unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(r.cuts.len(), 1);
}

/// Files the WAL thread makes ahead are preallocated: zeros follow the
/// records. They read as the end of a file, last or closed durably before
/// the last, in every mode.
#[test]
fn preallocated_files_end_at_their_zeros() {
    let fs = fs();
    for number in [3u64, 5] {
        let mut w = WalWriter::create(fs.clone(), Path::new(DIR), number).unwrap();
        w.preallocate(64 << 10);
        for i in 0..3 {
            w.append(&[format!("{number}-{i}").as_bytes()]).unwrap();
        }
        if number == 3 {
            w.close_durably().unwrap();
        } else {
            w.sync().unwrap();
        }
    }
    let path = Path::new(DIR).join(wal_file_name(3));
    assert!(read(&fs, &path).len() >= 64 << 10, "not preallocated");
    for mode in MODES {
        let (got, r) = collect(&*fs, 0, mode).unwrap();
        assert_eq!(got.len(), 3 + 1 + 3, "{mode:?}");
        assert_eq!(r.files, vec![3, 5], "{mode:?}");
        assert!(r.cuts.is_empty(), "{mode:?}");
    }
}

/// The WAL thread allocates a file made ahead a first piece, then keeps the
/// file in use allocated ahead of its appends as their writebacks start, up
/// to the size a file reaches at a memtable switch: not that whole size up
/// front, which left two files' worth of zeros on disk.
#[test]
fn allocation_runs_ahead_of_the_appends_in_pieces() {
    let fs = fs();
    let most = 64u64 << 20;
    let next = Arc::new(std::sync::atomic::AtomicU64::new(7));
    let keeper = keeper::WalKeeper::start(fs.clone(), DIR.into(), next, most).unwrap();
    let len_of = |path: &Path| fs.open(path, false).map_or(0, |f| f.len().unwrap());
    let len = |w: &WalWriter| len_of(w.path());
    // Wait for the thread to make file 7 (a file asked for before it does
    // is made on the caller's path, unallocated).
    let first = Path::new(DIR).join(wal_file_name(7));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while len_of(&first) < keeper::FIRST_PIECE && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut w = keeper.next_file().unwrap();
    assert_eq!(w.number(), 7);
    assert_eq!(len(&w), keeper::FIRST_PIECE, "the first piece only");
    // Appends with their writebacks handed to the thread, as the engine's
    // writers do, until past the most a file is allocated to.
    // Incompressible, so that the file grows by what is appended.
    let payload = strata_test_support::noise(1, 64 << 10);
    let mut appended = 0u64;
    let mut seen = vec![];
    while appended < most + (8 << 20) {
        if let Some(wb) = w.append_deferring_writeback(&[&payload]).unwrap() {
            keeper.start_writeback(wb);
            // Let the thread catch up, then look.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let want = (appended + keeper::ALLOCATE_AHEAD).min(most);
            while len(&w) < want && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            seen.push(len(&w));
        }
        appended += payload.len() as u64;
        // Never more than the piece ahead of what was appended, headers
        // counted (past the most, the appends themselves grow the file).
        let l = len(&w);
        let end = appended + appended / 64 + (4 << 10);
        assert!(
            l <= end + keeper::ALLOCATE_AHEAD,
            "{l} allocated at {appended} appended"
        );
    }
    assert!(seen.windows(2).all(|p| p[0] <= p[1]), "{seen:?}");
    assert!(
        seen.iter().any(|l| *l >= most),
        "allocated up to the most: {seen:?}"
    );
    // The next file made ahead has its first piece only.
    let second = Path::new(DIR).join(wal_file_name(8));
    while len_of(&second) < keeper::FIRST_PIECE && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let w2 = keeper.next_file().unwrap();
    assert_eq!(w2.number(), 8);
    assert_eq!(len(&w2), keeper::FIRST_PIECE);
    keeper.retire(w);
    keeper.retire(w2);
    keeper.stop().unwrap();
}

/// A write of one 1 KiB value is one payload; values that compress 2:1
/// must not cost the WAL their full size (the WAL is about a third of the
/// bytes a fill writes).
#[test]
fn a_one_kib_compressible_write_is_stored_compressed() {
    let fs = fs();
    let mut w = WalWriter::create(fs.clone(), Path::new(DIR), 1).unwrap();
    let before = w.bytes();
    let value: Vec<u8> = (0..1024u32).map(|i| (i / 2 % 251) as u8 ^ 0x5a).collect();
    let mut batch = crate::batch::WriteBatch::new();
    batch.put(
        crate::column_family::DEFAULT_COLUMN_FAMILY,
        b"key-000000000001",
        &value,
    );
    w.append(&[batch.payload()]).unwrap();
    let written = w.bytes() - before;
    assert!(
        written < 768,
        "{written} bytes for a 1 KiB compressible write"
    );
    let (got, _) = collect(&*fs, 0, RecoveryMode::AbsoluteConsistency).unwrap();
    assert_eq!(got, vec![(1, batch.payload().to_vec())]);
}

/// Makes WAL file `old` with `records` appends, closes it durably and moves
/// it to the pool, as a flush does with a file no memtable needs.
fn pooled_file(fs: &Arc<MemFs>, old: u64, records: usize) -> std::path::PathBuf {
    let w = write_file(fs, old, records, true, true);
    let pool = Path::new(DIR).join(POOL_FILE_NAME);
    fs.rename(w.path(), &pool).unwrap();
    pool
}

/// A recycled file keeps its old records past the new ones: each names the
/// old file's id, so replay ends cleanly at the first of them, in every
/// mode, and never returns one.
#[test]
fn a_recycled_file_replays_only_its_own_records() {
    let fs = fs();
    let pool = pooled_file(&fs, 5, 40);
    let old_len = read(&fs, &pool).len();
    let mut w = WalWriter::recycle(fs.clone(), Path::new(DIR), &pool, 9).unwrap();
    assert!(w.has_recycled_tail());
    assert!(!fs.exists(&pool), "the pool file is renamed");
    w.append(&[b"9-0"]).unwrap();
    w.append(&[b"9-1"]).unwrap();
    w.sync().unwrap();
    let path = Path::new(DIR).join(wal_file_name(9));
    let bytes = read(&fs, &path);
    assert_eq!(bytes.len(), old_len, "the old bytes are written over");
    assert!(
        bytes.windows(4).any(|w| w == b"5-39"),
        "the old file's last records are still there"
    );
    for mode in MODES {
        let (got, r) = collect(&*fs, 0, mode).unwrap();
        assert_eq!(
            got,
            vec![(9, b"9-0".to_vec()), (9, b"9-1".to_vec())],
            "{mode:?}"
        );
        assert_eq!(r.files, vec![9], "{mode:?}");
        assert!(r.cuts.is_empty(), "{mode:?}");
    }
}

/// Once trimmed, a recycled file keeps its records and `keep_ahead` bytes
/// past them; trimming again, or a file that was never recycled, does
/// nothing.
#[test]
fn trimming_a_recycled_file_keeps_its_records() {
    let fs = fs();
    let pool = pooled_file(&fs, 5, 400);
    let mut w = WalWriter::recycle(fs.clone(), Path::new(DIR), &pool, 9).unwrap();
    w.append(&[b"9-0"]).unwrap();
    let path = Path::new(DIR).join(wal_file_name(9));
    let keep_ahead = 100;
    assert!(read(&fs, &path).len() as u64 > w.bytes() + keep_ahead);
    w.trim_recycled_tail(keep_ahead);
    assert!(!w.has_recycled_tail());
    assert_eq!(read(&fs, &path).len() as u64, w.bytes() + keep_ahead);
    w.append(&[b"9-1"]).unwrap();
    w.close_durably().unwrap();
    let len = read(&fs, &path).len();
    w.trim_recycled_tail(0);
    assert_eq!(read(&fs, &path).len(), len, "trimmed once only");
    let (got, _) = collect(&*fs, 0, RecoveryMode::AbsoluteConsistency).unwrap();
    assert_eq!(got.len(), 3, "two records and the close's marker: {got:?}");
}

/// A pool file whose new header is written but whose rename a crash lost
/// is not a WAL file: replay ignores it.
#[test]
fn a_pool_file_is_never_replayed() {
    let fs = fs();
    let pool = pooled_file(&fs, 5, 3);
    let f = fs.open(&pool, true).unwrap();
    let header = WAL_FORMAT.encode_header(WAL_FILE_KIND, 9);
    f.write_at(0, &header).unwrap();
    write_file(&fs, 7, 2, true, false);
    let (got, r) = collect(&*fs, 0, RecoveryMode::AbsoluteConsistency).unwrap();
    assert_eq!(r.files, vec![7]);
    assert_eq!(got.len(), 2);
}

/// Regression (found by `db_power_cut_blob`): an obsolete WAL file handed to
/// the pool is renamed durably before the pool can be reused. Its rename was
/// left unsynced; the next file made from the pool then synced a new header
/// into it, and a power cut that lost the rename showed the old WAL name
/// over that header, which replay (reading from the oldest log number any
/// family needs) refused as a misnamed file, so the engine did not open.
#[test]
fn a_wal_file_handed_to_the_pool_loses_its_name_durably_first() {
    let fs = fs();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(9));
    let keeper = keeper::WalKeeper::start(fs.clone(), DIR.into(), next, 1 << 20).unwrap();
    let old = write_file(&fs, 5, 2, true, true);
    assert!(keeper.recycle(old.path().to_path_buf()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !keeper.pooled() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(keeper.pooled(), "the WAL thread pooled the file");
    let cut = fs.deep_clone();
    cut.crash(strata_fs::CrashMode::DropUnsynced);
    assert!(
        !cut.exists(old.path()),
        "the old name came back after a power cut"
    );
    assert!(cut.exists(&Path::new(DIR).join(POOL_FILE_NAME)));
    drop(keeper);
}
