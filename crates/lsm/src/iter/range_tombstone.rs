//! Range tombstones and their fragmented view at a snapshot.
//!
//! A range tombstone `[start, end) @ seqno` deletes every version of every
//! key in the range written at a lower sequence number. Tombstones of all
//! sources may overlap in any way; a reader at snapshot `s` needs only, for a
//! key, the largest seqno `<= s` among the tombstones covering it. So the set
//! cuts the tombstones visible at `s` into non-overlapping fragments, each
//! with that largest seqno, and answers a query with one binary search (the
//! way RocksDB's `FragmentedRangeTombstoneList` does, for one snapshot).
//!
//! Invariants of [`RangeTombstoneSet`]:
//! - Fragments are sorted, non-empty (`start < end`) and do not overlap.
//! - Two adjacent fragments that touch have different seqnos (merged
//!   otherwise), and no fragment has a seqno above the snapshot.

use std::collections::BTreeMap;

use crate::key::SeqNo;

/// A deletion of every key `k` with `start <= k < end` written before
/// `seqno`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RangeTombstone {
    /// The first deleted user key.
    pub start: Vec<u8>,
    /// The first user key after the range (exclusive).
    pub end: Vec<u8>,
    /// The sequence number of the deletion.
    pub seqno: SeqNo,
}

/// The range tombstones of several sources as seen by one snapshot,
/// fragmented for lookups in `O(log n)`.
#[derive(Debug, Clone, Default)]
pub struct RangeTombstoneSet {
    fragments: Vec<Fragment>,
}

#[derive(Debug, Clone)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    seqno: SeqNo,
}

impl RangeTombstoneSet {
    /// Fragments the tombstones with `seqno <= snapshot`; others, and empty
    /// ranges, are ignored.
    pub fn new<'a>(
        tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
        snapshot: SeqNo,
    ) -> RangeTombstoneSet {
        let mut starts: Vec<(&[u8], SeqNo)> = Vec::new();
        let mut ends: Vec<(&[u8], SeqNo)> = Vec::new();
        for t in tombstones {
            if t.seqno <= snapshot && t.start < t.end {
                starts.push((&t.start, t.seqno));
                ends.push((&t.end, t.seqno));
            }
        }
        starts.sort_unstable();
        ends.sort_unstable();
        let mut points: Vec<&[u8]> = starts.iter().chain(&ends).map(|(k, _)| *k).collect();
        points.sort_unstable();
        points.dedup();

        // Sweep the boundaries in order, keeping the seqnos of the
        // tombstones that cover the current fragment (a multiset).
        let mut active: BTreeMap<SeqNo, usize> = BTreeMap::new();
        let (mut si, mut ei) = (0, 0);
        let mut fragments: Vec<Fragment> = Vec::new();
        for (i, &point) in points.iter().enumerate() {
            while si < starts.len() && starts[si].0 == point {
                *active.entry(starts[si].1).or_default() += 1;
                si += 1;
            }
            while ei < ends.len() && ends[ei].0 == point {
                if let Some(n) = active.get_mut(&ends[ei].1) {
                    *n -= 1;
                    if *n == 0 {
                        active.remove(&ends[ei].1);
                    }
                }
                ei += 1;
            }
            let (Some((&seqno, _)), Some(&next)) = (active.last_key_value(), points.get(i + 1))
            else {
                continue;
            };
            match fragments.last_mut() {
                Some(last) if last.end == point && last.seqno == seqno => last.end = next.to_vec(),
                _ => fragments.push(Fragment {
                    start: point.to_vec(),
                    end: next.to_vec(),
                    seqno,
                }),
            }
        }
        RangeTombstoneSet { fragments }
    }

    /// Returns the largest seqno of the tombstones covering `user_key`.
    pub fn max_covering_seqno(&self, user_key: &[u8]) -> Option<SeqNo> {
        let at = self
            .fragments
            .partition_point(|f| f.start.as_slice() <= user_key);
        let f = self.fragments.get(at.checked_sub(1)?)?;
        (user_key < f.end.as_slice()).then_some(f.seqno)
    }

    /// Returns true when a tombstone newer than `seqno` covers `user_key`:
    /// the version of `user_key` written at `seqno` is deleted.
    pub fn covers(&self, user_key: &[u8], seqno: SeqNo) -> bool {
        self.max_covering_seqno(user_key).is_some_and(|t| t > seqno)
    }

    /// Returns true when the set holds no tombstone.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// Returns the number of fragments.
    pub fn fragment_count(&self) -> usize {
        self.fragments.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: &str, seqno: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.into(),
            seqno,
        }
    }

    #[test]
    fn overlapping_tombstones_fragment_by_the_newest() {
        let ts = [
            t("b", "f", 5),
            t("d", "h", 9),
            t("a", "c", 2),
            t("x", "z", 20),
        ];
        let set = RangeTombstoneSet::new(&ts, 10);
        let at = |k: &str| set.max_covering_seqno(k.as_bytes());
        assert_eq!(at("0"), None);
        assert_eq!(at("a"), Some(2));
        assert_eq!(at("b"), Some(5));
        assert_eq!(at("c"), Some(5));
        assert_eq!(at("d"), Some(9));
        assert_eq!(at("gz"), Some(9));
        assert_eq!(at("h"), None);
        assert_eq!(at("y"), None, "newer than the snapshot");
        assert!(set.covers(b"e", 8));
        assert!(!set.covers(b"e", 9));
        // [a,b)@2 [b,d)@5 [d,h)@9
        assert_eq!(set.fragment_count(), 3);
    }

    #[test]
    fn identical_and_empty_tombstones() {
        let ts = [
            t("b", "d", 3),
            t("b", "d", 3),
            t("c", "c", 7),
            t("d", "b", 8),
        ];
        let set = RangeTombstoneSet::new(&ts, 100);
        assert_eq!(set.fragment_count(), 1);
        assert_eq!(set.max_covering_seqno(b"c"), Some(3));
        assert!(RangeTombstoneSet::new(&[], 1).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn fragments_agree_with_a_scan(
            ts in proptest::collection::vec((0u8..12, 0u8..12, 1u64..20), 0..12),
            snapshot in 0u64..22,
        ) {
            let ts: Vec<RangeTombstone> = ts
                .into_iter()
                .map(|(a, b, s)| RangeTombstone { start: vec![a], end: vec![b], seqno: s })
                .collect();
            let set = RangeTombstoneSet::new(&ts, snapshot);
            for k in 0u8..13 {
                let want = ts
                    .iter()
                    .filter(|t| t.seqno <= snapshot && t.start[0] <= k && k < t.end[0])
                    .map(|t| t.seqno)
                    .max();
                proptest::prop_assert_eq!(set.max_covering_seqno(&[k]), want);
            }
        }
    }
}
