//! Times one `Engine::purge` over many groups, on the real disk.
//!
//! Fills `--groups` groups the way a multi-Raft store does (batches of 16
//! groups, one 1 KiB entry and a 64-byte state put per group, half of each
//! entry compressible, each group compacted to its last `--keep` entries),
//! uniformly or with Zipf-skewed group choice (`--zipf S`, S > 0), until
//! `--bytes` of entries are written. Then it reopens the engine with a purge
//! threshold of half the log, so that purge must copy the live data of the
//! oldest three quarters of the files, and times that purge and a second one
//! right after it (which has nothing to do).
//!
//! ```text
//! cargo run --release -p strata-raftlog --example purge_timing -- \
//!     --groups 100000 --bytes 1G [--zipf 1.0] [--dir ./strata-data/purge-timing]
//! ```
//!
//! One fill and two purges per run: run it several times and take the median.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_raftlog::{Config, Engine, LogBatch};

const GROUPS_PER_BATCH: usize = 16;
const ENTRY_BYTES: usize = 1024;
const STATE_BYTES: usize = 64;

struct Args {
    groups: u64,
    bytes: u64,
    zipf: f64,
    keep: u64,
    writers: usize,
    dir: PathBuf,
    seed: u64,
}

fn parse_bytes(s: &str) -> u64 {
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: f64 = num.parse().unwrap_or_else(|_| panic!("not a size: {s}"));
    (n * mult as f64) as u64
}

fn parse_args() -> Args {
    let mut args = Args {
        groups: 10_000,
        bytes: 1 << 30,
        zipf: 0.0,
        keep: 32,
        writers: 2,
        dir: PathBuf::from("./strata-data/purge-timing"),
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--groups" => args.groups = value().parse().expect("--groups"),
            "--bytes" => args.bytes = parse_bytes(&value()),
            "--zipf" => args.zipf = value().parse().expect("--zipf"),
            "--keep" => args.keep = value().parse().expect("--keep"),
            "--writers" => args.writers = value().parse().expect("--writers"),
            "--dir" => args.dir = PathBuf::from(value()),
            "--seed" => args.seed = value().parse().expect("--seed"),
            other => panic!("unknown flag {other} (see the file's docs)"),
        }
    }
    assert!(args.groups >= GROUPS_PER_BATCH as u64 * args.writers as u64);
    args
}

/// Picks group ranks `0..n` uniformly (`s == 0`) or with probability
/// proportional to `1 / (rank + 1)^s`.
struct Chooser {
    cdf: Vec<f64>,
}

impl Chooser {
    fn new(n: usize, s: f64) -> Self {
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 0..n {
            total += if s == 0.0 {
                1.0
            } else {
                1.0 / ((k + 1) as f64).powf(s)
            };
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Chooser { cdf }
    }

    fn pick(&self, rng: &mut StdRng) -> usize {
        let u: f64 = rng.gen();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// An entry: half pseudo-random bytes, half a repeated motif (LZ4 halves it).
fn entry(rng: &mut StdRng) -> Vec<u8> {
    let mut v = vec![0u8; ENTRY_BYTES];
    rng.fill(&mut v[..ENTRY_BYTES / 2]);
    let motif: [u8; 8] = rng.gen();
    for (i, b) in v[ENTRY_BYTES / 2..].iter_mut().enumerate() {
        *b = motif[i % 8];
    }
    v
}

/// One writer: owns every `writers`-th group and writes its share of bytes.
fn write_share(engine: &Engine, args: &Args, writer: usize) {
    let own: Vec<u64> = (1..=args.groups)
        .filter(|g| (g - 1) % args.writers as u64 == writer as u64)
        .collect();
    let chooser = Chooser::new(own.len(), args.zipf);
    let mut rng = StdRng::seed_from_u64(args.seed * 1000 + writer as u64);
    // Ranks are shuffled over the ids, so hot groups are not neighbours.
    let mut order: Vec<usize> = (0..own.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    let mut last = vec![0u64; own.len()];
    let mut first = vec![1u64; own.len()];
    let batches = args.bytes / (ENTRY_BYTES * GROUPS_PER_BATCH * args.writers) as u64;
    let mut batch = LogBatch::new();
    let mut picked = Vec::with_capacity(GROUPS_PER_BATCH);
    for _ in 0..batches {
        picked.clear();
        while picked.len() < GROUPS_PER_BATCH {
            let i = order[chooser.pick(&mut rng)];
            if !picked.contains(&i) {
                picked.push(i);
            }
        }
        for &i in &picked {
            last[i] += 1;
            batch.add_entries(own[i], last[i], &[entry(&mut rng)]);
            batch.put(own[i], b"raft_state", &[7u8; STATE_BYTES]);
        }
        engine.write(&mut batch, false).expect("write");
        for &i in &picked {
            if last[i] + 1 - first[i] >= 2 * args.keep {
                first[i] = last[i] + 1 - args.keep;
                engine.compact_to(own[i], first[i]).expect("compact");
            }
        }
    }
}

/// CPU time this thread has run, from `/proc/thread-self/schedstat` (Linux):
/// on a machine shared with other work, it shows what purge costs apart from
/// the time it waited for a CPU or the disk.
fn thread_cpu() -> Option<std::time::Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(std::time::Duration::from_nanos(ns))
}

fn secs(d: Option<std::time::Duration>) -> String {
    d.map_or("?".into(), |d| format!("{:.3}", d.as_secs_f64()))
}

fn main() {
    let args = parse_args();
    if args.dir.exists() {
        std::fs::remove_dir_all(&args.dir).expect("clear the directory");
    }
    let fill_config = Config {
        purge_threshold_bytes: u64::MAX,
        ..Config::default()
    };
    let engine = Arc::new(Engine::open(&args.dir, fill_config.clone()).expect("open"));
    let start = Instant::now();
    let args = Arc::new(args);
    let threads: Vec<_> = (0..args.writers)
        .map(|w| {
            let (engine, args) = (Arc::clone(&engine), Arc::clone(&args));
            std::thread::spawn(move || write_share(&engine, &args, w))
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    engine.sync().expect("sync");
    let fill = start.elapsed();
    let used = engine.used_bytes();
    Arc::into_inner(engine)
        .expect("writers are done")
        .close()
        .expect("close");
    println!(
        "fill: {} groups, zipf {}, {:.0} MiB of entries, {:.0} MiB on disk, {:.1} s",
        args.groups,
        args.zipf,
        args.bytes as f64 / (1 << 20) as f64,
        used as f64 / (1 << 20) as f64,
        fill.as_secs_f64()
    );

    let config = Config {
        purge_threshold_bytes: (used / 2).max(1 << 20),
        ..fill_config
    };
    let engine = Engine::open(&args.dir, config).expect("reopen");
    let (start, cpu) = (Instant::now(), thread_cpu());
    let out = engine.purge().expect("purge");
    let (first, first_cpu) = (start.elapsed(), thread_cpu());
    let first_cpu = first_cpu.zip(cpu).map(|(b, a)| b - a);
    let start = Instant::now();
    let again = engine.purge().expect("second purge");
    let second = start.elapsed();
    println!(
        "purge: {:.3} s ({} s CPU); {} files purged, {} entries ({:.0} MiB) rewritten, {} groups to compact",
        first.as_secs_f64(),
        secs(first_cpu),
        out.files_purged,
        out.entries_rewritten,
        out.bytes_rewritten as f64 / (1 << 20) as f64,
        out.groups_to_compact.len()
    );
    println!(
        "second purge (nothing to copy): {:.3} ms; {} files purged",
        second.as_secs_f64() * 1e3,
        again.files_purged
    );
    engine.close().expect("close");
}
