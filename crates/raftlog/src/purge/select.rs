//! Choosing what a purge copies: per group, the prefix of its log and the keys
//! in the files being freed, taken under the group's read lock.

use crate::index::{FileRef, Run};
use crate::Engine;

use super::PurgeOutcome;

/// One group's data chosen for copying, and how far its copy has got.
#[derive(Debug, Default)]
pub(super) struct GroupCopy {
    pub group: u64,
    /// The runs to copy, in index order: the first `carried` are in the
    /// rewrite queue (being compacted: they are always copied), the rest in
    /// append files being freed (`fresh`: copied unless the group is over
    /// the limit).
    pub runs: Vec<Run>,
    pub carried: usize,
    /// Keys whose latest value is in a file being freed.
    pub kvs: Vec<CopiedKv>,
    /// Entry bytes counted toward the limit without being read: the group's
    /// copies already in the rewrite queue, when they are not being copied.
    pub counted: u64,

    /// Runs read (or skipped) so far: `runs[..read]`.
    pub read: usize,
    /// Entry bytes read, carried and fresh.
    pub bytes: u64,
    /// Entry bytes read from carried runs.
    pub carried_bytes: u64,
    /// The group's data passed the limit: its fresh data is not copied.
    pub over: bool,
    /// Entries in the fresh runs, and how many of them were read.
    pub fresh_entries: u64,
    pub fresh_entries_read: u64,
    /// Fresh entries read and kept back, not yet handed to the writer: the
    /// index of the first, their lengths and their bytes back to back.
    pub pending_first: u64,
    pub pending_lens: Vec<u32>,
    pub pending_data: Vec<u8>,
    /// Fresh entries were handed to the writer before the group was known to
    /// be under the limit. If it turns out over, those copies are written but
    /// never installed.
    pub fresh_written: bool,
    /// Every run is read and everything to copy is handed to the writer.
    pub done: bool,
    /// Where the writer put the entries: whole entries items, in index order.
    pub pieces: Vec<Piece>,
}

/// A key to copy: its value, the file that holds it, and where the writer
/// put the copy (`None`: not copied).
#[derive(Debug)]
pub(super) struct CopiedKv {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub file: FileRef,
    pub copy: Option<FileRef>,
}

/// One entries item of a rewrite record holding a group's copied entries.
#[derive(Debug, Clone, Copy)]
pub(super) struct Piece {
    pub first: u64,
    pub count: u32,
    pub record: crate::index::RecordLoc,
    pub body_offset: u32,
}

impl GroupCopy {
    /// The entry bytes the group is expected to count once all its runs are
    /// read: what it counts so far, and its fresh entries still to read at
    /// the bytes per entry of those read.
    pub fn expected_bytes(&self) -> u64 {
        let fresh_bytes = (self.bytes - self.carried_bytes) as u128;
        let per_entry = fresh_bytes.div_ceil(self.fresh_entries_read.max(1) as u128);
        let to_read = (self.fresh_entries - self.fresh_entries_read) as u128;
        let expected = (self.counted + self.bytes) as u128 + to_read * per_entry;
        u64::try_from(expected).unwrap_or(u64::MAX)
    }

    /// The first index of the fresh runs (or one past the carried ones).
    pub fn fresh_first(&self) -> u64 {
        match self.runs.get(self.carried) {
            Some(r) => r.first,
            None => self.runs.last().map_or(0, Run::end),
        }
    }
}

impl Engine {
    /// Picks, per group, the prefix of data to copy: data in append files below
    /// `cutoff`, and all data in the rewrite queue when it is being compacted.
    ///
    /// A group whose copies already in the rewrite queue are over the limit,
    /// when they are not being compacted, is reported at once and its fresh
    /// data is not selected: nothing of it needs reading.
    pub(super) fn select(
        &self,
        cutoff: Option<u64>,
        include_rewrite: bool,
        out: &mut PurgeOutcome,
    ) -> Vec<GroupCopy> {
        let old = |f: FileRef| {
            if f.is_rewrite() {
                include_rewrite
            } else {
                cutoff.is_some_and(|c| f.id().seq < c)
            }
        };
        let limit = self.pipe.config.purge_rewrite_group_bytes_max;
        let mut selected = Vec::new();
        self.index.for_each(|group, g| {
            // The copy is a contiguous prefix of what follows the runs already
            // in the rewrite queue, unless those are being copied too.
            let runs: Vec<Run> = g
                .runs
                .iter()
                .skip_while(|r| r.record.file.is_rewrite() && !include_rewrite)
                .take_while(|r| old(r.record.file))
                .collect();
            let mut kvs: Vec<_> = g
                .kvs
                .iter()
                .filter(|(_, s)| old(s.file))
                .map(|(k, s)| CopiedKv {
                    key: k.to_vec(),
                    value: s.value.clone(),
                    file: s.file,
                    copy: None,
                })
                .collect();
            let carried = runs
                .iter()
                .take_while(|r| r.record.file.is_rewrite())
                .count();
            let counted = if include_rewrite {
                0
            } else {
                g.rewrite_bytes()
            };
            let mut runs = runs;
            if counted > limit && runs.len() > carried {
                out.groups_to_compact.push(group);
                runs.truncate(carried);
                kvs.retain(|kv| kv.file.is_rewrite());
            }
            if runs.is_empty() && kvs.is_empty() {
                return;
            }
            selected.push(GroupCopy {
                group,
                fresh_entries: runs[carried..].iter().map(|r| r.count as u64).sum(),
                runs,
                carried,
                kvs,
                counted,
                ..GroupCopy::default()
            });
        });
        selected
    }
}
