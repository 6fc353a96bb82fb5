//! A real process crash: the test binary runs itself as a child that writes
//! synced batches to an engine on the real disk, and the parent kills it with
//! SIGKILL at a random moment, reopens the directory and checks it, many times
//! over the same directory. It proves that after `kill -9`:
//! - every write the child saw return `Ok` is there, byte for byte;
//! - no batch is half visible: each batch writes the same indexes to groups 1,
//!   2 and 3 plus a key naming its last index, and these always agree;
//! - compactions, key overwrites and purges (with rotation, rewriting of a
//!   lagging group and recycling of files) lose nothing either, including when
//!   the kill lands while the child is still opening the engine.
//!
//! `STRATA_KILL9_CYCLES` sets the number of kills (default 50),
//! `STRATA_KILL9_SEED` the seed of the kill delays, and `STRATA_KILL9_KEEP`
//! keeps the directory (its path printed) to inspect after a failure.

#![cfg(unix)]

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_raftlog::{Config, Engine, LogBatch};
use strata_test_support::spawn_child;

/// Names the directory the child writes to; its absence means "not the child".
const CHILD_ENV: &str = "STRATA_KILL9_CHILD";

/// Groups 1..=3 receive the same indexes in every batch.
const MIRRORED: [u64; 3] = [1, 2, 3];
/// A group that gets an entry now and then and is never compacted, so purge
/// must copy it into the rewrite queue to free the oldest files.
const LAGGING: u64 = 4;
/// A group holding only keys, overwritten in a ring of `KEY_RING` names.
const KEYS: u64 = 5;
const KEY_RING: u64 = 64;
/// The child compacts the mirrored groups every `COMPACT_EVERY` batches, keeping
/// the last `KEEP` entries.
const COMPACT_EVERY: u64 = 32;
const KEEP: u64 = 64;
/// Entries per batch are at most this many, so at most this many indexes can be
/// written and not yet acknowledged when the kill lands.
const ENTRIES_MAX: u64 = 3;

fn config() -> Config {
    Config {
        target_file_size_bytes: 256 << 10,
        purge_threshold_bytes: 1 << 20,
        ..Config::default()
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The bytes of entry `index` of `group`: 64 to about 3 KiB, compressible for
/// even indexes (so LZ4 batches occur) and random for odd ones.
fn entry_bytes(group: u64, index: u64) -> Vec<u8> {
    let mut x = splitmix(group.wrapping_mul(0x1_0000_0001) ^ index);
    let len = 64 + (x % 3000) as usize;
    let mut v = format!("g{group}/i{index}/").into_bytes();
    while v.len() < len {
        x = splitmix(x);
        if index.is_multiple_of(2) {
            v.extend(std::iter::repeat_n(x as u8, 16));
        } else {
            v.extend_from_slice(&x.to_le_bytes());
        }
    }
    v.truncate(len);
    v
}

fn ring_key(put: u64) -> Vec<u8> {
    format!("k{}", put % KEY_RING).into_bytes()
}

fn ring_value(put: u64) -> Vec<u8> {
    let mut v = format!("put {put} ").into_bytes();
    v.extend_from_slice(&splitmix(put).to_le_bytes());
    v
}

fn parse_u64(bytes: &[u8]) -> u64 {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a number: {bytes:?}"))
}

/// The child: writes forever and acknowledges each successful write on stdout.
/// Without `STRATA_KILL9_CHILD` it returns at once, so a plain `cargo test`
/// only runs it as a no-op; `kill9_cycles` is the test.
#[test]
fn kill9_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let engine = Engine::open(&dir, config()).expect("child: open");
    let mut last = engine.last_index(1).unwrap_or(0);
    let mut lag = engine.last_index(LAGGING).unwrap_or(0);
    let mut puts = engine.get(KEYS, b"last_put").map_or(0, |v| parse_u64(&v));
    let out = std::io::stdout();
    let ack = |line: String| {
        let mut out = out.lock();
        writeln!(out, "{line}").expect("child: stdout");
        out.flush().expect("child: stdout");
    };
    // The harness has printed "test kill9_child ... " without a newline.
    ack(format!("\nready {last}"));
    let mut rng = StdRng::seed_from_u64(last ^ (puts << 32));
    for step in 1u64.. {
        // The mirrored groups, sometimes replacing the last entry (Raft's
        // suffix replacement) with the same bytes.
        let first_index = engine.first_index(1).unwrap_or(1);
        let first = if last > first_index && rng.gen_bool(0.1) {
            last
        } else {
            last + 1
        };
        let n = rng.gen_range(1..=ENTRIES_MAX);
        let new_last = (first + n - 1).max(last);
        let mut batch = LogBatch::new();
        for g in MIRRORED {
            let entries: Vec<Vec<u8>> = (first..first + n).map(|i| entry_bytes(g, i)).collect();
            batch.add_entries(g, first, &entries);
        }
        batch.put(1, b"applied", new_last.to_string().as_bytes());
        engine
            .write(&mut batch, true)
            .expect("child: write entries");
        last = new_last;
        ack(format!("ack 1 {last} entries"));

        if lag == 0 || step % 97 == 0 {
            lag += 1;
            batch.add_entries(LAGGING, lag, &[entry_bytes(LAGGING, lag)]);
            engine
                .write(&mut batch, true)
                .expect("child: write lagging");
            ack(format!("ack {LAGGING} {lag} lagging"));
        }

        if step % 3 == 0 {
            puts += 1;
            batch.put(KEYS, &ring_key(puts), &ring_value(puts));
            batch.put(KEYS, b"last_put", puts.to_string().as_bytes());
            engine.write(&mut batch, true).expect("child: write keys");
            ack(format!("ack {KEYS} {puts} put"));
        }

        if step % COMPACT_EVERY == 0 && last > KEEP {
            let to = last - KEEP;
            for g in MIRRORED {
                batch.compact_to(g, to);
            }
            batch.put(1, b"compacted", to.to_string().as_bytes());
            engine
                .write(&mut batch, true)
                .expect("child: write compaction");
            ack(format!("ack 1 {to} compact"));
            let outcome = engine.purge().expect("child: purge");
            ack(format!(
                "ack 0 {} purge rewritten={}",
                outcome.files_purged, outcome.entries_rewritten
            ));
        }
    }
}

/// What the parent knows the directory must hold: the highest value each
/// kind of write reached, either acknowledged by a child or seen by the parent.
#[derive(Debug, Default, Clone, Copy)]
struct Floor {
    last: u64,
    compacted: u64,
    lag: u64,
    puts: u64,
}

/// Totals for the summary line.
#[derive(Debug, Default)]
struct Totals {
    acks: u64,
    entries_checked: u64,
    killed_before_ready: u64,
    purges: u64,
    files_purged: u64,
    entries_rewritten: u64,
    torn_tails: u64,
}

/// Applies the child's acknowledgements to `floor`; returns how many there were.
fn apply_acks(lines: &[String], floor: &mut Floor, totals: &mut Totals) -> u64 {
    let mut acks = 0;
    for line in lines {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts.first() != Some(&"ack") {
            continue;
        }
        acks += 1;
        let value: u64 = parts[2].parse().expect("ack value");
        match (parts[1], parts[3]) {
            ("1", "entries") => floor.last = floor.last.max(value),
            ("1", "compact") => floor.compacted = floor.compacted.max(value),
            (g, "lagging") if g == LAGGING.to_string() => floor.lag = floor.lag.max(value),
            (g, "put") if g == KEYS.to_string() => floor.puts = floor.puts.max(value),
            ("0", "purge") => {
                totals.purges += 1;
                totals.files_purged += value;
                let rewritten = parts[4].trim_start_matches("rewritten=");
                totals.entries_rewritten += rewritten.parse::<u64>().expect("rewritten");
            }
            _ => panic!("unexpected line from the child: {line}"),
        }
    }
    acks
}

/// Reopens the directory and checks it against `floor`; returns the state it
/// holds, which is the floor for the next cycle.
fn verify(dir: &Path, floor: Floor, cycle: u64, totals: &mut Totals) -> Floor {
    let engine = Engine::open(dir, config())
        .unwrap_or_else(|e| panic!("cycle {cycle}: reopen after kill -9: {e}"));
    let report = engine.recovery_report();
    totals.torn_tails += report.damage.len() as u64;
    let ctx = format!("cycle {cycle}, floor {floor:?}");

    // Mirrored groups: one last index, at least the acknowledged one and at
    // most one unacknowledged batch beyond it; the key agrees.
    let last = engine.last_index(1).unwrap_or(0);
    assert!(
        last >= floor.last,
        "{ctx}: acknowledged entries lost: last {last}"
    );
    assert!(
        last <= floor.last + ENTRIES_MAX,
        "{ctx}: last {last} is beyond any batch the child could have written"
    );
    let first = engine.first_index(1).unwrap_or(1);
    for g in MIRRORED {
        assert_eq!(
            engine.last_index(g).unwrap_or(0),
            last,
            "{ctx}: group {g} last index"
        );
        assert_eq!(
            engine.first_index(g).unwrap_or(1),
            first,
            "{ctx}: group {g} first index"
        );
    }
    let applied = engine.get(1, b"applied").map_or(0, |v| parse_u64(&v));
    assert_eq!(
        applied, last,
        "{ctx}: the key and the entries of one batch disagree"
    );
    let compacted = engine.get(1, b"compacted").map_or(1, |v| parse_u64(&v));
    assert_eq!(compacted, first, "{ctx}: compaction half visible");
    assert!(
        first >= floor.compacted.max(1),
        "{ctx}: acknowledged compaction lost"
    );
    if last > 0 {
        for g in MIRRORED {
            let got = engine
                .fetch_entries(g, first, last + 1, usize::MAX)
                .unwrap_or_else(|e| panic!("{ctx}: fetch group {g}: {e}"));
            assert_eq!(got.len() as u64, last + 1 - first, "{ctx}: group {g}");
            for (i, data) in (first..).zip(&got) {
                assert!(
                    *data == entry_bytes(g, i),
                    "{ctx}: group {g} entry {i} bytes differ"
                );
            }
            let got = engine.get_entry(g, last).expect("get_entry");
            assert_eq!(
                got,
                Some(entry_bytes(g, last)),
                "{ctx}: group {g} entry {last}"
            );
            totals.entries_checked += last + 2 - first;
        }
    }

    // The lagging group keeps everything from index 1.
    let lag = engine.last_index(LAGGING).unwrap_or(0);
    assert!(
        lag >= floor.lag && lag <= floor.lag + 1,
        "{ctx}: lagging group last {lag}"
    );
    if lag > 0 {
        assert_eq!(
            engine.first_index(LAGGING),
            Some(1),
            "{ctx}: lagging group compacted"
        );
        let got = engine
            .fetch_entries(LAGGING, 1, lag + 1, usize::MAX)
            .unwrap_or_else(|e| panic!("{ctx}: fetch lagging group: {e}"));
        for (i, data) in (1..).zip(&got) {
            assert!(
                *data == entry_bytes(LAGGING, i),
                "{ctx}: lagging entry {i} differs"
            );
        }
        assert_eq!(got.len() as u64, lag, "{ctx}: lagging group entries");
        totals.entries_checked += lag;
    }

    // The key ring: `last_put` and the ring key it names were one batch, so
    // every ring key holds the newest value written at or before `last_put`.
    let puts = engine.get(KEYS, b"last_put").map_or(0, |v| parse_u64(&v));
    assert!(
        puts >= floor.puts && puts <= floor.puts + 1,
        "{ctx}: last_put {puts}"
    );
    for slot in 0..KEY_RING {
        let newest = (1..=puts)
            .rev()
            .take(KEY_RING as usize)
            .find(|p| p % KEY_RING == slot);
        let got = engine.get(KEYS, format!("k{slot}").as_bytes());
        assert_eq!(
            got,
            newest.map(ring_value),
            "{ctx}: ring key k{slot}, last_put {puts}"
        );
    }
    engine
        .close()
        .unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
    Floor {
        last,
        compacted: first,
        lag,
        puts,
    }
}

#[test]
fn kill9_cycles() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let cycles: u64 = std::env::var("STRATA_KILL9_CYCLES")
        .ok()
        .map_or(50, |v| v.parse().expect("STRATA_KILL9_CYCLES"));
    let seed: u64 = std::env::var("STRATA_KILL9_SEED")
        .ok()
        .map_or(0x006b_696c_6c39, |v| v.parse().expect("STRATA_KILL9_SEED"));
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().expect("tempdir");
    // `STRATA_KILL9_KEEP`: the directory outlives a failure, to inspect.
    let kept;
    let dir = if std::env::var_os("STRATA_KILL9_KEEP").is_some() {
        kept = tmp.keep();
        println!("kill9: directory {}", kept.display());
        kept.as_path()
    } else {
        tmp.path()
    };
    let start = Instant::now();
    let mut floor = Floor::default();
    let mut totals = Totals::default();
    for cycle in 0..cycles {
        // The parent's engine is closed here, so the child can take the lock.
        let (mut child, rx, reader) = spawn_child("kill9_child", CHILD_ENV, dir);
        let mut lines = Vec::new();
        let early = cycle % 5 == 4;
        if early {
            // Kill while the child may still be recovering or creating its file.
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..=50)));
        } else {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
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
                        panic!(
                            "cycle {cycle}: the child exited ({status}) before ready: {lines:?}"
                        );
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(20..=150)));
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
        if !lines.iter().any(|l| l.starts_with("ready")) {
            totals.killed_before_ready += 1;
        }

        let acks = apply_acks(&lines, &mut floor, &mut totals);
        totals.acks += acks;
        floor = verify(dir, floor, cycle, &mut totals);
    }
    let elapsed = start.elapsed();
    println!(
        "kill9: {cycles} cycles (seed {seed}, {} killed before ready), {} acknowledged writes \
         verified, {} entries compared, {} purges freed {} files and rewrote {} entries, \
         {} torn tails cut, final last index {}, in {:.1} s",
        totals.killed_before_ready,
        totals.acks,
        totals.entries_checked,
        totals.purges,
        totals.files_purged,
        totals.entries_rewritten,
        totals.torn_tails,
        floor.last,
        elapsed.as_secs_f64()
    );
    assert!(
        totals.acks >= cycles,
        "the children acknowledged only {} writes in {cycles} cycles",
        totals.acks
    );
    assert!(
        totals.purges > 0,
        "no purge ran: the test did not exercise purge"
    );
}
