//! The merging iterator against a model over many sources (up to 40, as
//! a deep L0 gives): the sorted union, equal keys in source order going
//! forward and the exact reverse going backward, whatever the walk. Each
//! entry's value is its source's index, so the order among equal keys is
//! visible.

use proptest::prelude::*;

use super::*;
use crate::iter::vec_iter::VecIter;
use crate::key::{compare, InternalKey, ValueKind};

#[derive(Debug, Clone)]
enum Nav {
    First,
    Last,
    Seek(u8, u64),
    SeekForPrev(u8, u64),
    Next,
    Prev,
}

fn nav() -> impl Strategy<Value = Nav> {
    prop_oneof![
        1 => Just(Nav::First),
        1 => Just(Nav::Last),
        2 => (any::<u8>(), 0u64..8).prop_map(|(k, s)| Nav::Seek(k % 32, s)),
        2 => (any::<u8>(), 0u64..8).prop_map(|(k, s)| Nav::SeekForPrev(k % 32, s)),
        6 => Just(Nav::Next),
        4 => Just(Nav::Prev),
    ]
}

fn ikey(user: u8, seqno: u64) -> Vec<u8> {
    InternalKey::new(&[user], seqno, ValueKind::Put)
        .encoded()
        .to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn many_sources_merge_into_the_sorted_union(
        sources in prop::collection::vec(
            prop::collection::btree_set((0u8..32, 0u64..8), 0..12),
            1..40,
        ),
        navs in prop::collection::vec(nav(), 1..60),
    ) {
        let lists: Vec<Vec<(Vec<u8>, Vec<u8>)>> = sources
            .iter()
            .enumerate()
            .map(|(i, set)| {
                let mut v: Vec<(Vec<u8>, Vec<u8>)> =
                    set.iter().map(|&(k, s)| (ikey(k, s), vec![i as u8])).collect();
                v.sort_by(|a, b| compare(&a.0, &b.0));
                v
            })
            .collect();
        // Forward order: by key, equal keys by source.
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = lists.iter().flatten().cloned().collect();
        want.sort_by(|a, b| compare(&a.0, &b.0).then(a.1.cmp(&b.1)));
        let mut it = MergingIterator::new(
            lists.into_iter().map(VecIter::new).collect(),
        );
        let mut at: Option<usize> = None;
        for nav in &navs {
            match nav {
                Nav::First => {
                    it.seek_to_first().unwrap();
                    at = (!want.is_empty()).then_some(0);
                }
                Nav::Last => {
                    it.seek_to_last().unwrap();
                    at = want.len().checked_sub(1);
                }
                Nav::Seek(k, s) => {
                    let t = ikey(*k, *s);
                    it.seek(&t).unwrap();
                    let i = want.partition_point(|(k, _)| compare(k, &t).is_lt());
                    at = (i < want.len()).then_some(i);
                }
                Nav::SeekForPrev(k, s) => {
                    let t = ikey(*k, *s);
                    it.seek_for_prev(&t).unwrap();
                    at = want.partition_point(|(k, _)| compare(k, &t).is_le()).checked_sub(1);
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
