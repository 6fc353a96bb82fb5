//! Scanning a whole log file: the one decoder of files that recovery, `ctl` and
//! the fuzz targets share. Pure: it takes bytes, never touches a file system.
//!
//! The record scan itself is the shared one of `strata-log`
//! ([`strata_log::record::scan`]); raftlog adds its payload check (every
//! record's items must decode) and its sealed files' trailer.

use strata_codec::DecodeError;
pub use strata_log::record::{judge_sealed_end, RawRecord, ScanEnd, ScannedRecord};

use crate::format::{decode_file_header, FileId, FILE_HEADER_LEN, RECORD_HEADER_LEN};
use crate::log_batch::{decode_items, Item};
use crate::section::{Trailer, TRAILER_LEN};

/// The result of scanning a file.
#[derive(Debug, Clone)]
pub struct FileScan {
    /// The id in the file's header.
    pub id: FileId,
    /// The format version in the file's header.
    pub version: u16,
    /// Every valid record before the end, in order.
    pub records: Vec<ScannedRecord>,
    /// Offset just past the last valid record.
    pub valid_end: u64,
    /// Why the scan stopped.
    pub end: ScanEnd,
}

/// Scans the bytes of a whole file. Fails only if the file header is unreadable.
/// A sealed file's end is checked against its trailer (see [`judge_sealed_end`]).
pub fn scan_file(bytes: &[u8]) -> Result<FileScan, DecodeError> {
    let mut records = Vec::new();
    let (id, version, valid_end, end) = scan_with(bytes, |rec, _items| {
        records.push(ScannedRecord {
            offset: rec.offset,
            len: rec.len,
            header: rec.header,
            payload: rec.payload.to_vec(),
        });
    })?;
    Ok(FileScan {
        id,
        version,
        records,
        valid_end,
        end,
    })
}

/// Scans the bytes of a whole file, calling `on_record` with each valid record
/// and its decoded items, in order; returns the file's id, version, the end of
/// its valid records and why the scan stopped. Fails only if the file header is
/// unreadable.
pub(crate) fn scan_with(
    bytes: &[u8],
    on_record: impl FnMut(RawRecord<'_>, Vec<Item<'_>>),
) -> Result<(FileId, u16, u64, ScanEnd), DecodeError> {
    let (id, version) = decode_header_of(bytes)?;
    let (pos, end) = scan_from(bytes, id.to_u64(), FILE_HEADER_LEN, on_record);
    let sealed_end = bytes
        .len()
        .checked_sub(TRAILER_LEN)
        .and_then(|at| sealed_data_end(&bytes[at..], id.to_u64()));
    Ok((id, version, pos, judge_sealed_end(pos, end, sealed_end)))
}

/// Decodes the file header at the start of `bytes`.
pub(crate) fn decode_header_of(bytes: &[u8]) -> Result<(FileId, u16), DecodeError> {
    decode_file_header(bytes.get(..FILE_HEADER_LEN).ok_or(DecodeError::Truncated {
        offset: 0,
        needed: FILE_HEADER_LEN.saturating_sub(bytes.len()),
    })?)
}

/// Scans records of the file `raw_id` from `start`, a record boundary, to the
/// end of the data; returns where the valid records end and why the scan
/// stopped. A record whose items do not decode is damage. When `bytes` is
/// only a prefix of the file, an end at or near the end of `bytes` may just
/// mean more bytes are needed (see `recovery/scan.rs`).
pub(crate) fn scan_from(
    bytes: &[u8],
    raw_id: u64,
    start: usize,
    mut on_record: impl FnMut(RawRecord<'_>, Vec<Item<'_>>),
) -> (u64, ScanEnd) {
    strata_log::record::scan_records(bytes, raw_id, start, |rec| {
        let items = decode_items(rec.payload).map_err(|e| format!("undecodable items: {e}"))?;
        on_record(rec, items);
        Ok(())
    })
}

/// The end of a sealed file's records, as its trailer (the last
/// [`TRAILER_LEN`] bytes of the file, `tail`) names it; `None` when the file
/// has no valid trailer of its own.
pub fn sealed_data_end(tail: &[u8], raw_id: u64) -> Option<u64> {
    let t = Trailer::decode(tail, raw_id)?;
    t.section_offset.checked_sub(RECORD_HEADER_LEN as u64)
}
