//! Purge: frees the oldest log files.
//!
//! 1. If the append queue holds more than `purge_threshold_bytes`, the live data
//!    of lagging groups in its oldest files is copied into the rewrite queue
//!    (groups with too much of it are reported for force compaction instead).
//! 2. If records that hide data copied in the rewrite queue (deletes, compactions,
//!    removed groups) are about to be purged, the whole rewrite queue is first
//!    rewritten into a new generation holding only live data, and the old
//!    generation deleted; otherwise the hidden copies would come back at the next
//!    recovery, which replays the rewrite queue before the append queue.
//! 3. Append files older than every group's oldest data are deleted (or kept
//!    for reuse), after the first file kept is logged (`Item::PurgedBelow`)
//!    and the log synced; no directory sync follows.
//!
//! The work of a copy follows the bytes copied, not the number of groups:
//! `select.rs` picks every group's data under its lock, `copy.rs` reads each
//! record holding any of it once, in file order, and takes every group's
//! entries out of it, `writer.rs` packs the copies into records of at most
//! about a megabyte, and `install.rs` points the index at them. A purge with
//! nothing to copy visits no group at all, and usually one to learn that no
//! file is free (`Index::oldest_append_file`); a purge with nothing to copy
//! or free returns then, having logged, synced and waited for nothing.
//!
//! Copies are made outside any lock and installed per group only where the
//! index still points at the copied location, so concurrent writes always win.

mod copy;
mod install;
mod select;
#[cfg(test)]
mod tests;
mod writer;

use std::sync::atomic::Ordering;

use crate::format::{FileId, Queue};
use crate::metrics::Metrics;
use crate::{Engine, Error, LogBatch, Result};

/// What a purge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeOutcome {
    /// Files deleted or kept for reuse.
    pub files_purged: u64,
    /// Entries copied into the rewrite queue.
    pub entries_rewritten: u64,
    /// Bytes of records written into the rewrite queue.
    pub bytes_rewritten: u64,
    /// True when the rewrite queue was rewritten into a new generation.
    pub rewrite_queue_compacted: bool,
    /// Groups whose old data holds back the oldest files and was too large to
    /// rewrite: compact them (force a Raft log compaction) to free those files.
    pub groups_to_compact: Vec<u64>,
}

/// How long a purge waits for the preparer to write the index section of a
/// file it frees (100,000 groups take about 100 ms) before it removes the
/// file rather than keep it for reuse.
const SEAL_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(1);

impl Engine {
    /// Frees the oldest files; see the module docs of `purge/mod.rs`.
    ///
    /// Returns what it did, and in [`PurgeOutcome::groups_to_compact`] (sorted,
    /// each group once) the groups the caller should force-compact. The list is
    /// empty unless the sealed append files hold more than
    /// `purge_threshold_bytes`, or the rewrite queue is being compacted; then
    /// purge means to free every append file older than the newest ones that
    /// hold half the threshold, by copying the live data the groups still have
    /// in them into the rewrite queue. A group whose live entries in those
    /// files, together with its entries already copied into the rewrite
    /// queue, total more than `purge_rewrite_group_bytes_max` bytes (entry
    /// bytes only: its keys do not count) is listed instead of copied, and the
    /// oldest of those files stay until the caller compacts the group past
    /// them (`compact_to`, after a Raft snapshot or log truncation) and a
    /// later purge frees them. Counting the copies already made means that a
    /// group lagging a little further at every purge is listed once its
    /// copies pass the limit, rather than copied again and again.
    pub fn purge(&self) -> Result<PurgeOutcome> {
        let _guard = self.purge_lock.lock();
        let mut out = PurgeOutcome::default();
        Metrics::add(&self.metrics.purges, 1);
        fail::fail_point!("raftlog::purge::start", |_| Err(Error::Io {
            op: "purge",
            path: self.pipe.dir.clone(),
            source: std::io::Error::other("fail point"),
        }));
        if self.nothing_to_purge() {
            // Most calls: no file is free and the log is under its
            // threshold. Nothing is logged, synced or waited for.
            return Ok(out);
        }
        // Compactions still only in the index may free files below; log them
        // first, so the sync before any deletion makes them durable.
        self.flush_compactions()?;

        // A rotation waits until the group before it is in the index (the
        // group's finish), so every batch in a file older than this one is.
        let active_seq = self.pipe.append.lock().id.seq;
        // 1. Choose the files to free by rewriting.
        let needed = self.first_needed_append_file(active_seq);
        let cutoff = self.rewrite_cutoff(active_seq, needed);
        let compact_rewrite_queue = self.min_dirty.load(Ordering::SeqCst) != u64::MAX;
        if compact_rewrite_queue {
            // Tombstones seen from now on are measured against the new generation.
            self.min_dirty.store(u64::MAX, Ordering::SeqCst);
        }
        let old_rewrite: Vec<FileId> = if compact_rewrite_queue {
            self.pipe
                .files
                .read()
                .keys()
                .filter(|id| id.queue == Queue::Rewrite)
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        let generation = match self.copy_out(cutoff, compact_rewrite_queue, active_seq, &mut out) {
            Ok(generation) => generation,
            Err(e) => {
                // Copies may sit in the rewrite queue without the index knowing
                // them: no append file may go before the rewrite queue is
                // rewritten.
                self.min_dirty.store(0, Ordering::SeqCst);
                return Err(e);
            }
        };
        // Without copies (and with `min_dirty` as it was), the files no group
        // needs are still those: concurrent writes go to the active file or a
        // later one, and concurrent compactions only free more. Else the
        // copies moved groups' oldest data, and the search runs again.
        let needed = (cutoff.is_none() && !compact_rewrite_queue).then_some(needed);
        let out = self.finish_purge(active_seq, needed, old_rewrite, compact_rewrite_queue, out)?;
        if let Some(seq) = generation {
            // The old generation is gone: the marker has nothing left to tell.
            crate::generation::clear(self.pipe.fs.as_ref(), &self.pipe.dir, seq)?;
        }
        Ok(out)
    }

    fn copy_out(
        &self,
        cutoff: Option<u64>,
        compact_rewrite_queue: bool,
        snapshot_seq: u64,
        out: &mut PurgeOutcome,
    ) -> Result<Option<u64>> {
        if cutoff.is_none() && !compact_rewrite_queue {
            // Nothing is old enough to copy: no group needs visiting.
            return Ok(None);
        }
        let selected = self.select(cutoff, compact_rewrite_queue, out);
        if !selected.is_empty() {
            if compact_rewrite_queue {
                // The new generation must start in a file of its own.
                let mut rw = self.pipe.rewrite.lock();
                if let Some(active) = rw.as_mut() {
                    if active.write_index_section().is_ok() {
                        Metrics::add(&self.metrics.index_sections_written, 1);
                    }
                    active
                        .file
                        .sync_data()
                        .map_err(Error::io("sync", self.pipe.path(active.id)))?;
                }
                *rw = None;
                // Recovery must not replay part of a new generation after
                // the whole old one (`generation.rs`): mark where it starts.
                let seq = *self.pipe.next_rewrite_seq.lock();
                crate::generation::begin(self.pipe.fs.as_ref(), &self.pipe.dir, seq)?;
                drop(rw);
                self.rewrite(selected, snapshot_seq, out)?;
                crate::generation::finish(self.pipe.fs.as_ref(), &self.pipe.dir, seq)?;
                return Ok(Some(seq));
            }
            self.rewrite(selected, snapshot_seq, out)?;
        } else if compact_rewrite_queue {
            *self.pipe.rewrite.lock() = None;
        }
        Ok(None)
    }

    fn finish_purge(
        &self,
        active_seq: u64,
        needed: Option<u64>,
        old_rewrite: Vec<FileId>,
        compact_rewrite_queue: bool,
        mut out: PurgeOutcome,
    ) -> Result<PurgeOutcome> {
        // 3 (decided before anything is deleted). The append files no group
        // needs: those below the oldest any group needs, the active file and
        // `min_dirty`. When no append file is below the other two bounds, no
        // group needs asking. (Writers lower `min_dirty` concurrently, but
        // only to the active file or a later one: never below `active_seq`.)
        let needed = needed.unwrap_or_else(|| self.first_needed_append_file(active_seq));
        let purgeable: Vec<FileId> = self
            .pipe
            .files
            .read()
            .keys()
            .filter(|id| id.queue == Queue::Append && id.seq < needed)
            .copied()
            .collect();
        if !purgeable.is_empty() {
            // The floor lets recovery tell the holes these removals may leave
            // from lost data (step 3).
            let mut floor = LogBatch::new();
            floor.purged_below(needed);
            self.write(&mut floor, false)?;
        }
        if !old_rewrite.is_empty() || !purgeable.is_empty() {
            // The index counted unsynced writes: an unsynced overwrite, delete or
            // compaction may be what made these files dead. Make it durable
            // before the files go, or a crash would lose both old and new;
            // and the floor with it.
            self.sync_beside_writers()?;
        }

        // 2. Delete the old rewrite generation, now fully copied. Each removal
        // is made durable before the next: a file system may persist unsynced
        // directory changes in any order, and a later file gone while an
        // earlier one stays is a hole recovery must take for lost data. All of
        // them are durable before any append file goes (step 3): an append
        // file may hold the tombstone that hides a copy in the old generation.
        for id in &old_rewrite {
            fail::fail_point!("raftlog::purge::remove_rewrite");
            if let Err(e) = self.pipe.retire(*id, true).and_then(|()| self.sync_dir()) {
                // The old generation's dead copies stay on disk: keep every
                // append file that hides them until a later purge retries.
                self.min_dirty.store(0, Ordering::SeqCst);
                return Err(e);
            }
            out.files_purged += 1;
        }
        out.rewrite_queue_compacted = compact_rewrite_queue;

        // 3. Delete the append files no group needs, with no directory sync:
        // a power cut may keep any subset of the removals, and the files that
        // come back are below the floor logged above, which recovery reads
        // to remove them again (`inspect::set_aside_below_hole`). A file
        // kept for reuse has its new name made durable before its new
        // header is written (`Pipe::new_file`, `prepare.rs`), so it never
        // comes back under its old name with another file's header.
        // A file whose index section the preparer has yet to write must not
        // be kept for reuse (its new life would take the section's bytes):
        // wait for the section, briefly, else remove the file. Later
        // rotations seal only newer files.
        let reusable = match (&self.preparer, purgeable.last()) {
            (Some(p), Some(last)) => p.wait_sealed(last.seq, SEAL_WAIT_MAX),
            _ => true,
        };
        for id in &purgeable {
            fail::fail_point!("raftlog::purge::remove_append");
            self.pipe.retire(*id, reusable)?;
            self.append_sizes.lock().remove(&id.seq);
            out.files_purged += 1;
        }
        Metrics::add(&self.metrics.files_purged, out.files_purged);
        out.groups_to_compact.sort_unstable();
        out.groups_to_compact.dedup();
        Ok(out)
    }

    /// The oldest append file that must stay: the oldest any group needs,
    /// bounded by the active file and `min_dirty`. When no append file is
    /// below the other two bounds, no group is asked.
    fn first_needed_append_file(&self, active_seq: u64) -> u64 {
        let bound = active_seq.min(self.min_dirty.load(Ordering::SeqCst));
        let oldest = self
            .pipe
            .files
            .read()
            .keys()
            .find(|id| id.queue == Queue::Append)
            .map(|id| id.seq);
        match oldest {
            Some(oldest) if oldest < bound => self
                .index
                .oldest_append_file(oldest)
                .map_or(bound, |seq| seq.min(bound)),
            _ => bound,
        }
    }

    /// Whether a purge now would copy nothing and free no file: the append
    /// queue is under its threshold, the rewrite queue needs no new
    /// generation, and every append file is still needed. Compactions not
    /// yet logged count (the index holds them), so a file they free is
    /// seen, and the purge that frees it logs them first.
    fn nothing_to_purge(&self) -> bool {
        let active_seq = self.pipe.append.lock().id.seq;
        if self.min_dirty.load(Ordering::SeqCst) != u64::MAX {
            return false;
        }
        let needed = self.first_needed_append_file(active_seq);
        if self.rewrite_cutoff(active_seq, needed).is_some() {
            return false;
        }
        let files = self.pipe.files.read();
        !files
            .keys()
            .any(|id| id.queue == Queue::Append && id.seq < needed)
    }

    fn sync_dir(&self) -> Result<()> {
        fail::fail_point!("raftlog::purge::sync_dir", |_| Err(Error::Io {
            op: "sync dir",
            path: self.pipe.dir.clone(),
            source: std::io::Error::other("fail point"),
        }));
        self.pipe
            .fs
            .sync_dir(&self.pipe.dir)
            .map_err(Error::io("sync dir", &self.pipe.dir))?;
        Metrics::add(&self.metrics.fsyncs, 1);
        Ok(())
    }

    /// Returns the first append sequence to keep when the queue is over its
    /// threshold: files below it should be freed by rewriting. Files below
    /// `needed` (no group needs them) go without copying anything, so they
    /// do not count: a log that a plain purge brings under the threshold
    /// has nothing copied out of it.
    fn rewrite_cutoff(&self, active_seq: u64, needed: u64) -> Option<u64> {
        let sizes = self.append_sizes.lock();
        let total: u64 = sizes.range(needed..).map(|(_, size)| size).sum();
        let threshold = self.pipe.config.purge_threshold_bytes;
        if total <= threshold {
            return None;
        }
        // Keep the newest half of the threshold; rewrite what lags behind it.
        let mut kept = 0;
        let mut cutoff = active_seq;
        for (&seq, &size) in sizes.iter().rev() {
            if kept + size > threshold / 2 {
                break;
            }
            kept += size;
            cutoff = seq;
        }
        Some(cutoff)
    }
}
