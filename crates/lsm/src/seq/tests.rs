use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::*;

#[test]
fn a_later_range_waits_for_an_earlier_one() {
    let s = SeqAllocator::new(10).unwrap();
    let a = s.allocate(3).unwrap();
    let b = s.allocate(1).unwrap();
    let c = s.allocate(2).unwrap();
    assert_eq!((a, b, c), (11, 14, 15));
    assert_eq!(s.allocated(), 16);
    s.publish(16).unwrap();
    s.publish(14).unwrap();
    assert_eq!(s.visible(), 10, "the first range is not finished");
    s.publish(13).unwrap();
    assert_eq!(s.visible(), 16, "visible jumps over the finished prefix");
}

#[test]
fn bad_arguments_are_refused_without_effect() {
    assert!(SeqAllocator::new(MAX_SEQNO + 1).is_err());
    let s = SeqAllocator::new(MAX_SEQNO - 2).unwrap();
    assert!(matches!(s.allocate(0), Err(Error::InvalidArgument(_))));
    assert!(matches!(s.allocate(3), Err(Error::InvalidArgument(_))));
    assert_eq!(s.allocate(2).unwrap(), MAX_SEQNO - 1);
    assert!(s.allocate(1).is_err());
    // Not the end of a range, and a range published twice.
    assert!(s.publish(MAX_SEQNO - 1).is_err());
    s.publish(MAX_SEQNO).unwrap();
    assert!(s.publish(MAX_SEQNO).is_err());
    assert_eq!(s.visible(), MAX_SEQNO);
}

/// Writers allocate, "write" every seqno of their range (a flag per seqno,
/// standing for the memtable inserts), and publish, in random order and
/// timing; readers check that visible never goes backwards and never passes
/// a seqno whose write has not happened.
#[test]
fn visible_is_monotonic_and_never_passes_an_unfinished_batch() {
    const WRITERS: usize = 4;
    const BATCHES: usize = 3000;
    const MAX_BATCH: u64 = 4;
    let s = Arc::new(SeqAllocator::new(0).unwrap());
    let written: Arc<Vec<AtomicBool>> = Arc::new(
        (0..=WRITERS * BATCHES * MAX_BATCH as usize)
            .map(|_| AtomicBool::new(false))
            .collect(),
    );
    let done = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for w in 0..WRITERS {
        let (s, written, done) = (s.clone(), written.clone(), done.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = w as u64 + 1;
            for _ in 0..BATCHES {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let n = 1 + rng % MAX_BATCH;
                let first = s.allocate(n).unwrap();
                for seq in first..first + n {
                    if rng & 7 == 0 {
                        std::thread::yield_now();
                    }
                    written[seq as usize].store(true, Ordering::Relaxed);
                }
                s.publish(first + n - 1).unwrap();
            }
            done.fetch_add(1, Ordering::Release);
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (s, written, done) = (s.clone(), written.clone(), done.clone());
        readers.push(std::thread::spawn(move || {
            let mut last = 0;
            let mut checked = 0;
            loop {
                let finished = done.load(Ordering::Acquire) == WRITERS as u64;
                let v = s.visible();
                assert!(v >= last, "visible went backwards: {last} -> {v}");
                for seq in checked + 1..=v {
                    assert!(
                        written[seq as usize].load(Ordering::Relaxed),
                        "visible {v} passes unwritten seqno {seq}"
                    );
                }
                checked = checked.max(v);
                last = v;
                if finished {
                    return v;
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let allocated = s.allocated();
    for r in readers {
        assert_eq!(r.join().unwrap(), allocated);
    }
    assert_eq!(s.visible(), allocated);
}
