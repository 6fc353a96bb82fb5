//! Copying the selected data: every record that holds any of it is read once,
//! in file order, and each group's entries are taken out of it.
//!
//! A record holds the entries of every group its batch wrote (16 in a
//! TiKV-like workload). Reading it once per group, as purge once did, read
//! and verified (checksum, decompression) each record as many times as it had
//! groups: the cost grew with groups times records. Here it grows with the
//! records read, and reads go through each file in order.
//!
//! Invariants:
//! - A group's selected runs lie in increasing file order (`index.rs`: runs
//!   in the rewrite queue first, then append runs in file order), so reading
//!   records in file order meets each group's runs in index order, and its
//!   copy is built by appending.
//! - The limit is decided on entries actually read, and a group's copy is
//!   installed only if it is under it. Most groups are far below it: a run
//!   of a group expected to stay under half the limit (its bytes so far, and
//!   its remaining entries at the bytes per entry read so far) is written as
//!   it is read, with no copy in between. The entries of the other groups
//!   are kept back (`pending_*`) until all their runs are read or they pass
//!   the limit. Only when the kept-back entries of all groups pass
//!   [`PENDING_BYTES_MAX`] are some written early, those furthest from the
//!   limit first.
//! - A group whose fresh entries were written and which then passes the
//!   limit (the estimate was wrong, or it was written early) keeps its
//!   written copy out of the index, and `min_dirty` makes the next purge
//!   drop it, as for a copy that lost a race with a write.
//! - Carried data (the rewrite queue being compacted) is copied whatever the
//!   limit: the old generation is deleted after this purge.

use std::sync::atomic::Ordering;

use crate::index::{RecordLoc, Run};
use crate::metrics::Metrics;
use crate::run_entries::RunEntries;
use crate::{Engine, Error, Result};

use super::select::{GroupCopy, Piece};
use super::writer::{Placed, RewriteWriter};
use super::PurgeOutcome;

/// Entry bytes purge keeps back in memory, over all groups, before it writes
/// some early (see the module docs). It bounds a purge's memory whatever it
/// copies, and is large enough that the groups near the limit (1 MiB by
/// default) are almost always decided before their copies are written.
const PENDING_BYTES_MAX: usize = 64 << 20;

#[cfg(test)]
thread_local! {
    /// A smaller [`PENDING_BYTES_MAX`] for this thread's purges, so that unit
    /// tests reach the copies written early with a few megabytes of data.
    pub(super) static PENDING_BYTES_MAX_FOR_TESTS: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

fn pending_bytes_max() -> usize {
    #[cfg(test)]
    if let Some(max) = PENDING_BYTES_MAX_FOR_TESTS.get() {
        return max;
    }
    PENDING_BYTES_MAX
}

/// The order in which records are read: the rewrite queue before the append
/// queue (a group's carried runs come before its fresh ones), each by file
/// sequence and offset.
fn read_order(loc: RecordLoc) -> (bool, u64, u32) {
    (!loc.file.is_rewrite(), loc.file.id().seq, loc.offset)
}

/// The state of one purge's copy: the groups, the writer, and the entries
/// kept back.
struct Copier<'a> {
    engine: &'a Engine,
    groups: Vec<GroupCopy>,
    writer: RewriteWriter<'a>,
    pending_bytes: usize,
    limit: u64,
    /// The lengths of the entries of the run being copied (kept to reuse).
    lens: Vec<u32>,
}

impl Engine {
    /// Copies the selected data into the rewrite queue and points the index at it.
    /// `snapshot_seq` is the active append file when the data was selected: any
    /// write racing with the copy lands in it or a later file.
    pub(super) fn rewrite(
        &self,
        groups: Vec<GroupCopy>,
        snapshot_seq: u64,
        out: &mut PurgeOutcome,
    ) -> Result<()> {
        fail::fail_point!("raftlog::rewrite::start", |_| Err(Error::Io {
            op: "rewrite",
            path: self.pipe.dir.clone(),
            source: std::io::Error::other("fail point"),
        }));
        // Every run to read, by record, in reading order.
        let mut reads: Vec<(RecordLoc, u32, u32)> = groups
            .iter()
            .enumerate()
            .flat_map(|(slot, g)| {
                g.runs
                    .iter()
                    .enumerate()
                    .map(move |(i, r)| (r.record, slot as u32, i as u32))
            })
            .collect();
        reads.sort_unstable_by_key(|&(loc, slot, i)| (read_order(loc), slot, i));

        let mut copier = Copier {
            engine: self,
            groups,
            writer: RewriteWriter::new(self),
            pending_bytes: 0,
            limit: self.pipe.config.purge_rewrite_group_bytes_max,
            lens: Vec::new(),
        };
        // Groups with keys and no entries to copy are complete already.
        for slot in 0..copier.groups.len() {
            if copier.groups[slot].runs.is_empty() {
                copier.complete(slot, out)?;
            }
        }
        for record in reads.chunk_by(|a, b| a.0 == b.0) {
            copier.copy_record(record, out)?;
            if copier.pending_bytes > pending_bytes_max() {
                copier.write_early(out)?;
            }
        }
        let Copier {
            mut groups, writer, ..
        } = copier;
        debug_assert!(groups.iter().all(|g| g.done));
        let placed = writer.finish(out)?;

        // Durable: now install the new locations where nothing newer replaced them.
        for p in placed {
            match p {
                Placed::Entries {
                    slot,
                    first,
                    count,
                    record,
                    body_offset,
                } => groups[slot].pieces.push(Piece {
                    first,
                    count,
                    record,
                    body_offset,
                }),
                Placed::Kv { slot, kv, file } => groups[slot].kvs[kv].copy = Some(file),
            }
        }
        let mut dead_copies = false;
        for g in &groups {
            dead_copies |= !self.install(g);
        }
        if dead_copies {
            // A concurrent write dropped or replaced data while it was being
            // copied, or a group written early passed the limit: the record
            // doing so is in the file that was active when the data was
            // selected or a later one, and the copy must not outlive it.
            self.min_dirty.fetch_min(snapshot_seq, Ordering::SeqCst);
        }
        Metrics::add(&self.metrics.rewrites, 1);
        Ok(())
    }
}

impl Copier<'_> {
    /// Reads one record, if any group still wants a run of it, and takes
    /// each group's entries out of it. `runs` are `(record, slot, run)`, all
    /// of this record.
    fn copy_record(
        &mut self,
        runs: &[(RecordLoc, u32, u32)],
        out: &mut PurgeOutcome,
    ) -> Result<()> {
        let wanted = |g: &GroupCopy, i: usize| !(g.over && i >= g.carried);
        let loc = runs[0].0;
        let payload = if runs
            .iter()
            .any(|&(_, slot, i)| wanted(&self.groups[slot as usize], i as usize))
        {
            Some(self.engine.pipe.read_payload(loc)?)
        } else {
            None
        };
        for &(_, slot, i) in runs {
            let (slot, i) = (slot as usize, i as usize);
            let g = &self.groups[slot];
            if g.read != i {
                // Runs out of file order: copying would scramble the log.
                return Err(Error::Corruption {
                    path: self.engine.pipe.path(loc.file.id()),
                    offset: loc.offset as u64,
                    reason: format!("group {}: the index's runs are not in file order", g.group),
                });
            }
            match &payload {
                Some(p) if wanted(g, i) => self.take_run(slot, i, p, out)?,
                _ => {}
            }
            let g = &mut self.groups[slot];
            g.read += 1;
            if g.read == g.runs.len() {
                self.complete(slot, out)?;
            }
        }
        Ok(())
    }

    /// Copies run `i` of the group in `slot`: writes it, or keeps it back
    /// until the group is known to be under the limit, or drops it when the
    /// group is over.
    fn take_run(
        &mut self,
        slot: usize,
        i: usize,
        payload: &[u8],
        out: &mut PurgeOutcome,
    ) -> Result<()> {
        let mut lens = std::mem::take(&mut self.lens);
        let result = self.take_run_with(slot, i, payload, &mut lens, out);
        self.lens = lens;
        result
    }

    fn take_run_with(
        &mut self,
        slot: usize,
        i: usize,
        payload: &[u8],
        lens: &mut Vec<u32>,
        out: &mut PurgeOutcome,
    ) -> Result<()> {
        let g = &mut self.groups[slot];
        let run: Run = g.runs[i];
        let fresh = i >= g.carried;
        let corrupt = |why: &str| Error::Corruption {
            path: self.engine.pipe.path(run.record.file.id()),
            offset: run.record.offset as u64,
            reason: why.to_string(),
        };
        let data = RunEntries::new(payload, &run)
            .and_then(|entries| entries.packed(lens))
            .map_err(corrupt)?;
        g.bytes += data.len() as u64;
        if fresh {
            g.fresh_entries_read += run.count as u64;
        } else {
            g.carried_bytes += data.len() as u64;
        }
        if !g.over && g.counted + g.bytes > self.limit {
            // Too much to copy: the caller should compact the group instead.
            // Its carried data (a prefix) is still copied.
            g.over = true;
            out.groups_to_compact.push(g.group);
            self.pending_bytes -= g.pending_data.len();
            g.pending_lens = Vec::new();
            g.pending_data = Vec::new();
        }
        if fresh && g.over {
            return Ok(());
        }
        if !fresh || g.expected_bytes() <= self.limit / 2 {
            // Carried data is copied whatever the limit, and this group is
            // not expected near it: write the run as it lies in the record,
            // after what was kept back of the group.
            self.write_pending(slot, out)?;
            let g = &mut self.groups[slot];
            g.fresh_written |= fresh;
            return self
                .writer
                .add_entries(slot, g.group, run.first, lens, data, out);
        }
        if g.pending_lens.is_empty() {
            g.pending_first = run.first;
        }
        g.pending_lens.extend_from_slice(lens);
        g.pending_data.extend_from_slice(data);
        self.pending_bytes += data.len();
        Ok(())
    }

    /// Hands the group's kept-back entries to the writer.
    fn write_pending(&mut self, slot: usize, out: &mut PurgeOutcome) -> Result<()> {
        let g = &mut self.groups[slot];
        if g.pending_lens.is_empty() {
            return Ok(());
        }
        self.writer.add_entries(
            slot,
            g.group,
            g.pending_first,
            &g.pending_lens,
            &g.pending_data,
            out,
        )?;
        // Kept-back entries are always fresh: carried ones are written as read.
        g.fresh_written = true;
        self.pending_bytes -= g.pending_data.len();
        g.pending_lens = Vec::new();
        g.pending_data = Vec::new();
        Ok(())
    }

    /// Every run of the group is read: hands the rest of its copy and its
    /// keys to the writer. A group over the limit copies only what is carried.
    fn complete(&mut self, slot: usize, out: &mut PurgeOutcome) -> Result<()> {
        self.write_pending(slot, out)?;
        let g = &mut self.groups[slot];
        g.done = true;
        let (group, over) = (g.group, g.over);
        let kvs = std::mem::take(&mut g.kvs);
        for (i, kv) in kvs.iter().enumerate() {
            if !over || kv.file.is_rewrite() {
                self.writer
                    .add_kv(slot, i, group, &kv.key, &kv.value, out)?;
            }
        }
        self.groups[slot].kvs = kvs;
        Ok(())
    }

    /// Too many entries are kept back: writes those of the groups furthest
    /// from the limit, until half the budget is left.
    fn write_early(&mut self, out: &mut PurgeOutcome) -> Result<()> {
        let mut waiting: Vec<(u64, usize)> = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.pending_lens.is_empty())
            .map(|(slot, g)| (g.counted + g.bytes, slot))
            .collect();
        waiting.sort_unstable();
        for (_, slot) in waiting {
            if self.pending_bytes <= pending_bytes_max() / 2 {
                break;
            }
            self.write_pending(slot, out)?;
        }
        Ok(())
    }
}
