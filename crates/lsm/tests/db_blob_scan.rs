//! Scans over separated values: a scan that keeps moving forward fetches
//! its values ahead in batches, asks the OS for exactly the blocks a batch
//! references (never past the upper bound), and reads each blob file's
//! blocks in spans; a seek and a few moves read no more than they use; any
//! mix of moves yields what a cursor over a `BTreeMap` yields; a failed read
//! leaves the iterator not valid until the next seek.

mod db_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use db_support::*;
use proptest::prelude::*;
use strata_fs::{FaultFs, FileSystem, MemFs, Op};
use strata_lsm::blob::BlobRef;
use strata_lsm::{
    Db, DbIterator, Error, Options, ReadOptions, ValueKind, WriteBatch, WriteOptions,
};

fn separated_options() -> Options {
    let mut o = small_options();
    o.default_column_family.blob.min_blob_size = Some(100);
    o.default_column_family.blob.block_size_bytes = 2048;
    o
}

/// An engine whose file calls are counted (`FaultFs`, no fault set), with no
/// block cache, so that every block is read from its file, and no automatic
/// compaction under 10 L0 files, so that only the test reads.
fn counted_engine_without_cache() -> (MemFs, FaultFs, Db) {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let mut options = separated_options();
    options.default_column_family.write_buffer_bytes = 8 << 20;
    options
        .default_column_family
        .compaction
        .level0_compaction_trigger = 10;
    options.block_cache_bytes = 0;
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Db::open_with(dyn_fs, DIR, options, strata_lsm::Hooks::default()).unwrap();
    (mem, fs, db)
}

/// 2000 keys of 400-byte values in one blob file (about 850 KB).
fn one_blob_file() -> (MemFs, FaultFs, Db, u64) {
    let (mem, fs, db) = counted_engine_without_cache();
    let cf = db.default_column_family();
    put_range(&db, 0..2000, 1);
    db.flush(&cf, true).unwrap();
    db.compact_range(&cf, None, None).unwrap();
    let stats = db.blob_file_stats(&cf).unwrap();
    assert_eq!(stats.files, 1);
    (mem, fs, db, stats.file_bytes)
}

/// The value `put_range` wrote under `wide_key(i)` in round 1.
fn round_one(i: u32) -> Vec<u8> {
    value(u64::from(i) + 1_000_000, 400)
}

/// Point reads, and seeks followed by a move or two, fetch their values one
/// at a time and ask for nothing ahead.
#[test]
fn point_reads_and_short_scans_ask_for_nothing_ahead() {
    let (_, fs, db, _) = one_blob_file();
    let cf = db.default_column_family();
    let read = ReadOptions::default();
    for i in 0..2000 {
        assert!(db.get(&read, &cf, &wide_key(i)).unwrap().is_some());
    }
    let mut it = db.iter(&read, &cf).unwrap();
    for i in (0..1990).step_by(37) {
        it.seek(&wide_key(i)).unwrap();
        it.next().unwrap();
        assert_eq!(it.key(), wide_key(i + 1));
        assert_eq!(it.value(), round_one(i + 1));
        it.prev().unwrap();
        assert_eq!(it.key(), wide_key(i));
    }
    assert_eq!(fs.count(Op::WillNeed), 0, "asked for blocks ahead");
}

/// A full scan asks for each blob byte about once, in a few requests
/// (segments double up to 1024 entries), and its values are the same.
#[test]
fn a_scan_asks_for_each_blob_byte_about_once() {
    let (_, fs, db, file_bytes) = one_blob_file();
    let cf = db.default_column_family();
    let mut it = db.iter(&ReadOptions::default(), &cf).unwrap();
    let got = scan_forward(&mut it);
    assert_eq!(got.len(), 2000);
    for (i, (k, v)) in got.iter().enumerate() {
        assert_eq!(*k, wide_key(i as u32));
        assert_eq!(*v, round_one(i as u32));
    }
    let asked = fs.will_need_bytes();
    // The first values are fetched alone; a block straddling two segments
    // is asked for twice (8 segments, 2 KiB blocks).
    assert!(
        asked >= file_bytes * 9 / 10 && asked <= file_bytes + 8 * 2048,
        "asked for {asked} bytes of a {file_bytes}-byte file"
    );
    let requests = fs.count(Op::WillNeed);
    assert!(requests <= 10, "{requests} requests");
}

/// Regression: a scan over scattered values comes back to blocks it read
/// before (two files whose values interleave in key order); that is no
/// reason to ask for them again (it once re-asked a whole window at almost
/// every block, and the kernel's walks of cached pages took 45% of a scan).
#[test]
fn a_scan_back_at_a_block_it_read_does_not_read_ahead_again() {
    let (mem, fs, db) = counted_engine_without_cache();
    let cf = db.default_column_family();
    put_range(&db, 0..2000, 1);
    db.flush(&cf, true).unwrap();
    let mut b = WriteBatch::new();
    for i in (1..2000).step_by(2) {
        b.put(cf.id(), &wide_key(i), &value(u64::from(i) + 2_000_000, 400));
    }
    db.write(&WriteOptions::default(), &b).unwrap();
    db.flush(&cf, true).unwrap();
    let blobs = mem
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".blob"))
        .count();
    assert_eq!(blobs, 2);
    let total = db.blob_file_stats(&cf).unwrap().file_bytes;
    let mut it = db.iter(&ReadOptions::default(), &cf).unwrap();
    assert_eq!(scan_forward(&mut it).len(), 2000);
    // Each byte once, but for blocks straddling segments; one request per
    // file and segment.
    let asked = fs.will_need_bytes();
    assert!(
        asked <= total + 2 * 8 * 2048,
        "asked {asked} bytes of {total}"
    );
    let requests = fs.count(Op::WillNeed);
    assert!(requests <= 2 * 10, "{requests} requests");
}

/// A scan with an upper bound asks for about what its keys need: here the
/// cursor takes the bound before any window reaches past it, so what is
/// asked is the range's blocks (a quarter of the file), give or take the
/// blocks straddling its ends. (In general a window asked before the bound
/// is taken may reach past it by up to twice what was read of that file.)
#[test]
fn a_bounded_scan_asks_for_no_more_than_its_keys_need() {
    let (_, fs, db, file_bytes) = one_blob_file();
    let cf = db.default_column_family();
    let read = ReadOptions {
        lower_bound: Some(wide_key(100)),
        upper_bound: Some(wide_key(600)),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&read, &cf).unwrap();
    let got = scan_forward(&mut it);
    assert_eq!(got.len(), 500);
    assert_eq!(got[0].0, wide_key(100));
    assert_eq!(got[499].0, wide_key(599));
    // A quarter of the keys, of values all the same size.
    let asked = fs.will_need_bytes();
    assert!(
        asked > 0 && asked <= file_bytes / 4 + 8 * 2048,
        "asked {asked} bytes of a {file_bytes}-byte file for a quarter of its keys"
    );
}

/// A scan reads a blob file it reads forward in spans, not a read call per
/// block; the values are the same. Counted on the file system: a key-only
/// scan's reads (the SSTs alone) are taken from the full scan's.
#[test]
fn scans_read_blob_blocks_in_spans() {
    let (_, fs, db, file_bytes) = one_blob_file();
    let cf = db.default_column_family();
    let keys_only = ReadOptions {
        key_only: true,
        ..ReadOptions::default()
    };
    let before = fs.count(Op::Read);
    let mut it = db.iter(&keys_only, &cf).unwrap();
    assert_eq!(scan_forward(&mut it).len(), 2000);
    drop(it);
    let sst_reads = fs.count(Op::Read) - before;
    let before = fs.count(Op::Read);
    let mut it = db.iter(&ReadOptions::default(), &cf).unwrap();
    assert_eq!(scan_forward(&mut it).len(), 2000);
    drop(it);
    let blob_reads = fs.count(Op::Read) - before - sst_reads;
    // About 850 KB in 2 KiB blocks, over 400 blocks: one read per range of
    // a segment's blocks (at most 256 KiB), one more per segment boundary,
    // the first values read alone and the blob file's open (header,
    // footer). The SSTs were opened by the compaction that wrote them, so
    // the key-only scan's count holds no open to hide a read of the full
    // scan's in.
    let spans = file_bytes.div_ceil(256 << 10);
    assert!(
        blob_reads <= spans + 8 + 6,
        "{blob_reads} blob reads for {file_bytes} bytes"
    );
    check_range(&db, 0..2000, 1);
}

/// A read that fails in the middle of a scan fails the move that needed it;
/// the iterator is then not valid (a move does nothing) until a seek, and a
/// seek back to where it stopped yields the rest, the same as a clean scan.
#[test]
fn a_failed_read_ahead_of_the_cursor_stops_the_scan_until_a_seek() {
    let (_, fs, db, _) = one_blob_file();
    let cf = db.default_column_family();
    let mut it = db.iter(&ReadOptions::default(), &cf).unwrap();
    it.seek_to_first().unwrap();
    let mut got = Vec::new();
    let mut failed = false;
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        if got.len() == 300 {
            fs.fail_after(Op::Read, 0, libc::EIO);
        }
        if it.next().is_err() {
            failed = true;
            assert!(!it.valid(), "not valid after a failed move");
            assert!(it.key().is_empty() && it.value().is_empty());
            it.next().unwrap();
            assert!(!it.valid(), "a move after a failure does nothing");
            break;
        }
    }
    assert!(failed, "no read failed in {} moves", got.len());
    fs.clear_faults();
    let last = got.last().expect("keys before the failure").0.clone();
    it.seek(&last).unwrap();
    it.next().unwrap();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..2000).map(|i| (wide_key(i), round_one(i))).collect();
    assert!(got == want, "the scan resumed by a seek differs");
}

/// A value that cannot be read fails the move onto its key, not an earlier
/// one, though a batch read it ahead: a scan yields every entry before it,
/// as a cursor fetching one value at a time would, and a seek past it goes
/// on.
#[test]
fn a_value_that_cannot_be_read_fails_the_move_onto_its_key_only() {
    let (_, _, db, _) = one_blob_file();
    let cf = db.default_column_family();
    let missing = BlobRef {
        file_number: 999_999,
        block_offset: 4096,
        block_size: 2048,
        record_offset: 0,
        value_len: 400,
    };
    let mut reference = Vec::new();
    missing.encode_into(&mut reference);
    let mut b = WriteBatch::new();
    b.put_blob_index(cf.id(), &wide_key(1500), &reference);
    db.write(&WriteOptions::default(), &b).unwrap();
    let mut it = db.iter(&ReadOptions::default(), &cf).unwrap();
    it.seek_to_first().unwrap();
    let mut served = 0;
    let failure = loop {
        assert!(it.valid());
        assert_eq!(it.key(), wide_key(served));
        assert_eq!(it.value(), round_one(served));
        served += 1;
        if let Err(e) = it.next() {
            break e;
        }
    };
    assert_eq!(served, 1500, "the scan failed before the damaged key");
    assert!(matches!(failure, Error::Corruption { .. }), "{failure}");
    assert!(!it.valid());
    it.seek(&wide_key(1501)).unwrap();
    let mut rest = 1501;
    while it.valid() {
        assert_eq!(it.key(), wide_key(rest));
        assert_eq!(it.value(), round_one(rest));
        rest += 1;
        it.next().unwrap();
    }
    assert_eq!(rest, 2000);
}

/// With `lazy_values`, moves read no blob file: over a blob file with a
/// damaged block, a scan passes every key with its separated value unread
/// (empty), `prepare_value` reads any other value, and only the damaged
/// keys' fail (not valid until the next seek), where a scan without it
/// stops at the damage.
#[test]
fn lazy_values_are_read_only_when_prepared() {
    let (mem, fs, db, file_bytes) = one_blob_file();
    let cf = db.default_column_family();
    let blob: Vec<String> = mem
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".blob"))
        .collect();
    assert_eq!(blob.len(), 1);
    fs.flip_bit_on_read(&Path::new(DIR).join(&blob[0]), file_bytes / 2, 5);

    let mut eager = db.iter(&ReadOptions::default(), &cf).unwrap();
    let mut moved = eager.seek_to_first();
    while moved.is_ok() && eager.valid() {
        moved = eager.next();
    }
    assert!(
        moved.is_err(),
        "the damage is met by a scan that reads values"
    );

    let lazy = ReadOptions {
        lazy_values: true,
        ..ReadOptions::default()
    };
    let mut it = db.iter(&lazy, &cf).unwrap();
    it.seek_to_first().unwrap();
    let mut passed = 0;
    while it.valid() {
        assert_eq!(it.key(), wide_key(passed));
        assert!(it.value().is_empty(), "key {passed}: read by a move");
        passed += 1;
        it.next().unwrap();
    }
    assert_eq!(passed, 2000);

    let mut damaged = Vec::new();
    let mut i = 0;
    while i < 2000 {
        it.seek(&wide_key(i)).unwrap();
        match it.prepare_value() {
            Ok(()) => {
                assert_eq!(it.value(), round_one(i));
                // Prepared once: again is a no-op, and a step back and
                // forth leaves the value unread again.
                it.prepare_value().unwrap();
                assert_eq!(it.value(), round_one(i));
                if i > 0 {
                    it.prev().unwrap();
                    assert!(it.value().is_empty());
                    it.next().unwrap();
                    assert!(it.value().is_empty());
                }
            }
            Err(e) => {
                assert!(matches!(e, Error::Corruption { .. }), "{e}");
                assert!(!it.valid(), "valid after a failed read");
                damaged.push(i);
            }
        }
        i += 7;
    }
    assert!(!damaged.is_empty(), "the damaged block was never asked for");
    assert!(
        damaged.len() <= 2,
        "{damaged:?}: more than one block's keys"
    );
}

/// A long scan that fetches ahead while other threads overwrite every key,
/// flush and compact (moving values to new blob files and leaving the old
/// ones garbage) sees exactly the values of its own sequence number: the
/// blob files its batches read stay while it holds its version.
#[test]
fn a_scan_fetching_ahead_under_overwrites_and_compactions_sees_its_own_values() {
    let fs = MemFs::new();
    let mut options = separated_options();
    options.default_column_family.write_buffer_bytes = 256 << 10;
    let db = Arc::new(open(&fs, options).unwrap());
    let cf = db.default_column_family();
    put_range(&db, 0..3000, 1);
    db.flush(&cf, true).unwrap();
    let mut it = db.iter(&ReadOptions::default(), &cf).unwrap();
    it.seek_to_first().unwrap();
    let (done, rounds) = std::sync::mpsc::channel();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let cf = db.default_column_family();
            for round in 2..5 {
                put_range(&db, 0..3000, round);
                db.flush(&cf, true).unwrap();
                db.compact_range(&cf, None, None).unwrap();
                done.send(round).unwrap();
            }
        })
    };
    let mut seen = 0;
    while it.valid() {
        assert_eq!(it.key(), wide_key(seen));
        assert!(it.value() == round_one(seen), "key {seen}");
        seen += 1;
        if seen == 500 || seen == 1500 || seen == 2500 {
            // Mid-scan, with entries taken ahead: a whole overwrite lands,
            // flushed and compacted, and the scan's blob files are garbage.
            rounds.recv().unwrap();
        }
        it.next().unwrap();
    }
    assert_eq!(seen, 3000);
    writer.join().unwrap();
    drop(it);
    check_range(&db, 0..3000, 4);
}

/// A cursor's move: a run of `next`s or `prev`s, or a seek.
#[derive(Debug, Clone)]
enum Move {
    Next(u16),
    Prev(u16),
    Seek(u32),
    SeekForPrev(u32),
    First,
    Last,
}

fn a_move() -> impl Strategy<Value = Move> {
    prop_oneof![
        4 => (1u16..1500).prop_map(Move::Next),
        2 => (1u16..300).prop_map(Move::Prev),
        1 => (0u32..3100).prop_map(Move::Seek),
        1 => (0u32..3100).prop_map(Move::SeekForPrev),
        1 => Just(Move::First),
        1 => Just(Move::Last),
    ]
}

/// Value of key `i` in `round`: inline (under 100 bytes) for one key in
/// three, separated in sizes from 100 bytes to 3 KiB for the others.
fn mixed_value(i: u32, round: u64) -> Vec<u8> {
    let len = if i.is_multiple_of(3) {
        20 + (i as usize % 60)
    } else {
        100 + (i as usize * 37 + round as usize * 11) % 3000
    };
    value(u64::from(i) * 10 + round, len)
}

/// A database of 3000 keys over four rounds of writes (the first three
/// flushed, so the values of one scan interleave over several blob files),
/// deletions, and a last round left in the memtable; and its model.
fn mixed_database() -> (Db, BTreeMap<Vec<u8>, Vec<u8>>) {
    let fs = MemFs::new();
    let mut options = separated_options();
    options.default_column_family.write_buffer_bytes = 4 << 20;
    options
        .default_column_family
        .compaction
        .level0_compaction_trigger = 8;
    let db = open(&fs, options).unwrap();
    let cf = db.default_column_family();
    let mut model = BTreeMap::new();
    let mut b = WriteBatch::new();
    for round in 0..4u64 {
        for i in 0..3000u32 {
            let touched = match round {
                0 => true,
                1 => i % 2 == 1,
                2 => i % 5 == 2,
                _ => i % 7 == 3,
            };
            if !touched {
                continue;
            }
            if round == 2 && i % 10 == 2 {
                b.delete(cf.id(), &wide_key(i));
                model.remove(&wide_key(i));
            } else {
                b.put(cf.id(), &wide_key(i), &mixed_value(i, round));
                model.insert(wide_key(i), mixed_value(i, round));
            }
            if b.count() == 64 {
                db.write(&WriteOptions::default(), &b).unwrap();
                b.clear();
            }
        }
        db.write(&WriteOptions::default(), &b).unwrap();
        b.clear();
        if round < 3 {
            db.flush(&cf, true).unwrap();
        }
    }
    (db, model)
}

/// Where a cursor over the model's `keys` stands after one step of a move.
fn model_step(keys: &[&Vec<u8>], at: Option<usize>, m: &Move) -> Option<usize> {
    match *m {
        Move::Next(_) => at.map(|i| i + 1).filter(|&j| j < keys.len()),
        Move::Prev(_) => at.and_then(|i| i.checked_sub(1)),
        Move::Seek(t) => Some(keys.partition_point(|k| k.as_slice() < wide_key(t).as_slice()))
            .filter(|&j| j < keys.len()),
        Move::SeekForPrev(t) => keys
            .partition_point(|k| k.as_slice() <= wide_key(t).as_slice())
            .checked_sub(1),
        Move::First => (!keys.is_empty()).then_some(0),
        Move::Last => keys.len().checked_sub(1),
    }
}

/// Runs one step of a move (one `next` or `prev` of a run, or a seek) on the
/// engine's cursor.
fn engine_step(it: &mut DbIterator, m: &Move) {
    match *m {
        Move::Next(_) => it.next().unwrap(),
        Move::Prev(_) => it.prev().unwrap(),
        Move::Seek(t) => it.seek(&wide_key(t)).unwrap(),
        Move::SeekForPrev(t) => it.seek_for_prev(&wide_key(t)).unwrap(),
        Move::First => it.seek_to_first().unwrap(),
        Move::Last => it.seek_to_last().unwrap(),
    }
}

/// `PROPTEST_CASES` runs more cases than CI's (a soak).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]

    /// Any mix of moves over separated and inline values, within bounds or
    /// not, yields what a cursor over the model yields, entry by entry; a
    /// lazy iterator's separated values once prepared.
    #[test]
    fn any_mix_of_moves_matches_a_cursor_over_the_model(
        moves in prop::collection::vec(a_move(), 1..40),
        lower in prop::option::of(0u32..3000),
        span in prop::option::of(1u32..3000),
        lazy in any::<bool>(),
    ) {
        let (db, model) = mixed_database();
        let upper = span.map(|s| lower.unwrap_or(0) + s);
        let read = ReadOptions {
            lower_bound: lower.map(wide_key),
            upper_bound: upper.map(wide_key),
            lazy_values: lazy,
            ..ReadOptions::default()
        };
        let keys: Vec<&Vec<u8>> = model
            .keys()
            .filter(|k| lower.is_none_or(|l| k.as_slice() >= wide_key(l).as_slice()))
            .filter(|k| upper.is_none_or(|u| k.as_slice() < wide_key(u).as_slice()))
            .collect();
        let mut it = db.iter(&read, &db.default_column_family()).unwrap();
        let mut at = None;
        for m in &moves {
            let steps = match *m {
                Move::Next(n) | Move::Prev(n) => n,
                _ => 1,
            };
            // Every entry a run passes is checked; moves on a cursor that
            // is not valid do nothing, on both sides.
            for _ in 0..steps {
                at = model_step(&keys, at, m);
                engine_step(&mut it, m);
                match at {
                    Some(i) => {
                        prop_assert!(it.valid(), "{m:?}: not valid, model at {i}");
                        prop_assert_eq!(it.key(), keys[i].as_slice(), "{:?}", m);
                        if lazy && it.kind() == ValueKind::BlobIndex {
                            prop_assert!(it.value().is_empty(), "{m:?}: key {i} read by a move");
                            it.prepare_value().unwrap();
                        }
                        prop_assert!(
                            it.value() == model[keys[i]].as_slice(),
                            "{m:?}: value of key {i}"
                        );
                    }
                    None => prop_assert!(!it.valid(), "{m:?}: valid at {:?}", it.key()),
                }
            }
        }
    }
}
