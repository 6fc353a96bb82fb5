//! Blob files in `dump-blob`, `check` and `stats`: every block and record of
//! every blob file a version names, and every reference of every SST
//! followed to its value (the invariant that no reference points into a
//! file the version lacks, checked the way a read would fail).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use strata_fs::FileSystem;
use strata_lsm::blob::{BlobFileReader, BlobRef};
use strata_lsm::compaction::blob_file_name;
use strata_lsm::Version;

use super::{bytes, show_key};
use crate::error::CtlError;
use crate::Verdict;

/// The path of blob file `number` in `dir`.
pub fn blob_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(blob_file_name(number))
}

/// Prints one blob file: header, footer and, with `entries`, every record.
pub fn dump_blob(
    fs: &dyn FileSystem,
    file: &Path,
    entries: bool,
    out: &mut dyn Write,
) -> Result<Verdict, CtlError> {
    let number = file
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".blob"))
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or(0);
    let reader = match BlobFileReader::open(fs, file, number) {
        Ok(r) => r,
        Err(e) => {
            writeln!(out, "DAMAGE: {e}")?;
            return Ok(Verdict::Damaged);
        }
    };
    let (h, f) = (reader.header(), reader.footer());
    writeln!(
        out,
        "blob file {} (number {number}): family {}, compression {:?}, flags {:#x}",
        file.display(),
        h.column_family,
        h.compression,
        h.flags
    )?;
    writeln!(
        out,
        "  {} blocks, {} records, {} of values, blocks end at {}",
        f.block_count,
        f.record_count,
        bytes(f.value_bytes),
        f.data_end
    )?;
    if reader.dictionary_bytes() > 0 {
        writeln!(
            out,
            "  zstd dictionary of {} after the blocks",
            bytes(reader.dictionary_bytes() as u64)
        )?;
    }
    let mut lines = Vec::new();
    let walked = reader.for_each_record(|r, record| {
        if entries {
            lines.push(format!(
                "  block {} +{}: {} @{} {} value bytes",
                r.block_offset,
                r.record_offset,
                show_key(record.key),
                record.seqno,
                record.value.len()
            ));
        }
        Ok(())
    });
    for line in lines {
        writeln!(out, "{line}")?;
    }
    if let Err(e) = walked {
        writeln!(out, "DAMAGE: {e}")?;
        return Ok(Verdict::Damaged);
    }
    Ok(Verdict::Clean)
}

/// Walks every blob file of `version` (every block's checksum, the
/// footer's counts); returns how many are damaged.
pub fn check_blob_files(
    fs: &dyn FileSystem,
    dir: &Path,
    family: &str,
    version: &Version,
    out: &mut dyn Write,
) -> Result<u64, CtlError> {
    let mut damaged = 0;
    for b in version.blob_files() {
        let path = blob_path(dir, b.number());
        let walked = BlobFileReader::open(fs, &path, b.number())
            .and_then(|r| r.for_each_record(|_, _| Ok(())));
        if let Err(e) = walked {
            damaged += 1;
            writeln!(out, "DAMAGE: family {family:?} blob file: {e}")?;
        }
    }
    Ok(damaged)
}

/// Follows the references of one version's SSTs, each to its value.
pub struct RefCheck<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    version: &'a Version,
    readers: HashMap<u64, BlobFileReader>,
    /// References followed.
    pub followed: u64,
}

impl<'a> RefCheck<'a> {
    pub fn new(fs: &'a dyn FileSystem, dir: &'a Path, version: &'a Version) -> RefCheck<'a> {
        RefCheck {
            fs,
            dir,
            version,
            readers: HashMap::new(),
            followed: 0,
        }
    }

    /// Checks that the `BlobIndex` entry of `user_key` holding `value`
    /// points into a blob file of the version, at a record of that key.
    pub fn check(&mut self, user_key: &[u8], value: &[u8]) -> strata_lsm::Result<()> {
        let r = BlobRef::decode(value).map_err(|e| {
            strata_lsm::Error::corruption(
                self.dir,
                0,
                format!("blob reference of {user_key:?}: {e}"),
            )
        })?;
        if self.version.blob_file(r.file_number).is_none() {
            return Err(strata_lsm::Error::corruption(
                blob_path(self.dir, r.file_number),
                0,
                format!(
                    "the reference of {} points into a blob file the version lacks",
                    show_key(user_key)
                ),
            ));
        }
        let reader = match self.readers.entry(r.file_number) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(BlobFileReader::open(
                self.fs,
                &blob_path(self.dir, r.file_number),
                r.file_number,
            )?),
        };
        reader.get(&r, user_key)?;
        self.followed += 1;
        Ok(())
    }
}

/// One line of blob statistics for a family's version.
pub fn blob_stats_line(version: &Version) -> Option<String> {
    if version.blob_file_count() == 0 {
        return None;
    }
    let (mut size, mut values, mut live) = (0u64, 0u64, 0u64);
    for b in version.blob_files() {
        size += b.desc().size;
        values += b.desc().value_bytes;
        live += version.blob_live(b.number()).bytes;
    }
    let garbage = if values == 0 {
        0.0
    } else {
        100.0 * (1.0 - live as f64 / values as f64)
    };
    Some(format!(
        "  blob files: {}, {}, {} of {} values live ({garbage:.1}% garbage)",
        version.blob_file_count(),
        bytes(size),
        bytes(live),
        bytes(values)
    ))
}
