//! A bloom filter over a whole file's user keys (or their fixed-length
//! prefixes): a point lookup for a key the file lacks is answered without
//! reading an index partition or a data block, most of the time.
//!
//! ```text
//! filter = { u8 scheme = 1 | u8 num_probes | u32 num_bits | bits[ceil(num_bits / 8)] }
//! ```
//!
//! Scheme 1: `h = xxh3_64(key)`, `h1 = low 32 bits`, `h2 = high 32 bits`;
//! probe `i` (0-based) sets bit `(h1 + i * h2) mod num_bits` (Kirsch and
//! Mitzenmacher's double hashing: two hashes give the false-positive rate of
//! `k` independent ones). Bit `b` is bit `b % 8` of byte `b / 8`. xxh3 is
//! fast on short keys and well distributed; its output is frozen by its spec,
//! so files stay readable across crate versions.
//!
//! Invariants:
//! - `1 <= num_probes <= 30`, `num_bits >= 1`, and the bit array is exactly
//!   `ceil(num_bits / 8)` bytes; [`BloomFilter::decode`] refuses anything else.
//! - A key added is always reported as possibly present (no false negatives).

use strata_codec::{DecodeError, Reader};
use xxhash_rust::xxh3::xxh3_64;

/// The hashing scheme tag (on disk).
pub const SCHEME_XXH3_DOUBLE: u8 = 1;

/// The most probes a filter may ask for.
pub const MAX_PROBES: u8 = 30;

const HEADER_LEN: usize = 6;

/// Collects key hashes while a file is written.
#[derive(Debug)]
pub struct FilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl FilterBuilder {
    /// A builder spending `bits_per_key` bits per distinct key (at least 1).
    pub fn new(bits_per_key: u32) -> FilterBuilder {
        FilterBuilder {
            bits_per_key: bits_per_key.max(1),
            hashes: Vec::new(),
        }
    }

    /// Adds a key. Consecutive duplicates (versions of one key) count once.
    pub fn add(&mut self, key: &[u8]) {
        let h = xxh3_64(key);
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    /// Keys (hashes) added so far.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// True when no key was added.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The filter's bytes.
    pub fn finish(&self) -> Vec<u8> {
        // k = bits_per_key * ln 2 minimises the false-positive rate.
        let probes = ((self.bits_per_key as f64) * 0.69).round() as u8;
        let probes = probes.clamp(1, MAX_PROBES);
        let num_bits = (self.hashes.len() as u64 * self.bits_per_key as u64).max(64);
        let mut bits = vec![0u8; num_bits.div_ceil(8) as usize];
        for &h in &self.hashes {
            for bit in probes_of(h, probes, num_bits) {
                bits[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        let mut out = Vec::with_capacity(HEADER_LEN + bits.len());
        out.push(SCHEME_XXH3_DOUBLE);
        out.push(probes);
        out.extend_from_slice(&(num_bits as u32).to_le_bytes());
        out.extend_from_slice(&bits);
        out
    }
}

fn probes_of(h: u64, probes: u8, num_bits: u64) -> impl Iterator<Item = u64> {
    let h1 = h & 0xffff_ffff;
    let h2 = h >> 32;
    (0..probes as u64).map(move |i| (h1 + i * h2) % num_bits)
}

/// A decoded filter.
#[derive(Debug, Clone)]
pub struct BloomFilter {
    bits: Vec<u8>,
    num_bits: u64,
    probes: u8,
}

impl BloomFilter {
    /// Validates a filter's bytes.
    pub fn decode(data: &[u8]) -> Result<BloomFilter, DecodeError> {
        let mut r = Reader::new(data);
        let scheme = r.u8()?;
        if scheme != SCHEME_XXH3_DOUBLE {
            return Err(DecodeError::invalid(
                "filter scheme",
                0,
                format!("{scheme}"),
            ));
        }
        let probes = r.u8()?;
        if probes == 0 || probes > MAX_PROBES {
            return Err(DecodeError::invalid(
                "filter probes",
                1,
                format!("{probes}"),
            ));
        }
        let num_bits = r.u32()? as u64;
        if num_bits == 0 || r.remaining() as u64 != num_bits.div_ceil(8) {
            return Err(DecodeError::invalid(
                "filter size",
                2,
                format!("{num_bits} bits in {} bytes", r.remaining()),
            ));
        }
        Ok(BloomFilter {
            bits: data[HEADER_LEN..].to_vec(),
            num_bits,
            probes,
        })
    }

    /// False when `key` was certainly not added; true when it may have been.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        probes_of(xxh3_64(key), self.probes, self.num_bits)
            .all(|bit| self.bits[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }

    /// Bytes of the bit array.
    pub fn len(&self) -> usize {
        self.bits.len()
    }

    /// True when the bit array is empty (never, for a decoded filter).
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let mut b = FilterBuilder::new(10);
        for i in 0..10_000u32 {
            b.add(format!("key{i}").as_bytes());
        }
        let f = BloomFilter::decode(&b.finish()).unwrap();
        for i in 0..10_000u32 {
            assert!(f.may_contain(format!("key{i}").as_bytes()));
        }
        let fp = (0..10_000u32)
            .filter(|i| f.may_contain(format!("other{i}").as_bytes()))
            .count();
        // 10 bits per key with 7 probes: about 0.8% in theory.
        assert!(fp < 200, "{fp} false positives in 10000");
    }

    #[test]
    fn empty_filter_and_bad_headers() {
        let f = BloomFilter::decode(&FilterBuilder::new(10).finish()).unwrap();
        assert!(!f.may_contain(b"x"));
        let good = FilterBuilder::new(10).finish();
        for (at, v) in [(0, 2u8), (1, 0), (1, 31), (2, 0)] {
            let mut bad = good.clone();
            bad[at] = v;
            assert!(BloomFilter::decode(&bad).is_err(), "byte {at} = {v}");
        }
        assert!(BloomFilter::decode(&good[..good.len() - 1]).is_err());
    }
}
