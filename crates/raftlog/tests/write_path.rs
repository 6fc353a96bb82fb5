//! The write path's reuse of buffers and its shortcuts keep `Engine::write`'s
//! contract: a batch reused after a write, a thread whose data turns
//! incompressible, and gap checks in small and large batches.

use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_raftlog::{Config, Engine, Error, LogBatch};

fn open(fs: &MemFs) -> Engine {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Engine::open_with_fs("/db", Config::default(), dyn_fs).unwrap()
}

/// 16 KiB of noise: lz4 cannot shrink it.
fn noise(seed: u64) -> Vec<u8> {
    strata_test_support::noise(seed, 16 << 10)
}

#[test]
fn a_batch_reused_after_writes_holds_only_its_new_items() {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut b = LogBatch::new();
    for i in 1..=50u64 {
        // Alternate big compressible and small batches through the same buffers.
        let entry = if i % 2 == 0 {
            vec![i as u8; 20 << 10]
        } else {
            format!("e{i}").into_bytes()
        };
        b.add_entries(1, i, &[entry]);
        b.put(1, b"k", &i.to_le_bytes());
        engine.write(&mut b, false).unwrap();
        assert!(b.is_empty());
        assert_eq!(b.approximate_size(), 0);
    }
    assert!(engine.metrics().compressed_batches > 0);
    drop(engine);
    let engine = open(&fs);
    for i in 1..=50u64 {
        let want = if i % 2 == 0 {
            vec![i as u8; 20 << 10]
        } else {
            format!("e{i}").into_bytes()
        };
        assert_eq!(engine.get_entry(1, i).unwrap().unwrap(), want, "entry {i}");
    }
    assert_eq!(engine.get(1, b"k").unwrap(), 50u64.to_le_bytes());
}

#[test]
fn data_turning_incompressible_is_stored_raw_and_back() {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut index = 0;
    let mut write = |entry: Vec<u8>| {
        index += 1;
        let before = engine.metrics().compressed_batches;
        let mut b = LogBatch::new();
        b.add_entries(1, index, &[entry]);
        engine.write(&mut b, false).unwrap();
        engine.metrics().compressed_batches > before
    };
    assert!(write(vec![7; 16 << 10]));
    assert!(write(vec![8; 16 << 10]));
    // After compressible batches the thread compresses without sampling first;
    // noise must still end up stored raw.
    assert!(!write(noise(1)));
    assert!(!write(noise(2)));
    assert!(write(vec![9; 16 << 10]));
    drop(engine);
    let engine = open(&fs);
    assert_eq!(engine.get_entry(1, 3).unwrap().unwrap(), noise(1));
    assert_eq!(engine.get_entry(1, 4).unwrap().unwrap(), noise(2));
    assert_eq!(engine.get_entry(1, 5).unwrap().unwrap(), vec![9; 16 << 10]);
}

#[test]
fn gaps_are_judged_against_the_batch_own_runs_in_small_and_large_batches() {
    let fs = MemFs::new();
    let engine = open(&fs);
    // 4 runs (looked back linearly) and 100 runs (kept in a map).
    for groups in [4u64, 100] {
        let base = groups * 1000;
        let mut b = LogBatch::new();
        for g in base..base + groups {
            b.add_entries(g, 1, &[b"a"]);
            b.add_entries(g, 2, &[b"b"]);
        }
        // Index 3 follows the batch's own run, though not the index's (empty).
        b.add_entries(base + 1, 3, &[b"c"]);
        engine.write(&mut b, false).unwrap();
        assert_eq!(engine.last_index(base + 1), Some(3));

        let mut b = LogBatch::new();
        for g in base + 1..base + groups {
            b.add_entries(g, 3, &[b"c"]);
        }
        // The batch cuts `base` back to 1, so 3 leaves a gap, though it would
        // follow the index's last index (2).
        b.add_entries(base, 1, &[b"x"]);
        b.add_entries(base, 3, &[b"gap"]);
        let err = engine.write(&mut b, false).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        // The refused batch is intact and nothing of it was applied.
        assert!(!b.is_empty());
        assert_eq!(engine.last_index(base), Some(2));
        assert_eq!(engine.last_index(base + 2), Some(2));
    }
}

/// Unsynced appends ask the OS to write their bytes back as the file grows
/// (one hint per 256 KiB), so that the sync sealing the file at rotation finds
/// little left to write; without it, U64K-4 (unsynced, ~64 KiB batches) held
/// a whole file dirty and wrote it out on the leader's path. Synced appends
/// are clean once synced and ask nothing.
#[test]
fn unsynced_appends_start_writeback_as_the_file_grows() {
    let fs = MemFs::new();
    let engine = open(&fs);
    // 4 MiB unsynced: sixteen hints.
    for i in 1..=256u64 {
        let mut batch = LogBatch::new();
        batch.add_entries(1, i, &[noise(i)]);
        engine.write(&mut batch, false).unwrap();
    }
    let hints = engine.metrics().writeback_hints;
    assert!((15..=16).contains(&hints), "{hints} hints for 4 MiB");
    // 4 MiB more, synced: none.
    for i in 257..=512u64 {
        let mut batch = LogBatch::new();
        batch.add_entries(1, i, &[noise(i)]);
        engine.write(&mut batch, true).unwrap();
    }
    assert_eq!(engine.metrics().writeback_hints, hints);
}

/// After large appends a recycled file's old cache is dropped a few MiB at a
/// time as the appends reach it, never the whole file in one call (freed at
/// once, its pages sat free long enough for a VM's balloon to hand them to the
/// host, and the appends then faulted every one back in); after small appends
/// it is kept. Without a preparer the leader drops each range itself, so the
/// steps can be checked exactly; with one, only the drop made as it takes a
/// file is certain (its later ranges may run after the appends passed them).
#[test]
fn a_recycled_files_cache_is_dropped_in_steps_after_large_appends_only() {
    const FILE_BYTES: u64 = 16 << 20;
    for (entry_bytes, prepare) in [(1024, true), (16 << 10, true), (16 << 10, false)] {
        let fault = strata_fs::FaultFs::new(Arc::new(MemFs::new()));
        let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
        let config = Config {
            target_file_size_bytes: FILE_BYTES,
            prepare_next_file: prepare,
            ..Config::default()
        };
        let engine = Engine::open_with_fs("/db", config, fs).unwrap();
        let mut index = 0u64;
        let write_mib = |engine: &Engine, index: &mut u64, mib: u64| {
            for _ in 0..(mib << 20) / entry_bytes as u64 {
                *index += 1;
                let mut batch = LogBatch::new();
                let entry = strata_test_support::noise(*index, entry_bytes);
                batch.add_entries(1, *index, &[entry]);
                engine.write(&mut batch, false).unwrap();
            }
        };
        // Three files, all freed, then two more files' worth from the pool.
        write_mib(&engine, &mut index, 3 * (FILE_BYTES >> 20));
        engine.compact_to(1, index + 1).unwrap();
        let purged = engine.purge().unwrap();
        assert!(purged.files_purged >= 2, "{purged:?}");
        write_mib(&engine, &mut index, 2 * (FILE_BYTES >> 20));
        assert!(engine.metrics().files_recycled >= 1);
        let drops = fault.cache_drops();
        if entry_bytes < 16 << 10 {
            assert_eq!(drops, vec![], "small appends keep the cache");
            continue;
        }
        let mut files: Vec<_> = drops.iter().map(|d| d.0.clone()).collect();
        files.sort();
        files.dedup();
        assert!(!files.is_empty(), "no cache dropped");
        let mut most = 0;
        for file in &files {
            let ranges: Vec<(u64, u64)> = drops
                .iter()
                .filter(|d| &d.0 == file)
                .map(|d| (d.1, d.2))
                .collect();
            most = most.max(ranges.len());
            if file.to_string_lossy().contains("recycle-") {
                // Taken from the pool by the preparer: its first 8 MiB at once.
                assert!(prepare, "{file:?}");
                assert_eq!(ranges[0], (0, 8 << 20), "{file:?}: {ranges:?}");
            }
            for (w, &(at, len)) in ranges.iter().enumerate() {
                assert!(len > 0 && len < FILE_BYTES, "{file:?}: a whole-file drop");
                // With a preparer that falls behind (a busy machine) a file
                // can be taken by the leader, or prepared twice: only the
                // leader's own drops are certain to follow each other.
                if w > 0 && !prepare {
                    let (before, before_len) = ranges[w - 1];
                    assert_eq!(at, before + before_len, "{file:?}: {ranges:?}");
                }
            }
        }
        if !prepare {
            // 16 MiB in steps of 4-8 MiB.
            assert!(most >= 3, "no file dropped in steps: {drops:?}");
        }
        engine.close().unwrap();
    }
}

/// After large synced appends the active file's synced pages are dropped
/// from the cache in consecutive steps from its start, never within
/// `cached_tail_bytes` of the synced end; after small appends, or with the
/// option 0, nothing is dropped. The file is fresh, so every drop is one
/// behind the appends (a recycled file's drops ahead are the test above's).
#[test]
fn synced_pages_are_dropped_a_fixed_way_behind_after_large_appends_only() {
    const MIB: u64 = 1 << 20;
    let keep = MIB;
    for (entry_bytes, cached_tail_bytes, prepare) in [
        (64 << 10, keep, true),
        (64 << 10, keep, false),
        (64 << 10, 0, true),
        (8 << 10, keep, true),
    ] {
        let case = format!("{entry_bytes} B entries, keep {cached_tail_bytes}");
        let fault = strata_fs::FaultFs::new(Arc::new(MemFs::new()));
        let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
        let config = Config {
            target_file_size_bytes: 64 * MIB,
            prepare_next_file: prepare,
            cached_tail_bytes,
            ..Config::default()
        };
        let engine = Engine::open_with_fs("/db", config, fs).unwrap();
        let mut written = 0u64;
        let mut index = 0u64;
        while written < 26 * MIB {
            index += 1;
            let mut batch = LogBatch::new();
            batch.add_entries(1, index, &[strata_test_support::noise(index, entry_bytes)]);
            engine.write(&mut batch, true).unwrap();
            written += entry_bytes as u64;
        }
        // A preparer runs the drops on its own thread, and a stopping one
        // leaves what it was not yet handed to: wait for the third (with
        // large appends, 26 MiB hold three) before closing.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let expected = entry_bytes >= 16 << 10 && cached_tail_bytes > 0;
        while expected && fault.cache_drops().len() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        engine.close().unwrap();
        let drops = fault.cache_drops();
        if entry_bytes < 16 << 10 || cached_tail_bytes == 0 {
            assert_eq!(drops, vec![], "{case}: nothing dropped");
            continue;
        }
        assert!(drops.len() >= 3, "{case}: {drops:?}");
        let mut at = 0;
        for (file, from, len) in &drops {
            assert_eq!(file, &drops[0].0, "{case}: one file");
            assert_eq!(*from, at, "{case}: {drops:?}");
            assert!(
                *len >= 8 * MIB && (from + len) % 4096 == 0,
                "{case}: {drops:?}"
            );
            at = from + len;
        }
        // The file holds headers besides the entries: at most 27 MiB.
        assert!(at + keep <= 27 * MIB, "{case}: dropped to {at}");
        assert!(at >= 16 * MIB, "{case}: dropped only to {at}");
    }
}
