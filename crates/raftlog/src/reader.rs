//! Scanning a whole log file: the one decoder of files that recovery, `ctl` and
//! the fuzz targets share. Pure: it takes bytes, never touches a file system.

use strata_codec::DecodeError;

use crate::format::{
    decode_file_header, FileId, HeaderCheck, RecordHeader, FILE_HEADER_LEN, RECORD_HEADER_LEN,
};
use crate::log_batch::{decode_items, Item};
use crate::pipe::verify_payload;
use crate::section::{Trailer, TRAILER_LEN};

/// One valid record.
#[derive(Debug, Clone)]
pub struct ScannedRecord {
    /// Offset of the record's header in the file.
    pub offset: u64,
    /// Length of header plus stored payload.
    pub len: u32,
    /// The record's header.
    pub header: RecordHeader,
    /// The payload, decompressed; its items are known to decode.
    pub payload: Vec<u8>,
}

/// Why a scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// The file ended right after the last record.
    Eof,
    /// Zeros follow the last record (preallocated space).
    Zeros,
    /// A record of another file follows (left over in a recycled file).
    Stale,
    /// Bytes that are not a valid record follow the last good one, or the
    /// records of a sealed file end before the end its trailer names.
    Damaged {
        /// Where the bad bytes start.
        offset: u64,
        /// What is wrong with them.
        reason: String,
        /// True when the damaged bytes had been synced: a valid record after
        /// them says the file was durable past them (its `synced_end`), or the
        /// file's trailer says its data goes on. Such damage is not a power
        /// cut's unsynced tail, whose pages survive in any order.
        synced: bool,
    },
}

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

/// A valid record as the scan finds it: the payload is borrowed from the file's
/// bytes when it is not compressed.
pub(crate) struct RawRecord<'a> {
    pub offset: u64,
    pub len: u32,
    pub header: RecordHeader,
    pub payload: &'a [u8],
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
/// stopped. When `bytes` is only a prefix of the file, an end at or near the
/// end of `bytes` may just mean more bytes are needed (see `recovery.rs`).
pub(crate) fn scan_from(
    bytes: &[u8],
    raw_id: u64,
    start: usize,
    mut on_record: impl FnMut(RawRecord<'_>, Vec<Item<'_>>),
) -> (u64, ScanEnd) {
    let mut pos = start;
    let end = loop {
        let rest = &bytes[pos..];
        if rest.is_empty() {
            break ScanEnd::Eof;
        }
        if rest.len() < RECORD_HEADER_LEN {
            if rest.iter().all(|b| *b == 0) {
                break ScanEnd::Zeros;
            }
            break damaged(bytes, pos, "file ends inside a record header", raw_id);
        }
        let head: &[u8; RECORD_HEADER_LEN] = rest[..RECORD_HEADER_LEN]
            .try_into()
            .expect("length checked above");
        let h = match RecordHeader::check(head, raw_id) {
            HeaderCheck::Valid(h) => h,
            HeaderCheck::Zeros => break ScanEnd::Zeros,
            HeaderCheck::Stale => break ScanEnd::Stale,
            HeaderCheck::Invalid(why) => break damaged(bytes, pos, why, raw_id),
        };
        let total = RECORD_HEADER_LEN + h.stored_len as usize;
        let Some(stored) = rest.get(RECORD_HEADER_LEN..total) else {
            break damaged(bytes, pos, "file ends inside a record payload", raw_id);
        };
        let payload = match verify_payload(&h, stored) {
            Ok(p) => p,
            Err(why) => break damaged(bytes, pos, &why, raw_id),
        };
        let items = match decode_items(&payload) {
            Ok(items) => items,
            Err(e) => break damaged(bytes, pos, &format!("undecodable items: {e}"), raw_id),
        };
        on_record(
            RawRecord {
                offset: pos as u64,
                len: total as u32,
                header: h,
                payload: &payload,
            },
            items,
        );
        pos += total;
    };
    (pos as u64, end)
}

fn damaged(bytes: &[u8], pos: usize, reason: &str, raw_id: u64) -> ScanEnd {
    ScanEnd::Damaged {
        offset: pos as u64,
        reason: reason.to_string(),
        synced: synced_past(bytes, pos, raw_id),
    }
}

/// True when a valid record header of this file after `damage` says the file
/// was durable past `damage` before that record was written. Runs only after
/// damage was found, so a byte-by-byte search is affordable; the file-id bytes
/// are compared before any checksum is computed.
///
/// Valid records after damage are not enough to call it corruption: a power
/// cut keeps any subset of the pages written since the last sync, so a lost
/// page may sit before kept ones. Only a record that was written after a sync
/// covering the damage proves the damaged bytes were durable.
fn synced_past(bytes: &[u8], damage: usize, raw_id: u64) -> bool {
    let id = raw_id.to_le_bytes();
    let mut pos = damage + 1;
    while pos + RECORD_HEADER_LEN <= bytes.len() {
        if bytes[pos + 4..pos + 12] == id {
            let head: &[u8; RECORD_HEADER_LEN] = bytes[pos..pos + RECORD_HEADER_LEN]
                .try_into()
                .expect("length checked by the loop");
            if let HeaderCheck::Valid(h) = RecordHeader::check(head, raw_id) {
                // A record cannot have been synced past itself: such a claim
                // is not ours.
                let claim = h.synced_end as usize;
                if claim > damage && claim <= pos {
                    return true;
                }
            }
        }
        pos += 1;
    }
    false
}

/// The end of a sealed file's records, as its trailer (the last
/// [`TRAILER_LEN`] bytes of the file, `tail`) names it; `None` when the file
/// has no valid trailer of its own.
pub fn sealed_data_end(tail: &[u8], raw_id: u64) -> Option<u64> {
    let t = Trailer::decode(tail, raw_id)?;
    t.section_offset.checked_sub(RECORD_HEADER_LEN as u64)
}

/// Judges where a scan of a file stopped against the data end the file's
/// trailer names, if it has one. A sealed file was synced whole, so records
/// that stop short of that end (zeros or stale bytes before the real end read
/// as a clean end) or damage before it are damage to synced data.
pub fn judge_sealed_end(valid_end: u64, end: ScanEnd, sealed_end: Option<u64>) -> ScanEnd {
    let Some(sealed_end) = sealed_end else {
        return end;
    };
    match end {
        ScanEnd::Damaged { offset, reason, .. } if offset < sealed_end => ScanEnd::Damaged {
            offset,
            reason: format!("{reason}, before the sealed end {sealed_end}"),
            synced: true,
        },
        ScanEnd::Eof | ScanEnd::Zeros | ScanEnd::Stale if valid_end != sealed_end => {
            ScanEnd::Damaged {
                offset: valid_end,
                reason: format!(
                    "records end at {valid_end} but the file was sealed with its data ending at {sealed_end}"
                ),
                synced: true,
            }
        }
        end => end,
    }
}
