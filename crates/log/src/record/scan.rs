//! Scanning the records of a file: the one decoder of record files that
//! recovery, tools and fuzz targets share. Pure: it takes bytes, never touches
//! a file system.

use std::borrow::Cow;

use strata_codec::{crc32c, lz4_decompress, DecodeError};

use super::format::{
    FileFormat, FileHeader, HeaderCheck, RecordHeader, CODEC_LZ4, FILE_HEADER_LEN,
    RECORD_HEADER_LEN,
};

/// One valid record, its payload copied out.
#[derive(Debug, Clone)]
pub struct ScannedRecord {
    /// Offset of the record's header in the file.
    pub offset: u64,
    /// Length of header plus stored payload.
    pub len: u32,
    /// The record's header.
    pub header: RecordHeader,
    /// The payload, decompressed.
    pub payload: Vec<u8>,
}

/// A valid record as the scan finds it: the payload is borrowed from the file's
/// bytes when it is not compressed.
#[derive(Debug)]
pub struct RawRecord<'a> {
    /// Offset of the record's header in the file.
    pub offset: u64,
    /// Length of header plus stored payload.
    pub len: u32,
    /// The record's header.
    pub header: RecordHeader,
    /// The payload, decompressed.
    pub payload: &'a [u8],
}

/// Why a scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// The file ended right after the last record.
    Eof,
    /// Zeros follow the last record (the end marker, or preallocated space).
    Zeros,
    /// A record of another file follows (left over in a recycled file).
    Stale,
    /// Bytes that are not a valid record follow the last good one (or, as an
    /// owner judges it, the records end before where the owner knows the
    /// data ends: see [`judge_sealed_end`]).
    Damaged {
        /// Where the bad bytes start.
        offset: u64,
        /// What is wrong with them.
        reason: String,
        /// True when the damaged bytes had been synced: a valid record after
        /// them says the file was durable past them (its `synced_end`), or the
        /// owner knows the file's data goes on. Such damage is not a power
        /// cut's unsynced tail, whose pages survive in any order.
        synced: bool,
    },
}

/// The result of scanning a whole file.
#[derive(Debug, Clone)]
pub struct RecordScan {
    /// The file's header.
    pub header: FileHeader,
    /// Every valid record before the end, in order.
    pub records: Vec<ScannedRecord>,
    /// Offset just past the last valid record.
    pub valid_end: u64,
    /// Why the scan stopped.
    pub end: ScanEnd,
}

/// Decodes the file header at the start of `bytes`, which may be shorter
/// than a header.
pub fn decode_file_header_of(format: &FileFormat, bytes: &[u8]) -> Result<FileHeader, DecodeError> {
    format.decode_header(bytes.get(..FILE_HEADER_LEN).ok_or(DecodeError::Truncated {
        offset: 0,
        needed: FILE_HEADER_LEN.saturating_sub(bytes.len()),
    })?)
}

/// Scans the bytes of a whole file: its header, then every record, each
/// checked by `check` too (an `Err` from it is damage at that record). Fails
/// only if the file header is unreadable; a header of another id is the
/// caller's to judge (it holds `header.file_id`).
pub fn scan_file(
    format: &FileFormat,
    bytes: &[u8],
    mut check: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<RecordScan, DecodeError> {
    let header = decode_file_header_of(format, bytes)?;
    let mut records = Vec::new();
    let (valid_end, end) = scan_records(bytes, header.file_id, FILE_HEADER_LEN, |rec| {
        check(rec.payload)?;
        records.push(ScannedRecord {
            offset: rec.offset,
            len: rec.len,
            header: rec.header,
            payload: rec.payload.to_vec(),
        });
        Ok(())
    });
    Ok(RecordScan {
        header,
        records,
        valid_end,
        end,
    })
}

/// Scans records of the file `file_id` from `start`, a record boundary, to the
/// end of the data, calling `on_record` with each valid record in order; an
/// `Err` from it makes that record damaged (a payload its owner cannot
/// decode). Returns where the valid records end and why the scan stopped.
/// When `bytes` is only a prefix of the file, an end at or near the end of
/// `bytes` may just mean more bytes are needed.
pub fn scan_records(
    bytes: &[u8],
    file_id: u64,
    start: usize,
    mut on_record: impl FnMut(RawRecord<'_>) -> Result<(), String>,
) -> (u64, ScanEnd) {
    let mut pos = start.min(bytes.len());
    let end = loop {
        let rest = &bytes[pos..];
        if rest.is_empty() {
            break ScanEnd::Eof;
        }
        if rest.len() < RECORD_HEADER_LEN {
            if rest.iter().all(|b| *b == 0) {
                break ScanEnd::Zeros;
            }
            break damaged(bytes, pos, "file ends inside a record header", file_id);
        }
        let mut head = [0u8; RECORD_HEADER_LEN];
        head.copy_from_slice(&rest[..RECORD_HEADER_LEN]);
        let h = match RecordHeader::check(&head, file_id) {
            HeaderCheck::Valid(h) => h,
            HeaderCheck::Zeros => break ScanEnd::Zeros,
            HeaderCheck::Stale => break ScanEnd::Stale,
            HeaderCheck::Invalid(why) => break damaged(bytes, pos, why, file_id),
        };
        let total = RECORD_HEADER_LEN + h.stored_len as usize;
        let Some(stored) = rest.get(RECORD_HEADER_LEN..total) else {
            break damaged(bytes, pos, "file ends inside a record payload", file_id);
        };
        let payload = match verify_payload(&h, stored) {
            Ok(p) => p,
            Err(why) => break damaged(bytes, pos, &why, file_id),
        };
        let record = RawRecord {
            offset: pos as u64,
            len: total as u32,
            header: h,
            payload: &payload,
        };
        if let Err(why) = on_record(record) {
            break damaged(bytes, pos, &why, file_id);
        }
        pos += total;
    };
    (pos as u64, end)
}

/// Checks a payload against its header and decompresses it; an uncompressed
/// payload is returned borrowed.
pub fn verify_payload<'a>(h: &RecordHeader, stored: &'a [u8]) -> Result<Cow<'a, [u8]>, String> {
    if crc32c(stored) != h.payload_crc {
        return Err("payload checksum mismatch".into());
    }
    if h.codec == CODEC_LZ4 {
        lz4_decompress(stored, h.raw_len as usize)
            .map(Cow::Owned)
            .map_err(|e| e.to_string())
    } else {
        Ok(Cow::Borrowed(stored))
    }
}

fn damaged(bytes: &[u8], pos: usize, reason: &str, file_id: u64) -> ScanEnd {
    ScanEnd::Damaged {
        offset: pos as u64,
        reason: reason.to_string(),
        synced: synced_past(bytes, pos, file_id),
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
pub fn synced_past(bytes: &[u8], damage: usize, file_id: u64) -> bool {
    let id = file_id.to_le_bytes();
    let mut pos = damage + 1;
    while pos + RECORD_HEADER_LEN <= bytes.len() {
        if bytes[pos + 4..pos + 12] == id {
            let mut head = [0u8; RECORD_HEADER_LEN];
            head.copy_from_slice(&bytes[pos..pos + RECORD_HEADER_LEN]);
            if let HeaderCheck::Valid(h) = RecordHeader::check(&head, file_id) {
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

/// Judges where a scan stopped against the data end its owner knows from
/// elsewhere (raftlog: a sealed file's trailer), if it knows one. A file
/// whose data end is known was synced whole, so records that stop short of
/// that end (zeros or stale bytes before the real end read as a clean end) or
/// damage before it are damage to synced data.
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
