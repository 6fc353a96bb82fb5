//! The write path: argument checks, encoding (compression, checksum), group
//! commit (the leader's append and sync), rotation, `sync` and `compact_to`.

use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use strata_codec::{crc32c, looks_incompressible, lz4_compress_into};

use crate::format::{
    FileId, RecordHeader, CODEC_LZ4, CODEC_NONE, FILE_HEADER_LEN, RECORD_HEADER_LEN,
};
use crate::index::{FileRef, RecordLoc};
use crate::log_batch::{decode_items_with_capacity, spare, LogBatch};
use crate::metrics::Metrics;
use crate::pipe::{ActiveFile, Pipe, PAGE_BYTES, ZEROS};
use crate::{Engine, Error, Result};
use strata_log::group_commit::Writer;

/// What a writer hands to the group-commit leader.
#[derive(Debug)]
pub(crate) struct WriteRequest {
    /// Locked only by the leader, and by the writer after it is served (to take
    /// its payload back when the write failed).
    payload: Mutex<Payload>,
    stored_len: u32,
    raw_len: u32,
    /// Items in the payload, to size the decoded list.
    item_count: usize,
    payload_crc: u32,
    codec: u8,
    sync: bool,
}

#[derive(Debug)]
struct Payload {
    /// The payload as stored: compressed or not.
    stored: Vec<u8>,
    /// The payload uncompressed, when `stored` is compressed.
    raw: Option<Vec<u8>>,
}

impl Payload {
    fn raw(&self) -> &[u8] {
        self.raw.as_deref().unwrap_or(&self.stored)
    }

    /// Returns the uncompressed buffer and, if there is one, the compressed one.
    fn into_parts(self) -> (Vec<u8>, Option<Vec<u8>>) {
        match self.raw {
            Some(raw) => (raw, Some(self.stored)),
            None => (self.stored, None),
        }
    }
}

impl WriteRequest {
    fn record_len(&self) -> u64 {
        (RECORD_HEADER_LEN as u64) + self.stored_len as u64
    }
}

impl Engine {
    /// Writes `batch` atomically and empties it; returns the bytes appended.
    /// With `sync`, returns only once the batch is durable. On error the batch
    /// is left as it was, so that it can be retried (after `ENOSPC`, say).
    ///
    /// Entries of a group must continue its log: the first index of each run
    /// must be at most the group's last index + 1 (a lower index replaces the
    /// suffix from there, as Raft does).
    pub fn write(&self, batch: &mut LogBatch, sync: bool) -> Result<usize> {
        if let Some(why) = &batch.invalid {
            return Err(Error::InvalidArgument(why.clone()));
        }
        if batch.is_empty() {
            if sync {
                self.sync()?;
            }
            return Ok(0);
        }
        self.check_poisoned()?;
        if batch.payload.len() as u64 > self.pipe.config.batch_bytes_max {
            return Err(Error::InvalidArgument(format!(
                "batch of {} bytes exceeds batch_bytes_max = {}",
                batch.payload.len(),
                self.pipe.config.batch_bytes_max
            )));
        }
        self.check_continuity(batch)?;
        let raw = std::mem::take(&mut batch.payload);
        let request = {
            let _encoding = Encoding::enter(self);
            self.encode(raw, batch.item_count, sync)
        };
        let len = request.record_len() as usize;
        let start = Instant::now();
        let served = self.queue.submit(
            request,
            WriteRequest::record_len,
            GROUP_BYTES_MAX,
            // Gathering pays off only by sharing a sync: an unsynced
            // leader's append is cheaper than the wait (4 writers, sync off).
            || {
                if sync {
                    self.gather()
                }
            },
            |group| self.serve(group),
            |why| {
                // The group's bytes may be in the file while the index lacks
                // them: nothing about the engine's state is known any more.
                let e = Error::Poisoned(why.to_string());
                self.poison(&e);
                Err(e)
            },
        );
        self.metrics.record_write(start.elapsed());
        // The leader is done with the payload: take the buffers back.
        let payload = std::mem::replace(
            &mut *served.writer.request.payload.lock(),
            Payload {
                stored: Vec::new(),
                raw: None,
            },
        );
        match served.outcome {
            Ok(()) => {
                // Keep the allocations for the batch's next use.
                let (raw, compressed) = payload.into_parts();
                batch.clear();
                batch.payload = raw;
                batch.payload.clear();
                if let Some(c) = compressed {
                    spare::give(c);
                }
                Ok(len)
            }
            Err(e) => {
                // Give the batch back intact so the caller may retry it.
                let (raw, compressed) = payload.into_parts();
                batch.payload = raw;
                if let Some(c) = compressed {
                    spare::give(c);
                }
                Err(e)
            }
        }
    }

    /// Checks that every run of entries continues its group's log, as the
    /// group will be when the batch's earlier items are applied: a run may
    /// start at most one past the group's last index, anywhere once the group
    /// is empty (a compaction past its end or a removal earlier in the batch).
    fn check_continuity(&self, batch: &LogBatch) -> Result<()> {
        let runs = &batch.entry_runs;
        // A small batch looks back through its own items, which allocates
        // nothing on the write path; a big one keeps a map of each group's
        // last index as the batch leaves it so far (`None`: the group is empty).
        let mut map: Option<rustc_hash::FxHashMap<u64, Option<u64>>> =
            (runs.len() + batch.resets.len() > 32).then(Default::default);
        let mut resets = batch.resets.iter().peekable();
        for (i, &(group, first, count, _)) in runs.iter().enumerate() {
            let last = match &mut map {
                None => self.last_before(batch, i),
                Some(map) => {
                    while let Some(&(_, g, index)) = resets.next_if(|r| r.0 <= i) {
                        let last = map.entry(g).or_insert_with(|| self.index.last_index(g));
                        if last.is_some_and(|l| l < index) {
                            *last = None;
                        }
                    }
                    map.get(&group)
                        .copied()
                        .unwrap_or_else(|| self.index.last_index(group))
                }
            };
            if let Some(last) = last.filter(|&l| first > l + 1) {
                return Err(Error::InvalidArgument(format!(
                    "group {group}: entries from {first} leave a gap after last index {last}"
                )));
            }
            if let Some(map) = &mut map {
                // `LogBatch` refused runs whose end overflows.
                map.insert(group, Some(first + count as u64 - 1));
            }
        }
        Ok(())
    }

    /// The last index of run `i`'s group as the batch's items before run `i`
    /// leave it: the group's earlier run in the batch (or the index), then
    /// any compaction or removal of the group queued after that run.
    fn last_before(&self, batch: &LogBatch, i: usize) -> Option<u64> {
        let runs = &batch.entry_runs;
        let group = runs[i].0;
        let earlier = runs[..i].iter().rposition(|r| r.0 == group);
        let mut last = match earlier {
            Some(j) => Some(runs[j].1 + runs[j].2 as u64 - 1),
            None => self.index.last_index(group),
        };
        let after = earlier.map_or(0, |j| j + 1);
        for &(_, _, index) in batch
            .resets
            .iter()
            .filter(|r| r.1 == group && (after..=i).contains(&r.0))
        {
            if last.is_some_and(|l| l < index) {
                last = None;
            }
        }
        last
    }

    fn encode(&self, raw: Vec<u8>, item_count: usize, sync: bool) -> WriteRequest {
        thread_local! {
            /// Whether this thread's last compressed batch saved at least an
            /// eighth. While it does, skip the sample and compress at once: on
            /// compressible data the sample is pure overhead.
            static COMPRESSES_WELL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        let threshold = self.pipe.config.compression_threshold_bytes;
        let raw_len = raw.len() as u32;
        if threshold > 0
            && raw.len() as u64 >= threshold
            && (COMPRESSES_WELL.get() || !looks_incompressible(&raw))
        {
            let mut compressed = spare::take();
            lz4_compress_into(&raw, &mut compressed);
            COMPRESSES_WELL.set(compressed.len() * 8 <= raw.len() * 7);
            if compressed.len() < raw.len() {
                Metrics::add(&self.metrics.compressed_batches, 1);
                return WriteRequest {
                    payload_crc: crc32c(&compressed),
                    stored_len: compressed.len() as u32,
                    payload: Mutex::new(Payload {
                        stored: compressed,
                        raw: Some(raw),
                    }),
                    raw_len,
                    item_count,
                    codec: CODEC_LZ4,
                    sync,
                };
            }
            spare::give(compressed);
        }
        WriteRequest {
            payload_crc: crc32c(&raw),
            stored_len: raw_len,
            payload: Mutex::new(Payload {
                stored: raw,
                raw: None,
            }),
            raw_len,
            item_count,
            codec: CODEC_NONE,
            sync,
        }
    }

    /// Before a leader takes its group: waits (briefly) for the writers that
    /// are compressing their batches, so they join this group. Otherwise they
    /// queue one by one while the leader appends, competing with it for the
    /// CPU and waiting a whole extra sync; with many writers on few cores a
    /// leader's append took ten times as long (`docs/raftlog.md`).
    fn gather(&self) {
        let deadline = Instant::now() + GATHER_WAIT_MAX;
        let mut n = self.encoding.lock();
        while *n > 0 {
            if self.encoded.wait_until(&mut n, deadline).timed_out() {
                break;
            }
        }
    }

    /// Serves one group commit: runs on the leader's thread.
    fn serve(&self, group: &[Arc<Writer<WriteRequest, Result<()>>>]) -> Vec<Result<()>> {
        match self.serve_inner(group) {
            Ok(()) => group.iter().map(|_| Ok(())).collect(),
            Err(e) => group.iter().map(|_| Err(e.duplicate())).collect(),
        }
    }

    fn serve_inner(&self, group: &[Arc<Writer<WriteRequest, Result<()>>>]) -> Result<()> {
        self.check_poisoned()?;
        fail::fail_point!("raftlog::write::leader");
        let compactions = std::mem::take(&mut *self.pending_compactions.lock());
        if compactions.is_empty() {
            return self.append_group(group, None);
        }
        let mut batch = LogBatch::new();
        for &(g, index) in &compactions {
            batch.compact_to(g, index);
        }
        let outcome = self.append_group(group, Some(&batch.payload));
        if outcome.is_err() {
            // Not logged: the next group commit tries again.
            self.pending_compactions.lock().splice(0..0, compactions);
        }
        outcome
    }

    /// Appends the group's records, after a record of `compactions` if given.
    fn append_group(
        &self,
        group: &[Arc<Writer<WriteRequest, Result<()>>>],
        compactions: Option<&[u8]>,
    ) -> Result<()> {
        let mut active = self.pipe.append.lock();
        let extra_len = compactions.map_or(0, |p| (RECORD_HEADER_LEN + p.len()) as u64);
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
        let extra_header = compactions.map(|p| {
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
        if let (Some(header), Some(payload)) = (&extra_header, compactions) {
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
        // The bytes are in place (and durable if asked): show them to readers.
        let file = FileRef::new(active.id);
        let mut offset = active.offset;
        let mut shadows = false;
        if let Some(payload) = compactions {
            // Already applied by `compact_to`; applying again changes nothing.
            let loc = RecordLoc {
                file,
                offset: offset as u32,
                len: extra_len as u32,
            };
            let items = crate::log_batch::decode_items(payload)
                .map_err(|e| self.undecodable_own_batch(&path, e))?;
            shadows |= self.index.apply_record(&items, loc, false).shadows_rewrite;
            active.section.add_record(loc.len, &items);
            offset += extra_len;
        }
        for w in group {
            let loc = RecordLoc {
                file,
                offset: offset as u32,
                len: w.request.record_len() as u32,
            };
            let payload = w.request.payload.lock();
            let items = decode_items_with_capacity(payload.raw(), w.request.item_count)
                .map_err(|e| self.undecodable_own_batch(&path, e))?;
            shadows |= self.index.apply_record(&items, loc, false).shadows_rewrite;
            active.section.add_record(loc.len, &items);
            offset += loc.len as u64;
        }
        if shadows {
            self.min_dirty.fetch_min(active.id.seq, Ordering::SeqCst);
        }
        active.offset = offset;
        if sync {
            active.synced_end = offset;
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
        Ok(())
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
    fn undecodable_own_batch(&self, path: &std::path::Path, e: strata_codec::DecodeError) -> Error {
        let e = Error::Poisoned(format!(
            "a checked batch written to {} does not decode: {e}",
            path.display()
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
                // Still under its `recycle-` name: the preparer renames it.
                (ActiveFile::empty(next, prepared.file), Some(prepared.name))
            }
            None => (self.make_next_file(next)?, None),
        };
        let mut new = new;
        if let Some(builder) = preparer.spare_builder() {
            new.section = builder;
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

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.check_poisoned()?;
        self.flush_compactions()?;
        let mut active = self.pipe.append.lock();
        if let Err(e) = active.file.sync_data() {
            let e = Error::io("sync", self.pipe.path(active.id))(e);
            self.poison(&e);
            return Err(e);
        }
        active.synced_end = active.offset;
        Metrics::add(&self.metrics.fsyncs, 1);
        Ok(())
    }

    /// Makes every write so far durable like [`Engine::sync`], but syncs
    /// without holding the active file: writers go on appending meanwhile
    /// (purge's sync of an unsynced log took 50-90 ms, with every writer
    /// waiting behind it). Once the sync returns, the bytes up to the offset
    /// read before it are durable; a rotation in between sealed the file,
    /// with a sync if its data was not synced.
    pub(crate) fn sync_beside_writers(&self) -> Result<()> {
        self.check_poisoned()?;
        self.flush_compactions()?;
        let (id, file, offset) = {
            let active = self.pipe.append.lock();
            if active.synced_end == active.offset {
                // Every byte written is durable already (a rotation syncs
                // what it seals): a sync would only flush the disk's cache.
                return Ok(());
            }
            (active.id, active.file.clone(), active.offset)
        };
        if let Err(e) = file.sync_data() {
            let e = Error::io("sync", self.pipe.path(id))(e);
            self.poison(&e);
            return Err(e);
        }
        Metrics::add(&self.metrics.fsyncs, 1);
        let mut active = self.pipe.append.lock();
        if active.id == id && active.synced_end < offset {
            active.synced_end = offset;
        }
        Ok(())
    }

    /// Drops the entries of `group` below `index`; returns how many were
    /// dropped. The compaction is in the index at once and is logged, without
    /// a sync, ahead of the records of the next group commit (any writer's,
    /// `sync`'s, `close`'s, or that of a purge with files to copy or free),
    /// so it never waits for I/O. Like any
    /// unsynced write it is durable once a later sync covers it, and a crash
    /// before that brings the entries back: never a write made after it
    /// without the compaction.
    ///
    /// So after a crash on an idle engine, one that made no group commit and
    /// no sync after the compaction, `first_index` can move back to where it
    /// was: the compaction was never logged, or logged and not synced. Call
    /// [`Engine::sync`] after it when the new first index must survive.
    pub fn compact_to(&self, group: u64, index: u64) -> Result<u64> {
        self.check_poisoned()?;
        let Some(g) = self.index.group(group) else {
            return Ok(0);
        };
        let (dropped, effect) = {
            let mut g = g.write();
            if g.first_index().is_none_or(|first| index <= first) {
                return Ok(0);
            }
            // Queued under the group's lock, so the log has this group's
            // compactions in the order they were made.
            self.pending_compactions.lock().push((group, index));
            g.compact_to(index)
        };
        if effect.shadows_rewrite {
            // The record lands in the active file or a later one.
            self.min_dirty
                .fetch_min(self.active_seq.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        self.index.drop_if_empty(group);
        Ok(dropped)
    }

    /// Logs the compactions `compact_to` queued, without sync.
    pub(crate) fn flush_compactions(&self) -> Result<()> {
        let pending = std::mem::take(&mut *self.pending_compactions.lock());
        if pending.is_empty() {
            return Ok(());
        }
        let mut batch = LogBatch::new();
        for &(g, index) in &pending {
            batch.compact_to(g, index);
        }
        if let Err(e) = self.write(&mut batch, false) {
            self.pending_compactions.lock().splice(0..0, pending);
            return Err(e);
        }
        Ok(())
    }
}

/// Bytes of records one group commit appends at most (one batch may exceed
/// it alone). A larger append only makes its writers wait longer: by a few
/// megabytes a sync already runs near the disk's bandwidth.
const GROUP_BYTES_MAX: u64 = 4 << 20;

/// Counts a writer as encoding while it lives (see `Engine::gather`); the
/// count drops even if encoding panics, so no leader waits for a dead writer.
struct Encoding<'a>(&'a Engine);

impl<'a> Encoding<'a> {
    fn enter(engine: &'a Engine) -> Self {
        *engine.encoding.lock() += 1;
        Encoding(engine)
    }
}

impl Drop for Encoding<'_> {
    fn drop(&mut self) {
        let mut n = self.0.encoding.lock();
        *n -= 1;
        if *n == 0 {
            self.0.encoded.notify_all();
        }
    }
}

/// The longest a leader waits for writers still compressing (see `gather`).
const GATHER_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(2);
