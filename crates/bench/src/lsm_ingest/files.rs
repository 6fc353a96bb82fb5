//! The external SST files an ingesting phase feeds the engine, prepared
//! before the phase (untimed) in a directory beside the engine's, so that
//! `move_files` can hard link them.
//!
//! How many: `--ingest-files` if given; otherwise enough to ingest back to
//! back for the whole phase at the pace of the warm-up ingestions (timed
//! before the baseline, alone), capped by `--ingest-bytes-max`. The phase
//! spreads them evenly (see `phase.rs`), so that ingestion covers the whole
//! phase whichever bound applies.

use std::path::{Path, PathBuf};
use std::time::Duration;

use strata_fs::{DiskFs, FileSystem};

use super::engine::IngestEngine;
use super::keys::{file_stream, ingest_key, value, PAIR_BYTES};
use crate::error::BenchError;

/// The prefix and suffix of every file this module writes: nothing else
/// in the directory is ever removed.
const PREFIX: &str = "ingest-";
const SUFFIX: &str = ".sst";

/// One external file, ready to ingest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its size on disk.
    pub file_bytes: u64,
    /// The key and value bytes it holds.
    pub user_bytes: u64,
}

/// The directory of one engine's external files, and the number of the
/// next file (each file's keys are a range of their own, see `keys.rs`).
#[derive(Debug)]
pub struct ExternalDir {
    dir: PathBuf,
    next: u32,
    entries_per_file: u64,
}

impl ExternalDir {
    /// Opens `dir` (creating it), removing the files an earlier run left;
    /// refuses a directory holding anything else. Files hold
    /// `file_user_bytes` of keys and values each (at least one entry).
    pub fn new(dir: &Path, file_user_bytes: u64) -> Result<ExternalDir, BenchError> {
        let fs = DiskFs::new();
        fs.create_dir_all(dir)
            .map_err(BenchError::io("create dir", dir))?;
        let names = fs.list(dir).map_err(BenchError::io("list", dir))?;
        if let Some(stranger) = names.iter().find(|n| !is_ours(n)) {
            return Err(BenchError::Usage(format!(
                "{} holds {stranger:?}, which lsm-ingest did not write",
                dir.display()
            )));
        }
        let out = ExternalDir {
            dir: dir.to_path_buf(),
            next: 0,
            entries_per_file: (file_user_bytes / PAIR_BYTES).max(1),
        };
        out.clear()?;
        Ok(out)
    }

    /// Writes `count` new files through `engine`, each in a range of its
    /// own, and syncs the directory.
    pub fn prepare(
        &mut self,
        engine: &dyn IngestEngine,
        count: u64,
    ) -> Result<Vec<ExternalFile>, BenchError> {
        let mut out = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let n = self.next;
            self.next += 1;
            let path = self.dir.join(format!("{PREFIX}{n:08}{SUFFIX}"));
            let entries = self.entries_per_file;
            let mut rows = (0..entries).map(|e| (ingest_key(n, e), value(file_stream(n), e)));
            let file_bytes = engine.write_external(&path, &mut rows)?;
            out.push(ExternalFile {
                path,
                file_bytes,
                user_bytes: entries * PAIR_BYTES,
            });
        }
        DiskFs::new()
            .sync_dir(&self.dir)
            .map_err(BenchError::io("sync dir", &self.dir))?;
        Ok(out)
    }

    /// Removes every file of this module left in the directory (those not
    /// ingested).
    pub fn clear(&self) -> Result<(), BenchError> {
        let fs = DiskFs::new();
        let names = fs
            .list(&self.dir)
            .map_err(BenchError::io("list", &self.dir))?;
        for name in names.iter().filter(|n| is_ours(n)) {
            let path = self.dir.join(name);
            fs.remove(&path).map_err(BenchError::io("remove", &path))?;
        }
        Ok(())
    }

    /// Removes the files left and the directory itself.
    pub fn remove(self) -> Result<(), BenchError> {
        self.clear()?;
        // The directory is the bench's own, as `lsm` creates its `--dir`.
        std::fs::remove_dir(&self.dir).map_err(BenchError::io("remove dir", &self.dir))
    }
}

fn is_ours(name: &str) -> bool {
    name.starts_with(PREFIX) && name.ends_with(SUFFIX)
}

/// Returns how many files the ingesting phase needs: `given` if set;
/// otherwise one per `warmup` (the fastest warm-up ingestion) over
/// `phase`, plus one, at most `bytes_max / file_user_bytes`, at least one.
pub fn files_needed(
    given: Option<u64>,
    phase: Duration,
    warmup: Duration,
    bytes_max: u64,
    file_user_bytes: u64,
) -> u64 {
    if let Some(n) = given {
        return n;
    }
    let cap = (bytes_max / file_user_bytes.max(1)).max(1);
    let per_call = warmup.as_secs_f64().max(1e-4);
    let back_to_back = (phase.as_secs_f64() / per_call).ceil() as u64 + 1;
    back_to_back.clamp(1, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enough_files_for_the_phase_within_the_cap() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        assert_eq!(files_needed(Some(7), s(20), ms(1), 1 << 30, 64 << 20), 7);
        // 20 s at 500 ms a call: 40, plus one.
        assert_eq!(files_needed(None, s(20), ms(500), 1 << 40, 64 << 20), 41);
        // Fast calls: the byte cap, 4 GiB of 64 MiB files.
        assert_eq!(files_needed(None, s(20), ms(1), 4 << 30, 64 << 20), 64);
        // A cap below one file still gives one.
        assert_eq!(files_needed(None, s(20), ms(1), 1, 64 << 20), 1);
    }
}
