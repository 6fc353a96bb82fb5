//! The flags of `strata-bench lsm-versions`, checked by clap where it can and
//! by `validate` before anything reaches disk, and the settings they make.

use std::path::PathBuf;

use clap::builder::RangedU64ValueParser;

use super::engine::{Tuning, VersionsEngineKind};
use super::grow::GrowBy;
use crate::error::BenchError;
use crate::lsm::engine::KvSettings;
use crate::lsm::keys::{KeySpace, KEY_BYTES_MAX, KEY_BYTES_MIN};
use crate::units::parse_bytes;
use crate::workload::EntrySizes;

/// Most SST files a size may ask for.
const FILES_MAX: u64 = 10_000_000;
/// Longest value: a value far above the target file size would make one
/// file per value, which is not the shape this bench is after.
const VALUE_BYTES_MAX: u64 = 64 << 10;

/// Arguments of `lsm-versions`.
#[derive(Debug, clap::Args)]
pub struct VersionsArgs {
    /// Engines to run, in this order, comma-separated. RocksDB needs
    /// `--features peer-rocksdb`.
    #[arg(
        long = "engines",
        alias = "engine",
        value_enum,
        value_delimiter = ',',
        default_value = "strata"
    )]
    pub(super) engines: Vec<VersionsEngineKind>,
    /// Live SST file counts to measure at, ascending, comma-separated: the
    /// database grows to each in turn (e.g. 1000,10000,100000).
    #[arg(long, value_delimiter = ',', default_value = "200,1000",
          value_parser = RangedU64ValueParser::<u64>::new().range(1..=FILES_MAX))]
    pub(super) files: Vec<u64>,
    /// Size at which flush and compaction outputs are cut: small, so that
    /// the file count grows fast.
    #[arg(long, default_value = "32K", value_parser = parse_bytes)]
    pub(super) target_file_bytes: u64,
    /// Memtable size: small, so that flushes (and installs) are frequent.
    #[arg(long, default_value = "64K", value_parser = parse_bytes)]
    pub(super) write_buffer_bytes: u64,
    /// Target size of the level L0 compacts into [default: 4 memtables].
    /// Small, so that an L0 compaction rewrites little of the base level.
    #[arg(long, value_parser = parse_bytes)]
    pub(super) base_level_bytes: Option<u64>,
    /// How the database grows to each size: `ingest`, a bulk load of
    /// external files into the bottom level (minutes to 100k files), or
    /// `writes`, random writes that flushes and compactions turn into files
    /// (hours to 100k files on a small machine).
    #[arg(long, value_enum, default_value = "ingest")]
    pub(super) grow_by: GrowBy,
    /// Sizes (among --files) at which a full compaction follows the timed
    /// phase: one manual compaction of the whole key space, bottom level
    /// included, while the readers go on; each of its installs replaces
    /// every file of a level. Comma-separated; none by default.
    #[arg(long, value_delimiter = ',')]
    pub(super) full_compaction_at: Vec<u64>,
    /// Seconds of reads and writes measured at each size.
    #[arg(long, default_value_t = 10.0)]
    pub(super) seconds: f64,
    /// Reader threads.
    #[arg(long, default_value_t = 2, value_parser = RangedU64ValueParser::<usize>::new().range(1..=256))]
    pub(super) readers: usize,
    /// Loops per second each reader makes (0: as fast as it can, the
    /// default). Paced readers sleep between loops, as readers serving
    /// requests do: they leave the cores to the writer and the engine's
    /// background threads, so that a slow call is the engine's and not a
    /// reader waiting for a core that the other busy readers hold.
    #[arg(long, default_value_t = 0)]
    pub(super) reader_loops_per_sec: u64,
    /// Keys per second the writer of the measured phase puts (0: as fast as
    /// it can). Limited by default, so that on a small machine the readers'
    /// tail measures the engine rather than a CPU the writer saturates.
    #[arg(long, default_value_t = 20_000)]
    pub(super) writer_keys_per_sec: u64,
    /// Bytes of each key (8 to 1024).
    #[arg(long, default_value_t = 16,
          value_parser = RangedU64ValueParser::<usize>::new().range(KEY_BYTES_MIN as u64..=KEY_BYTES_MAX as u64))]
    pub(super) key_bytes: usize,
    /// Bytes of each value (about 2:1 compressible).
    #[arg(long, default_value = "100", value_parser = parse_bytes)]
    pub(super) value_bytes: u64,
    /// Block cache of every engine.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pub(super) block_cache: u64,
    /// Flush and compaction threads of every engine.
    #[arg(long, default_value_t = 2, value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub(super) background_threads: usize,
    /// Strata's `compaction_nice`: how much lower its compaction threads'
    /// CPU priority is (0 to 19). RocksDB's threads keep the process's.
    #[arg(long, default_value_t = 10, value_parser = RangedU64ValueParser::<u8>::new().range(0..=19))]
    pub(super) compaction_nice: u8,
    /// SST files each engine keeps open (Strata's `max_open_files`, RocksDB's
    /// table cache); -1: every file open. Mind `ulimit -n`.
    #[arg(long, default_value_t = 10_000, allow_negative_numbers = true)]
    pub(super) max_open_files: i32,
    /// Parent directory; each engine gets a subdirectory, wiped before and
    /// after its run.
    #[arg(long, default_value = "./strata-data/lsm-versions")]
    pub(super) dir: PathBuf,
    /// Print one JSON object per engine and size, then one per acceptance
    /// target, instead of tables.
    #[arg(long)]
    pub(super) json: bool,
    /// Also write those JSON lines to this file (beside the tables).
    #[arg(long)]
    pub(super) json_file: Option<PathBuf>,
}

impl VersionsArgs {
    /// Checks what clap cannot, before anything reaches disk.
    pub(super) fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Usage(m));
        if self.files.windows(2).any(|w| w[0] >= w[1]) {
            return bad("--files must be ascending".into());
        }
        if let Some(n) = self
            .full_compaction_at
            .iter()
            .find(|n| !self.files.contains(n))
        {
            return bad(format!("--full-compaction-at {n} is not one of --files"));
        }
        if !(self.seconds > 0.0 && self.seconds.is_finite()) {
            return bad("--seconds must be above 0".into());
        }
        if self.value_bytes == 0 || self.value_bytes > VALUE_BYTES_MAX {
            return bad(format!("--value-bytes must be 1 to {VALUE_BYTES_MAX}"));
        }
        if self.max_open_files < -1 || (0..20).contains(&self.max_open_files) {
            return bad("--max-open-files must be -1 or at least 20".into());
        }
        // The engines check their own bounds at open (Strata: files and
        // base level 4 KiB and up); this catches the ones they share.
        if self.target_file_bytes < 4 << 10 || self.write_buffer_bytes < 4 << 10 {
            return bad("--target-file-bytes and --write-buffer-bytes: at least 4K".into());
        }
        Ok(())
    }

    /// The shared engine settings: `lsm`'s defaults with this bench's small
    /// files, memtables and base level.
    pub(super) fn settings(&self) -> KvSettings {
        KvSettings {
            write_buffer_bytes: self.write_buffer_bytes,
            target_file_bytes: self.target_file_bytes,
            base_level_bytes: self.base_level_bytes.unwrap_or(4 * self.write_buffer_bytes),
            block_cache_bytes: self.block_cache,
            background_threads: self.background_threads,
            compaction_nice: self.compaction_nice,
            ..KvSettings::default()
        }
    }

    pub(super) fn tuning(&self) -> Tuning {
        Tuning {
            max_open_files: self.max_open_files,
        }
    }

    /// Keys per external file of an ingesting growth: the target file size
    /// at the values' 2:1 compression, so that a file on disk is about the
    /// size a compaction would cut.
    pub(super) fn keys_per_ingested_file(&self, space: &KeySpace) -> u64 {
        ((2.0 * self.target_file_bytes as f64 / space.mean_pair_bytes()) as u64).max(1)
    }

    /// The key space: room for four times the keys the largest size needs
    /// (at the 2:1 compression of the values), so that growth writes new
    /// keys rather than overwriting; the growth loop wraps around if an
    /// engine needs more.
    pub(super) fn key_space(&self) -> KeySpace {
        let mut space = KeySpace {
            keys: 1,
            key_bytes: self.key_bytes,
            values: EntrySizes::Fixed(self.value_bytes as usize),
        };
        let largest = self.files.last().copied().unwrap_or(1);
        let bytes = 4.0 * 2.0 * largest as f64 * self.target_file_bytes as f64;
        space.keys = ((bytes / space.mean_pair_bytes()) as u64).clamp(1000, 1 << 40);
        space
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: VersionsArgs,
    }

    fn parse(flags: &[&str]) -> Result<VersionsArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("lsm-versions").chain(flags.iter().copied()))
            .map(|c| c.args)
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&["--files", "0"]).is_err());
        assert!(parse(&["--readers", "0"]).is_err());
        assert!(parse(&["--engines", "fjall"]).is_err());
        let args = parse(&["--files", "1000,100"]).expect("parses");
        assert!(matches!(args.validate(), Err(BenchError::Usage(_))));
        let args = parse(&["--seconds", "0"]).expect("parses");
        assert!(matches!(args.validate(), Err(BenchError::Usage(_))));
        let args = parse(&["--max-open-files", "-1"]).expect("parses");
        args.validate().expect("valid");
    }

    #[test]
    fn the_key_space_has_room_for_the_largest_size() {
        let args = parse(&["--files", "10,1000", "--target-file-bytes", "32K"]).expect("parses");
        let space = args.key_space();
        let needed = 2.0 * 1000.0 * 32768.0 / space.mean_pair_bytes();
        assert!(space.keys as f64 >= 4.0 * needed - 1.0, "{space:?}");
        assert_eq!(args.settings().base_level_bytes, 256 << 10);
        // An ingesting growth fits too, with room for the writer's keys.
        let per_file = args.keys_per_ingested_file(&space);
        assert!(
            per_file * 1000 <= space.keys / 2,
            "{per_file} keys per file, {space:?}"
        );
        assert_eq!(args.grow_by, GrowBy::Ingest);
    }
}
