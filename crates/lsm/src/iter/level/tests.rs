//! The level iterator against a model: every entry of the level's files
//! within the bounds, in order, as one sorted vector with a cursor.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::iter::vec_iter::VecIter;
use crate::key::{compare, InternalKey, ValueKind};
use crate::version::{FileDesc, ObsoleteFiles};

/// Opens files from memory; files numbered in `ruled_out` are skipped, as a
/// prefix filter would.
struct Opener {
    files: Vec<Arc<Vec<Vec<u8>>>>,
    ruled_out: BTreeSet<u64>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    opened: std::cell::Cell<usize>,
}

impl FileOpener for Opener {
    type Iter = VecIter;
    fn open(&self, file: &Arc<FileMeta>) -> Result<Option<VecIter>> {
        self.opened.set(self.opened.get() + 1);
        if self.ruled_out.contains(&file.number()) {
            return Ok(None);
        }
        let in_bounds = |k: &Vec<u8>| {
            let u = user_key_of(k);
            self.lower.as_deref().is_none_or(|l| u >= l)
                && self.upper.as_deref().is_none_or(|h| u < h)
        };
        let all = &self.files[file.number() as usize];
        // The value of each entry is its key.
        let entries = all
            .iter()
            .filter(|k| in_bounds(k))
            .map(|k| (k.clone(), k.clone()))
            .collect();
        Ok(Some(VecIter::new(entries)))
    }
}

fn ikey(user: u16, seqno: u64) -> Vec<u8> {
    InternalKey::new(&user.to_be_bytes(), seqno, ValueKind::Put)
        .encoded()
        .to_vec()
}

#[derive(Debug, Clone)]
enum Op {
    First,
    Last,
    Seek(u16, u64),
    SeekForPrev(u16, u64),
    Next,
    Prev,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::First),
        Just(Op::Last),
        (0..400u16, 0..4u64).prop_map(|(k, s)| Op::Seek(k, s)),
        (0..400u16, 0..4u64).prop_map(|(k, s)| Op::SeekForPrev(k, s)),
        Just(Op::Next),
        Just(Op::Next),
        Just(Op::Prev),
        Just(Op::Prev),
    ]
}

/// Files cut from sorted user keys: each key with one to three versions,
/// each file a run of consecutive keys.
fn level_files() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
    (
        prop::collection::btree_set(0..400u16, 0..60),
        prop::collection::vec(1..6usize, 1..40),
    )
        .prop_map(|(keys, cuts)| {
            let keys: Vec<u16> = keys.into_iter().collect();
            let mut files = Vec::new();
            let mut at = 0;
            for n in cuts {
                if at >= keys.len() {
                    break;
                }
                let end = (at + n).min(keys.len());
                let file = keys[at..end]
                    .iter()
                    .flat_map(|&k| (1..=1 + u64::from(k % 3)).rev().map(move |s| ikey(k, s)))
                    .collect();
                files.push(file);
                at = end;
            }
            files
        })
}

fn bound() -> impl Strategy<Value = Option<u16>> {
    prop::option::of(0..400u16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn matches_one_source_per_file(
        files in level_files(),
        lower in bound(),
        upper in bound(),
        ruled_out in prop::collection::btree_set(0..40u64, 0..4),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let (queue, _rx) = ObsoleteFiles::channel();
        let mut level = Level::sorted();
        for (n, entries) in files.iter().enumerate() {
            let desc = FileDesc {
                number: n as u64,
                size: 1,
                smallest: InternalKey::decode(entries.first().unwrap()).unwrap(),
                largest: InternalKey::decode(entries.last().unwrap()).unwrap(),
                smallest_seqno: 1,
                largest_seqno: 3,
                blob_refs: Vec::new(),
                range_tombstones: false,
            };
            level.insert(1, Arc::new(FileMeta::new(desc, queue.clone()))).unwrap();
        }
        let lower = lower.map(|k| k.to_be_bytes().to_vec());
        let upper = upper.map(|k| k.to_be_bytes().to_vec());
        let in_bounds = |k: &[u8]| {
            let u = user_key_of(k);
            lower.as_deref().is_none_or(|l| u >= l) && upper.as_deref().is_none_or(|h| u < h)
        };
        let model: Vec<Vec<u8>> = files
            .iter()
            .enumerate()
            .filter(|(n, _)| !ruled_out.contains(&(*n as u64)))
            .flat_map(|(_, f)| f.iter().filter(|k| in_bounds(k)).cloned())
            .collect();
        let opener = Opener {
            files: files.into_iter().map(Arc::new).collect(),
            ruled_out,
            lower: lower.clone(),
            upper: upper.clone(),
            opened: std::cell::Cell::new(0),
        };
        let mut it = LevelIterator::new(
            level,
            lower.map(Arc::from),
            upper.map(Arc::from),
            opener,
        );
        prop_assert_eq!(it.opener.opened.get(), 0, "a file opened at creation");
        let mut at: Option<usize> = None;
        for op in ops {
            match op {
                Op::First => {
                    it.seek_to_first().unwrap();
                    at = (!model.is_empty()).then_some(0);
                }
                Op::Last => {
                    it.seek_to_last().unwrap();
                    at = model.len().checked_sub(1);
                }
                Op::Seek(k, s) => {
                    let t = ikey(k, s);
                    it.seek(&t).unwrap();
                    let i = model.partition_point(|m| compare(m, &t) == Ordering::Less);
                    at = (i < model.len()).then_some(i);
                }
                Op::SeekForPrev(k, s) => {
                    let t = ikey(k, s);
                    it.seek_for_prev(&t).unwrap();
                    let i = model.partition_point(|m| compare(m, &t) != Ordering::Greater);
                    at = i.checked_sub(1);
                }
                Op::Next => {
                    it.next().unwrap();
                    at = at.map(|i| i + 1).filter(|&i| i < model.len());
                }
                Op::Prev => {
                    it.prev().unwrap();
                    at = at.and_then(|i| i.checked_sub(1));
                }
            }
            prop_assert_eq!(it.valid(), at.is_some(), "after {:?}", op);
            if let Some(i) = at {
                prop_assert_eq!(it.key(), &model[i][..], "after {:?}", op);
            }
        }
    }
}
