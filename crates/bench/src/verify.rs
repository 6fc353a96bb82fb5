//! Verification: reads back every live entry and state value of every group
//! and compares them byte for byte with what the generator says was written.
//!
//! The expected contents come from the writers' [`GroupLog`]s (the live range
//! of each group) and from the generator in `workload.rs`, so nothing written
//! needs to be kept in memory.

use std::thread;
use std::time::{Duration, Instant};

use crate::engines::{LogEngine, STATE_KEY};
use crate::error::BenchError;
use crate::workload::{entry, state, EntrySizes, GroupLog};

/// Entries fetched per read, to bound memory.
const FETCH_CHUNK: u64 = 256;
/// Failures described in full; the rest are only counted.
const FAILURES_KEPT: usize = 10;

/// What verification found.
#[derive(Debug, Clone, Default)]
pub struct VerifyOutcome {
    /// Groups checked.
    pub groups: u64,
    /// Entries that matched.
    pub entries: u64,
    /// Entry bytes compared.
    pub bytes: u64,
    /// State values that matched.
    pub states: u64,
    /// Mismatches, missing data and read errors.
    pub failure_count: u64,
    /// The first few failures, described.
    pub failures: Vec<String>,
    /// Wall time.
    pub duration: Duration,
}

impl VerifyOutcome {
    /// Returns an error describing the failures, if there were any.
    pub fn check(&self) -> Result<(), BenchError> {
        if self.failure_count == 0 {
            return Ok(());
        }
        Err(BenchError::Verify(format!(
            "{} failures; first: {}",
            self.failure_count,
            self.failures.join("; ")
        )))
    }

    fn fail(&mut self, msg: String) {
        self.failure_count += 1;
        if self.failures.len() < FAILURES_KEPT {
            self.failures.push(msg);
        }
    }

    fn merge(&mut self, other: VerifyOutcome) {
        self.groups += other.groups;
        self.entries += other.entries;
        self.bytes += other.bytes;
        self.states += other.states;
        self.failure_count += other.failure_count;
        for f in other.failures {
            if self.failures.len() < FAILURES_KEPT {
                self.failures.push(f);
            }
        }
    }
}

/// Verifies every group of `groups` on `threads` threads. With `sample`, only
/// the last entry of each group is read (plus the ranges and state).
pub fn verify(
    engine: &dyn LogEngine,
    groups: &[GroupLog],
    sizes: EntrySizes,
    threads: usize,
    sample: bool,
) -> Result<VerifyOutcome, BenchError> {
    let start = Instant::now();
    let chunk = groups.len().div_ceil(threads.max(1)).max(1);
    let mut total = VerifyOutcome::default();
    let results: Vec<_> = thread::scope(|s| {
        let handles: Vec<_> = groups
            .chunks(chunk)
            .map(|part| s.spawn(move || verify_part(engine, part, sizes, sample)))
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    for r in results {
        total.merge(r.map_err(BenchError::from_panic)?);
    }
    total.duration = start.elapsed();
    Ok(total)
}

fn verify_part(
    engine: &dyn LogEngine,
    groups: &[GroupLog],
    sizes: EntrySizes,
    sample: bool,
) -> VerifyOutcome {
    let mut out = VerifyOutcome::default();
    for log in groups {
        out.groups += 1;
        verify_group(engine, log, sizes, sample, &mut out);
    }
    out
}

fn verify_group(
    engine: &dyn LogEngine,
    log: &GroupLog,
    sizes: EntrySizes,
    sample: bool,
    out: &mut VerifyOutcome,
) {
    let g = log.group;
    let range = (engine.first_index(g), engine.last_index(g));
    let (first, last) = match range {
        (Ok(first), Ok(last)) => (first, last),
        (Err(e), _) | (_, Err(e)) => return out.fail(format!("group {g}: {e}")),
    };
    if log.live() == 0 {
        if last.is_some() {
            out.fail(format!(
                "group {g}: expected no entries, found up to {last:?}"
            ));
        }
        return;
    }
    if (first, last) != (Some(log.first), Some(log.last)) {
        return out.fail(format!(
            "group {g}: live range is {first:?}..={last:?}, expected {}..={}",
            log.first, log.last
        ));
    }
    match engine.get_state(g, STATE_KEY) {
        Ok(Some(v)) if v == state(g, log.last) => out.states += 1,
        Ok(Some(_)) => out.fail(format!("group {g}: state value differs")),
        Ok(None) => out.fail(format!("group {g}: state key is missing")),
        Err(e) => out.fail(format!("group {g}: state: {e}")),
    }
    let begin = if sample { log.last } else { log.first };
    let mut at = begin;
    while at <= log.last {
        let end = (at + FETCH_CHUNK).min(log.last + 1);
        match engine.fetch_entries(g, at, end) {
            Ok(entries) => {
                for (index, data) in (at..end).zip(&entries) {
                    if *data == entry(g, index, sizes.len(g, index)) {
                        out.entries += 1;
                        out.bytes += data.len() as u64;
                    } else {
                        out.fail(format!(
                            "group {g}: entry {index} differs ({} bytes read)",
                            data.len()
                        ));
                    }
                }
            }
            Err(e) => out.fail(format!("group {g}: entries {at}..{end}: {e}")),
        }
        at = end;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::engines::{EngineError, EngineStats, PurgeReport, WriteBatch};
    use crate::workload::{next_append, GroupLog};

    /// An engine in a map, whose stored bytes a test can damage.
    #[derive(Debug, Default)]
    struct MapEngine {
        entries: Mutex<BTreeMap<(u64, u64), Vec<u8>>>,
        states: Mutex<BTreeMap<u64, Vec<u8>>>,
    }

    impl LogEngine for MapEngine {
        fn name(&self) -> &'static str {
            "map"
        }
        fn write(&self, batch: &WriteBatch, _sync: bool) -> Result<(), EngineError> {
            for a in &batch.appends {
                for (i, e) in a.entries.iter().enumerate() {
                    let key = (a.group, a.first_index + i as u64);
                    self.entries.lock().unwrap().insert(key, e.clone());
                }
                self.states.lock().unwrap().insert(a.group, a.state.clone());
            }
            Ok(())
        }
        fn compact_to(&self, group: u64, index: u64) -> Result<(), EngineError> {
            self.entries
                .lock()
                .unwrap()
                .retain(|&(g, i), _| g != group || i >= index);
            Ok(())
        }
        fn purge(&self) -> Result<PurgeReport, EngineError> {
            Ok(PurgeReport::default())
        }
        fn get_entry(&self, group: u64, index: u64) -> Result<Option<Vec<u8>>, EngineError> {
            Ok(self.entries.lock().unwrap().get(&(group, index)).cloned())
        }
        fn first_index(&self, group: u64) -> Result<Option<u64>, EngineError> {
            let m = self.entries.lock().unwrap();
            Ok(m.range((group, 0)..=(group, u64::MAX))
                .next()
                .map(|(k, _)| k.1))
        }
        fn last_index(&self, group: u64) -> Result<Option<u64>, EngineError> {
            let m = self.entries.lock().unwrap();
            Ok(m.range((group, 0)..=(group, u64::MAX))
                .next_back()
                .map(|(k, _)| k.1))
        }
        fn get_state(&self, group: u64, _key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
            Ok(self.states.lock().unwrap().get(&group).cloned())
        }
        fn stats(&self) -> EngineStats {
            EngineStats::default()
        }
        fn close(self: Box<Self>) -> Result<(), EngineError> {
            Ok(())
        }
    }

    /// Four groups with entries 3..=10 live (1 and 2 compacted away).
    fn filled(sizes: EntrySizes) -> (MapEngine, Vec<GroupLog>) {
        let engine = MapEngine::default();
        let mut logs: Vec<GroupLog> = (1..=4).map(GroupLog::empty).collect();
        for _ in 0..10 {
            let batch = WriteBatch {
                appends: logs.iter().map(|l| next_append(l, 1, sizes)).collect(),
            };
            engine.write(&batch, true).unwrap();
            for l in &mut logs {
                l.last += 1;
            }
        }
        for l in &mut logs {
            engine.compact_to(l.group, 3).unwrap();
            l.first = 3;
        }
        (engine, logs)
    }

    #[test]
    fn passes_intact_data_and_counts_it() {
        let sizes = EntrySizes::Uniform { min: 10, max: 300 };
        let (engine, logs) = filled(sizes);
        let out = verify(&engine, &logs, sizes, 3, false).unwrap();
        out.check().unwrap();
        assert_eq!((out.groups, out.entries, out.states), (4, 32, 4));
    }

    #[test]
    fn catches_a_flipped_byte_a_lost_entry_a_stale_state_and_a_wrong_range() {
        let sizes = EntrySizes::Fixed(64);
        let (engine, logs) = filled(sizes);
        engine.entries.lock().unwrap().get_mut(&(1, 5)).unwrap()[17] ^= 1;
        engine.entries.lock().unwrap().remove(&(2, 7));
        engine.states.lock().unwrap().insert(3, state(3, 9));
        engine.entries.lock().unwrap().remove(&(4, 3));
        let out = verify(&engine, &logs, sizes, 2, false).unwrap();
        assert_eq!(out.failure_count, 4, "{:?}", out.failures);
        assert!(out.check().is_err());
        let all = out.failures.join("\n");
        assert!(all.contains("group 1: entry 5 differs"), "{all}");
        assert!(all.contains("group 2: entries"), "{all}");
        assert!(all.contains("group 3: state value differs"), "{all}");
        assert!(all.contains("group 4: live range"), "{all}");
    }
}
