//! The engine's configuration: one serde struct loadable from TOML, each
//! field with its default, minimum and maximum, checked by `validate` before
//! anything is opened; and the per-call options of writes and reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::blob::BlobWriterOptions;
use crate::compaction::CompactionOptions;
use crate::error::{Error, Result};
use crate::sst::{Compression, SstWriterOptions};
use strata_log::RecoveryMode;

/// Options of the whole engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Create the directory and an empty database when there is none.
    /// Default true.
    pub create_if_missing: bool,
    /// Refuse to open a directory that already holds a database. Default false.
    pub error_if_exists: bool,
    /// What the WAL replay at open tolerates. Default `tolerate_tail_corruption`.
    pub recovery_mode: RecoveryMode,
    /// Bytes of the block cache shared by every SST. Default 256 MiB; 0 turns
    /// it off; at most 1 TiB.
    pub block_cache_bytes: u64,
    /// Threads that run flushes and compactions. From 2, a quarter of them
    /// (at least one) run only flushes and the rest only compactions.
    /// Default 2; 1 to 64.
    pub background_threads: usize,
    /// How much lower than the process's the CPU priority of compaction
    /// merges is, as a Linux nice increment: compactions and blob GC then
    /// take the CPU reads and writes leave, and flushes, which writers wait
    /// for, keep the process's priority, as do the installs of compactions
    /// (the merge runs on a thread of its own). Ignored with one background
    /// thread, for manual compactions and off Linux. Default 10; 0 (no
    /// change) to 19.
    pub compaction_nice: u8,
    /// SST files kept open for reads (each a descriptor and its index and
    /// filter blocks); the files read least recently are closed and
    /// reopened when read again. Keep it under the process's open-file
    /// limit (`ulimit -n`), with room for WALs, blob files and the
    /// application. Default 4,096; 16 to 4,194,304.
    pub max_open_files: usize,
    /// The manifest is rewritten as a snapshot of the current state once it
    /// grows past this. Default 64 MiB; 4 KiB to 4 GiB.
    pub max_manifest_bytes: u64,
    /// Options of the default column family, and of any column family not
    /// named in `column_families`.
    pub default_column_family: ColumnFamilyOptions,
    /// Options by column-family name.
    pub column_families: BTreeMap<String, ColumnFamilyOptions>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            recovery_mode: RecoveryMode::default(),
            block_cache_bytes: 256 << 20,
            background_threads: 2,
            compaction_nice: 10,
            max_open_files: 4096,
            max_manifest_bytes: 64 << 20,
            default_column_family: ColumnFamilyOptions::default(),
            column_families: BTreeMap::new(),
        }
    }
}

/// Options of one column family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ColumnFamilyOptions {
    /// Bytes after which the active memtable is switched for a new one and
    /// flushed. Default 64 MiB; 4 KiB to 4 GiB.
    pub write_buffer_bytes: u64,
    /// Memtables (the active one and those waiting for a flush) the family
    /// may hold: once they are all full, writers wait for a flush; from 3,
    /// writes that fill the last one are slowed to 64 MiB/s so that the
    /// running flush can finish first (RocksDB's `max_write_buffer_number`
    /// paces writes the same way). Default 4; 2 to 64.
    pub max_write_buffers: usize,
    /// How SST files are laid out.
    pub table: SstWriterOptions,
    /// Leveled compaction.
    pub compaction: CompactionOptions,
    /// Key-value separation.
    pub blob: BlobOptions,
}

impl Default for ColumnFamilyOptions {
    fn default() -> Self {
        ColumnFamilyOptions {
            write_buffer_bytes: 64 << 20,
            max_write_buffers: 4,
            table: SstWriterOptions::default(),
            compaction: CompactionOptions::default(),
            blob: BlobOptions::default(),
        }
    }
}

/// Key-value separation of one column family: values of at least
/// `min_blob_size` bytes leave the LSM tree for blob files when a flush or
/// compaction writes them (never on the write path), and the SSTs keep a
/// small reference. `docs/lsm.md` ("Key-value separation").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BlobOptions {
    /// Values of at least this many bytes are separated; `None` (the
    /// default) keeps every value inline. Changeable on an open database
    /// (`Db::set_min_blob_size`). 1 byte to 4 GiB.
    pub min_blob_size: Option<u64>,
    /// Decompressed bytes at which a blob block is sealed. Default 1 KiB;
    /// 1 byte to 16 MiB.
    pub block_size_bytes: usize,
    /// How blob blocks are compressed. Default LZ4.
    pub compression: Compression,
    /// With zstd compression, each blob file trains a dictionary of at most
    /// this many bytes from its first blocks (32 bytes of them per byte of
    /// dictionary, at most 4 MiB) and compresses its later blocks with it:
    /// for values that compress poorly one block at a time but resemble
    /// each other (records, JSON). 0 (the default) trains none; otherwise
    /// 256 bytes to 1 MiB. Ignored with another compression.
    pub zstd_dictionary_bytes: usize,
    /// A blob file is closed once it reaches this size. Default 256 MiB;
    /// 64 KiB to 64 GiB.
    pub target_file_bytes: u64,
    /// A compaction moves the live values out of a blob file its inputs
    /// reference once the file is at least this share garbage (value bytes
    /// no SST references): relocating a file of garbage `g` rewrites
    /// `1 - g` to free `g`, so from 0.5 at most one byte is written per byte
    /// freed. Default 0.5; 0.01 to 1.
    pub garbage_ratio: f64,
    /// The most value bytes in blob files per live one that GC lets stand
    /// once writers pause: over it, SSTs are rewritten in place to collect
    /// the files `garbage_ratio` garbage at any time, and the files
    /// `1 - 1 / target` garbage when writers have paused, as long as those
    /// dearer collections have relocated at most 2 value bytes per value
    /// byte flushed, banking at most one rewrite of the family's values
    /// (past that, the target slips until later writes pay for the next
    /// collection). Default 1.05: with less, the keys and references
    /// separation adds leave a family of 1 KiB values larger than the same
    /// data inline after an overwrite (`docs/bench/lsm-blob.md`); 1.05 to
    /// 10.
    pub space_amp_target: f64,
    /// The most value bytes in blob files per live one that GC lets stand
    /// under sustained writes: over it, the in-place rewrites collect files
    /// `1 - 1 / space_amp_target` garbage without waiting for a pause.
    /// Default 2; `space_amp_target` to 10.
    pub space_amp_limit: f64,
    /// The most referenced value bytes one compaction relocates, so that
    /// it holds its SSTs (and the L0 compaction that needs them) for a
    /// bounded time; an in-place rewrite while writers pause relocates four
    /// times this. Default 128 MiB; 1 MiB to 64 GiB.
    pub max_relocate_bytes: u64,
}

impl Default for BlobOptions {
    fn default() -> Self {
        let writer = BlobWriterOptions::default();
        BlobOptions {
            min_blob_size: None,
            block_size_bytes: writer.block_size_bytes,
            compression: writer.compression,
            zstd_dictionary_bytes: writer.zstd_dictionary_bytes,
            target_file_bytes: 256 << 20,
            garbage_ratio: 0.5,
            space_amp_target: 1.05,
            space_amp_limit: 2.0,
            max_relocate_bytes: 128 << 20,
        }
    }
}

impl BlobOptions {
    /// Checks every field against its bounds.
    pub fn validate(&self) -> Result<()> {
        if let Some(min) = self.min_blob_size {
            check_min_blob_size(min)?;
        }
        self.writer_options().validate()?;
        check(
            "target_file_bytes",
            self.target_file_bytes,
            64 << 10,
            64 << 30,
        )?;
        check(
            "max_relocate_bytes",
            self.max_relocate_bytes,
            1 << 20,
            64 << 30,
        )?;
        check_ratio("garbage_ratio", self.garbage_ratio, 0.01, 1.0)?;
        check_ratio("space_amp_target", self.space_amp_target, 1.05, 10.0)?;
        check_ratio(
            "space_amp_limit",
            self.space_amp_limit,
            self.space_amp_target,
            10.0,
        )
    }

    /// The blob files' writer options.
    pub fn writer_options(&self) -> BlobWriterOptions {
        BlobWriterOptions {
            block_size_bytes: self.block_size_bytes,
            compression: self.compression,
            zstd_dictionary_bytes: self.zstd_dictionary_bytes,
            ..BlobWriterOptions::default()
        }
    }
}

/// Checks a `min_blob_size`: 1 byte to 4 GiB.
pub(crate) fn check_min_blob_size(min: u64) -> Result<()> {
    check("min_blob_size", min, 1, 4 << 30)
}

fn check_ratio(what: &str, v: f64, min: f64, max: f64) -> Result<()> {
    // Written so that NaN fails too.
    if !(v >= min && v <= max) {
        return Err(Error::InvalidArgument(format!(
            "{what} is {v}: must be {min} to {max}"
        )));
    }
    Ok(())
}

fn check(what: &str, v: u64, min: u64, max: u64) -> Result<()> {
    if v < min || v > max {
        return Err(Error::InvalidArgument(format!(
            "{what} is {v}: must be {min} to {max}"
        )));
    }
    Ok(())
}

impl Options {
    /// Parses TOML and validates the result.
    pub fn from_toml(text: &str) -> Result<Options> {
        let options: Options =
            toml::from_str(text).map_err(|e| Error::InvalidArgument(format!("options: {e}")))?;
        options.validate()?;
        Ok(options)
    }

    /// Checks every field against its bounds.
    pub fn validate(&self) -> Result<()> {
        check("block_cache_bytes", self.block_cache_bytes, 0, 1 << 40)?;
        check("background_threads", self.background_threads as u64, 1, 64)?;
        check("compaction_nice", u64::from(self.compaction_nice), 0, 19)?;
        check("max_open_files", self.max_open_files as u64, 16, 1 << 22)?;
        check(
            "max_manifest_bytes",
            self.max_manifest_bytes,
            4 << 10,
            4 << 30,
        )?;
        self.default_column_family
            .validate("default_column_family")?;
        for (name, cf) in &self.column_families {
            crate::db::cf::check_name(name)?;
            cf.validate(name)?;
        }
        Ok(())
    }

    /// The options of the column family `name`.
    pub fn column_family(&self, name: &str) -> &ColumnFamilyOptions {
        self.column_families
            .get(name)
            .unwrap_or(&self.default_column_family)
    }
}

impl ColumnFamilyOptions {
    /// Checks every field against its bounds; `name` goes into the message.
    pub fn validate(&self, name: &str) -> Result<()> {
        check(
            &format!("{name}.write_buffer_bytes"),
            self.write_buffer_bytes,
            4 << 10,
            4 << 30,
        )?;
        check(
            &format!("{name}.max_write_buffers"),
            self.max_write_buffers as u64,
            2,
            64,
        )?;
        self.table
            .validate()
            .map_err(|e| Error::InvalidArgument(format!("{name}.table: {e}")))?;
        self.compaction
            .validate()
            .map_err(|e| Error::InvalidArgument(format!("{name}.compaction: {e}")))?;
        self.blob
            .validate()
            .map_err(|e| Error::InvalidArgument(format!("{name}.blob: {e}")))
    }
}

/// Options of one write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Sync the WAL before the write returns: the write survives a power
    /// cut. Default false (it survives a crash of the process only).
    pub sync: bool,
    /// Do not log the write: it lives in the memtable only until a flush,
    /// and is lost by a crash before that. For callers whose own log (the
    /// Raft log) can replay it.
    pub disable_wal: bool,
    /// Fail with `Error::Busy` instead of waiting when the engine must slow
    /// writers down (compaction debt, too many memtables).
    pub no_slowdown: bool,
}

/// Options of one read.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Read at this snapshot's sequence number instead of the latest.
    pub snapshot: Option<crate::db::Snapshot>,
    /// Iterators: the smallest user key yielded (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: the first user key not yielded (exclusive).
    pub upper_bound: Option<Vec<u8>>,
    /// Iterators: yield only keys with this prefix.
    pub prefix: Option<Vec<u8>>,
    /// Iterators: never read blob files. A separated value's
    /// `DbIterator::value` is then empty (its `kind` is `BlobIndex`); inline
    /// values are returned as always. For scans that need keys only.
    pub key_only: bool,
    /// Iterators: leave separated values unread until asked. A move does
    /// not read the new entry's separated value: `DbIterator::value` is
    /// empty for it until `DbIterator::prepare_value` reads it (inline
    /// values are there at once). For scans that use a few of the values
    /// they pass, chosen by key; a scan that uses them all is faster
    /// without it, as it then fetches them ahead in batches. `key_only`
    /// overrides it.
    pub lazy_values: bool,
}
