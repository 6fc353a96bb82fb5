//! The key space of the LSM workloads, and the values written into it.
//!
//! - Key `i` of the space (`0 <= i < keys`) is `2i` as a big-endian u64,
//!   padded to the key size with a fixed filler, so keys sort by `i`; a
//!   missing key is `2i + 1`, which falls between two stored keys, so a
//!   miss is answered by the filters rather than by a file's key range.
//! - The random fill visits every key once, in the order of a bijection
//!   `i -> (i x P + offset) mod keys` (P a prime not dividing `keys`), so
//!   no memory is spent on a shuffled list and every engine sees the same
//!   order.
//! - Values are half pseudo-random bytes and half a repeated motif, as the
//!   raftlog workload's entries (`workload::entry`): compressible about 2:1,
//!   as db_bench's default `--compression_ratio=0.5`.
//! - [`LiveKeys`] counts the live user bytes (key + value of every key
//!   present), the denominator of space amplification.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::workload::{entry, EntrySizes};

/// Smallest key: the big-endian u64 that orders keys.
pub const KEY_BYTES_MIN: usize = 8;
/// Largest key the bench makes (every engine accepts it).
pub const KEY_BYTES_MAX: usize = 1024;
/// The byte keys are padded with.
const KEY_FILLER: u8 = b'k';

/// Primes for the fill's bijection; the first one not dividing the number
/// of keys is used.
const PRIMES: [u64; 3] = [1_000_000_007, 998_244_353, 2_147_483_647];
/// Where the fill's bijection starts.
const FILL_OFFSET: u64 = 0x5354_5241;

/// The shape of the key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpace {
    /// Keys in the space.
    pub keys: u64,
    /// Bytes of each key.
    pub key_bytes: usize,
    /// Value lengths.
    pub values: EntrySizes,
}

impl KeySpace {
    /// Returns stored key `i`.
    pub fn key(&self, i: u64) -> Vec<u8> {
        self.encode(2 * i)
    }

    /// Returns a key between stored keys `i` and `i + 1`: never written.
    pub fn missing_key(&self, i: u64) -> Vec<u8> {
        self.encode(2 * i + 1)
    }

    fn encode(&self, n: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.key_bytes);
        k.extend_from_slice(&n.to_be_bytes());
        k.resize(self.key_bytes, KEY_FILLER);
        k
    }

    /// Returns the value of key `i` at `version` (each write of a key is a
    /// new version, so overwrites change the bytes).
    pub fn value(&self, i: u64, version: u64) -> Vec<u8> {
        let len = self.values.len(i, version);
        entry(i, version, len)
    }

    /// Returns the `n`-th key of the random fill order.
    pub fn fill_order(&self, n: u64) -> u64 {
        let keys = self.keys.max(1);
        // A prime that does not divide `keys` is coprime with it: a bijection.
        let p = PRIMES
            .iter()
            .copied()
            .find(|&p| keys.checked_rem(p) != Some(0))
            .unwrap_or(1);
        ((u128::from(n) * u128::from(p) + u128::from(FILL_OFFSET)) % u128::from(keys)) as u64
    }

    /// Returns the mean bytes of a key and its value.
    pub fn mean_pair_bytes(&self) -> f64 {
        let (lo, hi) = self.values.bounds();
        self.key_bytes as f64 + (lo + hi) as f64 / 2.0
    }
}

/// Which keys are present and the bytes they hold. Shared by the threads of
/// a workload: each write updates its key's length with one atomic swap and
/// the total with one add, so concurrent writers need no lock (two writers
/// of one key may leave the total off by one value until the next write of
/// it; the workloads give each writer its own keys where that matters).
#[derive(Debug)]
pub struct LiveKeys {
    /// Value length + 1 of each key; 0 when absent.
    lens: Vec<AtomicU32>,
    /// Key + value bytes of the present keys.
    bytes: AtomicU64,
    key_bytes: u64,
}

impl LiveKeys {
    /// An empty set over `keys` keys of `key_bytes` bytes.
    pub fn new(keys: u64, key_bytes: usize) -> LiveKeys {
        LiveKeys {
            lens: (0..keys).map(|_| AtomicU32::new(0)).collect(),
            bytes: AtomicU64::new(0),
            key_bytes: key_bytes as u64,
        }
    }

    /// Records a put of a value of `len` bytes under key `i`.
    pub fn put(&self, i: u64, len: usize) {
        let new = len as u32 + 1;
        let old = self.lens[i as usize].swap(new, Relaxed);
        self.adjust(old, new);
    }

    /// Records a delete of key `i`.
    pub fn delete(&self, i: u64) {
        let old = self.lens[i as usize].swap(0, Relaxed);
        self.adjust(old, 0);
    }

    fn adjust(&self, old: u32, new: u32) {
        let size = |l: u32| {
            if l == 0 {
                0
            } else {
                self.key_bytes + u64::from(l) - 1
            }
        };
        let (old, new) = (size(old), size(new));
        if new >= old {
            self.bytes.fetch_add(new - old, Relaxed);
        } else {
            self.bytes.fetch_sub(old - new, Relaxed);
        }
    }

    /// Returns the key + value bytes of the present keys.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(keys: u64) -> KeySpace {
        KeySpace {
            keys,
            key_bytes: 16,
            values: EntrySizes::Fixed(100),
        }
    }

    #[test]
    fn keys_sort_by_index_and_misses_fall_between() {
        let s = space(10);
        assert_eq!(s.key(3).len(), 16);
        assert!(s.key(3) < s.missing_key(3));
        assert!(s.missing_key(3) < s.key(4));
        assert!(s.key(9) > s.key(1));
    }

    #[test]
    fn fill_order_visits_every_key_once() {
        for keys in [1, 7, 1000, 1_000_000_007 * 2] {
            let s = space(keys);
            let n = keys.min(5000);
            let mut seen: Vec<u64> = (0..n).map(|i| s.fill_order(i)).collect();
            assert!(seen.iter().all(|&k| k < keys));
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len() as u64, n, "{keys} keys");
        }
    }

    #[test]
    fn live_keys_count_bytes_through_overwrites_and_deletes() {
        let live = LiveKeys::new(4, 16);
        live.put(0, 100);
        live.put(1, 50);
        live.put(0, 10);
        assert_eq!(live.bytes(), 16 + 10 + 16 + 50);
        live.delete(1);
        live.delete(2);
        assert_eq!(live.bytes(), 26);
    }
}
