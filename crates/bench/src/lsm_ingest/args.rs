//! The flags of `strata-bench lsm-ingest`, checked by clap where it can and
//! by `validate` before anything reaches disk.

use std::path::PathBuf;

use clap::builder::RangedU64ValueParser;

use super::keys::{KEY_BYTES, PAIR_BYTES, VALUE_BYTES, WRITERS_MAX};
use super::record::Params;
use crate::error::BenchError;
use crate::lsm::engine::{KvEngineKind, KvSettings};
use crate::raftlog::OnOff;
use crate::units::parse_bytes;

/// Longest phase: an hour.
const SECONDS_MAX: f64 = 3600.0;

/// Arguments of `lsm-ingest`.
#[derive(Debug, clap::Args)]
pub struct LsmIngestArgs {
    /// Engines to run, comma-separated (default: strata, and rocksdb when
    /// built with `--features peer-rocksdb`). fjall cannot ingest.
    #[arg(long = "engines", alias = "engine", value_enum, value_delimiter = ',')]
    pub(super) engines: Vec<KvEngineKind>,
    /// Writer threads, each putting random keys of its own range.
    #[arg(long, default_value_t = 4,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=WRITERS_MAX as u64))]
    pub(super) writers: usize,
    /// Seconds of each phase (baseline, then ingesting).
    #[arg(long, default_value_t = 20.0)]
    pub(super) seconds: f64,
    /// Key and value bytes written into the writers' ranges before the
    /// phases (their key space).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pub(super) preload: u64,
    /// Key and value bytes of each ingested file (one file per call).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pub(super) ingest_file_bytes: u64,
    /// Files to ingest in the ingesting phase, spread over it [default:
    /// enough to ingest back to back at the warm-up pace, within
    /// --ingest-bytes-max].
    #[arg(long, value_parser = RangedU64ValueParser::<u64>::new().range(1..=100_000))]
    pub(super) ingest_files: Option<u64>,
    /// Most key and value bytes prepared for one ingesting phase when
    /// --ingest-files is not given (the files take this much disk).
    #[arg(long, default_value = "4G", value_parser = parse_bytes)]
    pub(super) ingest_bytes_max: u64,
    /// Sync the log before each put returns.
    #[arg(long, value_enum, default_value_t = OnOff::Off)]
    pub(super) sync: OnOff,
    /// Memtable size of every engine.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pub(super) write_buffer: u64,
    /// Block cache of every engine.
    #[arg(long, default_value = "512M", value_parser = parse_bytes)]
    pub(super) block_cache: u64,
    /// Flush and compaction threads of every engine.
    #[arg(long, default_value_t = 2, value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub(super) background_threads: usize,
    /// Parent directory; each engine gets a subdirectory for its database
    /// and one for its external files, wiped before and after each run.
    #[arg(long, default_value = "./strata-data/lsm-ingest")]
    pub(super) dir: PathBuf,
    /// Runs per engine, the engines interleaved; the table gives medians.
    #[arg(long, default_value_t = 3, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100))]
    pub(super) runs: usize,
    /// Print one JSON object per engine, phase and run, then one
    /// `"kind":"median"` each, instead of tables.
    #[arg(long)]
    pub(super) json: bool,
}

impl LsmIngestArgs {
    /// The engines to run, in order.
    pub(super) fn engines(&self) -> Vec<KvEngineKind> {
        if self.engines.is_empty() {
            [KvEngineKind::Strata, KvEngineKind::Rocksdb]
                .into_iter()
                .filter(|k| k.is_built())
                .collect()
        } else {
            self.engines.clone()
        }
    }

    /// The shared engine settings: the `lsm` bench's defaults with this
    /// command's overrides.
    pub(super) fn settings(&self) -> KvSettings {
        KvSettings {
            write_buffer_bytes: self.write_buffer,
            block_cache_bytes: self.block_cache,
            background_threads: self.background_threads,
            ..KvSettings::default()
        }
    }

    /// Keys of each writer's range: the preload split over the writers.
    pub(super) fn keys_per_writer(&self) -> u64 {
        (self.preload / PAIR_BYTES / self.writers as u64).max(1)
    }

    pub(super) fn params(&self) -> Params {
        Params {
            writers: self.writers,
            key_bytes: KEY_BYTES,
            value_bytes: VALUE_BYTES,
            preload_bytes: self.keys_per_writer() * self.writers as u64 * PAIR_BYTES,
            keys_per_writer: self.keys_per_writer(),
            ingest_file_bytes: self.ingest_file_bytes,
            seconds: self.seconds,
            sync: self.sync == OnOff::On,
            settings: self.settings(),
        }
    }

    /// Checks what clap cannot, before anything reaches disk.
    pub(super) fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Usage(m.into()));
        if !(self.seconds > 0.0 && self.seconds <= SECONDS_MAX) {
            return bad("--seconds must be above 0 and at most 3600");
        }
        if self.ingest_file_bytes < PAIR_BYTES {
            return bad("--ingest-file-bytes must hold at least one key and value (1040 B)");
        }
        if self.ingest_file_bytes / PAIR_BYTES > u64::from(u32::MAX) {
            return bad("--ingest-file-bytes: too many entries for one file");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: LsmIngestArgs,
    }

    fn parse(flags: &[&str]) -> Result<LsmIngestArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("lsm-ingest").chain(flags.iter().copied()))
            .map(|c| c.args)
    }

    #[test]
    fn defaults_are_the_acceptance_configuration() {
        let a = parse(&[]).expect("parses");
        assert_eq!(a.writers, 4);
        assert_eq!(a.seconds, 20.0);
        assert_eq!(a.preload, 64 << 20);
        assert_eq!(a.ingest_file_bytes, 64 << 20);
        assert_eq!(a.runs, 3);
        assert!(a.validate().is_ok());
        assert_eq!(a.keys_per_writer(), (64 << 20) / PAIR_BYTES / 4);
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&["--writers", "0"]).is_err());
        assert!(parse(&["--writers", "256"]).is_err());
        assert!(parse(&["--engines", "leveldb"]).is_err());
        let a = parse(&["--seconds", "0"]).expect("parses");
        assert!(matches!(a.validate(), Err(BenchError::Usage(_))));
        let a = parse(&["--ingest-file-bytes", "100"]).expect("parses");
        assert!(matches!(a.validate(), Err(BenchError::Usage(_))));
    }
}
