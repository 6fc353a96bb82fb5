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
//!    for reuse), oldest first, and the directory synced.
//!
//! Copies are made outside any lock and installed per group only where the
//! index still points at the copied location, so concurrent writes always win.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::format::{FileId, Queue, FILE_HEADER_LEN};
use crate::index::{FileRef, RecordLoc, Run};
use crate::log_batch::{decode_items, Item, LogBatch};
use crate::metrics::Metrics;
use crate::pipe::ActiveFile;
use crate::{Engine, Error, Result};

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

/// A group's data selected for copying.
struct Selected {
    group: u64,
    runs: Vec<Run>,
    kvs: Vec<(Vec<u8>, Vec<u8>, FileRef)>,
}

impl Engine {
    /// Frees the oldest files; see the module docs of `purge.rs`.
    ///
    /// Returns what it did, and in [`PurgeOutcome::groups_to_compact`] (sorted,
    /// each group once) the groups the caller should force-compact. The list is
    /// empty unless the sealed append files hold more than
    /// `purge_threshold_bytes`; then purge means to free every append file
    /// older than the newest ones that hold half the threshold, by copying the
    /// live data the groups still have in them into the rewrite queue. A group
    /// whose live entries in those files total more than
    /// `purge_rewrite_group_bytes_max` bytes (entry bytes only: its keys do not
    /// count) is listed instead of copied, and the oldest of those files stay
    /// until the caller compacts the group past them (`compact_to`, after a Raft
    /// snapshot or log truncation) and a later purge frees them.
    pub fn purge(&self) -> Result<PurgeOutcome> {
        let _guard = self.purge_lock.lock();
        // Compactions still only in the index may free files below; log them
        // first, so the sync before any deletion makes them durable.
        self.flush_compactions()?;
        let mut out = PurgeOutcome::default();
        Metrics::add(&self.metrics.purges, 1);
        fail::fail_point!("raftlog::purge::start", |_| Err(Error::Io {
            op: "purge",
            path: self.pipe.dir.clone(),
            source: std::io::Error::other("fail point"),
        }));

        // The leader applies a group to the index before it releases the append
        // lock, so every batch in a file older than this one is indexed.
        let active_seq = self.pipe.append.lock().id.seq;
        // 1. Choose the files to free by rewriting.
        let cutoff = self.rewrite_cutoff(active_seq);
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
        if let Err(e) = self.copy_out(cutoff, compact_rewrite_queue, active_seq, &mut out) {
            // Copies may sit in the rewrite queue without the index knowing them:
            // no append file may go before the rewrite queue is rewritten.
            self.min_dirty.store(0, Ordering::SeqCst);
            return Err(e);
        }
        self.finish_purge(active_seq, old_rewrite, compact_rewrite_queue, out)
    }

    fn copy_out(
        &self,
        cutoff: Option<u64>,
        compact_rewrite_queue: bool,
        snapshot_seq: u64,
        out: &mut PurgeOutcome,
    ) -> Result<()> {
        let selected = self.select(cutoff, compact_rewrite_queue);
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
            }
            self.rewrite(selected, snapshot_seq, out)?;
        } else if compact_rewrite_queue {
            *self.pipe.rewrite.lock() = None;
        }
        Ok(())
    }

    fn finish_purge(
        &self,
        active_seq: u64,
        old_rewrite: Vec<FileId>,
        compact_rewrite_queue: bool,
        mut out: PurgeOutcome,
    ) -> Result<PurgeOutcome> {
        // 3 (decided before anything is deleted). The append files no group needs.
        let mut needed = active_seq;
        self.index.for_each(|_, g| {
            if let Some(seq) = g.oldest_append_file() {
                needed = needed.min(seq);
            }
        });
        let dirty = self.min_dirty.load(Ordering::SeqCst);
        let purgeable: Vec<FileId> = self
            .pipe
            .files
            .read()
            .keys()
            .filter(|id| id.queue == Queue::Append && id.seq < needed && id.seq < dirty)
            .copied()
            .collect();
        if !old_rewrite.is_empty() || !purgeable.is_empty() {
            // The index counted unsynced writes: an unsynced overwrite, delete or
            // compaction may be what made these files dead. Make it durable
            // before the files go, or a crash would lose both old and new.
            self.sync()?;
        }

        // 2. Delete the old rewrite generation, now fully copied. Each removal
        // is made durable before the next: a file system may persist unsynced
        // directory changes in any order, and a later file gone while an
        // earlier one stays is a hole recovery must take for lost data. All of
        // them are durable before any append file goes (step 3): an append
        // file may hold the tombstone that hides a copy in the old generation.
        for id in &old_rewrite {
            fail::fail_point!("raftlog::purge::remove_rewrite");
            if let Err(e) = self.pipe.retire(*id).and_then(|()| self.sync_dir()) {
                // The old generation's dead copies stay on disk: keep every
                // append file that hides them until a later purge retries.
                self.min_dirty.store(0, Ordering::SeqCst);
                return Err(e);
            }
            out.files_purged += 1;
        }
        out.rewrite_queue_compacted = compact_rewrite_queue;

        // 3. Delete the append files no group needs, oldest first, each
        // removal durable before the next (see step 2).
        for id in &purgeable {
            fail::fail_point!("raftlog::purge::remove_append");
            self.pipe.retire(*id)?;
            self.append_sizes.lock().remove(&id.seq);
            self.sync_dir()?;
            out.files_purged += 1;
        }
        Metrics::add(&self.metrics.files_purged, out.files_purged);
        out.groups_to_compact.sort_unstable();
        Ok(out)
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
    /// threshold: files below it should be freed by rewriting.
    fn rewrite_cutoff(&self, active_seq: u64) -> Option<u64> {
        let sizes = self.append_sizes.lock();
        let total: u64 = sizes.values().sum();
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

    /// Picks, per group, the prefix of data to copy: data in append files below
    /// `cutoff`, and all data in the rewrite queue when it is being compacted.
    fn select(&self, cutoff: Option<u64>, include_rewrite: bool) -> Vec<Selected> {
        let old = |f: FileRef| {
            if f.is_rewrite() {
                include_rewrite
            } else {
                cutoff.is_some_and(|c| f.id().seq < c)
            }
        };
        let mut selected = Vec::new();
        self.index.for_each(|group, g| {
            // The copy is a contiguous prefix of what follows the runs already
            // in the rewrite queue, unless those are being copied too.
            let runs: Vec<Run> = g
                .runs
                .iter()
                .skip_while(|r| r.record.file.is_rewrite() && !include_rewrite)
                .take_while(|r| old(r.record.file))
                .copied()
                .collect();
            let kvs: Vec<_> = g
                .kvs
                .iter()
                .filter(|(_, s)| old(s.file))
                .map(|(k, s)| (k.clone(), s.value.clone(), s.file))
                .collect();
            if runs.is_empty() && kvs.is_empty() {
                return;
            }
            selected.push(Selected { group, runs, kvs });
        });
        selected
    }

    /// Copies the selected data into the rewrite queue and points the index at it.
    /// `snapshot_seq` is the active append file when the data was selected: any
    /// write racing with the copy lands in it or a later file.
    fn rewrite(
        &self,
        selected: Vec<Selected>,
        snapshot_seq: u64,
        out: &mut PurgeOutcome,
    ) -> Result<()> {
        fail::fail_point!("raftlog::rewrite::start", |_| Err(Error::Io {
            op: "rewrite",
            path: self.pipe.dir.clone(),
            source: std::io::Error::other("fail point"),
        }));
        let mut rw = self.pipe.rewrite.lock();
        // Pack groups into batches of about a megabyte.
        let mut pending: Vec<(Selected, Vec<Vec<u8>>)> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut written = Vec::new();
        let limit = self.pipe.config.purge_rewrite_group_bytes_max;
        for mut sel in selected {
            let mut entries = Vec::new();
            let mut append_bytes = 0u64;
            for run in &sel.runs {
                let payload = self.pipe.read_record(run.record)?;
                for i in 0..run.count {
                    let data = crate::log_batch::entry_at(
                        &payload,
                        run.body_offset,
                        run.item_count,
                        run.skip + i,
                    )
                    .map_err(|e| Error::Corruption {
                        path: self.pipe.path(run.record.file.id()),
                        offset: run.record.offset as u64,
                        reason: e.to_string(),
                    })?;
                    if !run.record.file.is_rewrite() {
                        append_bytes += data.len() as u64;
                    }
                    entries.push(data.to_vec());
                }
            }
            if append_bytes > limit {
                // Too much to copy: the caller should compact the group instead.
                // Its rewrite-queue data (a prefix) is still carried over when
                // the rewrite queue is being compacted.
                out.groups_to_compact.push(sel.group);
                let keep: Vec<Run> = sel
                    .runs
                    .iter()
                    .take_while(|r| r.record.file.is_rewrite())
                    .copied()
                    .collect();
                entries.truncate(keep.iter().map(|r| r.count as usize).sum());
                sel.runs = keep;
                sel.kvs.retain(|kv| kv.2.is_rewrite());
                if sel.runs.is_empty() && sel.kvs.is_empty() {
                    continue;
                }
            }
            batch_bytes += entries.iter().map(Vec::len).sum::<usize>()
                + sel
                    .kvs
                    .iter()
                    .map(|(k, v, _)| k.len() + v.len())
                    .sum::<usize>();
            pending.push((sel, entries));
            if batch_bytes >= 1 << 20 {
                written.extend(self.write_rewrite_batch(
                    &mut rw,
                    std::mem::take(&mut pending),
                    out,
                )?);
                batch_bytes = 0;
            }
        }
        if !pending.is_empty() {
            written.extend(self.write_rewrite_batch(&mut rw, pending, out)?);
        }
        if let Some(active) = rw.as_mut() {
            fail::fail_point!("raftlog::rewrite::sync");
            active
                .file
                .sync_data()
                .map_err(Error::io("sync", self.pipe.path(active.id)))?;
            active.synced_end = active.offset;
            Metrics::add(&self.metrics.fsyncs, 1);
        }
        drop(rw);
        // Durable: now install the new locations where nothing newer replaced them.
        let mut lost_race = false;
        for (sel, loc, body) in written {
            lost_race |= !self.install(&sel, loc, body);
        }
        if lost_race {
            // A concurrent write dropped or replaced data while it was being
            // copied: the record doing so is in the file that was active when
            // the data was selected or a later one, and the copy must not
            // outlive it.
            self.min_dirty.fetch_min(snapshot_seq, Ordering::SeqCst);
        }
        Metrics::add(&self.metrics.rewrites, 1);
        Ok(())
    }

    /// Writes one batch of copies; returns, per group, where its copy landed and
    /// the body offset of its entries item.
    fn write_rewrite_batch(
        &self,
        rw: &mut Option<ActiveFile>,
        pending: Vec<(Selected, Vec<Vec<u8>>)>,
        out: &mut PurgeOutcome,
    ) -> Result<Vec<(Selected, RecordLoc, Option<u32>)>> {
        let mut batch = LogBatch::new();
        let mut bodies = Vec::with_capacity(pending.len());
        for (sel, entries) in &pending {
            let before = batch.entry_runs.len();
            if let Some(first) = sel.runs.first() {
                batch.add_entries(sel.group, first.first, entries);
            }
            bodies.push((batch.entry_runs.len() > before).then(|| batch.entry_runs[before].3));
            for (k, v, _) in &sel.kvs {
                batch.put(sel.group, k, v);
            }
            out.entries_rewritten += entries.len() as u64;
            Metrics::add(&self.metrics.entries_rewritten, entries.len() as u64);
        }
        let record = self.encode_record(&batch);
        let len = record.len() as u64;
        let target = self.pipe.config.target_file_size_bytes;
        let need_new = match rw.as_ref() {
            None => true,
            Some(a) => a.offset > FILE_HEADER_LEN as u64 && a.offset + len > target,
        };
        if need_new {
            if let Some(a) = rw.as_ref() {
                if a.write_index_section().is_ok() {
                    Metrics::add(&self.metrics.index_sections_written, 1);
                }
                a.file
                    .sync_data()
                    .map_err(Error::io("sync", self.pipe.path(a.id)))?;
            }
            let mut next = self.pipe.next_rewrite_seq.lock();
            let id = FileId {
                queue: Queue::Rewrite,
                seq: *next,
            };
            let new = crate::pipe::Pipe::new_file(
                &self.pipe.fs,
                &self.pipe.dir,
                &self.pipe.config,
                &self.pipe.recycled,
                &self.metrics,
                id,
            )?;
            *next += 1;
            self.pipe.files.write().insert(id, new.file.clone());
            *rw = Some(new);
        }
        let active = rw.as_mut().expect("set above");
        let mut record = self.seal_record(record, active);
        record.extend_from_slice(&crate::format::END_MARKER);
        active
            .file
            .write_at(active.offset, &record)
            .map_err(Error::io("write", self.pipe.path(active.id)))?;
        let loc = RecordLoc {
            file: FileRef::new(active.id),
            offset: active.offset as u32,
            len: len as u32,
        };
        let items = decode_items(&batch.payload).expect("a batch built by LogBatch always decodes");
        active.section.add_record(loc.len, &items);
        active.offset += len;
        out.bytes_rewritten += len;
        Metrics::add(&self.metrics.bytes_rewritten, len);
        Metrics::add(&self.metrics.bytes_written, len);
        Ok(pending
            .into_iter()
            .zip(bodies)
            .map(|((sel, _), body)| (sel, loc, body))
            .collect())
    }

    /// Points the index at the copy where it still points at the original.
    /// Returns false if anything copied had changed meanwhile.
    fn install(&self, sel: &Selected, loc: RecordLoc, body: Option<u32>) -> bool {
        let Some(g) = self.index.group(sel.group) else {
            return false;
        };
        let mut g = g.write();
        let mut intact = true;
        if let (Some(body), Some(first_copied)) = (body, sel.runs.first()) {
            let item_first = first_copied.first;
            let item_count: u32 = sel.runs.iter().map(|r| r.count).sum();
            // Several runs may share one item (an earlier copy), so a run is
            // matched by its item and its range.
            let mut original: HashMap<(RecordLoc, u32), Vec<(u64, u64)>> = HashMap::new();
            for r in &sel.runs {
                original
                    .entry((r.record, r.body_offset))
                    .or_default()
                    .push((r.first, r.first + r.count as u64));
            }
            let mut matched = 0;
            for run in g.runs.iter_mut() {
                let end = run.first + run.count as u64;
                let found = original
                    .get(&(run.record, run.body_offset))
                    .and_then(|v| v.iter().find(|(lo, hi)| run.first >= *lo && end <= *hi));
                let Some(&(lo, hi)) = found else {
                    if run.record.file.is_rewrite() && matched == 0 {
                        // The uncopied rewrite-queue prefix (see `select`).
                        continue;
                    }
                    break;
                };
                run.record = loc;
                run.body_offset = body;
                run.item_count = item_count;
                run.skip = (run.first - item_first) as u32;
                if run.first != lo || run.first + run.count as u64 != hi {
                    intact = false;
                }
                matched += 1;
            }
            intact &= matched == sel.runs.len();
        }
        for (k, _, file) in &sel.kvs {
            match g.kvs.get_mut(k) {
                Some(slot) if slot.file == *file => slot.file = loc.file,
                _ => intact = false,
            }
        }
        intact
    }

    /// Encodes a batch as a record whose header is filled in by `seal_record`.
    fn encode_record(&self, batch: &LogBatch) -> Vec<u8> {
        let mut record = vec![0u8; crate::format::RECORD_HEADER_LEN];
        record.extend_from_slice(&batch.payload);
        debug_assert!(decode_items(&batch.payload).is_ok_and(|items| items
            .iter()
            .all(|i| matches!(i, Item::Entries { .. } | Item::Put { .. }))));
        record
    }

    fn seal_record(&self, mut record: Vec<u8>, active: &ActiveFile) -> Vec<u8> {
        let payload = &record[crate::format::RECORD_HEADER_LEN..];
        let header = crate::format::RecordHeader {
            file_id: active.id.to_u64(),
            stored_len: payload.len() as u32,
            raw_len: payload.len() as u32,
            payload_crc: strata_codec::crc32c(payload),
            synced_end: active.synced_end as u32,
            codec: crate::format::CODEC_NONE,
        };
        record[..crate::format::RECORD_HEADER_LEN].copy_from_slice(&header.encode());
        record
    }
}
