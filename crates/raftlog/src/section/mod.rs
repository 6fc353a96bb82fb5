//! The index section of a sealed file: what recovery needs from the file, so
//! that recovery reads a few bytes per record instead of every record.
//!
//! When a file is sealed (rotation), its writer encodes every change its
//! records made, consolidated per group, into a section placed after the end
//! marker, and a fixed-size trailer at the very end of the file pointing at it.
//! The records are untouched: a reader that ignores sections (`ctl`, an older
//! build, recovery in `AbsoluteConsistency`) stops at the end marker as before.
//!
//! Consolidation keeps recovery's result identical to replaying the records
//! (see `docs/raftlog.md`, "Index sections"): a group's entries and compactions
//! stay in order; of its key-value changes only the last per key survives,
//! since they interact with nothing but a removal of the group; a removal
//! clears everything the file did to the group before it.
//!
//! Any doubt (no trailer, a trailer of another file, a checksum mismatch, an
//! undecodable section) makes recovery scan the file's records instead.

mod builder;

use strata_codec::{crc32c, DecodeError, Reader};

use crate::format::{
    FILE_HEADER_LEN, RECORD_HEADER_LEN, RECORD_PAYLOAD_MAX, TAG_COMPACT_TO, TAG_DELETE,
    TAG_ENTRIES, TAG_PUT,
};

pub(crate) use builder::SectionBuilder;

/// The first 8 bytes of a trailer.
pub const TRAILER_MAGIC: [u8; 8] = *b"STRATAIX";
/// `{ magic[8] | u64 file_id | u64 section_offset | u32 section_len | u32 section_crc | u32 0 | u32 crc32c(bytes 0..36) }`
pub const TRAILER_LEN: usize = 40;
const _: () = assert!(TRAILER_LEN == 8 + 8 + 8 + 4 + 4 + 4 + 4);

/// Where a trailer says a file's section is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// The file the trailer belongs to.
    pub file_id: u64,
    /// Offset of the section in the file.
    pub section_offset: u64,
    /// Length of the section.
    pub section_len: u32,
    /// CRC-32C of the section.
    pub section_crc: u32,
}

impl Trailer {
    /// Encodes the trailer.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut t = [0u8; TRAILER_LEN];
        t[..8].copy_from_slice(&TRAILER_MAGIC);
        t[8..16].copy_from_slice(&self.file_id.to_le_bytes());
        t[16..24].copy_from_slice(&self.section_offset.to_le_bytes());
        t[24..28].copy_from_slice(&self.section_len.to_le_bytes());
        t[28..32].copy_from_slice(&self.section_crc.to_le_bytes());
        let crc = crc32c(&t[..36]);
        t[36..40].copy_from_slice(&crc.to_le_bytes());
        t
    }

    /// Decodes the last [`TRAILER_LEN`] bytes of the file `file_id`; `None` if
    /// they are not a valid trailer of that file (never written, torn, or left
    /// from the file's life before it was recycled).
    pub fn decode(bytes: &[u8], file_id: u64) -> Option<Trailer> {
        let mut r = Reader::new(bytes.get(..TRAILER_LEN)?);
        if r.bytes(8).ok()? != TRAILER_MAGIC {
            return None;
        }
        let t = Trailer {
            file_id: r.u64().ok()?,
            section_offset: r.u64().ok()?,
            section_len: r.u32().ok()?,
            section_crc: r.u32().ok()?,
        };
        let reserved = r.u32().ok()?;
        let crc = r.u32().ok()?;
        (crc == crc32c(&bytes[..36]) && reserved == 0 && t.file_id == file_id).then_some(t)
    }
}

/// A change to a group's log, in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOp {
    /// An entries item of record number `record` of the file.
    Entries {
        /// The record (0-based, in file order).
        record: u32,
        /// Index of the first entry.
        first_index: u64,
        /// Number of entries.
        count: u32,
        /// Offset of the item's length table in the record's decompressed payload.
        body_offset: u32,
    },
    /// A compaction.
    CompactTo {
        /// The new first index.
        index: u64,
    },
}

/// Everything one file did to one group, consolidated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupChanges {
    /// The group was removed; `log` and `kvs` are what came after the last removal.
    pub removed: bool,
    /// Entries and compactions, in file order.
    pub log: Vec<LogOp>,
    /// The last change of each key: `Some(value)` for a put, `None` for a delete.
    pub kvs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// A decoded section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Where the file's records end.
    pub data_end: u64,
    /// `(offset, len)` of every record.
    pub records: Vec<(u32, u32)>,
    /// Every group the file changed, ascending.
    pub groups: Vec<(u64, GroupChanges)>,
    /// The highest purge floor the file logged (0: none).
    pub purged_below: u64,
}

/// Decodes and checks a section. Every index and length is checked against the
/// section itself, so a section that decodes describes records that fit the
/// file's data exactly.
pub fn decode_section(bytes: &[u8]) -> Result<Section, DecodeError> {
    let mut r = Reader::new(bytes);
    let data_end = r.varint()?;
    let n_records = r.varint()?;
    // Every record length takes at least a byte: bounds the allocation.
    if n_records > r.remaining() as u64 {
        return Err(DecodeError::invalid(
            "section",
            r.position(),
            "too many records",
        ));
    }
    let mut records = Vec::with_capacity(n_records as usize);
    let mut offset = FILE_HEADER_LEN as u64;
    for _ in 0..n_records {
        let at = r.position();
        let len = r.varint()?;
        // `offset` stays within u32 and `len` is checked first: no overflow.
        if len <= RECORD_HEADER_LEN as u64
            || len > u32::MAX as u64
            || offset + len > u32::MAX as u64
        {
            return Err(DecodeError::invalid(
                "section",
                at,
                "impossible record length",
            ));
        }
        records.push((offset as u32, len as u32));
        offset += len;
    }
    if offset != data_end {
        return Err(DecodeError::invalid(
            "section",
            0,
            format!("records end at {offset}, the section says {data_end}"),
        ));
    }
    let n_groups = r.varint()?;
    if n_groups > r.remaining() as u64 {
        return Err(DecodeError::invalid(
            "section",
            r.position(),
            "too many groups",
        ));
    }
    let mut groups: Vec<(u64, GroupChanges)> = Vec::with_capacity(n_groups as usize);
    for _ in 0..n_groups {
        let at = r.position();
        let group = r.varint()?;
        if groups.last().is_some_and(|(g, _)| *g >= group) {
            return Err(DecodeError::invalid("section", at, "groups out of order"));
        }
        let removed = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(DecodeError::invalid("section", at, "bad removed flag")),
        };
        let n_log = r.varint()?;
        if n_log > r.remaining() as u64 {
            return Err(DecodeError::invalid("section", at, "too many log changes"));
        }
        let mut log = Vec::with_capacity(n_log as usize);
        for _ in 0..n_log {
            let at = r.position();
            log.push(match r.u8()? {
                TAG_ENTRIES => {
                    let record = r.varint()?;
                    let first_index = r.varint()?;
                    let count = r.varint()?;
                    let body_offset = r.varint()?;
                    if record >= records.len() as u64 {
                        return Err(DecodeError::invalid("section", at, "no such record"));
                    }
                    // `body_offset` is within the decompressed payload, so it
                    // is bounded by the format's payload limit, not the record.
                    if count == 0
                        || count > u32::MAX as u64
                        || first_index.checked_add(count).is_none()
                        || body_offset >= RECORD_PAYLOAD_MAX as u64
                    {
                        return Err(DecodeError::invalid("section", at, "impossible entries"));
                    }
                    LogOp::Entries {
                        record: record as u32,
                        first_index,
                        count: count as u32,
                        body_offset: body_offset as u32,
                    }
                }
                TAG_COMPACT_TO => LogOp::CompactTo { index: r.varint()? },
                _ => return Err(DecodeError::invalid("section", at, "unknown log change")),
            });
        }
        let n_kvs = r.varint()?;
        if n_kvs > r.remaining() as u64 {
            return Err(DecodeError::invalid("section", at, "too many keys"));
        }
        let mut kvs = Vec::with_capacity(n_kvs as usize);
        for _ in 0..n_kvs {
            let at = r.position();
            let tag = r.u8()?;
            let key = r.length_prefixed()?.to_vec();
            let value = match tag {
                TAG_PUT => Some(r.length_prefixed()?.to_vec()),
                TAG_DELETE => None,
                _ => return Err(DecodeError::invalid("section", at, "unknown key change")),
            };
            kvs.push((key, value));
        }
        groups.push((group, GroupChanges { removed, log, kvs }));
    }
    let purged_below = r.varint()?;
    if !r.is_empty() {
        return Err(DecodeError::invalid(
            "section",
            r.position(),
            "bytes after the purge floor",
        ));
    }
    Ok(Section {
        data_end,
        records,
        groups,
        purged_below,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_round_trip_and_rejects() {
        let t = Trailer {
            file_id: 9,
            section_offset: 1000,
            section_len: 77,
            section_crc: 5,
        };
        let bytes = t.encode();
        assert_eq!(Trailer::decode(&bytes, 9), Some(t));
        assert_eq!(Trailer::decode(&bytes, 10), None, "another file's trailer");
        for i in 0..TRAILER_LEN {
            let mut bad = bytes;
            bad[i] ^= 4;
            assert_eq!(Trailer::decode(&bad, 9), None, "flip at {i} accepted");
        }
        assert_eq!(Trailer::decode(&bytes[..39], 9), None);
    }
}
