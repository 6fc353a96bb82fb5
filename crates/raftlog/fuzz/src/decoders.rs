//! Oracles for the pure decoders of `docs/format/raftlog.md`. Each takes any
//! bytes; the decoder must answer without panicking, and whatever it accepts must
//! agree with the bytes it was given and with the encoders.

use strata_raftlog::format::{
    decode_file_header, encode_file_header, HeaderCheck, RecordHeader, CODEC_LZ4, CODEC_NONE,
    FILE_HEADER_LEN, RECORD_HEADER_LEN, RECORD_PAYLOAD_MAX,
};
use strata_raftlog::reader::{self, ScanEnd};
use strata_raftlog::section::{decode_section, LogOp, Trailer, TRAILER_LEN};
use strata_raftlog::{decode_items, entry_at, Item};

/// Entries of one item whose every position is read back; past this, only the
/// first and last few are, since `entry_at` walks the length table from the start.
const ENTRIES_CHECKED_MAX: u32 = 1024;

/// Feeds `data` to `decode_file_header`. An accepted header must state exactly
/// what its bytes state: re-encoding its id gives the same bytes.
pub fn file_header(data: &[u8]) {
    let Ok((id, version)) = decode_file_header(data) else {
        return;
    };
    assert!(data.len() >= FILE_HEADER_LEN, "accepted a short header");
    assert_eq!(version, u16::from_le_bytes([data[8], data[9]]));
    let encoded = encode_file_header(id);
    // Byte 11 is reserved. The decoder ignores it (the checksum covers it), so an
    // accepted header may differ from the encoding there and in the checksum.
    assert_eq!(encoded[..11], data[..11], "magic, version or queue differ");
    assert_eq!(encoded[12..20], data[12..20], "file id differs");
}

/// Reads the first 8 bytes of `data` as a file id and the next 28 (zero-padded)
/// as a record header, and classifies them. A valid header re-encodes to the
/// same bytes and respects the format's limits; the other classes must be what
/// they claim.
pub fn record_header(data: &[u8]) {
    let Some((id, rest)) = data.split_first_chunk::<8>() else {
        return;
    };
    let file_id = u64::from_le_bytes(*id);
    let mut head = [0u8; RECORD_HEADER_LEN];
    let n = rest.len().min(RECORD_HEADER_LEN);
    head[..n].copy_from_slice(&rest[..n]);
    match RecordHeader::check(&head, file_id) {
        HeaderCheck::Valid(h) => {
            assert_eq!(h.encode(), head, "a valid header does not re-encode");
            assert_eq!(h.file_id, file_id);
            assert!(h.stored_len <= RECORD_PAYLOAD_MAX && h.raw_len <= RECORD_PAYLOAD_MAX);
            assert!(
                h.codec == CODEC_LZ4 || (h.codec == CODEC_NONE && h.raw_len == h.stored_len),
                "accepted {h:?}"
            );
        }
        HeaderCheck::Zeros => assert!(head.iter().all(|b| *b == 0)),
        HeaderCheck::Stale => assert_ne!(head[4..12], file_id.to_le_bytes()),
        HeaderCheck::Invalid(why) => assert!(!why.is_empty()),
    }
}

/// Decodes `data` as a batch payload. Every entry of every decoded entries item
/// must read back with `entry_at`, laid out as the grammar says: the length table
/// at `body_offset`, then the entries back to back, in order.
pub fn batch_payload(data: &[u8]) {
    let Ok(items) = decode_items(data) else {
        return;
    };
    for item in &items {
        if let Item::Entries {
            body_offset, count, ..
        } = *item
        {
            check_entries(data, body_offset, count);
        }
    }
}

/// Checks the entries of one decoded item: each lies where the length table says.
fn check_entries(payload: &[u8], body_offset: u32, count: u32) {
    assert!(count > 0, "decoded an empty entries item");
    let base = payload.as_ptr() as usize;
    let table = body_offset as usize;
    let len_at = |p: u32| {
        let at = table + p as usize * 4;
        u32::from_le_bytes(payload[at..at + 4].try_into().expect("4 bytes")) as usize
    };
    let positions: Vec<u32> = if count <= ENTRIES_CHECKED_MAX {
        (0..count).collect()
    } else {
        (0..8).chain(count - 8..count).collect()
    };
    // The start of entry 0, then of each next entry checked in turn.
    let mut expected = table + count as usize * 4;
    let mut next_position = 0;
    for p in positions {
        while next_position < p {
            expected += len_at(next_position);
            next_position += 1;
        }
        let entry = entry_at(payload, body_offset, count, p)
            .unwrap_or_else(|e| panic!("entry {p} of a decoded item: {e}"));
        assert_eq!(
            entry.as_ptr() as usize - base,
            expected,
            "entry {p} misplaced"
        );
        assert_eq!(entry.len(), len_at(p), "entry {p} has the wrong length");
    }
    assert!(entry_at(payload, body_offset, count, count).is_err());
}

/// Scans `data` as a whole log file. The records found must tile the file from
/// the header on, each valid and bound to the file, and the end must be what the
/// bytes after the last record are.
pub fn scan_file(data: &[u8]) {
    let Ok(scan) = reader::scan_file(data) else {
        return;
    };
    let mut pos = FILE_HEADER_LEN;
    for rec in &scan.records {
        assert_eq!(rec.offset, pos as u64, "records do not tile the file");
        let end = pos + rec.len as usize;
        assert_eq!(
            end - pos,
            RECORD_HEADER_LEN + rec.header.stored_len as usize
        );
        let head: &[u8; RECORD_HEADER_LEN] = data[pos..pos + RECORD_HEADER_LEN]
            .try_into()
            .expect("28 bytes");
        assert_eq!(
            RecordHeader::check(head, scan.id.to_u64()),
            HeaderCheck::Valid(rec.header)
        );
        assert_eq!(rec.payload.len(), rec.header.raw_len as usize);
        if rec.header.codec == CODEC_NONE {
            assert_eq!(rec.payload[..], data[pos + RECORD_HEADER_LEN..end]);
        }
        batch_payload(&rec.payload);
        assert!(
            decode_items(&rec.payload).is_ok(),
            "kept an undecodable record"
        );
        pos = end;
    }
    assert_eq!(scan.valid_end, pos as u64);
    let rest = &data[pos..];
    match scan.end {
        ScanEnd::Eof => assert!(rest.is_empty()),
        ScanEnd::Zeros => {
            assert!(!rest.is_empty());
            assert!(rest.iter().take(RECORD_HEADER_LEN).all(|b| *b == 0));
        }
        ScanEnd::Stale => assert!(rest.len() >= RECORD_HEADER_LEN),
        ScanEnd::Damaged { offset, .. } => {
            assert_eq!(offset, pos as u64);
            assert!(!rest.is_empty());
        }
    }
}

/// Feeds `data` to the index-section decoders: the trailer decoder (on the
/// first 40 bytes) and the section decoder. An accepted trailer re-encodes to
/// its bytes; an accepted section is self-consistent: its records tile the file
/// from offset 24 to `data_end`, every entries change names one of them, and
/// groups are strictly ascending.
pub fn index_section(data: &[u8]) {
    if data.len() >= TRAILER_LEN {
        let bytes = &data[..TRAILER_LEN];
        let id = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        if let Some(t) = Trailer::decode(bytes, id) {
            assert_eq!(
                &t.encode()[..],
                bytes,
                "an accepted trailer re-encodes to its bytes"
            );
        }
    }
    let Ok(s) = decode_section(data) else {
        return;
    };
    let mut end = FILE_HEADER_LEN as u64;
    for &(offset, len) in &s.records {
        assert_eq!(offset as u64, end, "records tile the file");
        end += len as u64;
    }
    assert_eq!(end, s.data_end);
    for pair in s.groups.windows(2) {
        assert!(pair[0].0 < pair[1].0, "groups ascend");
    }
    for (_, changes) in &s.groups {
        for op in &changes.log {
            if let LogOp::Entries { record, count, .. } = *op {
                assert!((record as usize) < s.records.len() && count > 0);
            }
        }
    }
}
