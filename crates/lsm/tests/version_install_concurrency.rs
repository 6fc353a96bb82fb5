//! Readers load the read state in a loop while installers publish at once:
//! two compaction-like installers each replacing their file in their own key
//! range, a flush that switches memtables and installs their files, an
//! ingestion that installs a file and its seqno in one swap, and writers
//! publishing visible seqnos. Every state a reader sees is whole: the
//! version's invariants hold, each compaction range holds exactly one file
//! once it has any, each switched memtable is either waiting or flushed
//! (never both, never neither), an ingested file is present exactly when its
//! seqno is visible, and the visible seqno never goes back.

mod version_support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use parking_lot::Mutex;
use strata_lsm::{Install, Memtable, SeqAllocator, Version, VersionEdit};
use version_support::*;

const INGESTED: u64 = 1_000_000;
const FLUSHED: u64 = 2_000_000;
const ROUNDS: u64 = 150;

#[test]
fn readers_never_see_a_torn_state() {
    let (inst, rx) = installer();
    let inst = Arc::new(inst);
    let alloc = Arc::new(SeqAllocator::new(0).unwrap());
    let next_number = Arc::new(AtomicU64::new(1));
    let ingested: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let persist = |_: &[VersionEdit], _: &Arc<Version>| Ok(());

    let mut jobs = Vec::new();
    // Compactions: job j owns keys j*1000.. and replaces its one L1 file.
    for j in 0..2u32 {
        let (inst, next_number) = (inst.clone(), next_number.clone());
        jobs.push(thread::spawn(move || {
            let mut mine: Option<u64> = None;
            for i in 0..ROUNDS {
                let n = next_number.fetch_add(1, Ordering::Relaxed);
                let lo = j * 1000 + (i % 7) as u32;
                let deleted: Vec<(u8, u64)> = mine.iter().map(|&m| (1, m)).collect();
                let e = edit(&[(1, desc(n, lo, lo + 100, 1, 1))], &deleted);
                install(&inst, &[e]).unwrap();
                mine = Some(n);
            }
        }));
    }
    // Flush: switch memtable m to immutable, then install its file.
    {
        let inst = inst.clone();
        jobs.push(thread::spawn(move || {
            for m in 1..=ROUNDS {
                inst.switch_memtable(Arc::new(Memtable::new(m + 1)))
                    .unwrap();
                let e = edit(&[(0, desc(FLUSHED + m, 5000, 5010, 0, 0))], &[]);
                let install = Install {
                    edits: &[e],
                    flushed: Some(m),
                    visible: None,
                };
                inst.install(install, &mut { persist }).unwrap();
            }
        }));
    }
    // Writers: batches of 3 seqnos, published in order.
    {
        let (inst, alloc, done) = (inst.clone(), alloc.clone(), done.clone());
        jobs.push(thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let first = alloc.allocate(3).unwrap();
                alloc.publish(first + 2).unwrap();
                inst.publish_visible(alloc.visible());
            }
        }));
    }
    // Ingestion: a seqno, its file and its visibility in one swap.
    let ingestion = {
        let (inst, alloc, ingested) = (inst.clone(), alloc.clone(), ingested.clone());
        thread::spawn(move || {
            for _ in 0..ROUNDS {
                let s = alloc.allocate(1).unwrap();
                // Earlier writes must be visible first (the engine waits so).
                while alloc.visible() < s - 1 {
                    std::hint::spin_loop();
                }
                ingested.lock().insert(s);
                let e = VersionEdit {
                    last_seqno: Some(s),
                    ..edit(&[(0, desc(INGESTED + s, 6000, 6010, s, s))], &[])
                };
                let install = Install {
                    edits: &[e],
                    flushed: None,
                    visible: Some(s),
                };
                inst.install(install, &mut { persist }).unwrap();
                alloc.publish(s).unwrap();
                // Publishing s may release writer batches queued behind
                // it; whoever moves the allocator's visible seqno passes
                // it on, or the installer's stays behind for good.
                inst.publish_visible(alloc.visible());
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (inst, ingested, done) = (inst.clone(), ingested.clone(), done.clone());
            thread::spawn(move || {
                let mut last_visible = 0;
                let mut seen = [false; 2];
                let mut loads = 0u64;
                // At least one check each, even when the writers finish
                // before this thread is first scheduled (seen in CI on 2
                // busy cores: a reader that never ran failed the test).
                loop {
                    let finished = done.load(Ordering::Relaxed);
                    if finished && loads > 0 {
                        break;
                    }
                    let state = inst.load_full();
                    loads += 1;
                    let v = &state.version;
                    assert!(state.visible >= last_visible, "visible went back");
                    last_visible = state.visible;
                    v.check().unwrap();
                    for (j, seen) in seen.iter_mut().enumerate() {
                        let lo = j as u32 * 1000;
                        let n = v
                            .files_in_range(1, Some(&key(lo)), Some(&key(lo + 999)))
                            .len();
                        assert!(n <= 1, "two files of one compaction range");
                        assert!(n == 1 || !*seen, "a compaction's file vanished");
                        *seen |= n == 1;
                    }
                    for m in 1..state.active.id() {
                        let waiting = state.immutables.iter().any(|t| t.id() == m);
                        let flushed = v.file(FLUSHED + m).is_some();
                        assert!(
                            waiting != flushed,
                            "memtable {m}: waiting {waiting}, flushed {flushed}"
                        );
                    }
                    for f in v.level(0).unwrap().iter() {
                        if f.number() >= INGESTED && f.number() < FLUSHED {
                            assert!(
                                state.visible >= f.number() - INGESTED,
                                "ingested file without its seqno"
                            );
                        }
                    }
                    for &s in ingested.lock().range(..=state.visible) {
                        assert!(
                            v.file(INGESTED + s).is_some(),
                            "seqno {s} visible without its file"
                        );
                    }
                }
                loads
            })
        })
        .collect();
    ingestion.join().unwrap();
    let writer_and_jobs = jobs.split_off(3);
    for j in jobs {
        j.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for j in writer_and_jobs {
        j.join().unwrap();
    }
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // Nothing was lost: every job's last file is there.
    let state = inst.load_full();
    assert_eq!(state.version.level_len(1), 2);
    assert_eq!(state.version.level_len(0), 2 * ROUNDS as usize);
    assert_eq!(state.active.id(), ROUNDS + 1);
    assert!(state.immutables.is_empty());
    // Every thread that moved the allocator's visible seqno published it
    // afterwards, so the installer ends exactly where the allocator does.
    assert_eq!(state.visible, alloc.visible());
    // Each compaction removed ROUNDS - 1 files, all unreachable by now.
    drop(state);
    assert_eq!(rx.try_iter().count(), 2 * (ROUNDS as usize - 1));
}

#[test]
fn visible_never_goes_back_through_the_installer() {
    let (inst, _rx) = installer();
    inst.publish_visible(10);
    inst.publish_visible(7);
    assert_eq!(inst.load().visible, 10);
    let install = Install {
        edits: &[],
        flushed: None,
        visible: Some(5),
    };
    let published = inst
        .install(install, &mut |_: &[VersionEdit], _: &Arc<Version>| Ok(()))
        .unwrap();
    assert_eq!(published.visible, 10);
    let install = Install {
        visible: Some(12),
        ..install
    };
    inst.install(install, &mut |_: &[VersionEdit], _: &Arc<Version>| Ok(()))
        .unwrap();
    assert_eq!(inst.load().visible, 12);
    assert!(inst.switch_memtable(Arc::new(Memtable::new(1))).is_err());
}
