//! The read path: entries by index or range, keys, first and last index.
//! Readers take one group's read lock for the look-up and none for the file
//! read; a read that lost a race with purge retries (see `moved`).

use crate::index::{EntryLoc, RecordLoc};
use crate::log_batch::entry_at;
use crate::{Engine, Error, Result};

impl Engine {
    /// Returns entry `index` of `group`, or `None` if the group does not hold it.
    pub fn get_entry(&self, group: u64, index: u64) -> Result<Option<Vec<u8>>> {
        for _ in 0..RETRIES {
            let Some(g) = self.index.group(group) else {
                return Ok(None);
            };
            let loc = match g.read().find(index) {
                Some(run) => run.entry(index),
                None => return Ok(None),
            };
            match self.read_entry(loc) {
                Ok(data) => return Ok(Some(data)),
                Err(e) if self.moved(group, index, loc) => drop(e),
                Err(e) => return Err(e),
            }
        }
        Err(self.retry_error(group, index))
    }

    /// Returns the entries `begin..end` of `group`, stopping early once their total
    /// size exceeds `max_bytes` (at least one entry is always returned).
    pub fn fetch_entries(
        &self,
        group: u64,
        begin: u64,
        end: u64,
        max_bytes: usize,
    ) -> Result<Vec<Vec<u8>>> {
        if begin >= end {
            return Ok(Vec::new());
        }
        'retry: for _ in 0..RETRIES {
            let locs: Vec<EntryLoc> = {
                let Some(g) = self.index.group(group) else {
                    return Err(Error::Unavailable {
                        group,
                        index: begin,
                    });
                };
                let g = g.read();
                match (g.first_index(), g.last_index()) {
                    (Some(first), _) if begin < first => {
                        return Err(Error::Compacted {
                            group,
                            index: begin,
                            first,
                        })
                    }
                    (Some(_), Some(last)) if end <= last + 1 => {}
                    _ => {
                        return Err(Error::Unavailable {
                            group,
                            index: end - 1,
                        })
                    }
                }
                let mut locs = Vec::with_capacity((end - begin).min(1024) as usize);
                let mut i = begin;
                while i < end {
                    let Some(run) = g.find(i) else {
                        return Err(Error::Unavailable { group, index: i });
                    };
                    let stop = end.min(run.first + run.count as u64);
                    locs.extend((i..stop).map(|j| run.entry(j)));
                    i = stop;
                }
                locs
            };
            let mut out = Vec::with_capacity(locs.len());
            let mut bytes = 0usize;
            let mut cached: Option<(RecordLoc, Vec<u8>)> = None;
            for (k, loc) in locs.iter().enumerate() {
                if cached.as_ref().map(|c| c.0) != Some(loc.record) {
                    match self.pipe.read_record(loc.record) {
                        Ok(p) => cached = Some((loc.record, p)),
                        Err(e) => {
                            if self.moved(group, begin + k as u64, *loc) {
                                continue 'retry;
                            }
                            return Err(e);
                        }
                    }
                }
                let payload = &cached.as_ref().expect("filled above").1;
                let data = entry_at(payload, loc.body_offset, loc.item_count, loc.position)
                    .map_err(|e| self.corrupt(loc.record, e.to_string()))?;
                if !out.is_empty() && bytes + data.len() > max_bytes {
                    break;
                }
                bytes += data.len();
                out.push(data.to_vec());
            }
            return Ok(out);
        }
        Err(self.retry_error(group, begin))
    }

    fn read_entry(&self, loc: EntryLoc) -> Result<Vec<u8>> {
        let payload = self.pipe.read_record(loc.record)?;
        entry_at(&payload, loc.body_offset, loc.item_count, loc.position)
            .map(|d| d.to_vec())
            .map_err(|e| self.corrupt(loc.record, e.to_string()))
    }

    fn corrupt(&self, loc: RecordLoc, reason: String) -> Error {
        Error::Corruption {
            path: self.pipe.path(loc.file.id()),
            offset: loc.offset as u64,
            reason,
        }
    }

    /// True when the entry no longer lives at `loc`: purge moved or dropped it
    /// between the index look-up and the read, so the read should be retried.
    fn moved(&self, group: u64, index: u64, loc: EntryLoc) -> bool {
        match self.index.group(group) {
            Some(g) => g.read().find(index).map(|r| r.entry(index)) != Some(loc),
            None => true,
        }
    }

    fn retry_error(&self, group: u64, index: u64) -> Error {
        Error::InvalidArgument(format!(
            "group {group}: entry {index} kept moving under concurrent purges; retry"
        ))
    }

    /// Returns the first index of `group`, if it has entries.
    pub fn first_index(&self, group: u64) -> Option<u64> {
        self.index.group(group)?.read().first_index()
    }

    /// Returns the last index of `group`, if it has entries.
    pub fn last_index(&self, group: u64) -> Option<u64> {
        self.index.group(group)?.read().last_index()
    }

    /// Returns the value of `key` in `group`.
    pub fn get(&self, group: u64, key: &[u8]) -> Option<Vec<u8>> {
        let g = self.index.group(group)?;
        let g = g.read();
        g.kvs.get(key).map(|s| s.value.clone())
    }

    /// Returns every key of `group` with its value, in key order.
    pub fn scan_keys(&self, group: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        match self.index.group(group) {
            Some(g) => g
                .read()
                .kvs
                .iter()
                .map(|(k, s)| (k.clone(), s.value.clone()))
                .collect(),
            None => Vec::new(),
        }
    }
}

const RETRIES: usize = 8;
