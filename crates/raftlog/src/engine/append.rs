//! The group-commit leader's side of a write: the group's records appended
//! in one write (and synced when a writer asked), the index updated after,
//! a failed append cut durably, and rotation to the next append file when
//! the active one is full. The writers' side (checks, encoding, the queue)
//! is `write.rs`.

use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use strata_codec::crc32c;

use super::write::WriteRequest;
use crate::format::{FileId, RecordHeader, CODEC_NONE, FILE_HEADER_LEN, RECORD_HEADER_LEN};
use crate::index::{FileRef, RecordLoc};
use crate::log_batch::{decode_items_with_capacity, LogBatch};
use crate::metrics::Metrics;
use crate::pipe::{ActiveFile, Pipe, PAGE_BYTES, ZEROS};
use crate::section::SectionBuilder;
use crate::{Engine, Error, Result};
use strata_log::group_commit::{Stage, Writer};

/// What a group's append leaves for its finish (`Engine::index_group`).
#[derive(Debug)]
pub(super) struct Appended {
    /// The file the records went to.
    file: FileRef,
    /// Where the group's first record starts.
    offset: u64,
    /// The payload of the compactions' record, written first, if any.
    compactions: Option<Vec<u8>>,
    /// The file's index section, which the records join.
    section: Arc<parking_lot::Mutex<SectionBuilder>>,
}

impl Engine {
    /// The first stage of a group commit, on the leader's thread: the
    /// group's records appended (after a record of the compactions
    /// `compact_to` queued) and synced if asked. The index learns them in
    /// [`Engine::index_group`], beside the next group's append.
    pub(super) fn append_stage(
        &self,
        group: &[Arc<Writer<WriteRequest, Result<()>>>],
    ) -> Stage<Appended, Result<()>> {
        let failed = |e: Error| Stage::Done(group.iter().map(|_| Err(e.duplicate())).collect());
        if let Err(e) = self.check_poisoned() {
            return failed(e);
        }
        fail::fail_point!("raftlog::write::leader");
        let compactions = std::mem::take(&mut *self.pending_compactions.lock());
        if compactions.is_empty() {
            return self
                .append_group(group, None)
                .map_or_else(failed, Stage::Finish);
        }
        let mut batch = LogBatch::new();
        for &(g, index) in &compactions {
            batch.compact_to(g, index);
        }
        let payload = std::mem::take(&mut batch.payload);
        match self.append_group(group, Some(payload)) {
            Ok(appended) => Stage::Finish(appended),
            Err(e) => {
                // Not logged: the next group commit tries again.
                self.pending_compactions.lock().splice(0..0, compactions);
                failed(e)
            }
        }
    }

    /// The second stage of a group commit: applies the records
    /// [`Engine::append_stage`] appended to the index and adds them to
    /// their file's index section, in the log's order
    /// (the queue runs finishes one at a time, in the order of their
    /// groups), so readers see them; the writers learn their outcome after.
    pub(super) fn index_group(
        &self,
        group: &[Arc<Writer<WriteRequest, Result<()>>>],
        appended: Appended,
    ) -> Vec<Result<()>> {
        match self.index_records(group, appended) {
            Ok(()) => group.iter().map(|_| Ok(())).collect(),
            Err(e) => group.iter().map(|_| Err(e.duplicate())).collect(),
        }
    }

    fn index_records(
        &self,
        group: &[Arc<Writer<WriteRequest, Result<()>>>],
        appended: Appended,
    ) -> Result<()> {
        fail::fail_point!("raftlog::write::index");
        let Appended {
            file,
            mut offset,
            compactions,
            section,
        } = appended;
        let mut shadows = false;
        if let Some(payload) = &compactions {
            // Already applied by `compact_to`; applying again changes nothing.
            let len = (RECORD_HEADER_LEN + payload.len()) as u32;
            let loc = RecordLoc {
                file,
                offset: offset as u32,
                len,
            };
            let items = crate::log_batch::decode_items(payload)
                .map_err(|e| self.undecodable_own_batch(file.id(), e))?;
            shadows |= self.index.apply_record(&items, loc, false).shadows_rewrite;
            section.lock().add_record(len, &items);
            offset += len as u64;
        }
        for w in group {
            let loc = RecordLoc {
                file,
                offset: offset as u32,
                len: w.request.record_len() as u32,
            };
            let payload = w.request.payload.lock();
            let items = decode_items_with_capacity(payload.raw(), w.request.item_count)
                .map_err(|e| self.undecodable_own_batch(file.id(), e))?;
            shadows |= self.index.apply_record(&items, loc, false).shadows_rewrite;
            section.lock().add_record(loc.len, &items);
            offset += loc.len as u64;
        }
        if shadows {
            self.min_dirty.fetch_min(file.id().seq, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Appends the group's records, after a record of `compactions` if
    /// given; returns where they went, for the group's index update.
    fn append_group(
        &self,
        group: &[Arc<Writer<WriteRequest, Result<()>>>],
        compactions: Option<Vec<u8>>,
    ) -> Result<Appended> {
        let mut active = self.pipe.append.lock();
        let extra_len = compactions
            .as_ref()
            .map_or(0, |p| (RECORD_HEADER_LEN + p.len()) as u64);
        let total: u64 = extra_len + group.iter().map(|w| w.request.record_len()).sum::<u64>();
        let target = self.pipe.config.target_file_size_bytes;
        if active.offset > FILE_HEADER_LEN as u64 && active.offset + total > target {
            self.rotate_append(&mut active)?;
        }
        if active.offset + total > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "a group of {total} bytes does not fit in one file"
            )));
        }
        let file_id = active.id.to_u64();
        // Offsets fit in u32: checked above.
        let synced_end = active.synced_end as u32;
        // One gathered write of every record and the end marker: no copy of
        // the payloads into one buffer.
        let headers: Vec<[u8; RECORD_HEADER_LEN]> = group
            .iter()
            .map(|w| {
                let r = &w.request;
                RecordHeader {
                    file_id,
                    stored_len: r.stored_len,
                    raw_len: r.raw_len,
                    payload_crc: r.payload_crc,
                    synced_end,
                    codec: r.codec,
                }
                .encode()
            })
            .collect();
        let extra_header = compactions.as_ref().map(|p| {
            RecordHeader {
                file_id,
                stored_len: p.len() as u32,
                raw_len: p.len() as u32,
                payload_crc: crc32c(p),
                synced_end,
                codec: CODEC_NONE,
            }
            .encode()
        });
        let sync = group.iter().any(|w| w.request.sync);
        let payloads: Vec<_> = group.iter().map(|w| w.request.payload.lock()).collect();
        let mut slices = Vec::with_capacity(2 * group.len() + 3);
        if let (Some(header), Some(payload)) = (&extra_header, &compactions) {
            slices.push(IoSlice::new(header));
            slices.push(IoSlice::new(payload));
        }
        for (header, payload) in headers.iter().zip(&payloads) {
            slices.push(IoSlice::new(header));
            slices.push(IoSlice::new(&payload.stored));
        }
        slices.push(IoSlice::new(&crate::format::END_MARKER));
        let pad = self.page_padding(active.offset + total + RECORD_HEADER_LEN as u64);
        if pad > 0 {
            slices.push(IoSlice::new(&ZEROS[..pad]));
        }
        let path = self.pipe.path(active.id);
        fail::fail_point!("raftlog::write::append", |_| Err(Error::Io {
            op: "write",
            path: path.clone(),
            source: std::io::Error::other("fail point"),
        }));
        let written = active.file.write_vectored_at(active.offset, &slices);
        // Unlock the payloads: the loop below locks them again.
        drop(slices);
        drop(payloads);
        if let Err(e) = written {
            // Part of the group may be in the file. Cut it off, so that a later,
            // shorter record cannot leave a valid-looking unacknowledged record
            // after itself; if the cut fails, nothing about the file is known.
            if let Err(cut) = self.cut_tail(&active) {
                self.poison(&cut);
            }
            return Err(Error::io("write", &path)(e));
        }
        if sync {
            fail::fail_point!("raftlog::write::sync", |_| {
                let e = Error::Io {
                    op: "sync",
                    path: path.clone(),
                    source: std::io::Error::other("fail point"),
                };
                self.poison(&e);
                Err(e)
            });
            if let Err(e) = active.file.sync_data() {
                let e = Error::io("sync", &path)(e);
                self.poison(&e);
                return Err(e);
            }
            Metrics::add(&self.metrics.fsyncs, 1);
        }
        // The bytes are in place (and durable if asked); the index and the
        // file's index section learn them in the finish.
        let file = FileRef::new(active.id);
        let start = active.offset;
        let offset = start + total;
        active.offset = offset;
        if sync {
            active.synced_end = offset;
        }
        // A recycled file's old cache goes just ahead of the appends, and
        // after large appends the synced pages some way behind them
        // (`cache_drop.rs`), off the leader's path when there is a preparer.
        let a = &mut *active;
        let ahead = a.drop_ahead.as_mut().and_then(|d| d.due(&a.file, offset));
        let keep = self.pipe.config.cached_tail_bytes;
        let behind = if keep > 0 && sync && self.metrics.appends_are_large() {
            a.drop_behind.due(&a.file, offset, keep)
        } else {
            None
        };
        for range in [ahead, behind].into_iter().flatten() {
            match &self.preparer {
                Some(p) => p.drop_cache(range),
                None => range.run(),
            }
        }
        if let Some((from, len)) = active.writeback.due(offset) {
            // Synced bytes are clean already.
            if !sync {
                Metrics::add(&self.metrics.writeback_hints, 1);
                match &self.preparer {
                    Some(p) => p.start_writeback(active.file.clone(), from, len),
                    None => {
                        let _ = active.file.start_writeback(from, len);
                    }
                }
            }
        }
        Metrics::add(&self.metrics.bytes_written, total);
        Metrics::add(&self.metrics.batches_written, group.len() as u64);
        Metrics::add(&self.metrics.write_groups, 1);
        let payload: u64 = group.iter().map(|w| w.request.raw_len as u64).sum();
        Metrics::add(&self.metrics.payload_bytes, payload);
        Ok(Appended {
            file,
            offset: start,
            compactions,
            section: active.section.clone(),
        })
    }

    /// Zeros to write after the end marker ending at `end`, up to the next
    /// page boundary, so that the append covers its last page whole. In a
    /// preallocated file the page past the data may hold a recycled file's
    /// old bytes; a write into part of a page that is not cached reads the
    /// page from the disk first, synchronously, on the leader's path (every
    /// unsynced append of 16 KiB or more, after `drop_cache`, paid one such
    /// read). Whole pages need no read. The zeros are past the end marker,
    /// where the next append writes anyway. None where the append grows the
    /// file: pages past the end read as zeros without I/O.
    fn page_padding(&self, end: u64) -> usize {
        let config = &self.pipe.config;
        let pad = (PAGE_BYTES - end % PAGE_BYTES) % PAGE_BYTES;
        if !config.preallocate || end + pad > config.target_file_size_bytes {
            return 0;
        }
        pad as usize
    }

    /// A batch that `LogBatch` built and `write` checked does not decode: a
    /// bug, found after its bytes reached the file. Poisons the engine, since
    /// the index no longer matches the file.
    fn undecodable_own_batch(&self, file: FileId, e: strata_codec::DecodeError) -> Error {
        let e = Error::Poisoned(format!(
            "a checked batch written to {} does not decode: {e}",
            self.pipe.path(file).display()
        ));
        self.poison(&e);
        e
    }

    /// Cuts what a failed append may have left after the last good record, and
    /// makes the cut durable: the caller was told the write failed, so its
    /// records must not come back after a crash.
    fn cut_tail(&self, active: &ActiveFile) -> Result<()> {
        let path = self.pipe.path(active.id);
        fail::fail_point!("raftlog::write::cut", |_| Err(Error::Io {
            op: "truncate",
            path: path.clone(),
            source: std::io::Error::other("fail point"),
        }));
        active
            .file
            .truncate(active.offset)
            .map_err(Error::io("truncate", &path))?;
        active.file.sync_all().map_err(Error::io("sync", &path))?;
        Metrics::add(&self.metrics.fsyncs, 1);
        if self.pipe.config.preallocate {
            // Best effort: without the space, appends extend the file instead.
            let _ = active
                .file
                .allocate(self.pipe.config.target_file_size_bytes);
        }
        Ok(())
    }

    fn rotate_append(&self, active: &mut ActiveFile) -> Result<()> {
        // The group before this one may still be reaching the index: a
        // sealed file's records are all indexed (purge counts on it).
        self.queue.wait_for_finish();
        let sealed = (active.id.seq, active.offset);
        if let Err(e) = self.rotate_to_next(active) {
            // A failed sync (of the sealed file, the new one or the directory)
            // leaves what is durable unknown.
            if matches!(
                &e,
                Error::Io {
                    op: "sync" | "sync dir",
                    ..
                }
            ) {
                self.poison(&e);
            }
            return Err(e);
        }
        self.append_sizes.lock().insert(sealed.0, sealed.1);
        self.active_seq.store(active.id.seq, Ordering::SeqCst);
        Ok(())
    }

    /// Seals the active append file and makes the next one active: the
    /// file the preparer made ahead if it is ready (`prepare.rs`), else one
    /// made here. The leader syncs the sealed file's data if it was not
    /// synced; the file's index section (its encoding and write, 70-100 ms
    /// at 100,000 groups) and emptying its builder for reuse are left to the
    /// preparer when there is one, as is the new file's rename. A file whose
    /// section never became durable is scanned by recovery instead.
    fn rotate_to_next(&self, active: &mut ActiveFile) -> Result<()> {
        let next = active.id.next();
        let Some(preparer) = self.preparer.as_ref() else {
            self.pipe.seal(active, true, &self.metrics)?;
            let new = self.make_next_file(next)?;
            drop(self.pipe.install_next(active, new, &self.metrics));
            return Ok(());
        };
        if active.synced_end < active.offset {
            fail::fail_point!("raftlog::rotate::seal", |_| Err(Error::Io {
                op: "sync",
                path: self.pipe.path(active.id),
                source: std::io::Error::other("fail point"),
            }));
            active
                .file
                .sync_data()
                .map_err(Error::io("sync", self.pipe.path(active.id)))?;
            Metrics::add(&self.metrics.fsyncs, 1);
            active.synced_end = active.offset;
        }
        // A rename the preparer could not do must be done before a later
        // file takes the active one's place, and before `make_next_file`
        // syncs the directory (normally long done: no call).
        preparer.finish_rename()?;
        let (new, name) = match preparer.take(next) {
            Some(prepared) => {
                Metrics::add(&self.metrics.rotations_prepared, 1);
                let mut new = ActiveFile::empty(next, prepared.file);
                new.drop_ahead = prepared.drop_ahead;
                // Still under its `recycle-` name: the preparer renames it.
                (new, Some(prepared.name))
            }
            None => (self.make_next_file(next)?, None),
        };
        if let Some(builder) = preparer.spare_builder() {
            *new.section.lock() = builder;
        }
        let sealed = self.pipe.install_next(active, new, &self.metrics);
        preparer.rotated(next, name, sealed);
        Ok(())
    }

    /// Makes the append queue's next file on the leader's path (no file was
    /// made ahead).
    fn make_next_file(&self, next: FileId) -> Result<ActiveFile> {
        // The active file's own rename (done: see `rotate_to_next`) may not
        // be durable yet: it must be before the next file's name can be.
        self.pipe
            .fs
            .sync_dir(&self.pipe.dir)
            .map_err(Error::io("sync dir", &self.pipe.dir))?;
        Metrics::add(&self.metrics.fsyncs, 1);
        Pipe::new_file(
            &self.pipe.fs,
            &self.pipe.dir,
            &self.pipe.config,
            &self.pipe.recycled,
            &self.metrics,
            next,
        )
    }
}
