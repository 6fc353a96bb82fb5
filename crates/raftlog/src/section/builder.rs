//! Collecting a file's changes while it is written, and encoding them as its
//! index section when it is sealed (the format: [`SectionBuilder::encode`]).

use rustc_hash::FxHashMap;
use strata_codec::{put_varint, DecodeError, Reader};

use crate::format::{TAG_COMPACT_TO, TAG_DELETE, TAG_ENTRIES, TAG_PUT};
use crate::log_batch::Item;
#[cfg(doc)]
use crate::section::GroupChanges;

/// Where one group's changes lie in the builder's arena ([`GroupChanges`]
/// as it is collected), already encoded as the section holds them: its key
/// changes (`kv`, the last per key, unsorted), then its log ops (`log_op`,
/// in file order).
///
/// Why encoded, and in one arena: sealing a file then copies each group's
/// bytes from one place. When each group's ops, keys and values were
/// allocations of their own (four or five a group), encoding a 128 MiB file
/// of 16-group batches over 100,000 groups (M-100K) took ~22 ms of CPU,
/// mostly cache misses, and that encoding, though off the leader's path,
/// is what set M-100K's tail apart from raft-engine's (probes within one
/// binary: `docs/bench/raftlog-vs-peers.md`, "2026-11-29 (noon)"). Keeping
/// the bytes inside the map's slots made the slots, and so the misses of
/// the leader's lookups, larger; here a slot is a few words.
#[derive(Debug, Default, Clone, Copy)]
struct Slot {
    /// Where the group's region starts in the arena.
    at: usize,
    /// Bytes in use: the key changes, then the log ops.
    len: usize,
    /// Bytes the region has room for; it moves to the arena's end, twice as
    /// large, when a change does not fit.
    cap: usize,
    /// Where the key changes end and the log ops begin, in the region.
    kv_end: usize,
    /// How many key changes the region holds.
    kvs: u32,
    /// How many log ops the region holds.
    log_ops: u32,
    removed: bool,
}

impl Slot {
    /// Whether a record of the current file changed the group: every item
    /// leaves a log op, a key or the removal.
    fn touched(&self) -> bool {
        self.removed || self.len > 0
    }

    /// Makes room for `extra` more bytes in the region: in place at the
    /// arena's end, else by moving the region there with twice the room.
    /// Growing by doubling keeps a hot group's copies proportional to its
    /// bytes.
    fn make_room(&mut self, arena: &mut Vec<u8>, extra: usize) {
        let need = self.len + extra;
        if need <= self.cap {
            return;
        }
        let cap = need.next_power_of_two().max(MIN_REGION);
        if self.cap > 0 && self.at + self.cap == arena.len() {
            arena.resize(self.at + cap, 0);
        } else {
            let at = arena.len();
            arena.extend_from_within(self.at..self.at + self.len);
            arena.resize(at + cap, 0);
            self.at = at;
        }
        self.cap = cap;
    }

    /// Appends an encoded log op.
    fn push_op(&mut self, arena: &mut Vec<u8>, op: &[u8]) {
        self.make_room(arena, op.len());
        let end = self.at + self.len;
        arena[end..end + op.len()].copy_from_slice(op);
        self.len += op.len();
        self.log_ops += 1;
    }

    /// Records `entry`, the encoded change of `key`, replacing the key's
    /// earlier change in this file if there is one.
    fn set_kv(&mut self, arena: &mut Vec<u8>, key: &[u8], entry: &[u8]) {
        // Groups hold a handful of keys: a linear search beats a map.
        let mut at = 0;
        let (start, end) = loop {
            if at >= self.kv_end {
                // A new key, at the end of the key changes.
                self.kvs += 1;
                break (self.kv_end, self.kv_end);
            }
            let kv = KvAt::parse(&arena[self.at..self.at + self.kv_end], at);
            if &arena[self.at + kv.key.start..self.at + kv.key.end] == key {
                break (kv.start, kv.end);
            }
            at = kv.end;
        };
        let old = end - start;
        if entry.len() > old {
            self.make_room(arena, entry.len() - old);
        }
        // What follows the replaced change moves by the difference.
        let (region, tail) = (self.at, self.at + end..self.at + self.len);
        arena.copy_within(tail, region + start + entry.len());
        arena[region + start..region + start + entry.len()].copy_from_slice(entry);
        self.len = self.len + entry.len() - old;
        self.kv_end = self.kv_end + entry.len() - old;
    }

    /// Forgets everything the file did to the group so far (it was
    /// removed), keeping the region.
    fn remove(&mut self) {
        self.len = 0;
        self.kv_end = 0;
        self.kvs = 0;
        self.log_ops = 0;
        self.removed = true;
    }

    /// Appends the group's part of the section (`group` in its format) to
    /// `out`; `kvs` is scratch space for sorting its keys.
    fn encode_into(&self, group: u64, arena: &[u8], out: &mut Vec<u8>, kvs: &mut Vec<KvAt>) {
        let region = &arena[self.at..self.at + self.len];
        put_varint(out, group);
        out.push(self.removed as u8);
        put_varint(out, u64::from(self.log_ops));
        out.extend_from_slice(&region[self.kv_end..]);
        put_varint(out, u64::from(self.kvs));
        if self.kvs <= 1 {
            out.extend_from_slice(&region[..self.kv_end]);
            return;
        }
        kvs.clear();
        let mut at = 0;
        while at < self.kv_end {
            let kv = KvAt::parse(region, at);
            at = kv.end;
            kvs.push(kv);
        }
        kvs.sort_unstable_by(|a, b| region[a.key.clone()].cmp(&region[b.key.clone()]));
        for kv in kvs.iter() {
            out.extend_from_slice(&region[kv.start..kv.end]);
        }
    }
}

/// The smallest region a group gets: an entries op and a short key change.
const MIN_REGION: usize = 32;

/// Where one encoded key change lies in a group's region.
#[derive(Debug)]
struct KvAt {
    start: usize,
    key: std::ops::Range<usize>,
    end: usize,
}

impl KvAt {
    /// Parses the key change at `start` of a region this builder wrote
    /// (never bytes read from a file): failing means the builder is broken.
    fn parse(region: &[u8], start: usize) -> KvAt {
        let mut r = Reader::new(&region[start..]);
        let parsed = (|| -> Result<_, DecodeError> {
            let tag = r.u8()?;
            let key_len = r.length_prefixed()?.len();
            let key_end = start + r.position();
            if tag == TAG_PUT {
                r.length_prefixed()?;
            }
            Ok(key_end - key_len..key_end)
        })();
        let key = parsed.expect("a key change the section builder encoded");
        KvAt {
            start,
            key,
            end: start + r.position(),
        }
    }
}

/// Collects the changes of a file's records while the file is written.
#[derive(Debug, Default)]
pub(crate) struct SectionBuilder {
    /// Length of every record, in order; the first starts at `FILE_HEADER_LEN`.
    records: Vec<u32>,
    /// Every group of the current file, and the groups of the file before
    /// that this one has not changed (yet) when the builder was reused.
    groups: FxHashMap<u64, Slot>,
    /// The groups' regions.
    arena: Vec<u8>,
    /// One op or key change being encoded.
    scratch: Vec<u8>,
    /// The highest purge floor the file's records logged (0: none).
    purged_below: u64,
}

impl SectionBuilder {
    /// The groups the builder holds.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Empties the builder for another file, keeping its arena's memory and
    /// the slots of the groups this file changed (the next file will most
    /// likely change them again), and forgetting the rest.
    pub fn reset(&mut self) {
        self.records.clear();
        self.purged_below = 0;
        self.arena.clear();
        self.groups.retain(|_, g| {
            let keep = g.touched();
            *g = Slot::default();
            keep
        });
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
        let (arena, scratch) = (&mut self.arena, &mut self.scratch);
        let mut current: Option<(u64, &mut Slot)> = None;
        for item in items {
            if let Item::PurgedBelow { seq } = *item {
                self.purged_below = self.purged_below.max(seq);
                continue;
            }
            let group = item.group();
            let slot = match current.take() {
                Some((g, s)) if g == group => s,
                _ => self.groups.entry(group).or_default(),
            };
            scratch.clear();
            match *item {
                Item::Entries {
                    first_index,
                    count,
                    body_offset,
                    ..
                } => {
                    scratch.push(TAG_ENTRIES);
                    put_varint(scratch, u64::from(record));
                    put_varint(scratch, first_index);
                    put_varint(scratch, u64::from(count));
                    put_varint(scratch, u64::from(body_offset));
                    slot.push_op(arena, scratch);
                }
                Item::CompactTo { index, .. } => {
                    scratch.push(TAG_COMPACT_TO);
                    put_varint(scratch, index);
                    slot.push_op(arena, scratch);
                }
                Item::Put { key, value, .. } => {
                    scratch.push(TAG_PUT);
                    put_varint(scratch, key.len() as u64);
                    scratch.extend_from_slice(key);
                    put_varint(scratch, value.len() as u64);
                    scratch.extend_from_slice(value);
                    slot.set_kv(arena, key, scratch);
                }
                Item::Delete { key, .. } => {
                    scratch.push(TAG_DELETE);
                    put_varint(scratch, key.len() as u64);
                    scratch.extend_from_slice(key);
                    slot.set_kv(arena, key, scratch);
                }
                Item::PurgedBelow { .. } => {}
                Item::RemoveGroup { .. } => slot.remove(),
            }
            current = Some((group, slot));
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
        // The slots copied out in the map's order, then sorted: the sort and
        // the encoding read no slot again, only each group's region.
        let mut groups: Vec<(u64, Slot)> = self
            .groups
            .iter()
            .filter(|(_, s)| s.touched())
            .map(|(&g, s)| (g, *s))
            .collect();
        groups.sort_unstable_by_key(|(g, _)| *g);
        // Sized once: a section is megabytes, and growing it copies them. A
        // group's header is at most 21 bytes (its id, the removal flag and
        // two counts).
        let capacity =
            48 + self.records.len() * 5 + groups.iter().map(|(_, s)| 21 + s.len).sum::<usize>();
        let mut out = Vec::with_capacity(capacity);
        put_varint(&mut out, data_end);
        put_varint(&mut out, self.records.len() as u64);
        for &len in &self.records {
            put_varint(&mut out, len as u64);
        }
        put_varint(&mut out, groups.len() as u64);
        let mut kvs = Vec::new();
        for (n, (group, slot)) in groups.into_iter().enumerate() {
            between(n);
            slot.encode_into(group, &self.arena, &mut out, &mut kvs);
        }
        put_varint(&mut out, self.purged_below);
        debug_assert!(out.len() <= capacity, "{} > {capacity}", out.len());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::FILE_HEADER_LEN;
    use crate::section::{decode_section, GroupChanges, LogOp};

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

    /// A group in the model: removed, its log ops, its last change per key.
    type ModelGroup = (
        bool,
        Vec<LogOp>,
        std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    );

    /// What one generated item is.
    #[derive(Debug, Clone)]
    enum Change {
        Entries(u64, u64, u32, u32),
        CompactTo(u64, u64),
        Put(u64, u8, usize),
        Delete(u64, u8),
        Remove(u64),
        PurgedBelow(u64),
    }

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        let group = 0..4u64;
        prop_oneof![
            (group.clone(), any::<u64>(), 1..5000u32, 0..1_000_000u32)
                .prop_map(|(g, i, c, o)| Change::Entries(g, i >> (i % 64), c, o)),
            (group.clone(), any::<u64>()).prop_map(|(g, i)| Change::CompactTo(g, i)),
            (group.clone(), 0..4u8, 0..300usize).prop_map(|(g, k, v)| Change::Put(g, k, v)),
            (group.clone(), 0..4u8).prop_map(|(g, k)| Change::Delete(g, k)),
            group.prop_map(Change::Remove),
            any::<u64>().prop_map(Change::PurgedBelow),
        ]
    }

    /// Key `k` of the generated changes: lengths from 1 to 200 bytes, so
    /// that a group's region outgrows its room and moves, in place and not.
    fn key(k: u8) -> Vec<u8> {
        vec![b'k' + k; [1, 9, 60, 200][k as usize]]
    }

    proptest::proptest! {
            /// Whatever a file's records do to a handful of groups, the section
            /// holds what the consolidation rules say: a group's log ops in
            /// order, its last change per key (sorted), a removal clearing what
            /// the file did before it; and the highest purge floor.
            #[test]
            fn the_section_holds_what_the_rules_say(
                records in proptest::collection::vec(proptest::collection::vec(change(), 1..6), 1..80),
                reset_first in proptest::bool::ANY,
            ) {
                use std::collections::BTreeMap;
                let mut b = SectionBuilder::default();
                if reset_first {
                    // A reused builder: a file before, then a reset.
                    b.add_record(60, &[Item::Put { group: 1, key: b"old", value: b"v" }]);
                    b.reset();
                }
    let mut model: BTreeMap<u64, ModelGroup> = BTreeMap::new();
                let mut floor = 0;
                let keys: Vec<Vec<u8>> = (0..4).map(key).collect();
                let values: Vec<Vec<u8>> = (0..300).map(|n| vec![n as u8; n]).collect();
                for (r, changes) in records.iter().enumerate() {
                    let mut items = Vec::new();
                    for c in changes {
                        let item = match *c {
                            Change::Entries(group, first_index, count, body_offset) => Item::Entries {
                                group, first_index, count, body_offset,
                            },
                            Change::CompactTo(group, index) => Item::CompactTo { group, index },
                            Change::Put(group, k, v) => Item::Put {
                                group, key: &keys[k as usize], value: &values[v],
                            },
                            Change::Delete(group, k) => Item::Delete { group, key: &keys[k as usize] },
                            Change::Remove(group) => Item::RemoveGroup { group },
                            Change::PurgedBelow(seq) => Item::PurgedBelow { seq },
                        };
                        match *c {
                            Change::PurgedBelow(seq) => floor = floor.max(seq),
                            Change::Entries(g, first_index, count, body_offset) => {
                                model.entry(g).or_default().1.push(LogOp::Entries {
                                    record: r as u32, first_index, count, body_offset,
                                });
                            }
                            Change::CompactTo(g, index) => {
                                model.entry(g).or_default().1.push(LogOp::CompactTo { index });
                            }
                            Change::Put(g, k, v) => {
                                model.entry(g).or_default().2.insert(key(k), Some(values[v].clone()));
                            }
                            Change::Delete(g, k) => {
                                model.entry(g).or_default().2.insert(key(k), None);
                            }
                            Change::Remove(g) => {
                                model.insert(g, (true, Vec::new(), BTreeMap::new()));
                            }
                        }
                        items.push(item);
                    }
                    b.add_record(50, &items);
                }
                let end = FILE_HEADER_LEN as u64 + 50 * records.len() as u64;
                let s = decode_section(&b.encode(end)).unwrap();
                let want: Vec<(u64, GroupChanges)> = model
                    .into_iter()
                    .map(|(g, (removed, log, kvs))| {
                        (g, GroupChanges { removed, log, kvs: kvs.into_iter().collect() })
                    })
                    .collect();
                proptest::prop_assert_eq!(s.groups, want);
                proptest::prop_assert_eq!(s.purged_below, floor);
                proptest::prop_assert_eq!(s.records.len(), records.len());
            }
        }
}
