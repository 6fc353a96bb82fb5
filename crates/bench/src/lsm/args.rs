//! The flags of `strata-bench lsm`, checked by clap where it can and by
//! `validate` before anything reaches disk, and what they resolve to: the
//! key space, the shared engine settings, the workload list.

use std::path::PathBuf;

use clap::builder::RangedU64ValueParser;

use super::engine::{KvEngineKind, KvSettings};
use super::keys::{KeySpace, KEY_BYTES_MAX, KEY_BYTES_MIN};
use super::workloads::Workload;
use crate::error::BenchError;
use crate::raftlog::OnOff;
use crate::units::{fmt_bytes, parse_bytes};
use crate::workload::EntrySizes;

/// Longest value the bench writes: every engine takes it in one piece.
const VALUE_BYTES_MAX: usize = 64 << 20;
/// Most keys: the live-key table costs 4 bytes a key.
const KEYS_MAX: u64 = 1 << 31;

/// Arguments of `lsm`.
#[derive(Debug, clap::Args)]
pub struct LsmArgs {
    /// Engines to run, in this order, comma-separated (default: every engine
    /// compiled in). fjall and RocksDB need `--features peer-fjall`,
    /// `peer-rocksdb` or `peers`.
    #[arg(long = "engines", alias = "engine", value_enum, value_delimiter = ',')]
    pub(super) engines: Vec<KvEngineKind>,
    /// Workloads, in this order, on one database per engine and run. A
    /// workload that needs data with no fill before it gets a fillrandom
    /// first.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fillrandom,overwrite,readrandom,readmissing,readrandom-cold,seekrandom,readwhilewriting,deleterandom,scan"
    )]
    pub(super) workloads: Vec<Workload>,
    /// Keys in the key space [default: 100000].
    #[arg(long, value_parser = RangedU64ValueParser::<u64>::new().range(1..=KEYS_MAX))]
    pub(super) keys: Option<u64>,
    /// Size the key space to hold this many user bytes instead (keys =
    /// bytes / (key + mean value)), e.g. 2G.
    #[arg(long, value_parser = parse_bytes, conflicts_with = "keys")]
    pub(super) total_bytes: Option<u64>,
    /// Bytes of each key (8 to 1024).
    #[arg(long, default_value_t = 16,
          value_parser = RangedU64ValueParser::<usize>::new().range(KEY_BYTES_MIN as u64..=KEY_BYTES_MAX as u64))]
    pub(super) key_bytes: usize,
    /// Bytes of each value: a size (1K), MIN:MAX spread evenly, or
    /// log:MIN:MAX (their logarithm spread evenly).
    #[arg(long, default_value = "1024", value_parser = parse_value_bytes)]
    pub(super) value_bytes: EntrySizes,
    /// Threads (readwhilewriting: reader threads, plus one writer).
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub(super) threads: usize,
    /// Operations of overwrite, the reads and the seeks (fills write every
    /// key once) [default: one per key].
    #[arg(long, value_parser = RangedU64ValueParser::<u64>::new().range(1..))]
    pub(super) ops: Option<u64>,
    /// Seeks of seekrandom, seekrange and seekrange-cold, where they should
    /// differ from `--ops` (a few long range scans after a whole overwrite).
    #[arg(long, value_parser = RangedU64ValueParser::<u64>::new().range(1..))]
    pub(super) seeks: Option<u64>,
    /// Longest time one workload runs, in seconds (it stops early).
    #[arg(long)]
    pub(super) seconds: Option<f64>,
    /// Keys per write batch.
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub(super) batch_keys: usize,
    /// Sync the log before each write returns.
    #[arg(long, value_enum, default_value_t = OnOff::Off)]
    pub(super) sync: OnOff,
    /// Write the log (off: fjall, which always journals, is left out).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub(super) wal: OnOff,
    /// Entries each seek of seekrandom reads; keys each range of seekrange
    /// spans (its upper bound is the key this many keys on).
    #[arg(long, default_value_t = 100, value_parser = RangedU64ValueParser::<u64>::new().range(1..=1_000_000))]
    pub(super) scan_length: u64,
    /// Share of the keys deleterandom deletes (0 to 1).
    #[arg(long, default_value_t = 0.5)]
    pub(super) delete_fraction: f64,
    /// Block cache of every engine.
    #[arg(long, default_value = "512M", value_parser = parse_bytes)]
    pub(super) block_cache: u64,
    /// Memtable size of every engine.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pub(super) write_buffer: u64,
    /// Memtables (active and waiting for flush) before writers wait.
    #[arg(long, default_value_t = 4, value_parser = RangedU64ValueParser::<usize>::new().range(2..=64))]
    pub(super) max_write_buffers: usize,
    /// Size at which flush and compaction outputs are cut.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pub(super) target_file: u64,
    /// Target size of the level L0 compacts into (fjall: target file x L0
    /// trigger, whatever this says).
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    pub(super) base_level: u64,
    /// L0 files that make L0 due for compaction.
    #[arg(long, default_value_t = 4, value_parser = RangedU64ValueParser::<usize>::new().range(1..=255))]
    pub(super) level0_trigger: usize,
    /// Uncompressed bytes of a data block (1 KiB to 1 MiB, fjall's range).
    #[arg(long, default_value = "4K", value_parser = parse_bytes)]
    pub(super) block_size: u64,
    /// Bloom filter bits per key (0: none).
    #[arg(long, default_value_t = 10, value_parser = RangedU64ValueParser::<u32>::new().range(0..=64))]
    pub(super) bloom_bits: u32,
    /// LZ4 on every level.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub(super) compression: OnOff,
    /// Flush and compaction threads of every engine.
    #[arg(long, default_value_t = 2, value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub(super) background_threads: usize,
    /// Strata's `compaction_nice`: how much lower its compaction threads'
    /// CPU priority is (0 to 19). The peers' threads keep the process's.
    #[arg(long, default_value_t = 10, value_parser = RangedU64ValueParser::<u8>::new().range(0..=19))]
    pub(super) compaction_nice: u8,
    /// Leave fjall's unsynced writes in its 8 KiB user-space journal buffer
    /// (fjall's default: a process crash loses them, and most writes make
    /// no system call). Without it each write reaches the OS before it
    /// returns, as Strata's and RocksDB's do.
    #[arg(long)]
    pub(super) fjall_buffered_journal: bool,
    /// Key-value separation in every engine: values of at least this many
    /// bytes go to blob files (Strata, RocksDB's BlobDB, fjall's blobs).
    /// Off unless given.
    #[arg(long, value_parser = parse_bytes)]
    pub(super) blob_min_size: Option<u64>,
    /// Blob garbage collection, with `--blob-min-size`: `off` measures what
    /// GC costs the foreground (Strata: a garbage ratio of 1 and space
    /// amplification targets of 10, so only wholly dead files go; RocksDB:
    /// `enable_blob_gc` false). fjall's GC has no such switch: refused.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub(super) blob_gc: OnOff,
    /// Strata's blob block size, with `--blob-min-size`: the decompressed
    /// bytes compressed together in a blob file (the engine's default
    /// unless given). RocksDB's BlobDB and fjall compress each value alone.
    #[arg(long, value_parser = parse_bytes)]
    pub(super) blob_block_size: Option<u64>,
    /// Strata's blob files compressed with zstd and a dictionary of at most
    /// this many bytes (256 to 1M) trained for each file, with
    /// `--blob-min-size`: for values that resemble each other but compress
    /// poorly one block at a time. The peers' blobs keep their compression.
    #[arg(long, value_parser = parse_bytes)]
    pub(super) blob_zstd_dictionary: Option<u64>,
    /// Strata's blob space amplification target (blob bytes over the live
    /// bytes they hold, which GC keeps under it), with `--blob-min-size`;
    /// the engine's default (1.05) unless given. The peers have no such
    /// target.
    #[arg(long)]
    pub(super) blob_space_target: Option<f64>,
    /// Parent directory; each engine gets a subdirectory, wiped before and
    /// after each run (but the last, with `--keep`).
    #[arg(long, default_value = "./strata-data/lsm")]
    pub(super) dir: PathBuf,
    /// Runs per engine; the tables give the median.
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100))]
    pub(super) runs: usize,
    /// Leave each engine's directory as its last run left it, closed, for
    /// inspection (`strata-ctl`, `du`); the next invocation wipes it.
    #[arg(long)]
    pub(super) keep: bool,
    /// After each workload, print to stderr each engine's own account of
    /// its levels (Strata: files and bytes per level, flushes, compaction
    /// bytes by level; RocksDB: its `rocksdb.stats`), and with Strata every
    /// flush and compaction as it ends: to see where write amplification
    /// comes from.
    #[arg(long)]
    pub(super) print_levels: bool,
    /// Print one JSON object per engine, workload and run, then one
    /// `"kind":"median"` each, instead of tables.
    #[arg(long)]
    pub(super) json: bool,
}

impl LsmArgs {
    pub(super) fn settings(&self) -> KvSettings {
        KvSettings {
            write_buffer_bytes: self.write_buffer,
            max_write_buffers: self.max_write_buffers,
            target_file_bytes: self.target_file,
            base_level_bytes: self.base_level,
            level0_compaction_trigger: self.level0_trigger,
            block_bytes: self.block_size,
            bloom_bits_per_key: self.bloom_bits,
            lz4: self.compression == OnOff::On,
            block_cache_bytes: self.block_cache,
            background_threads: self.background_threads,
            compaction_nice: self.compaction_nice,
            fjall_buffered_journal: self.fjall_buffered_journal,
            blob_min_bytes: self.blob_min_size,
            blob_gc: self.blob_gc == OnOff::On,
            blob_block_bytes: self.blob_block_size,
            blob_zstd_dictionary_bytes: self.blob_zstd_dictionary,
            blob_space_amp_target: self.blob_space_target,
        }
    }

    /// Checks what clap cannot, before anything reaches disk.
    pub(super) fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Usage(m));
        if self.blob_gc == OnOff::Off && self.engines.contains(&KvEngineKind::Fjall) {
            return bad("--blob-gc off: fjall's blob GC cannot be turned off".into());
        }
        if self.blob_gc == OnOff::Off && self.blob_space_target.is_some() {
            // GC off sets the target itself (10): the flag would be dropped.
            return bad("--blob-space-target: not with --blob-gc off".into());
        }
        if !(0.0..=1.0).contains(&self.delete_fraction) {
            return bad("--delete-fraction must be 0 to 1".into());
        }
        if self.seconds.is_some_and(|s| !(s > 0.0 && s.is_finite())) {
            return bad("--seconds must be above 0".into());
        }
        if self.value_bytes.bounds().1 > VALUE_BYTES_MAX {
            return bad(format!(
                "--value-bytes: at most {}",
                fmt_bytes(VALUE_BYTES_MAX as u64)
            ));
        }
        if !(1 << 10..=1 << 20).contains(&self.block_size) {
            return bad("--block-size must be 1K to 1M".into());
        }
        Ok(())
    }

    pub(super) fn key_space(&self) -> Result<KeySpace, BenchError> {
        let mut space = KeySpace {
            keys: self.keys.unwrap_or(100_000),
            key_bytes: self.key_bytes,
            values: self.value_bytes,
        };
        if let Some(total) = self.total_bytes {
            space.keys = (total as f64 / space.mean_pair_bytes()).round() as u64;
        }
        if space.keys == 0 || space.keys > KEYS_MAX {
            return Err(BenchError::Usage(format!(
                "the key space must hold 1 to {KEYS_MAX} keys, not {}",
                space.keys
            )));
        }
        Ok(space)
    }
}

/// Parses `--value-bytes`: one size, or a range as `--entry-bytes-dist` of
/// the raftlog bench takes it.
fn parse_value_bytes(s: &str) -> Result<EntrySizes, String> {
    if s.contains(':') {
        s.parse()
    } else {
        parse_bytes(s).map(|n| EntrySizes::Fixed(n as usize))
    }
}

/// Puts a fillrandom in front when the first workload is not a fill (every
/// other workload reads, rewrites or deletes what a fill wrote); returns
/// whether it did.
pub(super) fn with_fill(workloads: &[Workload]) -> (Vec<Workload>, bool) {
    match workloads.first() {
        Some(w) if w.fills() => (workloads.to_vec(), false),
        _ => {
            let mut all = vec![Workload::Fillrandom];
            all.extend_from_slice(workloads);
            (all, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: LsmArgs,
    }

    fn parse(flags: &[&str]) -> Result<LsmArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("lsm").chain(flags.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn bad_flags_are_refused_by_the_parser() {
        assert!(parse(&["--key-bytes", "4"]).is_err());
        assert!(parse(&["--threads", "0"]).is_err());
        assert!(parse(&["--runs", "0"]).is_err());
        assert!(parse(&["--workloads", "readsomething"]).is_err());
        assert!(parse(&["--keys", "10", "--total-bytes", "1G"]).is_err());
        assert!(parse(&["--value-bytes", "x"]).is_err());
        let args = parse(&["--delete-fraction", "2"]).expect("parses");
        assert!(matches!(args.validate(), Err(BenchError::Usage(_))));
        // GC off would drop the target silently.
        let flags = ["--engines", "strata", "--blob-min-size", "4K"];
        let with = |more: &[&'static str]| parse(&[&flags[..], more].concat()).expect("parses");
        let args = with(&["--blob-gc", "off", "--blob-space-target", "1.1"]);
        assert!(matches!(args.validate(), Err(BenchError::Usage(_))));
        let args = with(&["--blob-space-target", "1.1"]);
        args.validate().expect("valid");
        assert_eq!(args.settings().blob_space_amp_target, Some(1.1));
    }

    #[test]
    fn total_bytes_sizes_the_key_space() {
        let args = parse(&[
            "--total-bytes",
            "2G",
            "--key-bytes",
            "16",
            "--value-bytes",
            "1K",
        ])
        .expect("parses");
        let space = args.key_space().expect("valid");
        assert_eq!(space.keys, (2u64 << 30) / (16 + 1024));
    }

    #[test]
    fn a_fill_goes_first_when_the_workloads_need_data() {
        let (w, added) = with_fill(&[Workload::Readrandom, Workload::Fillseq]);
        assert!(added);
        assert_eq!(w[0], Workload::Fillrandom);
        let (w, added) = with_fill(&[Workload::Fillseq, Workload::Readrandom]);
        assert!(!added);
        assert_eq!(w.len(), 2);
    }
}
