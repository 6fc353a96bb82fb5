//! The memtables and the read path against a model: random batches (puts,
//! blob indexes, deletes, range deletes) get increasing seqnos through the
//! WAL payload codec and go into one to three memtables (switched at random
//! points); then point lookups at random snapshots, and the snapshot
//! iterator over a merge of all the memtables, forward and backward with
//! seeks, bounds and prefixes, must agree with a `BTreeMap` of every
//! version.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use strata_lsm::{
    InternalIterator, InternalKey, IterOptions, Memtable, MemtableIter, MergingIterator,
    RangeTombstone, RangeTombstoneSet, SeqNo, SnapshotIterator, ValueKind, WriteBatch,
};

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>),
    BlobIndex(Vec<u8>),
    Delete(Vec<u8>),
    DeleteRange(Vec<u8>, Vec<u8>),
}

#[derive(Debug, Clone)]
enum Step {
    Batch(Vec<Op>),
    SwitchMemtable,
}

#[derive(Debug, Clone)]
enum Nav {
    First,
    Last,
    Seek(Vec<u8>),
    SeekForPrev(Vec<u8>),
    Next,
    Prev,
}

/// Keys of one or two bytes from a small alphabet, so versions pile up.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"abcd".to_vec()), 1..=2)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => key().prop_map(Op::Put),
        1 => key().prop_map(Op::BlobIndex),
        2 => key().prop_map(Op::Delete),
        1 => (key(), key())
            .prop_filter("non-empty", |(a, b)| a != b)
            .prop_map(|(a, b)| Op::DeleteRange(a.clone().min(b.clone()), a.max(b))),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => prop::collection::vec(op(), 1..5).prop_map(Step::Batch),
        1 => Just(Step::SwitchMemtable),
    ]
}

fn nav() -> impl Strategy<Value = Nav> {
    prop_oneof![
        1 => Just(Nav::First),
        1 => Just(Nav::Last),
        2 => key().prop_map(Nav::Seek),
        2 => key().prop_map(Nav::SeekForPrev),
        4 => Just(Nav::Next),
        4 => Just(Nav::Prev),
    ]
}

fn bound() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![2 => Just(None), 1 => key().prop_map(Some)]
}

/// One version of a key: seqno, kind, value.
type Version = (SeqNo, ValueKind, Vec<u8>);

/// Every version of every key, and every range tombstone.
#[derive(Debug, Default)]
struct Model {
    versions: BTreeMap<Vec<u8>, Vec<Version>>,
    tombstones: Vec<(Vec<u8>, Vec<u8>, SeqNo)>,
}

impl Model {
    /// The live kind and value of `key` at `snapshot`.
    fn get(&self, key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
        let (seqno, kind, value) = self
            .versions
            .get(key)?
            .iter()
            .filter(|v| v.0 <= snapshot)
            .max_by_key(|v| v.0)?;
        let covered = self.tombstones.iter().any(|(s, e, t)| {
            *t <= snapshot && *t > *seqno && s.as_slice() <= key && key < e.as_slice()
        });
        match kind {
            ValueKind::Put | ValueKind::BlobIndex if !covered => Some((*kind, value.clone())),
            _ => None,
        }
    }

    fn visible(&self, snapshot: SeqNo, o: &IterOptions) -> Vec<(Vec<u8>, ValueKind, Vec<u8>)> {
        self.versions
            .keys()
            .filter(|k| o.lower_bound.as_ref().is_none_or(|l| *k >= l))
            .filter(|k| o.upper_bound.as_ref().is_none_or(|u| *k < u))
            .filter(|k| o.prefix.as_ref().is_none_or(|p| k.starts_with(p)))
            .filter_map(|k| self.get(k, snapshot).map(|(kind, v)| (k.clone(), kind, v)))
            .collect()
    }
}

/// Writes the steps into memtables (newest last) and the model.
fn apply(steps: &[Step]) -> (Vec<Arc<Memtable>>, Model, SeqNo) {
    let mut tables = vec![Arc::new(Memtable::new(1))];
    let mut model = Model::default();
    let mut next: SeqNo = 1;
    for step in steps {
        let ops = match step {
            Step::SwitchMemtable if tables.len() < 3 => {
                tables.push(Arc::new(Memtable::new(tables.len() as u64 + 1)));
                continue;
            }
            Step::SwitchMemtable => continue,
            Step::Batch(ops) => ops,
        };
        let mut b = WriteBatch::new();
        for op in ops {
            match op {
                Op::Put(k) => b.put(0, k, format!("v{}", next + b.count() as u64).as_bytes()),
                Op::BlobIndex(k) => {
                    // A reference naming the seqno, so each is distinct.
                    let r = strata_lsm::blob::BlobRef {
                        file_number: next + b.count() as u64,
                        block_offset: 0,
                        block_size: 5,
                        record_offset: 0,
                        value_len: 0,
                    };
                    b.put_blob_index(0, k, &r.encode())
                }
                Op::Delete(k) => b.delete(0, k),
                Op::DeleteRange(s, e) => b.delete_range(0, s, e),
            }
        }
        b.validate().unwrap();
        b.set_first_seqno(next).unwrap();
        let decoded = WriteBatch::decode(b.payload()).unwrap();
        let active = tables.last().unwrap();
        for (i, item) in decoded.items.iter().enumerate() {
            let seqno = decoded.first_seqno + i as u64;
            active
                .insert(item.key, seqno, item.kind, item.value)
                .unwrap();
            match item.kind {
                ValueKind::RangeDelete => {
                    model
                        .tombstones
                        .push((item.key.to_vec(), item.value.to_vec(), seqno))
                }
                kind => model.versions.entry(item.key.to_vec()).or_default().push((
                    seqno,
                    kind,
                    item.value.to_vec(),
                )),
            }
        }
        next += decoded.items.len() as u64;
    }
    (tables, model, next - 1)
}

/// A point lookup over the memtables, newest first, as the engine will do.
fn get(tables: &[Arc<Memtable>], key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
    for m in tables.iter().rev() {
        match m.get(key, snapshot) {
            Some((kind @ (ValueKind::Put | ValueKind::BlobIndex), v)) => return Some((kind, v)),
            Some(_) => return None,
            None => {}
        }
    }
    None
}

fn snapshot_iter<'a>(
    tables: &'a [Arc<Memtable>],
    snapshot: SeqNo,
    options: &IterOptions,
    bounded_sources: bool,
) -> SnapshotIterator<MergingIterator<MemtableIter<'a>>> {
    let children = tables
        .iter()
        .rev()
        .map(|m| match bounded_sources {
            true => m.iter_with_bounds(
                options.lower_bound.as_deref(),
                options.upper_bound.as_deref(),
            ),
            false => m.iter(),
        })
        .collect();
    let tombstones: Vec<RangeTombstone> = tables
        .iter()
        .flat_map(|m| m.range_tombstones(snapshot))
        .collect();
    let set = RangeTombstoneSet::new(&tombstones, snapshot);
    SnapshotIterator::new(
        MergingIterator::new(children),
        snapshot,
        set,
        options.clone(),
    )
}

fn current<I: InternalIterator>(it: &SnapshotIterator<I>) -> Option<(Vec<u8>, ValueKind, Vec<u8>)> {
    it.valid()
        .then(|| (it.key().to_vec(), it.kind(), it.value().to_vec()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn reads_agree_with_the_model(
        steps in prop::collection::vec(step(), 1..25),
        snapshot_picks in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        lower in bound(),
        upper in bound(),
        prefix in prop_oneof![3 => Just(None), 1 => prop::sample::select(b"abcd".to_vec()).prop_map(|c| Some(vec![c]))],
        navs in prop::collection::vec(nav(), 0..30),
        bounded_sources: bool,
    ) {
        let (tables, model, last) = apply(&steps);
        let options = IterOptions { lower_bound: lower, upper_bound: upper, prefix };
        for pick in snapshot_picks {
            let snapshot = pick.index(last as usize + 2) as SeqNo;
            for k in model.versions.keys() {
                prop_assert_eq!(get(&tables, k, snapshot), model.get(k, snapshot), "get {:?} at {}", k, snapshot);
            }

            let want = model.visible(snapshot, &options);
            let mut it = snapshot_iter(&tables, snapshot, &options, bounded_sources);
            let mut forward = Vec::new();
            it.seek_to_first().unwrap();
            while let Some(kv) = current(&it) {
                prop_assert_eq!(it.seqno() <= snapshot, true);
                forward.push(kv);
                it.next().unwrap();
            }
            prop_assert_eq!(&forward, &want, "forward at {}", snapshot);
            let mut backward = Vec::new();
            it.seek_to_last().unwrap();
            while let Some(kv) = current(&it) {
                backward.push(kv);
                it.prev().unwrap();
            }
            backward.reverse();
            prop_assert_eq!(&backward, &want, "backward at {}", snapshot);

            // Random walks: a cursor into the model's list, invalid once it
            // falls off either end, as the iterator is.
            let mut at: Option<usize> = None;
            for nav in &navs {
                match nav {
                    Nav::First => { it.seek_to_first().unwrap(); at = (!want.is_empty()).then_some(0); }
                    Nav::Last => { it.seek_to_last().unwrap(); at = want.len().checked_sub(1); }
                    Nav::Seek(t) => {
                        it.seek(t).unwrap();
                        let i = want.partition_point(|(k, _, _)| k < t);
                        at = (i < want.len()).then_some(i);
                    }
                    Nav::SeekForPrev(t) => {
                        it.seek_for_prev(t).unwrap();
                        at = want.partition_point(|(k, _, _)| k <= t).checked_sub(1);
                    }
                    Nav::Next => {
                        it.next().unwrap();
                        at = at.map(|i| i + 1).filter(|&i| i < want.len());
                    }
                    Nav::Prev => {
                        it.prev().unwrap();
                        at = at.and_then(|i| i.checked_sub(1));
                    }
                }
                prop_assert_eq!(current(&it), at.map(|i| want[i].clone()), "{:?} at {}", nav, snapshot);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The merged stream of internal keys is the sorted union of the
    /// memtables' entries, whatever the walk: every change of direction
    /// makes the merging iterator re-position its other children.
    #[test]
    fn the_merged_stream_is_the_sorted_union(
        steps in prop::collection::vec(step(), 1..25),
        navs in prop::collection::vec((nav(), 0u64..40), 1..40),
    ) {
        let (tables, _, _) = apply(&steps);
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for m in &tables {
            let mut it = m.iter();
            it.seek_to_first().unwrap();
            while it.valid() {
                want.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
        }
        want.sort_by(|a, b| strata_lsm::key::compare(&a.0, &b.0));
        let mut it = MergingIterator::new(tables.iter().map(|m| m.iter()).collect());
        let mut at: Option<usize> = None;
        for (nav, seqno) in &navs {
            let target = |k: &[u8]| InternalKey::new(k, *seqno, ValueKind::Put).encoded().to_vec();
            match nav {
                Nav::First => { it.seek_to_first().unwrap(); at = (!want.is_empty()).then_some(0); }
                Nav::Last => { it.seek_to_last().unwrap(); at = want.len().checked_sub(1); }
                Nav::Seek(k) => {
                    let t = target(k);
                    it.seek(&t).unwrap();
                    let i = want.partition_point(|(k, _)| strata_lsm::key::compare(k, &t).is_lt());
                    at = (i < want.len()).then_some(i);
                }
                Nav::SeekForPrev(k) => {
                    let t = target(k);
                    it.seek_for_prev(&t).unwrap();
                    at = want.partition_point(|(k, _)| strata_lsm::key::compare(k, &t).is_le()).checked_sub(1);
                }
                Nav::Next => {
                    it.next().unwrap();
                    at = at.map(|i| i + 1).filter(|&i| i < want.len());
                }
                Nav::Prev => {
                    it.prev().unwrap();
                    at = at.and_then(|i| i.checked_sub(1));
                }
            }
            let got = it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
            prop_assert_eq!(got, at.map(|i| want[i].clone()), "{:?}", nav);
        }
    }
}

/// A range tombstone in a newer memtable hides versions in an older one,
/// for lookups and for iteration both ways.
#[test]
fn a_newer_memtables_range_tombstone_hides_older_memtables() {
    let old = Arc::new(Memtable::new(1));
    old.insert(b"a", 1, ValueKind::Put, b"a1").unwrap();
    old.insert(b"b", 2, ValueKind::Put, b"b2").unwrap();
    old.insert(b"c", 3, ValueKind::Put, b"c3").unwrap();
    let new = Arc::new(Memtable::new(2));
    new.insert(b"a", 4, ValueKind::RangeDelete, b"c").unwrap();
    new.insert(b"b", 5, ValueKind::Put, b"b5").unwrap();
    let tables = vec![old, new];
    assert_eq!(get(&tables, b"a", 9), None);
    assert_eq!(
        get(&tables, b"a", 3),
        Some((ValueKind::Put, b"a1".to_vec()))
    );
    assert_eq!(get(&tables, b"b", 4), None);
    assert_eq!(
        get(&tables, b"b", 5),
        Some((ValueKind::Put, b"b5".to_vec()))
    );
    let mut it = snapshot_iter(&tables, 9, &IterOptions::default(), false);
    it.seek_to_first().unwrap();
    assert_eq!(current(&it).unwrap().0, b"b");
    it.next().unwrap();
    assert_eq!(current(&it).unwrap().0, b"c");
    it.prev().unwrap();
    assert_eq!(current(&it).unwrap().2, b"b5");
    it.prev().unwrap();
    assert!(!it.valid());
}
