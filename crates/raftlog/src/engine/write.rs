//! The writers' side of the write path: argument checks, encoding
//! (compression, checksum), the group-commit queue (the leader's append,
//! sync and rotation are `append.rs`), `sync` and `compact_to`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::Mutex;
use strata_codec::{crc32c, looks_incompressible, lz4_compress_into};

use crate::format::{CODEC_LZ4, CODEC_NONE, RECORD_HEADER_LEN};
use crate::log_batch::{spare, LogBatch};
use crate::metrics::Metrics;
use crate::{Engine, Error, Result};

/// What a writer hands to the group-commit leader.
#[derive(Debug)]
pub(crate) struct WriteRequest {
    /// Locked only by the leader, and by the writer after it is served (to take
    /// its payload back when the write failed).
    pub(super) payload: Mutex<Payload>,
    pub(super) stored_len: u32,
    pub(super) raw_len: u32,
    /// Items in the payload, to size the decoded list.
    pub(super) item_count: usize,
    pub(super) payload_crc: u32,
    pub(super) codec: u8,
    pub(super) sync: bool,
}

#[derive(Debug)]
pub(super) struct Payload {
    /// The payload as stored: compressed or not.
    pub(super) stored: Vec<u8>,
    /// The payload uncompressed, when `stored` is compressed.
    raw: Option<Vec<u8>>,
}

impl Payload {
    pub(super) fn raw(&self) -> &[u8] {
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
    pub(super) fn record_len(&self) -> u64 {
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
            let _encoding = self.encoders.enter();
            self.encode(raw, batch.item_count, sync)
        };
        let len = request.record_len() as usize;
        let start = Instant::now();
        let served = self.queue.submit_staged(
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
            |group| self.append_stage(group),
            |group, appended| self.index_group(group, appended),
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
        self.encoders
            .wait_for_none(Instant::now() + GATHER_WAIT_MAX);
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
    ///
    /// Compact a group only past entries whose write has returned, as a Raft
    /// log does (it compacts below its applied index). A compaction made
    /// while a write to the same group is still in flight is logged after
    /// that write's record but can reach the index before its entries; if it
    /// drops entries of that write, the index keeps them until a restart,
    /// which replays the log and drops them.
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

/// The longest a leader waits for writers still compressing (see `gather`).
const GATHER_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(2);
