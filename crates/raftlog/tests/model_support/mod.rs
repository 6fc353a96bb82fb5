//! Shared by `model_btreemap.rs` and `crash_unsynced.rs`: a `BTreeMap` model of
//! what the engine holds, batches of changes that apply to both the model and the
//! engine, a reader that takes the engine's whole state out through its public
//! API, and a checker that compares the two through every read path.
//!
//! The model follows the engine's documented semantics, not its code: an append
//! at or below the last index replaces the suffix from there; a batch whose run
//! would leave a gap after the group's last index (as the batch's earlier
//! changes leave the group) is refused as a whole; a group exists while it
//! holds an entry or a key.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the helpers"
)]

use std::collections::BTreeMap;
use std::fmt;

use strata_raftlog::{Config, Engine, Error, LogBatch};

/// The engine configuration both tests use: small files, a low purge threshold,
/// compression of any batch of 512 bytes or more, and a rewrite limit low enough
/// that some lagging groups are rewritten and others reported for compaction.
pub fn small_config() -> Config {
    Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        compression_threshold_bytes: 512,
        purge_rewrite_group_bytes_max: 8 << 10,
        recovery_threads: 2,
        ..Config::default()
    }
}

/// One group's entries and keys.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct GroupState {
    pub entries: BTreeMap<u64, Vec<u8>>,
    pub keys: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl GroupState {
    fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.keys.is_empty()
    }
}

/// The logical content of an engine. Invariant: no group in `groups` is empty.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Model {
    pub groups: BTreeMap<u64, GroupState>,
}

impl fmt::Debug for Model {
    // Entry bytes would drown a failure message: show the shape only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (g, s) in &self.groups {
            let range = match (s.entries.keys().next(), s.entries.keys().next_back()) {
                (Some(a), Some(b)) => format!("{a}..={b}"),
                _ => "-".to_owned(),
            };
            m.entry(g, &format!("entries {range}, {} keys", s.keys.len()));
        }
        m.finish()
    }
}

/// One change to one group, as a caller puts it into a [`LogBatch`].
#[derive(Clone, PartialEq, Eq)]
pub enum Change {
    Entries {
        group: u64,
        first: u64,
        data: Vec<Vec<u8>>,
    },
    Put {
        group: u64,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        group: u64,
        key: Vec<u8>,
    },
    CompactTo {
        group: u64,
        index: u64,
    },
    RemoveGroup {
        group: u64,
    },
}

impl fmt::Debug for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Entries { group, first, data } => {
                write!(
                    f,
                    "Entries(g{group} {first}..={})",
                    first + data.len() as u64 - 1
                )
            }
            Change::Put { group, key, value } => write!(
                f,
                "Put(g{group} {} = {} bytes)",
                String::from_utf8_lossy(key),
                value.len()
            ),
            Change::Delete { group, key } => {
                write!(f, "Delete(g{group} {})", String::from_utf8_lossy(key))
            }
            Change::CompactTo { group, index } => write!(f, "CompactTo(g{group} {index})"),
            Change::RemoveGroup { group } => write!(f, "RemoveGroup(g{group})"),
        }
    }
}

/// Builds the engine batch of `changes`.
pub fn log_batch(changes: &[Change]) -> LogBatch {
    let mut b = LogBatch::new();
    for c in changes {
        match c {
            Change::Entries { group, first, data } => b.add_entries(*group, *first, data),
            Change::Put { group, key, value } => b.put(*group, key, value),
            Change::Delete { group, key } => b.delete(*group, key),
            Change::CompactTo { group, index } => b.compact_to(*group, *index),
            Change::RemoveGroup { group } => b.remove_group(*group),
        }
    }
    b
}

impl Model {
    pub fn first_index(&self, group: u64) -> Option<u64> {
        self.groups.get(&group)?.entries.keys().next().copied()
    }

    pub fn last_index(&self, group: u64) -> Option<u64> {
        self.groups.get(&group)?.entries.keys().next_back().copied()
    }

    pub fn entry_count(&self) -> usize {
        self.groups.values().map(|g| g.entries.len()).sum()
    }

    /// True when the engine must accept `changes`: no entries run starts past
    /// its group's last index + 1, the group taken as the batch's earlier
    /// changes leave it (so a compaction past the end or a removal lets the
    /// entries after it start anywhere: a reset to a snapshot).
    pub fn accepts(&self, changes: &[Change]) -> bool {
        let mut sim = self.clone();
        for (i, c) in changes.iter().enumerate() {
            if let Change::Entries { group, first, .. } = c {
                if sim.last_index(*group).is_some_and(|last| *first > last + 1) {
                    return false;
                }
            }
            sim.apply(&changes[i..=i]);
        }
        true
    }

    /// Applies an accepted batch, change by change.
    pub fn apply(&mut self, changes: &[Change]) {
        for c in changes {
            match c {
                Change::Entries { group, first, data } => {
                    let g = self.groups.entry(*group).or_default();
                    if let Some(&last) = g.entries.keys().next_back() {
                        if *first <= last {
                            g.entries.split_off(first);
                        } else if *first > last + 1 {
                            // Only reachable after a compaction or removal earlier
                            // in the same batch emptied the log: it starts anew.
                            g.entries.clear();
                        }
                    }
                    for (i, d) in data.iter().enumerate() {
                        g.entries.insert(first + i as u64, d.clone());
                    }
                }
                Change::Put { group, key, value } => {
                    self.groups
                        .entry(*group)
                        .or_default()
                        .keys
                        .insert(key.clone(), value.clone());
                }
                Change::Delete { group, key } => {
                    if let Some(g) = self.groups.get_mut(group) {
                        g.keys.remove(key);
                    }
                }
                Change::CompactTo { group, index } => {
                    if let Some(g) = self.groups.get_mut(group) {
                        g.entries = g.entries.split_off(index);
                    }
                }
                Change::RemoveGroup { group } => {
                    self.groups.remove(group);
                }
            }
        }
        self.groups.retain(|_, g| !g.is_empty());
    }

    /// Describes the first difference from `other`, for failure messages.
    pub fn diff(&self, other: &Model) -> String {
        let ids: std::collections::BTreeSet<u64> = self
            .groups
            .keys()
            .chain(other.groups.keys())
            .copied()
            .collect();
        for g in ids {
            let (a, b) = (self.groups.get(&g), other.groups.get(&g));
            let (Some(a), Some(b)) = (a, b) else {
                return format!("group {g}: {:?} vs {:?}", a.is_some(), b.is_some());
            };
            if a.entries.keys().collect::<Vec<_>>() != b.entries.keys().collect::<Vec<_>>() {
                let r = |s: &GroupState| {
                    (
                        s.entries.keys().next().copied(),
                        s.entries.keys().next_back().copied(),
                    )
                };
                return format!("group {g}: entries {:?} vs {:?}", r(a), r(b));
            }
            for (i, e) in &a.entries {
                if b.entries.get(i) != Some(e) {
                    return format!("group {g}: entry {i} differs");
                }
            }
            if a.keys != b.keys {
                let names = |s: &GroupState| {
                    s.keys
                        .iter()
                        .map(|(k, v)| format!("{}({}B)", String::from_utf8_lossy(k), v.len()))
                        .collect::<Vec<_>>()
                };
                return format!("group {g}: keys {:?} vs {:?}", names(a), names(b));
            }
        }
        "no difference".to_owned()
    }
}

/// Takes the engine's whole logical state out through its public API.
pub fn read_state(engine: &Engine) -> Model {
    let mut model = Model::default();
    for g in engine.groups() {
        let mut s = GroupState::default();
        match (engine.first_index(g), engine.last_index(g)) {
            (Some(first), Some(last)) => {
                assert!(first <= last, "group {g}: first {first} > last {last}");
                let got = engine
                    .fetch_entries(g, first, last + 1, usize::MAX)
                    .unwrap_or_else(|e| panic!("group {g}: fetch {first}..={last}: {e}"));
                assert_eq!(got.len() as u64, last + 1 - first, "group {g}: fetch count");
                for (i, e) in got.into_iter().enumerate() {
                    s.entries.insert(first + i as u64, e);
                }
            }
            (None, None) => {}
            other => panic!("group {g}: first/last index disagree: {other:?}"),
        }
        s.keys = engine.scan_keys(g).into_iter().collect();
        assert!(
            !s.is_empty(),
            "groups() lists group {g}, which holds nothing"
        );
        model.groups.insert(g, s);
    }
    model
}

/// What `fetch_entries(.., max_bytes)` returns for `entries`: at least one, then
/// as many more as keep the total within `max_bytes`.
fn expected_fetch(entries: &[&Vec<u8>], max_bytes: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut bytes = 0;
    for e in entries {
        if !out.is_empty() && bytes + e.len() > max_bytes {
            break;
        }
        bytes += e.len();
        out.push((*e).clone());
    }
    out
}

/// Asserts that every read path of `engine` agrees with `model`: `groups()`,
/// first and last index, `get_entry` of each entry (or of every `stride`-th
/// one) and just outside the range, `fetch_entries` over the whole range, with a
/// byte limit, and out of range, `scan_keys` and `get`. `probe` lists groups to
/// check even if the model has no such group.
pub fn check_engine(engine: &Engine, model: &Model, probe: &[u64], stride: usize, ctx: &str) {
    let ids: Vec<u64> = model.groups.keys().copied().collect();
    assert_eq!(engine.groups(), ids, "{ctx}: groups()");
    let mut all: std::collections::BTreeSet<u64> = ids.iter().copied().collect();
    all.extend(probe);
    for g in all {
        let Some(s) = model.groups.get(&g) else {
            assert_eq!(engine.first_index(g), None, "{ctx}: g{g} first_index");
            assert_eq!(engine.last_index(g), None, "{ctx}: g{g} last_index");
            assert!(engine.scan_keys(g).is_empty(), "{ctx}: g{g} scan_keys");
            assert_eq!(
                engine.get_entry(g, 1).unwrap(),
                None,
                "{ctx}: g{g} get_entry"
            );
            assert!(
                matches!(
                    engine.fetch_entries(g, 1, 2, usize::MAX),
                    Err(Error::Unavailable { .. })
                ),
                "{ctx}: g{g} fetch from a missing group"
            );
            continue;
        };
        let first = s.entries.keys().next().copied();
        let last = s.entries.keys().next_back().copied();
        assert_eq!(engine.first_index(g), first, "{ctx}: g{g} first_index");
        assert_eq!(engine.last_index(g), last, "{ctx}: g{g} last_index");
        if let (Some(first), Some(last)) = (first, last) {
            let want: Vec<&Vec<u8>> = s.entries.values().collect();
            let got = engine
                .fetch_entries(g, first, last + 1, usize::MAX)
                .unwrap_or_else(|e| panic!("{ctx}: g{g} fetch {first}..={last}: {e}"));
            assert!(
                got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| a == *b),
                "{ctx}: g{g} fetch_entries {first}..={last} differs"
            );
            for (k, (i, e)) in s.entries.iter().enumerate() {
                if k % stride == 0 || *i == last {
                    let got = engine
                        .get_entry(g, *i)
                        .unwrap_or_else(|err| panic!("{ctx}: g{g} get_entry {i}: {err}"));
                    assert!(got.as_ref() == Some(e), "{ctx}: g{g} get_entry {i} differs");
                }
            }
            // A byte limit stops the fetch after a prefix.
            let limit = want.iter().take(3).map(|e| e.len()).sum::<usize>();
            let got = engine.fetch_entries(g, first, last + 1, limit).unwrap();
            assert_eq!(
                got,
                expected_fetch(&want, limit),
                "{ctx}: g{g} limited fetch"
            );
            // A sub-range from the middle.
            let mid = first + (last - first) / 2;
            let got = engine.fetch_entries(g, mid, last + 1, usize::MAX).unwrap();
            assert_eq!(
                got.len() as u64,
                last + 1 - mid,
                "{ctx}: g{g} fetch from {mid}"
            );
            assert!(got[0] == *s.entries[&mid], "{ctx}: g{g} fetch from {mid}");
            // Just outside the range.
            assert_eq!(engine.get_entry(g, last + 1).unwrap(), None, "{ctx}: g{g}");
            assert!(
                matches!(
                    engine.fetch_entries(g, first, last + 2, usize::MAX),
                    Err(Error::Unavailable { .. })
                ),
                "{ctx}: g{g} fetch past the last index"
            );
            if first > 1 {
                assert_eq!(engine.get_entry(g, first - 1).unwrap(), None, "{ctx}: g{g}");
                assert!(
                    matches!(
                        engine.fetch_entries(g, first - 1, last + 1, usize::MAX),
                        Err(Error::Compacted { first: f, .. }) if f == first
                    ),
                    "{ctx}: g{g} fetch below the first index"
                );
            }
        } else {
            assert_eq!(
                engine.get_entry(g, 1).unwrap(),
                None,
                "{ctx}: g{g} get_entry"
            );
        }
        let keys: Vec<(Vec<u8>, Vec<u8>)> =
            s.keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(engine.scan_keys(g) == keys, "{ctx}: g{g} scan_keys differ");
        for (k, v) in &s.keys {
            assert!(engine.get(g, k).as_ref() == Some(v), "{ctx}: g{g} get");
        }
        assert_eq!(
            engine.get(g, b"no-such-key"),
            None,
            "{ctx}: g{g} get missing"
        );
    }
}

/// Returns the first `k` such that `base` with `writes[..k]` applied equals
/// `recovered`, searching `k` from `min` up.
pub fn find_prefix(
    base: &Model,
    writes: &[Vec<Change>],
    min: usize,
    recovered: &Model,
) -> Option<usize> {
    let mut state = base.clone();
    for k in 0..=writes.len() {
        if k >= min && state == *recovered {
            return Some(k);
        }
        if let Some(w) = writes.get(k) {
            state.apply(w);
        }
    }
    None
}

/// Explains why no prefix matched: the difference from the last acceptable
/// prefix and from the full sequence.
pub fn explain_no_prefix(
    base: &Model,
    writes: &[Vec<Change>],
    min: usize,
    recovered: &Model,
) -> String {
    let mut state = base.clone();
    let mut lines = Vec::new();
    for k in 0..=writes.len() {
        if k >= min {
            lines.push(format!("  prefix {k}: {}", state.diff(recovered)));
        }
        if let Some(w) = writes.get(k) {
            state.apply(w);
        }
    }
    let shown = lines.len().min(12);
    format!(
        "recovered {recovered:?} matches no prefix of {} writes (at least {min}):\n{}\nwrites: {:?}",
        writes.len(),
        lines[lines.len() - shown..].join("\n"),
        &writes[min.saturating_sub(1).min(writes.len())..]
    )
}

/// A SplitMix64 step: payloads and choices derived from a seed replay exactly.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Returns `len` bytes derived from `seed`: three seeds in four (by the low two
/// bits of their hash) give text-like, compressible bytes (a short phrase
/// repeated), the fourth random bytes.
pub fn payload(seed: u64, len: usize) -> Vec<u8> {
    let h = mix(seed);
    if h & 3 == 0 {
        noise(h, len)
    } else {
        let phrase = format!("entry-{:x}-{}|", h >> 40, "abc".repeat((h % 5) as usize));
        phrase.bytes().cycle().take(len).collect()
    }
}

/// Returns `len` incompressible bytes derived from `seed`.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = mix(s);
            s as u8
        })
        .collect()
}
