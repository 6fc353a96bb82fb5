//! The shared generator: what every entry and state value holds, how long it
//! is, which groups each writer owns, and in what order a writer picks them.
//!
//! Every byte is a pure function of `(group, index)`, so verification can
//! recompute what a group should hold without keeping a copy, and two runs
//! (or two engines) write exactly the same data.
//!
//! Group choices come from a per-writer [`SplitMix`] stream with a fixed seed,
//! so every engine sees the same sequence of batches from each writer.
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
    /// Lengths whose logarithm spreads evenly over `ln min..=ln max`: as many
    /// entries between 64 B and 128 B as between 32 KiB and 64 KiB, the mix of
    /// small proposals and large batched writes a real Raft log carries.
    LogUniform {
        /// Shortest entry, at least 1.
        min: usize,
        /// Longest entry.
        max: usize,
    },
}

/// What `--entry-bytes mixed` means: log-uniform from 64 B to 64 KiB.
pub const MIXED: EntrySizes = EntrySizes::LogUniform {
    min: 64,
    max: 64 << 10,
};

impl EntrySizes {
    /// Returns the length of entry `index` of `group`.
    pub fn len(self, group: u64, index: u64) -> usize {
        match self {
            EntrySizes::Fixed(n) => n,
            EntrySizes::Uniform { min, max } => {
                let span = (max - min) as u64 + 1;
                min + (mix(group.rotate_left(17) ^ index ^ SIZE_SEED) % span) as usize
            }
            EntrySizes::LogUniform { min, max } => {
                let u = unit_f64(mix(group.rotate_left(17) ^ index ^ SIZE_SEED));
                let (lo, hi) = ((min as f64).ln(), (max as f64 + 1.0).ln());
                ((lo + u * (hi - lo)).exp() as usize).clamp(min, max)
            }
        }
    }

    /// Returns the shortest and the longest length.
    pub fn bounds(self) -> (usize, usize) {
        match self {
            EntrySizes::Fixed(n) => (n, n),
            EntrySizes::Uniform { min, max } | EntrySizes::LogUniform { min, max } => (min, max),
        }
    }
}

impl fmt::Display for EntrySizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntrySizes::Fixed(n) => write!(f, "{n} B"),
            EntrySizes::Uniform { min, max } => write!(f, "{min}..={max} B"),
            EntrySizes::LogUniform { min, max } => write!(f, "{min}..={max} B log-uniform"),
        }
    }
}

impl FromStr for EntrySizes {
    type Err = String;

    /// Parses `min:max` (uniform) or `log:min:max` (log-uniform), bytes with
    /// optional K/M suffixes.
    fn from_str(s: &str) -> Result<Self, String> {
        let (log, range) = match s.strip_prefix("log:") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (min, max) = range
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not min:max or log:min:max"))?;
        let min = crate::units::parse_bytes(min)? as usize;
        let max = crate::units::parse_bytes(max)? as usize;
        if min > max {
            return Err(format!("{s:?}: min is above max"));
        }
        if log && min == 0 {
            return Err(format!(
                "{s:?}: a log-uniform range starts at 1 byte or more"
            ));
        }
        Ok(if log {
            EntrySizes::LogUniform { min, max }
        } else {
            EntrySizes::Uniform { min, max }
        })
    }
}

/// Parses `--entry-bytes`: a byte count, or `mixed` ([`MIXED`]).
pub fn parse_entry_bytes(s: &str) -> Result<EntrySizes, String> {
    if s.eq_ignore_ascii_case("mixed") {
        return Ok(MIXED);
    }
    crate::units::parse_bytes(s)
        .map(|n| EntrySizes::Fixed(n as usize))
        .map_err(|e| format!("{e}, or mixed (64 B to 64 KiB, log-uniform)"))
}

/// How a writer chooses the groups of its next batch among its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GroupSkew {
    /// In turn, so that every group advances at the same pace, as TiKV's busy
    /// regions do.
    RoundRobin,
    /// At random, each group as likely as any other.
    Uniform,
    /// At random, the group of popularity rank k (1 = hottest) with a
    /// probability proportional to 1 / k^s: a few hot regions and a long
    /// tail of nearly idle ones. The ranks are scattered over the group ids.
    Zipf(f64),
}

impl fmt::Display for GroupSkew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupSkew::RoundRobin => write!(f, "round-robin"),
            GroupSkew::Uniform => write!(f, "uniform"),
            GroupSkew::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

impl FromStr for GroupSkew {
    type Err = String;

    /// Parses `round-robin`, `uniform` or `zipf:S` (S above 0, e.g. 0.99).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "round-robin" => Ok(GroupSkew::RoundRobin),
            "uniform" => Ok(GroupSkew::Uniform),
            _ => {
                let exponent = s
                    .strip_prefix("zipf:")
                    .ok_or_else(|| format!("{s:?} is not round-robin, uniform or zipf:S"))?;
                match exponent.parse::<f64>() {
                    Ok(e) if e > 0.0 && e.is_finite() => Ok(GroupSkew::Zipf(e)),
                    _ => Err(format!("{s:?}: the Zipf exponent must be a number above 0")),
                }
            }
        }
    }
}

/// Picks the groups of each batch for one writer, as [`GroupSkew`] says.
/// Positions index the writer's own list of groups.
#[derive(Debug, Clone)]
pub struct GroupPicker {
    skew: GroupSkew,
    groups: usize,
    rng: SplitMix,
    /// Round robin: the next position.
    cursor: usize,
    /// Zipf: cumulative probability of ranks 1..=k at `cdf[k - 1]`.
    cdf: Vec<f64>,
    /// Zipf: the position of each rank.
    rank_to_position: Vec<usize>,
}

/// Draws per batch slot before a skewed picker gives up on finding a group
/// not yet in the batch and takes the next free one in turn.
const DRAWS_PER_SLOT_MAX: usize = 64;

impl GroupPicker {
    /// A picker over `groups` groups for writer `writer`.
    pub fn new(skew: GroupSkew, groups: usize, writer: usize) -> GroupPicker {
        let mut rng = SplitMix::new(PICK_SEED ^ (writer as u64).wrapping_mul(GOLDEN));
        let (cdf, rank_to_position) = match skew {
            GroupSkew::Zipf(s) => {
                let mut total = 0.0;
                let mut cdf: Vec<f64> = (1..=groups)
                    .map(|k| {
                        total += (k as f64).powf(-s);
                        total
                    })
                    .collect();
                for c in &mut cdf {
                    *c /= total;
                }
                let mut ranks: Vec<usize> = (0..groups).collect();
                for i in (1..groups).rev() {
                    ranks.swap(i, (rng.next() % (i as u64 + 1)) as usize);
                }
                (cdf, ranks)
            }
            _ => (Vec::new(), Vec::new()),
        };
        GroupPicker {
            skew,
            groups,
            rng,
            cursor: 0,
            cdf,
            rank_to_position,
        }
    }

    /// Fills `out` with `count` distinct positions (at most the number of
    /// groups): a writer never puts a group twice in one batch.
    pub fn pick(&mut self, count: usize, out: &mut Vec<usize>) {
        out.clear();
        let count = count.min(self.groups);
        if self.skew == GroupSkew::RoundRobin {
            for _ in 0..count {
                out.push(self.cursor);
                self.cursor = (self.cursor + 1) % self.groups;
            }
            return;
        }
        let mut draws = 0;
        while out.len() < count && draws < DRAWS_PER_SLOT_MAX * count {
            draws += 1;
            let p = self.draw();
            if !out.contains(&p) {
                out.push(p);
            }
        }
        // Only a tiny writer with a steep skew gets here.
        while out.len() < count {
            if !out.contains(&self.cursor) {
                out.push(self.cursor);
            }
            self.cursor = (self.cursor + 1) % self.groups;
        }
    }

    fn draw(&mut self) -> usize {
        let u = unit_f64(self.rng.next());
        match self.skew {
            GroupSkew::Zipf(_) => {
                let rank = self.cdf.partition_point(|&c| c <= u).min(self.groups - 1);
                self.rank_to_position[rank]
            }
            _ => (u * self.groups as f64) as usize % self.groups,
        }
    }
}

/// SplitMix64: a small, fast, seedable generator, plenty for picking groups.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// Returns the next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }
}

/// Maps 64 random bits to a float in [0, 1).
fn unit_f64(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
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

/// Returns entry `index` of `group`, `len` bytes long: its first half
/// random words, its second one 8-byte motif repeated (about 2:1
/// compressible).
///
/// Written straight into a buffer of its final size, the motif doubled in
/// place: this runs for every write and competes with the engines for the
/// CPU (2.7 us of a 16 KiB write's 18 us on the writer thread, built word
/// by word into a growing vector).
pub fn entry(group: u64, index: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut state = mix(group.wrapping_mul(GOLDEN) ^ mix(index ^ ENTRY_SEED));
    let random = len / 2;
    let (head, tail) = out.split_at_mut(random);
    let mut words = head.chunks_exact_mut(8);
    for word in &mut words {
        state = state.wrapping_add(GOLDEN);
        word.copy_from_slice(&mix(state).to_le_bytes());
    }
    let rest = words.into_remainder();
    if !rest.is_empty() {
        state = state.wrapping_add(GOLDEN);
        let n = rest.len();
        rest.copy_from_slice(&mix(state).to_le_bytes()[..n]);
    }
    let motif = mix(state ^ MOTIF_SEED).to_le_bytes();
    let first = tail.len().min(8);
    tail[..first].copy_from_slice(&motif[..first]);
    let mut filled = first;
    while filled < tail.len() {
        let n = filled.min(tail.len() - filled);
        tail.copy_within(..n, filled);
        filled += n;
    }
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
const PICK_SEED: u64 = 0x5354_5241_5441_0004;

/// SplitMix64's finalizer: a cheap, well-mixed hash of a 64-bit value.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes every earlier measurement wrote, built word by word.
    fn entry_as_first_written(group: u64, index: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut state = mix(group.wrapping_mul(GOLDEN) ^ mix(index ^ ENTRY_SEED));
        let random = len / 2;
        while out.len() < random {
            state = state.wrapping_add(GOLDEN);
            let word = mix(state).to_le_bytes();
            let take = (random - out.len()).min(8);
            out.extend_from_slice(&word[..take]);
        }
        let motif = mix(state ^ MOTIF_SEED).to_le_bytes();
        let rest = len - random;
        for _ in 0..rest / 8 {
            out.extend_from_slice(&motif);
        }
        out.extend_from_slice(&motif[..rest % 8]);
        out
    }

    /// Results measured before the faster build stay comparable: the same
    /// bytes for every length.
    #[test]
    fn entries_are_the_bytes_they_always_were() {
        for len in (0..80).chain([511, 512, 1000, 1024, 4097, 16384, 16385, 65536]) {
            for (g, i) in [(0, 0), (1, 1), (7, 12_345), (u64::MAX, 3)] {
                assert_eq!(
                    entry(g, i, len),
                    entry_as_first_written(g, i, len),
                    "len {len}"
                );
            }
        }
    }

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
    fn log_uniform_sizes_cover_every_octave_alike() {
        let sizes = parse_entry_bytes("mixed").unwrap();
        assert_eq!(sizes, MIXED);
        assert_eq!(
            "log:1K:4K".parse::<EntrySizes>().unwrap(),
            EntrySizes::LogUniform {
                min: 1024,
                max: 4096
            }
        );
        assert!("log:0:4K".parse::<EntrySizes>().is_err());
        assert_eq!(
            parse_entry_bytes("16K").unwrap(),
            EntrySizes::Fixed(16 << 10)
        );
        // 64 B to 64 KiB is ten octaves: each should get about a tenth.
        let mut octaves = [0u32; 10];
        for i in 0..100_000 {
            let len = sizes.len(i % 97, i);
            assert!((64..=64 << 10).contains(&len));
            octaves[((len as f64 / 64.0).log2() as usize).min(9)] += 1;
        }
        for (o, n) in octaves.iter().enumerate() {
            assert!((8_000..12_000).contains(n), "octave {o}: {n} of 100,000");
        }
    }

    #[test]
    fn pickers_choose_distinct_groups_with_the_asked_skew() {
        assert_eq!("zipf:0.99".parse::<GroupSkew>(), Ok(GroupSkew::Zipf(0.99)));
        assert!("zipf:0".parse::<GroupSkew>().is_err());
        assert!("zipf".parse::<GroupSkew>().is_err());
        let mut out = Vec::new();
        let mut rr = GroupPicker::new(GroupSkew::RoundRobin, 5, 0);
        rr.pick(3, &mut out);
        assert_eq!(out, [0, 1, 2]);
        rr.pick(3, &mut out);
        assert_eq!(out, [3, 4, 0]);

        let groups = 10_000;
        let mut counts = vec![0u32; groups];
        let mut zipf = GroupPicker::new(GroupSkew::Zipf(0.99), groups, 0);
        for _ in 0..10_000 {
            zipf.pick(16, &mut out);
            let mut sorted = out.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 16, "a batch holds a group twice");
            for &p in &out {
                counts[p] += 1;
            }
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top_1pct: u32 = counts[..groups / 100].iter().sum();
        let total: u32 = counts.iter().sum();
        // Zipf 0.99 over 10,000 ranks puts about half the weight on the top 1%;
        // distinct groups per batch flatten the head a little.
        assert!(
            top_1pct * 100 / total > 35,
            "top 1% got {top_1pct} of {total}"
        );
        assert!(counts[groups / 2] < counts[0] / 50);
        // Same writer, same choices: every engine gets the same batches.
        let mut again = GroupPicker::new(GroupSkew::Zipf(0.99), groups, 0);
        let mut first = Vec::new();
        again.pick(16, &mut first);
        let mut fresh = GroupPicker::new(GroupSkew::Zipf(0.99), groups, 0);
        fresh.pick(16, &mut out);
        assert_eq!(first, out);

        // A steep skew over a few groups still fills the batch.
        let mut tiny = GroupPicker::new(GroupSkew::Zipf(3.0), 4, 1);
        tiny.pick(4, &mut out);
        out.sort_unstable();
        assert_eq!(out, [0, 1, 2, 3]);
    }

    #[test]
    fn writers_own_disjoint_groups_covering_all() {
        let mut all: Vec<u64> = (0..3).flat_map(|w| owned_groups(10, 3, w)).collect();
        all.sort_unstable();
        assert_eq!(all, (1..=10).collect::<Vec<_>>());
    }
}
