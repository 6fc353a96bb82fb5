//! Writers and readers on one memtable at once, through the sequence
//! allocator as the engine will drive them: every batch writes all of a
//! fixed set of keys (or range-deletes them all), inserting its items in
//! reverse order, so a reader that saw part of a batch would see keys that
//! disagree. Readers at the visible seqno must always see every key at the
//! same batch, by lookups and by iteration, and visible never goes back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strata_lsm::{
    IterOptions, Memtable, MergingIterator, RangeTombstoneSet, SeqAllocator, ValueKind, WriteBatch,
};

const KEYS: usize = 6;
const WRITERS: usize = 3;
const BATCHES: usize = 2000;

fn key(i: usize) -> Vec<u8> {
    format!("key{i}").into_bytes()
}

#[test]
fn readers_at_the_visible_seqno_never_see_a_torn_batch() {
    let memtable = Arc::new(Memtable::new(1));
    let seq = Arc::new(SeqAllocator::new(0).unwrap());
    let stop = Arc::new(AtomicBool::new(false));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (memtable, seq) = (memtable.clone(), seq.clone());
            std::thread::spawn(move || {
                for b in 0..BATCHES {
                    let mut batch = WriteBatch::new();
                    if b % 10 == 9 {
                        batch.delete_range(0, b"key", b"kez");
                    } else {
                        let value = format!("w{w}b{b}");
                        for i in 0..KEYS {
                            batch.put(0, &key(i), value.as_bytes());
                        }
                    }
                    batch.validate().unwrap();
                    let first = seq.allocate(u64::from(batch.count())).unwrap();
                    batch.set_first_seqno(first).unwrap();
                    let items: Vec<_> = batch.iter().map(Result::unwrap).collect();
                    for (i, item) in items.iter().enumerate().rev() {
                        memtable
                            .insert(item.key, first + i as u64, item.kind, item.value)
                            .unwrap();
                    }
                    seq.publish(first + items.len() as u64 - 1).unwrap();
                }
            })
        })
        .collect();

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (memtable, seq, stop) = (memtable.clone(), seq.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut last_visible = 0;
                let mut reads = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let snapshot = seq.visible();
                    assert!(snapshot >= last_visible, "visible went backwards");
                    last_visible = snapshot;
                    let seen: Vec<Option<Vec<u8>>> = if r == 0 {
                        (0..KEYS)
                            .map(|i| match memtable.get(&key(i), snapshot) {
                                Some((ValueKind::Put, v)) => Some(v),
                                _ => None,
                            })
                            .collect()
                    } else {
                        let tombstones = memtable.range_tombstones(snapshot);
                        let set = RangeTombstoneSet::new(&tombstones, snapshot);
                        let merged = MergingIterator::new(vec![memtable.iter()]);
                        let mut it = strata_lsm::SnapshotIterator::new(
                            merged,
                            snapshot,
                            set,
                            IterOptions::default(),
                        );
                        let mut found = vec![None; KEYS];
                        it.seek_to_first().unwrap();
                        while it.valid() {
                            let i: usize = std::str::from_utf8(&it.key()[3..])
                                .unwrap()
                                .parse()
                                .unwrap();
                            found[i] = Some(it.value().to_vec());
                            it.next().unwrap();
                        }
                        found
                    };
                    assert!(
                        seen.iter().all(|v| *v == seen[0]),
                        "torn batch at snapshot {snapshot}: {seen:?}"
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();

    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(seq.visible(), seq.allocated());
    assert_eq!(memtable.largest_seqno(), Some(seq.allocated()));
    assert_eq!(memtable.smallest_seqno(), Some(1));
}
