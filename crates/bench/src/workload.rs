//! The shared generator: what every entry and state value holds, how long it
//! is, and which groups each writer owns.
//!
//! Every byte is a pure function of `(group, index)`, so verification can
//! recompute what a group should hold without keeping a copy, and two runs
//! (or two engines) write exactly the same data.
//!
//! An entry is half pseudo-random bytes and half a repeated 8-byte motif, so
//! it compresses to roughly half, like the mix of protobuf headers and user
//! values a real Raft log holds.

use std::fmt;
use std::str::FromStr;

use crate::engines::GroupAppend;

/// Length of the state value put with every append (a Raft hard state is a
/// few dozen bytes).
pub const STATE_BYTES: usize = 64;

/// How long each entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntrySizes {
    /// Every entry has this many bytes.
    Fixed(usize),
    /// Lengths spread evenly over `min..=max`, chosen by `(group, index)`.
    Uniform {
        /// Shortest entry.
        min: usize,
        /// Longest entry.
        max: usize,
    },
}

impl EntrySizes {
    /// Returns the length of entry `index` of `group`.
    pub fn len(self, group: u64, index: u64) -> usize {
        match self {
            EntrySizes::Fixed(n) => n,
            EntrySizes::Uniform { min, max } => {
                let span = (max - min) as u64 + 1;
                min + (mix(group.rotate_left(17) ^ index ^ SIZE_SEED) % span) as usize
            }
        }
    }
}

impl fmt::Display for EntrySizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntrySizes::Fixed(n) => write!(f, "{n} B"),
            EntrySizes::Uniform { min, max } => write!(f, "{min}..={max} B"),
        }
    }
}

impl FromStr for EntrySizes {
    type Err = String;

    /// Parses `min:max` (bytes, with optional K/M suffixes).
    fn from_str(s: &str) -> Result<Self, String> {
        let (min, max) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not min:max"))?;
        let min = crate::units::parse_bytes(min)? as usize;
        let max = crate::units::parse_bytes(max)? as usize;
        if min > max {
            return Err(format!("{s:?}: min is above max"));
        }
        Ok(EntrySizes::Uniform { min, max })
    }
}

/// What a writer knows about one of its groups: the live entries are
/// `first..=last` (none when `last < first`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLog {
    /// The group.
    pub group: u64,
    /// Index of the oldest live entry.
    pub first: u64,
    /// Index of the newest entry.
    pub last: u64,
}

impl GroupLog {
    /// A group with no entry yet.
    pub fn empty(group: u64) -> Self {
        GroupLog {
            group,
            first: 1,
            last: 0,
        }
    }

    /// Returns how many entries are live.
    pub fn live(&self) -> u64 {
        (self.last + 1).saturating_sub(self.first)
    }
}

/// Returns the groups writer `writer` of `writers` owns: every `writers`-th
/// group, so that each writer's groups interleave with the others' on disk as
/// TiKV's regions do. Groups are numbered from 1.
pub fn owned_groups(groups: u64, writers: usize, writer: usize) -> Vec<u64> {
    (1..=groups)
        .filter(|g| (g - 1) % writers as u64 == writer as u64)
        .collect()
}

/// Returns entry `index` of `group`, `len` bytes long.
pub fn entry(group: u64, index: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut state = mix(group.wrapping_mul(GOLDEN) ^ mix(index ^ ENTRY_SEED));
    let random = len / 2;
    while out.len() < random {
        state = state.wrapping_add(GOLDEN);
        let word = mix(state).to_le_bytes();
        let take = (random - out.len()).min(8);
        out.extend_from_slice(&word[..take]);
    }
    // The compressible half repeats one 8-byte motif; whole words are copied at
    // once because this runs for every entry and competes with the engines for CPU.
    let motif = mix(state ^ MOTIF_SEED).to_le_bytes();
    let rest = len - random;
    for _ in 0..rest / 8 {
        out.extend_from_slice(&motif);
    }
    out.extend_from_slice(&motif[..rest % 8]);
    out
}

/// Returns the state value of `group` after an append that ends at `last`:
/// the group, the last index and a term, padded to [`STATE_BYTES`].
pub fn state(group: u64, last: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(STATE_BYTES);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&last.to_le_bytes());
    out.extend_from_slice(&(last / 1000 + 1).to_le_bytes());
    let pad = mix(group ^ last.rotate_left(29)).to_le_bytes();
    out.extend((0..STATE_BYTES - out.len()).map(|i| pad[i % 8]));
    out
}

/// Returns the append of `count` new entries to `log`, without changing `log`.
pub fn next_append(log: &GroupLog, count: usize, sizes: EntrySizes) -> GroupAppend {
    let first_index = log.last + 1;
    let entries = (0..count as u64)
        .map(|i| {
            let index = first_index + i;
            entry(log.group, index, sizes.len(log.group, index))
        })
        .collect();
    GroupAppend {
        group: log.group,
        first_index,
        entries,
        state: state(log.group, log.last + count as u64),
    }
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
const ENTRY_SEED: u64 = 0x5354_5241_5441_0001;
const MOTIF_SEED: u64 = 0x5354_5241_5441_0002;
const SIZE_SEED: u64 = 0x5354_5241_5441_0003;

/// SplitMix64's finalizer: a cheap, well-mixed hash of a 64-bit value.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_deterministic_distinct_and_sized() {
        assert_eq!(entry(3, 7, 1024), entry(3, 7, 1024));
        assert_ne!(entry(3, 7, 1024), entry(3, 8, 1024));
        assert_ne!(entry(3, 7, 1024), entry(4, 7, 1024));
        for len in [0, 1, 7, 8, 9, 1023, 1024] {
            assert_eq!(entry(1, 1, len).len(), len);
        }
        assert_eq!(state(5, 9).len(), STATE_BYTES);
        assert_ne!(state(5, 9), state(5, 10));
    }

    #[test]
    fn sizes_stay_in_range_and_spread() {
        let sizes: EntrySizes = "100:200".parse().unwrap();
        let lens: Vec<usize> = (0..1000).map(|i| sizes.len(1, i)).collect();
        assert!(lens.iter().all(|l| (100..=200).contains(l)));
        assert!(lens.iter().any(|&l| l < 120) && lens.iter().any(|&l| l > 180));
        assert!("2:1".parse::<EntrySizes>().is_err());
        assert!("12".parse::<EntrySizes>().is_err());
    }

    #[test]
    fn writers_own_disjoint_groups_covering_all() {
        let mut all: Vec<u64> = (0..3).flat_map(|w| owned_groups(10, 3, w)).collect();
        all.sort_unstable();
        assert_eq!(all, (1..=10).collect::<Vec<_>>());
    }
}
