//! Shared helpers of the fault-injection tests (`fault_*.rs`): a workload whose
//! expected state is known after every batch, a model that replays batches the
//! way recovery does, and raw access to the engine's files.
//!
//! The model is written from the documented semantics (Raft suffix replacement,
//! a gap restarts a group's log, compaction, keys), not from the engine's code,
//! so a test comparing the two can fail.

#![allow(dead_code, reason = "each fault test binary uses a different subset")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_fs::FileSystem;
use strata_raftlog::reader::{scan_file, FileScan};
use strata_raftlog::{Config, Engine, LogBatch, RecoveryMode, Result};

/// The engine directory every fault test uses.
pub const DIR: &str = "/db";

/// The three recovery modes, strictest first.
pub const MODES: [RecoveryMode; 3] = [
    RecoveryMode::AbsoluteConsistency,
    RecoveryMode::TolerateTailCorruption,
    RecoveryMode::TolerateAnyCorruption,
];

/// Small files (the minimum target size) and compression from 128 bytes, so
/// that a few hundred kilobytes of data span several files and mix codecs.
pub fn config(mode: RecoveryMode) -> Config {
    Config {
        target_file_size_bytes: 64 << 10,
        compression_threshold_bytes: 128,
        purge_threshold_bytes: 1 << 20,
        recovery_mode: mode,
        recovery_threads: 2,
        ..Config::default()
    }
}

/// Opens the engine in [`DIR`], turning a panic into an `Err` message that
/// names `case`, so a sweep reports which fault made the engine panic.
pub fn open(fs: Arc<dyn FileSystem>, config: Config, case: &str) -> Result<Engine> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Engine::open_with_fs(DIR, config, fs)
    })) {
        Ok(r) => r,
        Err(_) => panic!("{case}: Engine::open panicked"),
    }
}

/// Returns the path of `name` inside [`DIR`], spelt as the engine spells it.
pub fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

/// Returns the names of the append queue's files, oldest first.
pub fn append_files(fs: &dyn FileSystem) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".raftlog") && !n.starts_with("recycle-"))
        .collect();
    names.sort();
    names
}

/// Reads a whole file of [`DIR`].
pub fn read_file(fs: &dyn FileSystem, name: &str) -> Vec<u8> {
    let f = fs.open(&path(name), false).unwrap();
    let mut bytes = vec![0u8; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut bytes).unwrap();
    bytes
}

/// Overwrites bytes of a file of [`DIR`] at rest (written and synced).
pub fn overwrite(fs: &dyn FileSystem, name: &str, offset: u64, data: &[u8]) {
    let f = fs.open(&path(name), true).unwrap();
    f.write_at(offset, data).unwrap();
    f.sync_all().unwrap();
}

/// Scans a file's bytes with the engine's own decoder; only used on undamaged
/// files, to learn where the records are.
pub fn scan(bytes: &[u8]) -> FileScan {
    scan_file(bytes).expect("an undamaged file has a valid header")
}

/// One change in a batch.
#[derive(Clone, Debug)]
pub enum Change {
    /// Entries from `first` on.
    Entries {
        /// The group.
        group: u64,
        /// Index of the first entry.
        first: u64,
        /// The entries' bytes.
        data: Vec<Vec<u8>>,
    },
    /// Sets a key.
    Put {
        /// The group.
        group: u64,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Deletes a key.
    Delete {
        /// The group.
        group: u64,
        /// The key.
        key: Vec<u8>,
    },
    /// Drops entries below `index`.
    CompactTo {
        /// The group.
        group: u64,
        /// The new first index.
        index: u64,
    },
}

/// A batch as the test remembers it, to rebuild a `LogBatch` or replay it.
#[derive(Clone, Debug, Default)]
pub struct BatchSpec(pub Vec<Change>);

impl BatchSpec {
    /// Builds the `LogBatch` that writes these changes.
    pub fn to_batch(&self) -> LogBatch {
        let mut b = LogBatch::new();
        for c in &self.0 {
            match c {
                Change::Entries { group, first, data } => b.add_entries(*group, *first, data),
                Change::Put { group, key, value } => b.put(*group, key, value),
                Change::Delete { group, key } => b.delete(*group, key),
                Change::CompactTo { group, index } => b.compact_to(*group, *index),
            }
        }
        b
    }
}

/// What one group should hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupModel {
    /// Live entries; the keys are contiguous.
    pub entries: BTreeMap<u64, Vec<u8>>,
    /// Keys and values.
    pub kvs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// What the engine should hold after a sequence of batches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// Non-empty groups.
    pub groups: BTreeMap<u64, GroupModel>,
}

impl Model {
    /// Returns the model after replaying `batches` in order.
    pub fn replay<'a>(batches: impl IntoIterator<Item = &'a BatchSpec>) -> Model {
        let mut m = Model::default();
        for b in batches {
            m.apply(b);
        }
        m
    }

    /// Returns the last index of `group`, or 0.
    pub fn last(&self, group: u64) -> u64 {
        self.groups
            .get(&group)
            .and_then(|g| g.entries.keys().next_back().copied())
            .unwrap_or(0)
    }

    /// Returns the first index of `group`, or 0.
    pub fn first(&self, group: u64) -> u64 {
        self.groups
            .get(&group)
            .and_then(|g| g.entries.keys().next().copied())
            .unwrap_or(0)
    }

    /// Applies a batch with the documented semantics: entries at or below the
    /// last index replace the suffix; entries past a gap restart the log.
    pub fn apply(&mut self, batch: &BatchSpec) {
        for c in &batch.0 {
            match c {
                Change::Entries { group, first, data } => {
                    let g = self.groups.entry(*group).or_default();
                    let last = g.entries.keys().next_back().copied();
                    match last {
                        Some(last) if *first <= last => {
                            g.entries.retain(|i, _| i < first);
                        }
                        Some(last) if *first > last + 1 => g.entries.clear(),
                        _ => {}
                    }
                    for (k, d) in data.iter().enumerate() {
                        g.entries.insert(first + k as u64, d.clone());
                    }
                }
                Change::Put { group, key, value } => {
                    let g = self.groups.entry(*group).or_default();
                    g.kvs.insert(key.clone(), value.clone());
                }
                Change::Delete { group, key } => {
                    if let Some(g) = self.groups.get_mut(group) {
                        g.kvs.remove(key);
                    }
                    self.drop_if_empty(*group);
                }
                Change::CompactTo { group, index } => {
                    if let Some(g) = self.groups.get_mut(group) {
                        g.entries.retain(|i, _| i >= index);
                    }
                    self.drop_if_empty(*group);
                }
            }
        }
    }

    fn drop_if_empty(&mut self, group: u64) {
        if self
            .groups
            .get(&group)
            .is_some_and(|g| g.entries.is_empty() && g.kvs.is_empty())
        {
            self.groups.remove(&group);
        }
    }

    /// Compares the engine with the model; returns the first difference.
    pub fn check(&self, engine: &Engine) -> std::result::Result<(), String> {
        let groups: Vec<u64> = self.groups.keys().copied().collect();
        if engine.groups() != groups {
            return Err(format!(
                "groups: engine {:?}, model {groups:?}",
                engine.groups()
            ));
        }
        for (&id, g) in &self.groups {
            let first = g.entries.keys().next().copied();
            let last = g.entries.keys().next_back().copied();
            if engine.first_index(id) != first || engine.last_index(id) != last {
                return Err(format!(
                    "group {id}: engine holds {:?}..={:?}, model {first:?}..={last:?}",
                    engine.first_index(id),
                    engine.last_index(id)
                ));
            }
            if let (Some(first), Some(last)) = (first, last) {
                let got = engine
                    .fetch_entries(id, first, last + 1, usize::MAX)
                    .map_err(|e| format!("group {id}: fetch_entries failed: {e}"))?;
                let want: Vec<&Vec<u8>> = g.entries.values().collect();
                if got.len() != want.len() {
                    return Err(format!(
                        "group {id}: fetched {} entries, want {}",
                        got.len(),
                        want.len()
                    ));
                }
                for (k, (a, b)) in got.iter().zip(want).enumerate() {
                    if a != b {
                        return Err(format!(
                            "group {id}: entry {} differs ({} bytes, want {})",
                            first + k as u64,
                            a.len(),
                            b.len()
                        ));
                    }
                }
            }
            let kvs: Vec<(Vec<u8>, Vec<u8>)> =
                g.kvs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if engine.scan_keys(id) != kvs {
                return Err(format!("group {id}: keys differ"));
            }
        }
        Ok(())
    }
}

/// Bytes that LZ4 shrinks well (text with a counter in it).
pub fn compressible(tag: u64, len: usize) -> Vec<u8> {
    let unit = format!("entry {tag:08} of the raft log; ");
    unit.bytes().cycle().take(len).collect()
}

/// Bytes that do not compress.
pub fn incompressible(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.gen()).collect()
}

/// A deterministic mixed workload over groups `1..=groups`: entry runs of
/// mixed sizes (half of them compressible), suffix replacements, puts,
/// deletes and compactions. Returns the batches; `Model::replay` of any prefix
/// is the state after it.
pub fn workload(seed: u64, batches: usize, groups: u64, sizes: &[usize]) -> Vec<BatchSpec> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::default();
    let mut out = Vec::with_capacity(batches);
    for n in 0..batches {
        let mut spec = BatchSpec::default();
        let touched = rng.gen_range(1..=groups.min(3));
        let start = rng.gen_range(1..=groups);
        for k in 0..touched {
            let group = (start + k - 1) % groups + 1;
            // Within one batch, earlier changes count: replay them first.
            let mut view = model.clone();
            view.apply(&spec);
            let last = view.last(group);
            let first = if last >= 2 && rng.gen_ratio(1, 8) {
                last - 1 // Replaces the suffix, as a new Raft leader does.
            } else {
                last + 1
            };
            let count = rng.gen_range(1..=4);
            let data: Vec<Vec<u8>> = (0..count)
                .map(|i| {
                    let len = sizes[rng.gen_range(0..sizes.len())];
                    if rng.gen_bool(0.5) {
                        compressible((n as u64) << 8 | i, len)
                    } else {
                        incompressible(&mut rng, len)
                    }
                })
                .collect();
            spec.0.push(Change::Entries { group, first, data });
            if rng.gen_ratio(1, 3) {
                spec.0.push(Change::Put {
                    group,
                    key: format!("k{}", rng.gen_range(0..4)).into_bytes(),
                    value: format!("value of batch {n}").into_bytes(),
                });
            }
            if rng.gen_ratio(1, 10) {
                spec.0.push(Change::Delete {
                    group,
                    key: format!("k{}", rng.gen_range(0..4)).into_bytes(),
                });
            }
            if rng.gen_ratio(1, 10) {
                let mut view = model.clone();
                view.apply(&spec);
                let (f, l) = (view.first(group), view.last(group));
                if l >= f + 3 {
                    spec.0.push(Change::CompactTo {
                        group,
                        index: f + 2,
                    });
                }
            }
        }
        model.apply(&spec);
        out.push(spec);
    }
    out
}

/// Writes `batches` in order (every `sync_every`-th with sync, and the last
/// one with sync) and panics on any error.
pub fn write_all(engine: &Engine, batches: &[BatchSpec], sync_every: usize) {
    for (n, spec) in batches.iter().enumerate() {
        let sync = n % sync_every == 0 || n + 1 == batches.len();
        engine
            .write(&mut spec.to_batch(), sync)
            .unwrap_or_else(|e| panic!("batch {n}: {e}"));
    }
}
