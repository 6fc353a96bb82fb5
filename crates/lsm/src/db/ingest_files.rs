//! The files of an ingestion: checking an external SST in full before
//! anything changes, and rewriting it into the database directory with the
//! ingestion's sequence number.
//!
//! The seqno convention (`docs/lsm.md`, "Ingestion"): every entry of an
//! external file carries seqno 0, as `SstWriter` writes them when given
//! keys made with `InternalKey::new(user_key, 0, kind)`. User keys are
//! unique within a file (one version each), kinds are `Put` or `Delete`,
//! and external files hold no range deletions. The engine copies (or hard
//! links) the file unchanged and records the seqno it allocated for the
//! ingestion in the version (the file's seqno range is that one seqno);
//! a reader opening a file whose entries are all stored at seqno 0 while
//! its version says otherwise presents them at the version's seqno
//! (`SstReader::open_assigned`). Nothing is rewritten, so the files are in
//! place before the seqno is allocated and the allocation is held only
//! for the manifest append.

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
    /// The smallest and largest user keys.
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    /// The kinds of the first and last entries, for their internal keys.
    pub smallest_kind: ValueKind,
    pub largest_kind: ValueKind,
    pub entries: u64,
    /// The file's size in bytes.
    pub size: u64,
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
    let (mut smallest_kind, mut largest_kind) = (ValueKind::Put, ValueKind::Put);
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
            smallest_kind = it.kind();
        }
        largest_kind = it.kind();
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
    let size = fs
        .open(path, false)
        .and_then(|f| f.len())
        .map_err(Error::io("stat", path))?;
    Ok(ExternalFile {
        path: path.to_path_buf(),
        smallest,
        largest,
        smallest_kind,
        largest_kind,
        entries,
        size,
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

/// Brings the external file `src` into the database as `dest`: a hard
/// link when `link` is asked and the file system allows it, else a copy;
/// then syncs `dest`'s data. Naming it durably (a directory sync) is the
/// caller's. A missing `src` is `InvalidArgument`; on error the caller
/// removes `dest`.
pub(super) fn copy_in(fs: &dyn FileSystem, src: &Path, dest: &Path, link: bool) -> Result<bool> {
    if !fs.exists(src) {
        return Err(invalid(src, "not found"));
    }
    let linked = link && fs.link(src, dest).is_ok();
    if !linked {
        let from = fs.open(src, false).map_err(Error::io("open", src))?;
        let len = from.len().map_err(Error::io("stat", src))?;
        let to = fs.create(dest).map_err(Error::io("create", dest))?;
        let mut buf = vec![0u8; COPY_CHUNK_BYTES.min(len as usize).max(1)];
        let mut at = 0u64;
        while at < len {
            let n = buf.len().min((len - at) as usize);
            from.read_exact_at(at, &mut buf[..n])
                .map_err(Error::io("read", src))?;
            to.write_at(at, &buf[..n])
                .map_err(Error::io("write", dest))?;
            at += n as u64;
        }
    }
    let to = fs.open(dest, true).map_err(Error::io("open", dest))?;
    to.sync_all().map_err(Error::io("sync", dest))?;
    Ok(linked)
}

/// Bytes copied per read and write.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// The description of an ingested file in the version, at seqno `seqno`:
/// its keys as readers present them (`SstReader::open_assigned`).
pub(super) fn ingested_desc(
    file: &ExternalFile,
    number: FileNumber,
    size: u64,
    seqno: SeqNo,
) -> FileDesc {
    FileDesc {
        number,
        size,
        smallest: InternalKey::new(&file.smallest, seqno, file.smallest_kind),
        largest: InternalKey::new(&file.largest, seqno, file.largest_kind),
        smallest_seqno: seqno,
        largest_seqno: seqno,
        blob_refs: Vec::new(),
        // `check_external` refuses files that hold any.
        range_tombstones: false,
    }
}

/// Writes a file holding one range deletion of `[start, end)`, stored at
/// seqno 0 like every ingested file (its version's seqno applies), and
/// syncs it: `replace_range`'s delete.
pub(super) fn write_range_delete(
    fs: &dyn FileSystem,
    dest: &Path,
    options: SstWriterOptions,
    start: &[u8],
    end: &[u8],
) -> Result<u64> {
    let mut writer = SstWriter::create(fs, dest, options)?;
    writer.add_range_delete(start, end, 0)?;
    Ok(writer.finish()?.file_size)
}

/// The description of `replace_range`'s range-deletion file at `seqno`.
/// Its largest key is the sentinel `(end, MAX_SEQNO, RangeDelete)`, as
/// compaction writes for a tombstone reaching past a file's last point
/// key.
pub(super) fn range_delete_desc(
    number: FileNumber,
    size: u64,
    start: &[u8],
    end: &[u8],
    seqno: SeqNo,
) -> FileDesc {
    FileDesc {
        number,
        size,
        smallest: InternalKey::new(start, seqno, ValueKind::RangeDelete),
        largest: InternalKey::new(end, MAX_SEQNO, ValueKind::RangeDelete),
        smallest_seqno: seqno,
        largest_seqno: seqno,
        blob_refs: Vec::new(),
        range_tombstones: true,
    }
}
