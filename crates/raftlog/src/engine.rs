//! `Engine`: the public face of raftlog. Writes go through group commit into
//! the append queue; reads go to the index and then to the files.
//!
//! Invariants:
//! - A write is applied to the index only after its bytes are in the file (and
//!   synced, when any writer of its group asked for sync), and in the order of
//!   the log, so the index never shows what recovery would not.
//! - After a failed sync `poisoned` is set and stays set: every later write
//!   fails with [`Error::Poisoned`].
//! - `min_dirty` is the lowest append-file sequence whose records hide data
//!   that is still copied in the rewrite queue; purge must not delete such a
//!   file before it has rewritten the rewrite queue (see `purge.rs`).
//!
//! Concurrency: see `write_group.rs` (writers), `index.rs` (readers) and
//! `pipe.rs` (files). Purge runs under `purge_lock`, concurrently with both.

use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use strata_codec::{crc32c, looks_incompressible, lz4_compress_into};
use strata_fs::{DiskFs, FileLock, FileSystem};

use crate::format::{
    FileId, Queue, RecordHeader, CODEC_LZ4, CODEC_NONE, FILE_HEADER_LEN, RECORD_HEADER_LEN,
};
use crate::index::{EntryLoc, FileRef, Index, RecordLoc};
use crate::log_batch::{decode_items_with_capacity, entry_at, spare, LogBatch};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::pipe::Pipe;
use crate::recovery::RecoveryReport;
use crate::write_group::{WriteQueue, Writer};
use crate::{Config, Error, Result};

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

/// Counts of the index's contents and memory.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IndexStats {
    /// Groups with any entry or key.
    pub groups: u64,
    /// Live entries over all groups.
    pub entries: u64,
    /// Keys over all groups.
    pub keys: u64,
    /// Approximate heap bytes used by the index, keys' values included.
    pub memory_bytes: u64,
    /// Index bytes per live entry, counting only entry locations.
    pub entry_bytes_per_entry: f64,
}

/// Counts of the files on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileStats {
    /// Files of the append queue, the active one included.
    pub append_files: u64,
    /// Files of the rewrite queue.
    pub rewrite_files: u64,
    /// Bytes written into the append queue's files (record ends, not file sizes).
    pub append_bytes: u64,
    /// Sequence number of the oldest append file.
    pub first_append_seq: u64,
    /// Sequence number of the active append file.
    pub active_append_seq: u64,
    /// Purged files kept for reuse.
    pub recycled_files: u64,
}

/// The raft log engine. Share it between threads with an `Arc`.
#[derive(Debug)]
pub struct Engine {
    pub(crate) pipe: Pipe,
    pub(crate) index: Index,
    pub(crate) metrics: Metrics,
    queue: WriteQueue<WriteRequest, Result<()>>,
    poisoned: AtomicBool,
    poison_reason: Mutex<String>,
    pub(crate) min_dirty: AtomicU64,
    /// Writers between their continuity check and the queue (encoding and
    /// compressing); `encoded` is notified when it drops to zero.
    encoding: Mutex<usize>,
    encoded: parking_lot::Condvar,
    /// Compactions made in the index and not yet logged: the next group commit
    /// writes them ahead of its records (see `compact_to`).
    pending_compactions: Mutex<Vec<(u64, u64)>>,
    /// Sequence of the active append file (only grows).
    active_seq: AtomicU64,
    pub(crate) purge_lock: Mutex<()>,
    /// End offset of every sealed append file, for sizing purge.
    pub(crate) append_sizes: Mutex<std::collections::BTreeMap<u64, u64>>,
    report: RecoveryReport,
    _lock: Box<dyn FileLock>,
}

impl Engine {
    /// Opens (creating if needed) the engine in `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<Engine> {
        Self::open_with_fs(dir, config, Arc::new(DiskFs::new()))
    }

    /// Opens (creating if needed) the engine in `dir` on `fs`, recovering the
    /// index from the files (see `docs/raftlog.md`).
    pub fn open_with_fs(
        dir: impl AsRef<Path>,
        config: Config,
        fs: Arc<dyn FileSystem>,
    ) -> Result<Engine> {
        config.validate()?;
        let dir: PathBuf = dir.as_ref().to_path_buf();
        fs.create_dir_all(&dir)
            .map_err(Error::io("create dir", &dir))?;
        let lock_path = dir.join(crate::format::LOCK_FILE_NAME);
        let lock = fs.lock(&lock_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked(dir.clone())
            } else {
                Error::io("lock", &lock_path)(e)
            }
        })?;
        let metrics = Metrics::new();
        let index = Index::new();
        let recovered = crate::recovery::recover(&fs, &dir, &config, &index, &metrics)?;
        let active_seq = recovered.active.id.seq;
        let pipe = Pipe {
            fs,
            dir,
            config,
            files: parking_lot::RwLock::new(recovered.files),
            append: Mutex::new(recovered.active),
            rewrite: Mutex::new(None),
            recycled: Mutex::new(recovered.recycled),
            next_rewrite_seq: Mutex::new(recovered.next_rewrite_seq),
        };
        Ok(Engine {
            pipe,
            index,
            metrics,
            queue: WriteQueue::new(),
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(String::new()),
            min_dirty: AtomicU64::new(recovered.min_dirty),
            pending_compactions: Mutex::new(Vec::new()),
            encoding: Mutex::new(0),
            encoded: parking_lot::Condvar::new(),
            active_seq: AtomicU64::new(active_seq),
            purge_lock: Mutex::new(()),
            append_sizes: Mutex::new(recovered.append_sizes),
            report: recovered.report,
            _lock: lock,
        })
    }

    /// Writes `batch` atomically and empties it; returns the bytes appended.
    /// With `sync`, returns only once the batch is durable. On error the batch
    /// is left as it was, so that it can be retried (after `ENOSPC`, say).
    ///
    /// Entries of a group must continue its log: the first index of each run
    /// must be at most the group's last index + 1 (a lower index replaces the
    /// suffix from there, as Raft does).
    pub fn write(&self, batch: &mut LogBatch, sync: bool) -> Result<usize> {
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
            || self.gather(),
            |group| self.serve(group),
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

    fn check_continuity(&self, batch: &LogBatch) -> Result<()> {
        let runs = &batch.entry_runs;
        // A small batch finds its own earlier runs of a group by looking back,
        // which allocates nothing; a big one keeps a map.
        let mut last_in_batch: Option<rustc_hash::FxHashMap<u64, u64>> =
            (runs.len() > 32).then(Default::default);
        for (i, &(group, first, count, _)) in runs.iter().enumerate() {
            let earlier = match &last_in_batch {
                Some(map) => map.get(&group).copied(),
                None => runs[..i]
                    .iter()
                    .rev()
                    .find(|r| r.0 == group)
                    .map(|r| r.1 + r.2 as u64 - 1),
            };
            let last = match earlier {
                Some(l) => Some(l),
                None => self.index.group(group).and_then(|g| g.read().last_index()),
            };
            if let Some(last) = last {
                if first > last + 1 {
                    return Err(Error::InvalidArgument(format!(
                        "group {group}: entries from {first} leave a gap after last index {last}"
                    )));
                }
            }
            if let Some(map) = &mut last_in_batch {
                map.insert(group, first + count as u64 - 1);
            }
        }
        Ok(())
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
                .expect("a batch built by LogBatch always decodes");
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
                .expect("a batch built by LogBatch always decodes");
            shadows |= self.index.apply_record(&items, loc, false).shadows_rewrite;
            active.section.add_record(loc.len, &items);
            offset += loc.len as u64;
        }
        if shadows {
            self.min_dirty.fetch_min(active.id.seq, Ordering::SeqCst);
        }
        active.offset = offset;
        Metrics::add(&self.metrics.bytes_written, total);
        Metrics::add(&self.metrics.batches_written, group.len() as u64);
        Metrics::add(&self.metrics.write_groups, 1);
        let payload: u64 = group.iter().map(|w| w.request.raw_len as u64).sum();
        Metrics::add(&self.metrics.payload_bytes, payload);
        Ok(())
    }

    fn cut_tail(&self, active: &crate::pipe::ActiveFile) -> Result<()> {
        let path = self.pipe.path(active.id);
        active
            .file
            .truncate(active.offset)
            .map_err(Error::io("truncate", &path))?;
        if self.pipe.config.preallocate {
            // Best effort: without the space, appends extend the file instead.
            let _ = active
                .file
                .allocate(self.pipe.config.target_file_size_bytes);
        }
        Ok(())
    }

    fn rotate_append(&self, active: &mut crate::pipe::ActiveFile) -> Result<()> {
        let sealed = (active.id.seq, active.offset);
        if let Err(e) = self.pipe.rotate(active, &self.metrics) {
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

    fn poison(&self, e: &Error) {
        *self.poison_reason.lock() = e.to_string();
        self.poisoned.store(true, Ordering::SeqCst);
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(Error::Poisoned(self.poison_reason.lock().clone()));
        }
        Ok(())
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.check_poisoned()?;
        self.flush_compactions()?;
        let active = self.pipe.append.lock();
        if let Err(e) = active.file.sync_data() {
            let e = Error::io("sync", self.pipe.path(active.id))(e);
            self.poison(&e);
            return Err(e);
        }
        Metrics::add(&self.metrics.fsyncs, 1);
        Ok(())
    }

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

    /// Drops the entries of `group` below `index`; returns how many were
    /// dropped. The compaction is in the index at once and is logged, without
    /// a sync, ahead of the records of the next group commit (any writer's,
    /// purge's, `sync`'s or `close`'s), so it never waits for I/O. Like any
    /// unsynced write it is durable once a later sync covers it, and a crash
    /// before that brings the entries back: never a write made after it
    /// without the compaction.
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

    /// Returns the ids of all groups, sorted.
    pub fn groups(&self) -> Vec<u64> {
        let mut ids = self.index.group_ids();
        ids.sort_unstable();
        ids
    }

    /// Returns counts and memory of the index.
    pub fn index_stats(&self) -> IndexStats {
        self.index.stats()
    }

    /// Returns counts of the files on disk.
    pub fn file_stats(&self) -> FileStats {
        // The append lock before `files`, as rotation takes them.
        let active = self.pipe.append.lock();
        let files = self.pipe.files.read();
        let sizes = self.append_sizes.lock();
        let append: Vec<u64> = files
            .keys()
            .filter(|id| id.queue == Queue::Append)
            .map(|id| id.seq)
            .collect();
        FileStats {
            append_files: append.len() as u64,
            rewrite_files: files.keys().filter(|id| id.queue == Queue::Rewrite).count() as u64,
            append_bytes: sizes
                .iter()
                .filter(|(seq, _)| {
                    files.contains_key(&FileId {
                        queue: Queue::Append,
                        seq: **seq,
                    })
                })
                .map(|(_, b)| *b)
                .sum::<u64>()
                + active.offset,
            first_append_seq: append.first().copied().unwrap_or(active.id.seq),
            active_append_seq: active.id.seq,
            recycled_files: self.pipe.recycled.lock().len() as u64,
        }
    }

    /// Returns a copy of the engine's metrics.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot()
    }

    /// Returns what recovery found when the engine was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Seals the active files with their index sections, syncs them and
    /// closes the engine, so that the next open reads no record of the files
    /// written so far. Dropping the engine instead loses nothing synced, but
    /// the next open scans the last files.
    pub fn close(self) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
            // Nothing more can be made durable; the failure was reported.
            return Ok(());
        }
        self.flush_compactions()?;
        // Writers still queued are served by their leader before the lock is ours.
        let _purge = self.purge_lock.lock();
        if let Some(rw) = self.pipe.rewrite.lock().as_ref() {
            self.seal_for_close(rw)?;
        }
        let active = self.pipe.append.lock();
        self.seal_for_close(&active)
    }

    fn seal_for_close(&self, active: &crate::pipe::ActiveFile) -> Result<()> {
        if active.write_index_section().is_ok() {
            Metrics::add(&self.metrics.index_sections_written, 1);
        }
        if let Err(e) = active.file.sync_data() {
            let e = Error::io("sync", self.pipe.path(active.id))(e);
            self.poison(&e);
            return Err(e);
        }
        Metrics::add(&self.metrics.fsyncs, 1);
        Ok(())
    }
}

const RETRIES: usize = 8;

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
