//! A real process crash: the test binary runs itself as a child that writes
//! synced batches from several threads to an engine on the real disk, with
//! small memtables so flushes and compactions run all the time (and a
//! manual compaction now and then), and the parent kills it with SIGKILL at
//! a random moment, reopens the directory and checks it, many times over
//! the same directory. After every kill:
//! - every write the child saw acknowledged is there (at most one more per
//!   writer, in flight at the kill, may be too);
//! - batches are atomic across column families;
//! - nothing deleted comes back, and every ring key holds the value of the
//!   last write to it.
//!
//! - the default family separates the ring's larger values into blob
//!   files, so kills land in blob writes and GC too.
//!
//! `STRATA_LSM_KILL9_CYCLES` sets the number of kills (default 30).

#![cfg(unix)]

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_lsm::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use strata_test_support::spawn_child;

const CHILD_ENV: &str = "STRATA_LSM_KILL9_CHILD";
const WRITERS: u64 = 3;
const RING: u64 = 64;

fn options() -> Options {
    let mut o = Options {
        block_cache_bytes: 1 << 20,
        ..Options::default()
    };
    let cf = &mut o.default_column_family;
    cf.write_buffer_bytes = 32 << 10;
    cf.compaction.level0_compaction_trigger = 2;
    cf.compaction.target_file_bytes = 32 << 10;
    // Ring values on both sides of the threshold, small blob files and a
    // tight space target: the kill also lands in flushes writing blob
    // files and in blob GC.
    cf.blob.min_blob_size = Some(350);
    cf.blob.target_file_bytes = 64 << 10;
    cf.blob.garbage_ratio = 0.2;
    cf.blob.space_amp_target = 1.1;
    cf.blob.space_amp_limit = 1.2;
    o
}

fn counter_key(w: u64) -> Vec<u8> {
    format!("writer{w}").into_bytes()
}

fn ring_key(w: u64, slot: u64) -> Vec<u8> {
    format!("ring{w}-{slot:02}").into_bytes()
}

fn ring_value(w: u64, n: u64) -> Vec<u8> {
    let mut v = format!("{w}:{n}:").into_bytes();
    v.resize(200 + (n % 300) as usize, b'a' + (n % 26) as u8);
    v
}

fn parse(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |v| {
        String::from_utf8(v).expect("utf8").parse().expect("number")
    })
}

fn families(db: &Db) -> [strata_lsm::ColumnFamily; 2] {
    let other = db
        .column_family("other")
        .unwrap_or_else(|| db.create_column_family("other").expect("create"));
    [db.default_column_family(), other]
}

#[test]
fn kill9_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, options()).expect("child: open");
    let cfs = families(&db);
    let out = std::io::stdout();
    let ack = |line: String| {
        let mut out = out.lock();
        writeln!(out, "{line}").expect("child: stdout");
        out.flush().expect("child: stdout");
    };
    ack("\nready".to_string());
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let db = &db;
            let cfs = &cfs;
            let ack = &ack;
            s.spawn(move || {
                let read = ReadOptions::default();
                let mut n = parse(db.get(&read, &cfs[0], &counter_key(w)).expect("child: get"));
                loop {
                    n += 1;
                    let mut b = WriteBatch::new();
                    let c = n.to_string();
                    b.put(cfs[0].id(), &counter_key(w), c.as_bytes());
                    b.put(cfs[1].id(), &counter_key(w), c.as_bytes());
                    let slot = ring_key(w, n % RING);
                    if n.is_multiple_of(5) {
                        b.delete(cfs[0].id(), &slot);
                    } else {
                        b.put(cfs[0].id(), &slot, &ring_value(w, n));
                    }
                    db.write(
                        &WriteOptions {
                            sync: true,
                            ..WriteOptions::default()
                        },
                        &b,
                    )
                    .expect("child: write");
                    ack(format!("ack {w} {n}"));
                    if w == 0 && n.is_multiple_of(400) {
                        db.compact_range(&cfs[0], None, None)
                            .expect("child: compact");
                    }
                }
            });
        }
    });
}

/// Reopens, checks against the acknowledged floors, returns the counters.
fn verify(dir: &Path, floor: &[u64], cycle: u64) -> Vec<u64> {
    let db = Db::open(dir, options())
        .unwrap_or_else(|e| panic!("cycle {cycle}: reopen after kill -9: {e}"));
    let cfs = families(&db);
    let read = ReadOptions::default();
    let mut counters = Vec::new();
    for w in 0..WRITERS {
        let a = parse(db.get(&read, &cfs[0], &counter_key(w)).expect("get"));
        let b = parse(db.get(&read, &cfs[1], &counter_key(w)).expect("get"));
        assert_eq!(a, b, "cycle {cycle} writer {w}: a batch half there");
        let f = floor[w as usize];
        assert!(
            a >= f,
            "cycle {cycle} writer {w}: {a} recovered, {f} acknowledged"
        );
        assert!(
            a <= f + 1,
            "cycle {cycle} writer {w}: {a} recovered, only {f} acknowledged"
        );
        for slot in 0..RING {
            // The last write to this slot at or below `a`.
            let last = (1..=a).rev().find(|n| n % RING == slot);
            let want = match last {
                Some(n) if n % 5 != 0 => Some(ring_value(w, n)),
                _ => None,
            };
            assert_eq!(
                db.get(&read, &cfs[0], &ring_key(w, slot)).expect("get"),
                want,
                "cycle {cycle} writer {w} slot {slot} (counter {a})"
            );
        }
        counters.push(a);
    }
    db.close()
        .unwrap_or_else(|e| panic!("cycle {cycle}: close: {e}"));
    counters
}

#[test]
fn kill9_cycles() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let cycles: u64 = std::env::var("STRATA_LSM_KILL9_CYCLES")
        .ok()
        .map_or(30, |v| v.parse().expect("STRATA_LSM_KILL9_CYCLES"));
    let mut rng = StdRng::seed_from_u64(0x6c73_6d39);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let start = Instant::now();
    let mut floor = vec![0u64; WRITERS as usize];
    let mut acks = 0u64;
    for cycle in 0..cycles {
        let (mut child, rx, reader) = spawn_child("kill9_child", CHILD_ENV, dir);
        let mut lines = Vec::new();
        if cycle % 5 == 4 {
            // Kill while the child may still be recovering.
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..=40)));
        } else {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(line) => {
                        let ready = line.starts_with("ready");
                        lines.push(line);
                        if ready {
                            break;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        let _ = child.kill();
                        panic!("cycle {cycle}: the child never became ready: {lines:?}");
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        let status = child.wait().expect("wait");
                        panic!("cycle {cycle}: the child exited ({status}): {lines:?}");
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(30..=200)));
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            lines.extend(rx.iter());
            let tail = &lines[lines.len().saturating_sub(30)..];
            panic!("cycle {cycle}: the child exited by itself ({status}): {tail:#?}");
        }
        child.kill().expect("SIGKILL the child");
        let status = child.wait().expect("wait for the child");
        assert_eq!(status.signal(), Some(9), "cycle {cycle}: {status}");
        lines.extend(rx.iter());
        reader.join().expect("reader thread");
        for line in &lines {
            let parts: Vec<&str> = line.split_whitespace().collect();
            if parts.first() == Some(&"ack") {
                let w: usize = parts[1].parse().expect("writer");
                let n: u64 = parts[2].parse().expect("counter");
                floor[w] = floor[w].max(n);
                acks += 1;
            }
        }
        floor = verify(dir, &floor, cycle);
    }
    println!(
        "lsm kill9: {cycles} cycles, {acks} acknowledged writes, counters {floor:?}, {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(acks > 0, "the child must have written something");
}
