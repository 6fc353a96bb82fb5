//! An index rebuilt in memory from scans, as recovery would rebuild it, so that
//! `check` and `stats` can tell which entries and keys are live without opening
//! the engine.
//!
//! It applies the same Raft semantics as the engine's index (`index.rs`):
//! - entries from an index at or below a group's last one replace that suffix;
//!   entries after a gap start the group's log anew;
//! - `compact_to` drops entries below an index; a delete or a compaction that
//!   leaves a group with nothing removes the group;
//! - `remove_group` drops the group's entries and keys.
//!
//! Files must be applied in log order ([`crate::log_dir::Listing::files`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use strata_codec::DecodeError;
use strata_raftlog::format::FileId;
use strata_raftlog::reader::ScannedRecord;
use strata_raftlog::{decode_items, Item};

/// Consecutive live entries of one entries item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Index of the first live entry.
    pub first: u64,
    /// Number of live entries.
    pub count: u32,
    /// Position of `first` within the item (entries before it were compacted).
    pub skip: u32,
    /// The file of the record.
    pub file: FileId,
    /// Offset of the record in its file.
    pub record_offset: u64,
    /// Offset of the item's length table in the record's payload.
    pub body_offset: u32,
    /// Number of entries in the whole item.
    pub item_count: u32,
}

impl Run {
    fn end(&self) -> u64 {
        self.first + self.count as u64
    }
}

#[derive(Debug, Default)]
struct Group {
    runs: VecDeque<Run>,
    keys: BTreeSet<Vec<u8>>,
}

impl Group {
    fn last_index(&self) -> Option<u64> {
        self.runs.back().map(|r| r.end() - 1)
    }

    fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.keys.is_empty()
    }

    fn append(&mut self, run: Run) {
        match self.last_index() {
            Some(last) if run.first <= last => {
                while let Some(back) = self.runs.back_mut() {
                    if back.first >= run.first {
                        self.runs.pop_back();
                    } else {
                        if back.end() > run.first {
                            back.count = (run.first - back.first) as u32;
                        }
                        break;
                    }
                }
            }
            Some(last) if run.first > last + 1 => self.runs.clear(),
            _ => {}
        }
        self.runs.push_back(run);
    }

    fn compact_to(&mut self, index: u64) {
        while let Some(front) = self.runs.front_mut() {
            if front.first >= index {
                break;
            }
            if front.end() <= index {
                self.runs.pop_front();
            } else {
                let dropped = (index - front.first) as u32;
                front.first = index;
                front.skip += dropped;
                front.count -= dropped;
                break;
            }
        }
    }
}

/// The live entries and keys of every group.
#[derive(Debug, Default)]
pub struct Replay {
    groups: BTreeMap<u64, Group>,
}

impl Replay {
    /// Applies the items of one record of `file`.
    pub fn apply(&mut self, file: FileId, record: &ScannedRecord) -> Result<(), DecodeError> {
        for item in decode_items(&record.payload)? {
            match item {
                Item::Entries {
                    group,
                    first_index,
                    count,
                    body_offset,
                } => self.groups.entry(group).or_default().append(Run {
                    first: first_index,
                    count,
                    skip: 0,
                    file,
                    record_offset: record.offset,
                    body_offset,
                    item_count: count,
                }),
                Item::Put { group, key, .. } => {
                    self.groups
                        .entry(group)
                        .or_default()
                        .keys
                        .insert(key.to_vec());
                }
                Item::Delete { group, key } => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        g.keys.remove(key);
                        self.drop_if_empty(group);
                    }
                }
                Item::CompactTo { group, index } => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        g.compact_to(index);
                        self.drop_if_empty(group);
                    }
                }
                Item::RemoveGroup { group } => {
                    self.groups.remove(&group);
                }
            }
        }
        Ok(())
    }

    fn drop_if_empty(&mut self, group: u64) {
        if self.groups.get(&group).is_some_and(Group::is_empty) {
            self.groups.remove(&group);
        }
    }

    /// Returns the number of groups holding any entry or key.
    pub fn groups(&self) -> u64 {
        self.groups.values().filter(|g| !g.is_empty()).count() as u64
    }

    /// Returns the number of live entries over all groups.
    pub fn live_entries(&self) -> u64 {
        self.groups
            .values()
            .flat_map(|g| g.runs.iter())
            .map(|r| r.count as u64)
            .sum()
    }

    /// Returns the number of keys over all groups.
    pub fn keys(&self) -> u64 {
        self.groups.values().map(|g| g.keys.len() as u64).sum()
    }

    /// Returns every live run with its group, by the file that holds it.
    pub fn runs_by_file(&self) -> BTreeMap<FileId, Vec<(u64, Run)>> {
        let mut by_file: BTreeMap<FileId, Vec<(u64, Run)>> = BTreeMap::new();
        for (&group, g) in &self.groups {
            for run in &g.runs {
                by_file.entry(run.file).or_default().push((group, *run));
            }
        }
        by_file
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_raftlog::format::Queue;

    fn run(first: u64, count: u32) -> Run {
        Run {
            first,
            count,
            skip: 0,
            file: FileId {
                queue: Queue::Append,
                seq: 1,
            },
            record_offset: 24,
            body_offset: 0,
            item_count: count,
        }
    }

    #[test]
    fn raft_semantics_match_the_engine_index() {
        let mut g = Group::default();
        g.append(run(1, 10));
        g.append(run(11, 5));
        g.append(run(8, 2)); // Replaces 8.. : live 1..=9.
        assert_eq!(g.last_index(), Some(9));
        assert_eq!(g.runs.iter().map(|r| r.count).sum::<u32>(), 9);
        g.compact_to(5);
        let front = g.runs[0];
        assert_eq!((front.first, front.skip, front.count), (5, 4, 3));
        g.append(run(20, 1)); // A gap restarts the log.
        assert_eq!(g.runs.len(), 1);
        g.compact_to(100);
        assert!(g.is_empty());
    }
}
