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

use rustc_hash::FxHashMap;
use strata_codec::{crc32c, put_varint, varint_len, DecodeError, Reader};

use crate::format::{
    FILE_HEADER_LEN, RECORD_HEADER_LEN, RECORD_PAYLOAD_MAX, TAG_COMPACT_TO, TAG_DELETE,
    TAG_ENTRIES, TAG_PUT,
};
use crate::log_batch::Item;

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

/// Makes room for one more element, exactly one while the vector is small:
/// most groups of a file get one entry run and one key, and a first push
/// would otherwise reserve four (at a million idle groups, ~200 B a group).
fn grow_by_one<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() && v.len() < 4 {
        v.reserve_exact(1);
    }
}

/// `SectionBuilder::free_gently` frees this many groups at a time...
const FREE_CHUNK_GROUPS: usize = 2048;
/// ...and pauses this long between.
const FREE_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

/// One group's changes while a file is written ([`GroupChanges`] as it is
/// collected). A builder reused for the next file keeps each group's
/// allocations: cleared, not freed.
///
/// The log ops are kept already encoded, as the section holds them, so that
/// sealing a file copies each group's bytes instead of encoding every op of
/// the file at once: at 10,000 groups with a skewed choice (Z-10K) a 128 MiB
/// file's section is 2.6 MB (some 130,000 ops by our estimate: 128 MiB of
/// 16-group batches of ~16.5 KiB), and encoding them at the seal
/// took 9-13 ms of CPU in a burst right after each rotation, during which
/// the leader's syncs had a p99 of 2.5 ms against 0.34 ms elsewhere (traced).
/// The encoding now runs op by op in the finish of the group that wrote
/// them, beside the next group's append.
#[derive(Debug, Default)]
struct GroupBuild {
    removed: bool,
    /// The ops of the current file, encoded (`log_op` in the section's format).
    log: Vec<u8>,
    /// How many ops `log` holds.
    log_ops: u32,
    /// Slots `..kv_len` hold the current file's last change of each key;
    /// the rest are kept for reuse.
    kvs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    kv_len: usize,
}

impl GroupBuild {
    fn set_kv(&mut self, key: &[u8], value: Option<&[u8]>) {
        // Groups hold a handful of keys: a linear search beats a map.
        if let Some((_, slot)) = self.kvs[..self.kv_len].iter_mut().find(|(k, _)| k == key) {
            set_value(slot, value);
            return;
        }
        if let Some((k, slot)) = self.kvs.get_mut(self.kv_len) {
            k.clear();
            k.extend_from_slice(key);
            set_value(slot, value);
        } else {
            grow_by_one(&mut self.kvs);
            self.kvs.push((key.to_vec(), value.map(<[u8]>::to_vec)));
        }
        self.kv_len += 1;
    }

    /// Whether a record of the current file changed the group: every item
    /// leaves a log op, a key or the removal.
    fn touched(&self) -> bool {
        self.removed || self.log_ops > 0 || self.kv_len > 0
    }

    /// Empties the group for the next file, keeping its allocations.
    fn clear(&mut self) {
        self.removed = false;
        self.log.clear();
        self.log_ops = 0;
        self.kv_len = 0;
    }

    /// Appends an encoded op of `len` bytes that `put` writes.
    fn push_op(&mut self, len: usize, put: impl FnOnce(&mut Vec<u8>)) {
        // Exactly what is needed while the group is small: most groups of a
        // file get one run (see `grow_by_one`).
        if self.log.capacity() - self.log.len() < len && self.log.len() < 64 {
            self.log.reserve_exact(len);
        }
        put(&mut self.log);
        self.log_ops += 1;
    }
}

fn set_value(slot: &mut Option<Vec<u8>>, value: Option<&[u8]>) {
    match (slot.as_mut(), value) {
        (Some(old), Some(v)) => {
            old.clear();
            old.extend_from_slice(v);
        }
        (_, v) => *slot = v.map(<[u8]>::to_vec),
    }
}

/// Collects the changes of a file's records while the file is written.
#[derive(Debug, Default)]
pub(crate) struct SectionBuilder {
    /// Length of every record, in order; the first starts at `FILE_HEADER_LEN`.
    records: Vec<u32>,
    /// Every group of the current file, and the groups of the file before
    /// that this one has not changed (yet) when the builder was reused.
    groups: FxHashMap<u64, GroupBuild>,
    /// The highest purge floor the file's records logged (0: none).
    purged_below: u64,
}

impl SectionBuilder {
    /// The groups the builder holds.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Empties the builder for another file, keeping the allocations of the
    /// groups this file changed (the next file will most likely change them
    /// again) and freeing the rest. At 100,000 groups a builder is some
    /// 400,000 allocations (each group's log and keys) of the leader's
    /// thread: freed on another thread, they stalled the leader's own
    /// allocations while it applied groups to the index for 3-30 ms (traced
    /// on M-100K), and made again they cost the leader as much.
    pub fn reset(&mut self) {
        self.records.clear();
        self.purged_below = 0;
        self.groups.retain(|_, g| {
            let keep = g.touched();
            g.clear();
            keep
        });
    }

    /// Frees the builder a few thousand groups at a time, pausing between
    /// (see [`SectionBuilder::reset`] for why), when it is not reused.
    pub fn free_gently(self) {
        let n = self.groups.len();
        for (i, _) in self.groups.into_values().enumerate() {
            if (i + 1) % FREE_CHUNK_GROUPS == 0 && i + 1 < n {
                std::thread::sleep(FREE_PAUSE);
            }
        }
    }

    /// Makes room for `n` groups at once.
    pub fn reserve_groups(&mut self, n: usize) {
        self.groups.reserve(n.saturating_sub(self.groups.len()));
    }

    /// Adds the record just written after the previous one, `len` bytes long
    /// (header included), holding `items`.
    pub fn add_record(&mut self, len: u32, items: &[Item<'_>]) {
        let record = self.records.len() as u32;
        self.records.push(len);
        let mut current: Option<(u64, &mut GroupBuild)> = None;
        for item in items {
            if let Item::PurgedBelow { seq } = *item {
                self.purged_below = self.purged_below.max(seq);
                continue;
            }
            let group = item.group();
            let changes = match current.take() {
                Some((g, c)) if g == group => c,
                _ => self.groups.entry(group).or_default(),
            };
            match *item {
                Item::Entries {
                    first_index,
                    count,
                    body_offset,
                    ..
                } => {
                    let len = 1
                        + varint_len(u64::from(record))
                        + varint_len(first_index)
                        + varint_len(u64::from(count))
                        + varint_len(u64::from(body_offset));
                    changes.push_op(len, |out| {
                        out.push(TAG_ENTRIES);
                        put_varint(out, u64::from(record));
                        put_varint(out, first_index);
                        put_varint(out, u64::from(count));
                        put_varint(out, u64::from(body_offset));
                    });
                }
                Item::CompactTo { index, .. } => {
                    changes.push_op(1 + varint_len(index), |out| {
                        out.push(TAG_COMPACT_TO);
                        put_varint(out, index);
                    });
                }
                Item::Put { key, value, .. } => changes.set_kv(key, Some(value)),
                Item::Delete { key, .. } => changes.set_kv(key, None),
                Item::PurgedBelow { .. } => {}
                Item::RemoveGroup { .. } => {
                    changes.removed = true;
                    changes.log.clear();
                    changes.log_ops = 0;
                    changes.kv_len = 0;
                }
            }
            current = Some((group, changes));
        }
    }

    /// Encodes the section of a file whose records end at `data_end`.
    ///
    /// ```text
    /// section = varint data_end | varint n_records | varint record_len[n_records]
    ///           | varint n_groups | group[n_groups]           (ascending group ids)
    /// group   = varint group | u8 removed | varint n_log | log_op[n_log]
    ///           | varint n_kvs | kv[n_kvs]                    (ascending keys)
    /// log_op  = u8 ENTRIES | varint record | varint first_index | varint count | varint body_offset
    ///         | u8 COMPACT_TO | varint index
    /// kv      = u8 PUT | varint key_len | key | varint value_len | value
    ///         | u8 DELETE | varint key_len | key
    ///         | varint purged_below   (the highest PURGED_BELOW seq of the file, 0: none)
    /// ```
    #[cfg(test)]
    pub fn encode(&self, data_end: u64) -> Vec<u8> {
        self.encode_with(data_end, |_| {})
    }

    /// [`Self::encode`], calling `between(n)` before the `n`-th group: a
    /// caller off the write path pauses there (see `prepare.rs`).
    pub fn encode_with(&self, data_end: u64, mut between: impl FnMut(usize)) -> Vec<u8> {
        let mut groups: Vec<(&u64, &GroupBuild)> =
            self.groups.iter().filter(|(_, g)| g.touched()).collect();
        groups.sort_unstable_by_key(|(g, _)| **g);
        // Sized once: a section is megabytes, and growing it copies them.
        let kv_bytes = |g: &GroupBuild| -> usize {
            g.kvs[..g.kv_len]
                .iter()
                .map(|(k, v)| 11 + k.len() + v.as_ref().map_or(0, |v| 5 + v.len()))
                .sum()
        };
        let capacity = 48
            + self.records.len() * 5
            + groups
                .iter()
                .map(|(_, g)| 25 + g.log.len() + kv_bytes(g))
                .sum::<usize>();
        let mut out = Vec::with_capacity(capacity);
        put_varint(&mut out, data_end);
        put_varint(&mut out, self.records.len() as u64);
        for &len in &self.records {
            put_varint(&mut out, len as u64);
        }
        put_varint(&mut out, groups.len() as u64);
        let mut kvs: Vec<&(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for (n, (&group, changes)) in groups.into_iter().enumerate() {
            between(n);
            put_varint(&mut out, group);
            out.push(changes.removed as u8);
            put_varint(&mut out, u64::from(changes.log_ops));
            out.extend_from_slice(&changes.log);
            kvs.clear();
            kvs.extend(&changes.kvs[..changes.kv_len]);
            kvs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            put_varint(&mut out, kvs.len() as u64);
            for (key, value) in kvs.iter().copied() {
                out.push(if value.is_some() { TAG_PUT } else { TAG_DELETE });
                put_varint(&mut out, key.len() as u64);
                out.extend_from_slice(key);
                if let Some(v) = value {
                    put_varint(&mut out, v.len() as u64);
                    out.extend_from_slice(v);
                }
            }
        }
        put_varint(&mut out, self.purged_below);
        debug_assert!(out.len() <= capacity, "{} > {capacity}", out.len());
        out
    }
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

    /// The hook of a paced encoding sees each group once, in order, and
    /// leaves the bytes as they are.
    #[test]
    fn a_paced_encoding_calls_between_once_per_group() {
        let mut b = SectionBuilder::default();
        for g in [5u64, 1, 9] {
            b.add_record(40, &[Item::CompactTo { group: g, index: 2 }]);
        }
        let end = FILE_HEADER_LEN as u64 + 120;
        let mut seen = Vec::new();
        let bytes = b.encode_with(end, |n| seen.push(n));
        assert_eq!(seen, vec![0, 1, 2]);
        assert_eq!(bytes, b.encode(end));
    }

    /// A builder reused for the next file describes that file alone: no
    /// group, key, log op, removal or floor of the file before comes back,
    /// and keys reuse their slots.
    #[test]
    fn a_reset_builder_describes_only_the_next_file() {
        let mut b = SectionBuilder::default();
        b.add_record(
            100,
            &[
                Item::Put {
                    group: 3,
                    key: b"a",
                    value: b"one",
                },
                Item::Put {
                    group: 3,
                    key: b"b",
                    value: b"two",
                },
                Item::Entries {
                    group: 7,
                    first_index: 1,
                    count: 1,
                    body_offset: 0,
                },
                Item::RemoveGroup { group: 9 },
                Item::PurgedBelow { seq: 5 },
            ],
        );
        b.reset();
        assert_eq!(b.group_count(), 3, "the groups changed are kept for reuse");
        b.add_record(
            60,
            &[
                Item::Delete {
                    group: 3,
                    key: b"b",
                },
                Item::CompactTo { group: 3, index: 4 },
            ],
        );
        let end = FILE_HEADER_LEN as u64 + 60;
        let s = decode_section(&b.encode(end)).unwrap();
        assert_eq!(s.records, vec![(FILE_HEADER_LEN as u32, 60)]);
        assert_eq!(s.purged_below, 0);
        assert_eq!(s.groups.len(), 1, "{:?}", s.groups);
        let (g, c) = &s.groups[0];
        assert_eq!(*g, 3);
        assert!(!c.removed);
        assert_eq!(c.log, vec![LogOp::CompactTo { index: 4 }]);
        assert_eq!(c.kvs, vec![(b"b".to_vec(), None)]);
        // Groups the second file did not change are freed at the next reset.
        b.reset();
        assert_eq!(b.group_count(), 1);
    }

    /// A group's ops are kept encoded as they come: many of them, with
    /// varints of every width, decode to the same ops in the same order.
    #[test]
    fn a_group_with_many_ops_round_trips_in_order() {
        let mut b = SectionBuilder::default();
        let mut want = Vec::new();
        for r in 0..300u32 {
            let first_index = u64::MAX / 3 + u64::from(r) * 1_000_003;
            let (count, body_offset) = (r % 200 + 1, r * 70_001);
            b.add_record(
                40,
                &[
                    Item::Entries {
                        group: u64::MAX,
                        first_index,
                        count,
                        body_offset,
                    },
                    Item::CompactTo {
                        group: u64::MAX,
                        index: first_index >> (r % 64),
                    },
                ],
            );
            want.push(LogOp::Entries {
                record: r,
                first_index,
                count,
                body_offset,
            });
            want.push(LogOp::CompactTo {
                index: first_index >> (r % 64),
            });
        }
        let end = FILE_HEADER_LEN as u64 + 300 * 40;
        let s = decode_section(&b.encode(end)).unwrap();
        assert_eq!(s.groups.len(), 1);
        assert_eq!(s.groups[0].0, u64::MAX);
        assert_eq!(s.groups[0].1.log, want);
    }

    #[test]
    fn consolidates_and_round_trips() {
        let mut b = SectionBuilder::default();
        let e = |group, first_index, body_offset| Item::Entries {
            group,
            first_index,
            count: 2,
            body_offset,
        };
        b.add_record(
            100,
            &[
                e(7, 1, 3),
                Item::Put {
                    group: 7,
                    key: b"s",
                    value: b"one",
                },
                e(3, 5, 3),
            ],
        );
        b.add_record(
            50,
            &[
                Item::Put {
                    group: 7,
                    key: b"s",
                    value: b"two",
                },
                Item::Delete {
                    group: 3,
                    key: b"x",
                },
                Item::CompactTo { group: 7, index: 2 },
                Item::RemoveGroup { group: 3 },
                Item::PurgedBelow { seq: 4 },
                e(3, 9, 4),
                Item::PurgedBelow { seq: 6 },
            ],
        );
        let end = FILE_HEADER_LEN as u64 + 150;
        let s = decode_section(&b.encode(end)).unwrap();
        assert_eq!(s.data_end, end);
        assert_eq!(s.records, vec![(24, 100), (124, 50)]);
        assert_eq!(s.groups.len(), 2, "a purge floor is no group's change");
        assert_eq!(s.purged_below, 6, "the highest floor");
        let (g3, c3) = &s.groups[0];
        assert_eq!(*g3, 3);
        assert!(c3.removed);
        assert_eq!(
            c3.log,
            vec![LogOp::Entries {
                record: 1,
                first_index: 9,
                count: 2,
                body_offset: 4
            }]
        );
        assert!(c3.kvs.is_empty(), "the delete came before the removal");
        let (g7, c7) = &s.groups[1];
        assert_eq!(*g7, 7);
        assert!(!c7.removed);
        assert_eq!(
            c7.log,
            vec![
                LogOp::Entries {
                    record: 0,
                    first_index: 1,
                    count: 2,
                    body_offset: 3
                },
                LogOp::CompactTo { index: 2 }
            ]
        );
        assert_eq!(c7.kvs, vec![(b"s".to_vec(), Some(b"two".to_vec()))]);
        // A wrong end, truncation and trailing bytes are all refused.
        assert!(decode_section(&b.encode(end + 1)).is_err());
        let bytes = b.encode(end);
        for cut in 0..bytes.len() {
            assert!(decode_section(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_section(&longer).is_err());
    }
}
