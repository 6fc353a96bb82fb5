//! The engine's configuration: every limit in one place, units last.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// What recovery does with damaged records: the mode every Strata log shares,
/// re-exported here so raftlog's configuration keeps its name.
pub use strata_log::RecoveryMode;

/// Engine configuration. Loadable from TOML; every field has a default, and
/// [`Config::validate`] enforces the bounds documented on each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// A log file is sealed and a new one started once it reaches this size.
    /// Default 128 MiB; min 64 KiB; max 1 GiB.
    pub target_file_size_bytes: u64,
    /// Batches whose payload is at least this large are LZ4-compressed (unless a
    /// sample shows they would not shrink). 0 disables compression.
    /// Default 8 KiB; max 64 MiB.
    pub compression_threshold_bytes: u64,
    /// When the append queue exceeds this size, purge rewrites the live data of
    /// lagging groups so that the oldest files can go.
    /// Default 10 GiB; min 1 MiB.
    pub purge_threshold_bytes: u64,
    /// A lagging group whose live entry bytes in the files purge wants to free,
    /// together with its entries purge already copied into the rewrite queue,
    /// exceed this is not rewritten but reported for force compaction.
    /// Default 1 MiB; min 0; max 1 GiB.
    pub purge_rewrite_group_bytes_max: u64,
    /// What recovery does with damaged records. Default `tolerate_tail_corruption`.
    pub recovery_mode: RecoveryMode,
    /// Recovery reads a sealed file's index section instead of scanning its
    /// records, so it reads a few bytes per record; the records' checksums are
    /// then checked when they are read, not at open. Never used in
    /// `absolute_consistency`, which verifies every record. Default true.
    pub recovery_reads_index_sections: bool,
    /// Threads that read files in parallel during recovery. Default 4; min 1; max 64.
    pub recovery_threads: usize,
    /// Purged files kept (renamed) for reuse as new log files, so that a new file
    /// needs no allocation and its pages stay in memory. Max 1024. Default
    /// (`None`): as many files of `target_file_size_bytes` as
    /// `purge_threshold_bytes` holds, at least 16 ([`Config::recycle_files_cap`];
    /// raft-engine's recycling keeps as many, and half again). A purge that
    /// frees more deletes the rest, and their cached pages with them, which a
    /// virtual machine that hands free memory back to its host pays for when
    /// the appends take memory again (`docs/raftlog.md`).
    pub recycle_files_max: Option<usize>,
    /// Preallocate each new log file to its target size. Default true.
    pub preallocate: bool,
    /// Make the append queue's next file ahead of its rotation, on a thread
    /// of the engine's own, so that a rotation on the write path is one
    /// rename (`docs/raftlog.md`, "Rotation off the leader's path"). Off,
    /// the writer that rotates makes the file. Default true.
    pub prepare_next_file: bool,
    /// The largest payload one batch may have. Default 256 MiB; min 1 KiB; max 1 GiB.
    pub batch_bytes_max: u64,
    /// When the engine's appends average 16 KiB or more, the active file's
    /// synced pages further than this behind its end are dropped from the
    /// page cache, so that the log's cache stays this size instead of
    /// taking fresh memory at the write rate (`docs/raftlog.md`, "The page
    /// cache"). Reads of entries further back read the disk. 0 keeps every
    /// page cached. Default 32 MiB; min (unless 0) 1 MiB.
    pub cached_tail_bytes: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            target_file_size_bytes: 128 << 20,
            compression_threshold_bytes: 8 << 10,
            purge_threshold_bytes: 10 << 30,
            purge_rewrite_group_bytes_max: 1 << 20,
            recovery_mode: RecoveryMode::default(),
            recovery_reads_index_sections: true,
            recovery_threads: 4,
            recycle_files_max: None,
            preallocate: true,
            prepare_next_file: true,
            batch_bytes_max: 256 << 20,
            cached_tail_bytes: 32 << 20,
        }
    }
}

/// The most files `recycle_files_max` may keep.
const RECYCLE_FILES_MAX: usize = 1024;

impl Config {
    /// How many purged files are kept for reuse: `recycle_files_max`, or by
    /// default the purge threshold's worth of files, at least 16.
    pub fn recycle_files_cap(&self) -> usize {
        self.recycle_files_max.unwrap_or_else(|| {
            let files = self.purge_threshold_bytes / self.target_file_size_bytes.max(1);
            (files as usize).clamp(16, RECYCLE_FILES_MAX)
        })
    }

    /// Parses a TOML document; missing fields take their defaults.
    pub fn from_toml(text: &str) -> Result<Config> {
        let config: Config = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every field against its documented bounds.
    pub fn validate(&self) -> Result<()> {
        fn check(name: &str, v: u64, min: u64, max: u64) -> Result<()> {
            if v < min || v > max {
                return Err(Error::Config(format!(
                    "{name} = {v} is outside [{min}, {max}]"
                )));
            }
            Ok(())
        }
        check(
            "target_file_size_bytes",
            self.target_file_size_bytes,
            64 << 10,
            1 << 30,
        )?;
        check(
            "compression_threshold_bytes",
            self.compression_threshold_bytes,
            0,
            64 << 20,
        )?;
        check(
            "purge_threshold_bytes",
            self.purge_threshold_bytes,
            1 << 20,
            u64::MAX,
        )?;
        check(
            "purge_rewrite_group_bytes_max",
            self.purge_rewrite_group_bytes_max,
            0,
            1 << 30,
        )?;
        check("recovery_threads", self.recovery_threads as u64, 1, 64)?;
        if let Some(n) = self.recycle_files_max {
            check("recycle_files_max", n as u64, 0, RECYCLE_FILES_MAX as u64)?;
        }
        check("batch_bytes_max", self.batch_bytes_max, 1 << 10, 1 << 30)?;
        if self.cached_tail_bytes != 0 {
            check(
                "cached_tail_bytes",
                self.cached_tail_bytes,
                1 << 20,
                u64::MAX,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_round_trip_through_toml() {
        let c = Config::default();
        c.validate().unwrap();
        let text = toml::to_string(&c).unwrap();
        assert_eq!(Config::from_toml(&text).unwrap(), c);
    }

    /// The default pool holds the purge threshold's worth of files, within
    /// its bounds; a number given is taken as it is.
    #[test]
    fn the_recycled_pool_follows_the_purge_threshold_unless_given() {
        let mut c = Config::default();
        assert_eq!(c.recycle_files_cap(), 80);
        c.purge_threshold_bytes = 1 << 30;
        assert_eq!(c.recycle_files_cap(), 16);
        c.target_file_size_bytes = 64 << 10;
        assert_eq!(c.recycle_files_cap(), 1024);
        c.recycle_files_max = Some(0);
        assert_eq!(c.recycle_files_cap(), 0);
        let c = Config::from_toml("recycle_files_max = 3").unwrap();
        assert_eq!(c.recycle_files_max, Some(3));
        assert!(Config::from_toml("recycle_files_max = 1025").is_err());
    }

    #[test]
    fn partial_toml_and_bounds() {
        let c = Config::from_toml("recovery_mode = \"absolute_consistency\"\n").unwrap();
        assert_eq!(c.recovery_mode, RecoveryMode::AbsoluteConsistency);
        assert!(Config::from_toml("target_file_size_bytes = 10").is_err());
        assert!(Config::from_toml("no_such_field = 1").is_err());
        // The cached tail: 0 (keep every page) or at least 1 MiB.
        assert_eq!(Config::default().cached_tail_bytes, 32 << 20);
        assert_eq!(
            Config::from_toml("cached_tail_bytes = 0")
                .unwrap()
                .cached_tail_bytes,
            0
        );
        assert!(Config::from_toml("cached_tail_bytes = 4096").is_err());
        assert!(Config::from_toml("cached_tail_bytes = 1048576").is_ok());
    }
}
