//! Collecting a file's changes while it is written, and encoding them as its
//! index section when it is sealed (the format: [`SectionBuilder::encode`]).

use rustc_hash::FxHashMap;
use strata_codec::{put_varint, varint_len};

use crate::format::{TAG_COMPACT_TO, TAG_DELETE, TAG_ENTRIES, TAG_PUT};
use crate::log_batch::Item;
#[cfg(doc)]
use crate::section::GroupChanges;

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
    /// that a group's bytes outgrow the space kept in its slot.
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
                records in proptest::collection::vec(proptest::collection::vec(change(), 1..6), 1..40),
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
