//! Writing purge's copies into the rewrite queue as records of bounded size.
//!
//! Every rewrite record's payload is at most [`REWRITE_RECORD_BYTES`], like
//! the batches a writer packs, unless a single entry or key-value pair is
//! larger: it then fills a record of its own. A group's copy may therefore
//! span several records, each holding a contiguous run of its entries in one
//! entries item; replaying them appends one run after the other, which gives
//! the index the copy was installed as. Without the bound, a group's whole
//! copy went into one record, which could pass the format's record limit
//! (`RECORD_PAYLOAD_MAX`), and recovery would cut it as a torn tail.

use std::io::IoSlice;

use parking_lot::MutexGuard;

use crate::format::{
    FileId, Queue, RecordHeader, CODEC_NONE, END_MARKER, FILE_HEADER_LEN, RECORD_HEADER_LEN,
    RECORD_PAYLOAD_MAX,
};
use crate::index::{FileRef, RecordLoc};
use crate::log_batch::{decode_items, LogBatch};
use crate::metrics::Metrics;
use crate::pipe::ActiveFile;
use crate::{Engine, Error, Result};

use super::PurgeOutcome;

/// The payload a rewrite record holds at most, unless one entry or key-value
/// pair alone is larger. A megabyte is enough for a write and a sync to run
/// near the device's bandwidth, and it bounds what a reader of one entry
/// reads and verifies (a reader reads its entry's whole record).
pub(crate) const REWRITE_RECORD_BYTES: usize = 1 << 20;

const _: () = assert!(REWRITE_RECORD_BYTES as u64 <= RECORD_PAYLOAD_MAX as u64);

/// The most an entries item adds besides its length table and data: a tag and
/// the varints of its group, first index and count.
const ENTRIES_ITEM_HEAD_MAX: usize = 1 + 10 + 10 + 5;
/// The most a put item adds besides its key and value.
const PUT_ITEM_HEAD_MAX: usize = 1 + 10 + 10 + 10;

/// Where the writer put a piece of a group's copy, once its record is written.
#[derive(Debug, Clone, Copy)]
pub(super) enum Placed {
    /// Entries `first..first + count` of the group in `slot`, as one whole
    /// entries item.
    Entries {
        slot: usize,
        first: u64,
        count: u32,
        record: RecordLoc,
        body_offset: u32,
    },
    /// Key number `kv` of the group in `slot`.
    Kv {
        slot: usize,
        kv: usize,
        file: FileRef,
    },
}

/// An item of the batch being filled, placed once the batch is written.
#[derive(Debug, Clone, Copy)]
enum Unplaced {
    Entries {
        slot: usize,
        first: u64,
        count: u32,
        body_offset: u32,
    },
    Kv {
        slot: usize,
        kv: usize,
    },
}

/// Packs copies into records and appends them to the rewrite queue's active
/// file, holding its lock throughout.
pub(super) struct RewriteWriter<'a> {
    engine: &'a Engine,
    rw: MutexGuard<'a, Option<ActiveFile>>,
    batch: LogBatch,
    unplaced: Vec<Unplaced>,
    /// Every piece written so far.
    pub placed: Vec<Placed>,
}

impl<'a> RewriteWriter<'a> {
    pub fn new(engine: &'a Engine) -> Self {
        RewriteWriter {
            engine,
            rw: engine.pipe.rewrite.lock(),
            batch: LogBatch::new(),
            unplaced: Vec::new(),
            placed: Vec::new(),
        }
    }

    /// Adds entries `first..` of `group` (given as lengths and bytes back to
    /// back), splitting them over records as the bound requires.
    pub fn add_entries(
        &mut self,
        slot: usize,
        group: u64,
        first: u64,
        lens: &[u32],
        data: &[u8],
        out: &mut PurgeOutcome,
    ) -> Result<()> {
        let (mut i, mut at) = (0usize, 0usize);
        while i < lens.len() {
            let room = REWRITE_RECORD_BYTES
                .saturating_sub(self.batch.payload.len() + ENTRIES_ITEM_HEAD_MAX);
            let (mut n, mut size, mut bytes) = (0usize, 0usize, 0usize);
            while let Some(&len) = lens.get(i + n) {
                if size + 4 + len as usize > room {
                    break;
                }
                size += 4 + len as usize;
                bytes += len as usize;
                n += 1;
            }
            if n == 0 {
                if !self.batch.is_empty() {
                    self.write_batch(out)?;
                    continue;
                }
                // One entry larger than the bound: a record of its own.
                n = 1;
                bytes = lens[i] as usize;
            }
            let body_offset = self.batch.add_packed_entries(
                group,
                first + i as u64,
                &lens[i..i + n],
                &data[at..at + bytes],
            );
            self.unplaced.push(Unplaced::Entries {
                slot,
                first: first + i as u64,
                count: n as u32,
                body_offset,
            });
            i += n;
            at += bytes;
            if self.batch.payload.len() + ENTRIES_ITEM_HEAD_MAX + 4 >= REWRITE_RECORD_BYTES {
                self.write_batch(out)?;
            }
        }
        Ok(())
    }

    /// Adds key `kv` of `group`, in a record of its own if it does not fit.
    pub fn add_kv(
        &mut self,
        slot: usize,
        kv: usize,
        group: u64,
        key: &[u8],
        value: &[u8],
        out: &mut PurgeOutcome,
    ) -> Result<()> {
        let size = PUT_ITEM_HEAD_MAX + key.len() + value.len();
        if !self.batch.is_empty() && self.batch.payload.len() + size > REWRITE_RECORD_BYTES {
            self.write_batch(out)?;
        }
        self.batch.put(group, key, value);
        self.unplaced.push(Unplaced::Kv { slot, kv });
        Ok(())
    }

    /// Writes what is left and syncs the rewrite file: the copies are durable
    /// when this returns.
    pub fn finish(mut self, out: &mut PurgeOutcome) -> Result<Vec<Placed>> {
        if !self.batch.is_empty() {
            self.write_batch(out)?;
        }
        let engine = self.engine;
        if let Some(active) = self.rw.as_mut() {
            fail::fail_point!("raftlog::rewrite::sync");
            active
                .file
                .sync_data()
                .map_err(Error::io("sync", engine.pipe.path(active.id)))?;
            active.synced_end = active.offset;
            Metrics::add(&engine.metrics.fsyncs, 1);
        }
        Ok(self.placed)
    }

    /// Writes the batch as one record, starting a new rewrite file if it does
    /// not fit in the active one.
    fn write_batch(&mut self, out: &mut PurgeOutcome) -> Result<()> {
        let engine = self.engine;
        let payload = &self.batch.payload;
        let len = (RECORD_HEADER_LEN + payload.len()) as u64;
        let target = engine.pipe.config.target_file_size_bytes;
        let need_new = match self.rw.as_ref() {
            None => true,
            Some(a) => a.offset > FILE_HEADER_LEN as u64 && a.offset + len > target,
        };
        if need_new {
            if let Some(a) = self.rw.as_ref() {
                if a.write_index_section().is_ok() {
                    Metrics::add(&engine.metrics.index_sections_written, 1);
                }
                a.file
                    .sync_data()
                    .map_err(Error::io("sync", engine.pipe.path(a.id)))?;
            }
            let mut next = engine.pipe.next_rewrite_seq.lock();
            let id = FileId {
                queue: Queue::Rewrite,
                seq: *next,
            };
            let new = crate::pipe::Pipe::new_file(
                &engine.pipe.fs,
                &engine.pipe.dir,
                &engine.pipe.config,
                &engine.pipe.recycled,
                &engine.metrics,
                id,
            )?;
            *next += 1;
            engine.pipe.files.write().insert(id, new.file.clone());
            *self.rw = Some(new);
        }
        let active = self.rw.as_mut().expect("set above");
        // { u32 header_crc | u64 file_id | u32 stored_len | u32 raw_len | u32 payload_crc | u32 synced_end | u8 codec | u8[3] 0 }
        let header = RecordHeader {
            file_id: active.id.to_u64(),
            stored_len: payload.len() as u32,
            raw_len: payload.len() as u32,
            payload_crc: strata_codec::crc32c(payload),
            synced_end: active.synced_end as u32,
            codec: CODEC_NONE,
        };
        let header = header.encode();
        let slices = [
            IoSlice::new(&header),
            IoSlice::new(payload),
            IoSlice::new(&END_MARKER),
        ];
        active
            .file
            .write_vectored_at(active.offset, &slices)
            .map_err(Error::io("write", engine.pipe.path(active.id)))?;
        let loc = RecordLoc {
            file: FileRef::new(active.id),
            offset: active.offset as u32,
            len: len as u32,
        };
        let items = decode_items(payload).expect("a batch built by LogBatch always decodes");
        active.section.lock().add_record(loc.len, &items);
        active.offset += len;
        if let Some(range) = active
            .drop_ahead
            .as_mut()
            .and_then(|d| d.due(&active.file, active.offset))
        {
            range.run();
        }
        out.bytes_rewritten += len;
        Metrics::add(&engine.metrics.bytes_rewritten, len);
        Metrics::add(&engine.metrics.bytes_written, len);
        for item in self.unplaced.drain(..) {
            self.placed.push(match item {
                Unplaced::Entries {
                    slot,
                    first,
                    count,
                    body_offset,
                } => {
                    out.entries_rewritten += count as u64;
                    Metrics::add(&engine.metrics.entries_rewritten, count as u64);
                    Placed::Entries {
                        slot,
                        first,
                        count,
                        record: loc,
                        body_offset,
                    }
                }
                Unplaced::Kv { slot, kv } => Placed::Kv {
                    slot,
                    kv,
                    file: loc.file,
                },
            });
        }
        self.batch.clear();
        Ok(())
    }
}
