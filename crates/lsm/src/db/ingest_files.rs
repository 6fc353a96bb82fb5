//! The files of an ingestion: checking an external SST in full before
//! anything changes, and rewriting it into the database directory with the
//! ingestion's sequence number.
//!
//! The seqno convention (`docs/lsm.md`, "Ingestion"): every entry of an
//! external file carries seqno 0, as `SstWriter` writes them when given
//! keys made with `InternalKey::new(user_key, 0, kind)`. User keys are
//! unique within a file (one version each), kinds are `Put` or `Delete`,
//! and external files hold no range deletions. The engine rewrites each
//! file while copying it, giving every entry the seqno it allocated for
//! the ingestion, so that the files it installs are ordinary SST files:
//! readers, compaction and recovery need nothing new.

use std::path::{Path, PathBuf};

use strata_fs::FileSystem;

use crate::batch::KEY_BYTES_MAX;
use crate::error::{Error, Result};
use crate::key::{InternalKey, SeqNo, ValueKind, MAX_SEQNO};
use crate::sst::{SstReader, SstWriter, SstWriterOptions};
use crate::version::{FileDesc, FileNumber};

/// An external file that passed every check.
#[derive(Debug)]
pub(super) struct ExternalFile {
    pub path: PathBuf,
    pub reader: SstReader,
    /// The smallest and largest user keys.
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub entries: u64,
}

fn invalid(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("external file {}: {why}", path.display()))
}

/// Opens `path` and reads every entry: checksums and the format version
/// (by the reader), key order, the seqno convention, the kinds. Returns
/// what the rest of the ingestion needs; any failure is a typed error
/// naming the file (`InvalidArgument` for a file that breaks the
/// convention or is missing, `Corruption` for bytes that fail a check).
pub(super) fn check_external(fs: &dyn FileSystem, path: &Path) -> Result<ExternalFile> {
    if !fs.exists(path) {
        return Err(invalid(path, "not found"));
    }
    let reader = SstReader::open(fs, path, 0, None)?;
    if !reader.range_tombstones().is_empty() {
        return Err(invalid(
            path,
            "holds range deletions (use replace_range to delete a range)",
        ));
    }
    let mut smallest: Option<Vec<u8>> = None;
    let mut largest: Vec<u8> = Vec::new();
    let mut entries = 0u64;
    let mut it = reader.iter();
    it.first()?;
    while it.valid() {
        check_entry(path, it.user_key(), it.seqno(), it.kind())?;
        let key = it.user_key();
        if smallest.is_some() && key <= largest.as_slice() {
            return Err(Error::corruption(
                path,
                0,
                format!("user key {key:?} not above the one before it (one version per key)"),
            ));
        }
        if smallest.is_none() {
            smallest = Some(key.to_vec());
        }
        largest.clear();
        largest.extend_from_slice(key);
        entries += 1;
        it.next()?;
    }
    let Some(smallest) = smallest else {
        return Err(invalid(path, "holds no entries"));
    };
    if reader.properties().num_entries != entries {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "properties count {} entries, the data blocks {entries}",
                reader.properties().num_entries
            ),
        ));
    }
    Ok(ExternalFile {
        path: path.to_path_buf(),
        reader,
        smallest,
        largest,
        entries,
    })
}

fn check_entry(path: &Path, key: &[u8], seqno: SeqNo, kind: ValueKind) -> Result<()> {
    if seqno != 0 {
        return Err(invalid(
            path,
            format!("key {key:?} has seqno {seqno}; external files carry seqno 0"),
        ));
    }
    if !matches!(kind, ValueKind::Put | ValueKind::Delete) {
        return Err(invalid(
            path,
            format!("key {key:?} is a {kind:?}; only Put and Delete are ingested"),
        ));
    }
    if key.len() > KEY_BYTES_MAX {
        return Err(invalid(
            path,
            format!("a key of {} bytes: at most {KEY_BYTES_MAX}", key.len()),
        ));
    }
    Ok(())
}

/// Writes `file`'s entries to `dest` (a new file) with seqno `seqno`, and
/// syncs it. The entries are checked again on the way (the external file
/// could have changed since the check); on error the caller removes
/// `dest`.
pub(super) fn rewrite(
    fs: &dyn FileSystem,
    file: &ExternalFile,
    dest: &Path,
    number: FileNumber,
    options: SstWriterOptions,
    seqno: SeqNo,
) -> Result<FileDesc> {
    let mut writer = SstWriter::create(fs, dest, options)?;
    let mut first: Option<InternalKey> = None;
    let mut last: Option<InternalKey> = None;
    let mut count = 0u64;
    let mut it = file.reader.iter();
    it.first()?;
    while it.valid() {
        check_entry(&file.path, it.user_key(), it.seqno(), it.kind())?;
        let key = InternalKey::new(it.user_key(), seqno, it.kind());
        writer.add(key.encoded(), it.value())?;
        if first.is_none() {
            first = Some(key.clone());
        }
        last = Some(key);
        count += 1;
        it.next()?;
    }
    let (Some(smallest), Some(largest)) = (first, last) else {
        return Err(invalid(&file.path, "changed during the ingestion"));
    };
    if count != file.entries || smallest.user_key() != file.smallest {
        return Err(invalid(&file.path, "changed during the ingestion"));
    }
    let info = writer.finish()?;
    Ok(FileDesc {
        number,
        size: info.file_size,
        smallest,
        largest,
        smallest_seqno: seqno,
        largest_seqno: seqno,
    })
}

/// Writes a file holding one range deletion of `[start, end)` at `seqno`
/// (`replace_range`'s delete), and syncs it. Its largest key is the
/// sentinel `(end, MAX_SEQNO, RangeDelete)`, as compaction writes for a
/// tombstone reaching past a file's last point key.
pub(super) fn write_range_delete(
    fs: &dyn FileSystem,
    dest: &Path,
    number: FileNumber,
    options: SstWriterOptions,
    start: &[u8],
    end: &[u8],
    seqno: SeqNo,
) -> Result<FileDesc> {
    let mut writer = SstWriter::create(fs, dest, options)?;
    writer.add_range_delete(start, end, seqno)?;
    let info = writer.finish()?;
    Ok(FileDesc {
        number,
        size: info.file_size,
        smallest: InternalKey::new(start, seqno, ValueKind::RangeDelete),
        largest: InternalKey::new(end, MAX_SEQNO, ValueKind::RangeDelete),
        smallest_seqno: seqno,
        largest_seqno: seqno,
    })
}
