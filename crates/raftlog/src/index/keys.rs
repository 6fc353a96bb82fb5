//! A group's keys with their values, in key order.
//!
//! Most groups hold one to three keys (their Raft states), and a `BTreeMap`
//! allocates a node of room for eleven at once (over 600 bytes for these
//! key and value types), which was most of an idle group's memory. So a
//! group's first keys live in a sorted `Vec` (48 bytes a key), and only a
//! group with more than [`FEW_MAX`] keys moves them to a `BTreeMap`, where an
//! insertion never moves more than a node. It goes back when it falls to
//! half of that, so a group at the edge does not move on every write.

use std::collections::btree_map::{self, BTreeMap};
use std::fmt;
use std::ops::Bound;

use super::KvSlot;

/// Most keys kept in a sorted `Vec`.
const FEW_MAX: usize = 32;

#[derive(Clone)]
pub(crate) enum Keys {
    Few(Vec<(Box<[u8]>, KvSlot)>),
    Many(BTreeMap<Box<[u8]>, KvSlot>),
}

impl Default for Keys {
    fn default() -> Self {
        Keys::Few(Vec::new())
    }
}

impl Keys {
    pub fn len(&self) -> usize {
        match self {
            Keys::Few(v) => v.len(),
            Keys::Many(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, key: &[u8]) -> Option<&KvSlot> {
        match self {
            Keys::Few(v) => v
                .binary_search_by(|(k, _)| (**k).cmp(key))
                .ok()
                .map(|i| &v[i].1),
            Keys::Many(m) => m.get(key),
        }
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut KvSlot> {
        match self {
            Keys::Few(v) => v
                .binary_search_by(|(k, _)| (**k).cmp(key))
                .ok()
                .map(|i| &mut v[i].1),
            Keys::Many(m) => m.get_mut(key),
        }
    }

    /// Sets `key`, which must not be present.
    pub fn insert_new(&mut self, key: &[u8], slot: KvSlot) {
        match self {
            Keys::Few(v) => {
                let Err(at) = v.binary_search_by(|(k, _)| (**k).cmp(key)) else {
                    unreachable!("insert_new of a present key");
                };
                if v.len() < FEW_MAX {
                    if v.len() == v.capacity() {
                        // Grows 1, 2, 4...: `insert` would start at room for 4.
                        v.reserve_exact(v.len().max(1));
                    }
                    v.insert(at, (key.into(), slot));
                } else {
                    let mut m: BTreeMap<_, _> = std::mem::take(v).into_iter().collect();
                    m.insert(key.into(), slot);
                    *self = Keys::Many(m);
                }
            }
            Keys::Many(m) => {
                m.insert(key.into(), slot);
            }
        }
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<KvSlot> {
        match self {
            Keys::Few(v) => {
                let i = v.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
                let slot = v.remove(i).1;
                if v.is_empty() {
                    // An emptied group may stay in the map a while: no buffer.
                    *v = Vec::new();
                }
                Some(slot)
            }
            Keys::Many(m) => {
                let slot = m.remove(key);
                if m.len() <= FEW_MAX / 2 {
                    *self = Keys::Few(std::mem::take(m).into_iter().collect());
                }
                slot
            }
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match self {
            Keys::Few(v) => Iter::Few(v.iter()),
            Keys::Many(m) => Iter::Many(m.iter()),
        }
    }

    pub fn values(&self) -> impl Iterator<Item = &KvSlot> + '_ {
        self.iter().map(|(_, s)| s)
    }

    /// The keys in `range`, whose start must not be after its end, and which
    /// must not exclude both ends at one key (as `BTreeMap::range`).
    pub fn range<'a>(&'a self, range: (Bound<&[u8]>, Bound<&[u8]>)) -> Iter<'a> {
        match self {
            Keys::Few(v) => {
                let from = match range.0 {
                    Bound::Included(k) => v.partition_point(|(x, _)| **x < *k),
                    Bound::Excluded(k) => v.partition_point(|(x, _)| **x <= *k),
                    Bound::Unbounded => 0,
                };
                let to = match range.1 {
                    Bound::Included(k) => v.partition_point(|(x, _)| **x <= *k),
                    Bound::Excluded(k) => v.partition_point(|(x, _)| **x < *k),
                    Bound::Unbounded => v.len(),
                };
                Iter::Few(v[from..to.max(from)].iter())
            }
            Keys::Many(m) => Iter::ManyRange(m.range::<[u8], _>(range)),
        }
    }

    /// Heap bytes held: the table (a `BTreeMap` node is counted as its
    /// share of about 48 bytes of overhead a key), keys and values.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Box<[u8]>, KvSlot)>();
        let table = match self {
            Keys::Few(v) => v.capacity() * entry,
            Keys::Many(m) => m.len() * (entry + 48),
        };
        table
            + self
                .iter()
                .map(|(k, s)| k.len() + s.value.capacity())
                .sum::<usize>()
    }
}

/// The keys in order, with their slots.
pub(crate) enum Iter<'a> {
    Few(std::slice::Iter<'a, (Box<[u8]>, KvSlot)>),
    Many(btree_map::Iter<'a, Box<[u8]>, KvSlot>),
    ManyRange(btree_map::Range<'a, Box<[u8]>, KvSlot>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a KvSlot);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Few(it) => it.next().map(|(k, s)| (&**k, s)),
            Iter::Many(it) => it.next().map(|(k, s)| (&**k, s)),
            Iter::ManyRange(it) => it.next().map(|(k, s)| (&**k, s)),
        }
    }
}

/// Prints the keys as a map, whichever form holds them.
impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ops::Bound;

    use proptest::prelude::*;

    use super::*;
    use crate::format::{FileId, Queue};
    use crate::index::FileRef;

    fn slot(v: u8) -> KvSlot {
        KvSlot {
            value: vec![v],
            file: FileRef::new(FileId {
                queue: Queue::Append,
                seq: 1,
            }),
        }
    }

    proptest! {
        /// Keys behave as a `BTreeMap`, across the move between their two
        /// forms and back.
        #[test]
        fn keys_match_a_btree_map(
            ops in prop::collection::vec((any::<bool>(), 0..80u8, any::<u8>()), 1..400),
            lo in 0..80u8,
            hi in 0..80u8,
        ) {
            let mut model = BTreeMap::new();
            let mut keys = Keys::default();
            for (put, k, v) in ops {
                let key = [k];
                if put {
                    match keys.get_mut(&key) {
                        Some(s) => *s = slot(v),
                        None => keys.insert_new(&key, slot(v)),
                    }
                    model.insert(key.to_vec(), slot(v));
                } else {
                    prop_assert_eq!(keys.remove(&key), model.remove(&key[..]));
                }
                prop_assert_eq!(keys.len(), model.len());
                prop_assert_eq!(keys.get(&key), model.get(&key[..]));
            }
            let all: Vec<(Vec<u8>, KvSlot)> =
                keys.iter().map(|(k, s)| (k.to_vec(), s.clone())).collect();
            let want: Vec<(Vec<u8>, KvSlot)> = model.clone().into_iter().collect();
            prop_assert_eq!(all, want);
            let (lo, hi) = (lo.min(hi), lo.max(hi));
            for range in [
                (Bound::Included(&[lo][..]), Bound::Excluded(&[hi][..])),
                (Bound::Excluded(&[lo][..]), Bound::Included(&[hi][..])),
                (Bound::Included(&[lo][..]), Bound::Unbounded),
                (Bound::Unbounded, Bound::Included(&[hi][..])),
            ] {
                let got: Vec<Vec<u8>> = keys.range(range).map(|(k, _)| k.to_vec()).collect();
                let want: Vec<Vec<u8>> = model.range::<[u8], _>(range).map(|(k, _)| k.clone()).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
