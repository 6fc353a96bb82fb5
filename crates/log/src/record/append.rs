//! Appending records to one file: every append is one `write_at` of its
//! records followed by the end marker, and every record header carries the
//! `synced_end` its appender's last sync established. Records may also be
//! staged (encoded, their place in the file fixed, not written) and written
//! later by whoever syncs, so that a caller holding a lock pays no system
//! call for them (the lsm's manifest, appended under its installer lock).
//!
//! Invariants:
//! - Bytes before `synced_end` are durable; `synced_end <= offset`.
//! - Staged records lie in `staged_at..offset`; the bytes before `staged_at`
//!   were written, or were handed out by `take_staged` to be written (by a
//!   caller that writes them before anything else is written after them).
//! - The end marker always follows the last record written, so a reader
//!   stops cleanly there whatever the file held before.
//! - After a failed write or sync nothing is known about the file's tail: the
//!   appender refuses every later call, and its owner must start a new file
//!   (or reopen and recover) rather than pretend.

use std::io;
use std::sync::Arc;

use strata_codec::{crc32c, looks_incompressible, lz4_compress_into};
use strata_fs::File;

use super::format::{
    FileFormat, RecordHeader, CODEC_LZ4, CODEC_NONE, END_MARKER, FILE_HEADER_LEN,
    RECORD_HEADER_LEN, RECORD_PAYLOAD_MAX,
};

/// Writes records at the end of one record file.
#[derive(Debug)]
pub struct Appender {
    file: Arc<dyn File>,
    file_id: u64,
    /// Where the next record goes (the end marker's offset).
    offset: u64,
    /// Every byte before this offset was durable at the last sync.
    synced_end: u64,
    /// Payloads at least this large are LZ4-compressed when that saves an
    /// eighth; `None` never compresses.
    compress_min_bytes: Option<usize>,
    /// Set by a failed write or sync.
    failed: bool,
    /// The bytes of one append, kept between appends: a small write then
    /// allocates nothing (the writer's allocations contend with the frees
    /// of background threads).
    scratch: Vec<u8>,
    /// One payload compressed, kept between records for the same reason.
    compressed: Vec<u8>,
    /// Records encoded by `stage` and not yet written; they begin at
    /// `staged_at` and end at `offset`.
    staged: Vec<u8>,
    staged_at: u64,
}

/// Scratch capacity kept after an append; a larger one is given back.
const SCRATCH_KEEP_BYTES: usize = 1 << 20;

/// Payloads up to this size are compressed without first compressing a
/// sample to guess whether that pays: the sample would cost about as much.
const SAMPLE_ABOVE_BYTES: usize = 32 << 10;

/// One payload in its stored form (compressed when that pays) with its
/// checksum, made ahead of [`Appender::stage_prepared`]: a caller that
/// stages under a lock does the compression and checksumming before it.
/// It belongs to no file: the header that binds it to one is written when
/// it is staged.
#[derive(Debug, Clone)]
pub struct PreparedRecord {
    stored: Vec<u8>,
    raw_len: u32,
    codec: u8,
    crc: u32,
}

impl PreparedRecord {
    /// Prepares `payload` as an appender made with `compress_min_bytes`
    /// would store it. Refuses (`InvalidInput`) a payload over
    /// [`RECORD_PAYLOAD_MAX`].
    pub fn new(payload: &[u8], compress_min_bytes: Option<usize>) -> io::Result<PreparedRecord> {
        check_payload_len(payload)?;
        let mut compressed = Vec::new();
        let (stored, codec) = stored_form(payload, compress_min_bytes, &mut compressed);
        Ok(PreparedRecord {
            crc: crc32c(stored),
            stored: stored.to_vec(),
            raw_len: payload.len() as u32,
            codec,
        })
    }

    /// Bytes the record takes in a file, header included.
    pub fn record_len(&self) -> u64 {
        (RECORD_HEADER_LEN + self.stored.len()) as u64
    }
}

/// Refuses a payload over [`RECORD_PAYLOAD_MAX`].
fn check_payload_len(payload: &[u8]) -> io::Result<()> {
    if payload.len() > RECORD_PAYLOAD_MAX as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a payload of {} bytes is over the limit {RECORD_PAYLOAD_MAX}",
                payload.len()
            ),
        ));
    }
    Ok(())
}

/// The bytes a record stores for `payload` and their codec: LZ4 (into
/// `compressed`) when the payload is at least `compress_min_bytes` and that
/// saves an eighth, else the payload itself.
fn stored_form<'a>(
    payload: &'a [u8],
    compress_min_bytes: Option<usize>,
    compressed: &'a mut Vec<u8>,
) -> (&'a [u8], u8) {
    let compress = compress_min_bytes.is_some_and(|min| {
        payload.len() >= min
            && (payload.len() <= SAMPLE_ABOVE_BYTES || !looks_incompressible(payload))
    });
    if compress {
        lz4_compress_into(payload, compressed);
    }
    // Kept only when it saves at least an eighth: otherwise the reader's
    // decompression costs more than the bytes saved.
    if compress && !compressed.is_empty() && compressed.len() * 8 <= payload.len() * 7 {
        (compressed.as_slice(), CODEC_LZ4)
    } else {
        (payload, CODEC_NONE)
    }
}

impl Appender {
    /// Starts a new file: writes its header and the end marker at offset 0 and
    /// syncs the file (`sync_all`: its length is metadata). The caller syncs
    /// the directory entry.
    pub fn create(
        file: Arc<dyn File>,
        format: &FileFormat,
        kind: u8,
        file_id: u64,
        compress_min_bytes: Option<usize>,
    ) -> io::Result<Appender> {
        let mut head = format.encode_header(kind, file_id).to_vec();
        head.extend_from_slice(&END_MARKER);
        file.write_at(0, &head)?;
        file.sync_all()?;
        Ok(Appender {
            file,
            file_id,
            offset: FILE_HEADER_LEN as u64,
            synced_end: FILE_HEADER_LEN as u64,
            compress_min_bytes,
            failed: false,
            scratch: Vec::new(),
            compressed: Vec::new(),
            staged: Vec::new(),
            staged_at: FILE_HEADER_LEN as u64,
        })
    }

    /// The file's id, in every record header.
    pub fn file_id(&self) -> u64 {
        self.file_id
    }

    /// Bytes of header and records in the file so far (the end marker not
    /// counted).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Every byte before this offset is durable.
    pub fn synced_end(&self) -> u64 {
        self.synced_end
    }

    /// The file being written.
    pub fn file(&self) -> &Arc<dyn File> {
        &self.file
    }

    /// Bytes `payloads` would take as records, at most (uncompressed).
    pub fn records_len(payloads: &[&[u8]]) -> u64 {
        payloads
            .iter()
            .map(|p| (RECORD_HEADER_LEN + p.len()) as u64)
            .sum()
    }

    /// Appends one record per payload, in one write followed by the end
    /// marker (staged records, if any, go first in the same write); syncs
    /// nothing. Refuses (`InvalidInput`, before writing) a payload over
    /// [`RECORD_PAYLOAD_MAX`] or records that would take the file past
    /// 4 GiB, where `synced_end` no longer fits its field.
    pub fn append(&mut self, payloads: &[&[u8]]) -> io::Result<()> {
        self.usable()?;
        let end = self.checked_end(payloads)?;
        let (at, mut buf) = if self.staged.is_empty() {
            let mut buf = std::mem::take(&mut self.scratch);
            buf.clear();
            (self.offset, buf)
        } else {
            (self.staged_at, std::mem::take(&mut self.staged))
        };
        buf.reserve((end - self.offset) as usize);
        for payload in payloads {
            self.encode_record(payload, &mut buf);
        }
        let records_end = at + buf.len() as u64;
        buf.extend_from_slice(&END_MARKER);
        let written = self.file.write_at(at, &buf);
        if buf.capacity() <= SCRATCH_KEEP_BYTES {
            self.scratch = buf;
        }
        if self.compressed.capacity() > SCRATCH_KEEP_BYTES {
            self.compressed = Vec::new();
        }
        if let Err(e) = written {
            self.failed = true;
            return Err(e);
        }
        self.offset = records_end;
        Ok(())
    }

    /// Encodes one record per payload after those appended or staged so
    /// far, without writing them: [`Self::offset`] moves past them, and
    /// they reach the file with the next `append` or `sync`, or through
    /// [`Self::take_staged`]. Refuses what `append` refuses.
    pub fn stage(&mut self, payloads: &[&[u8]]) -> io::Result<()> {
        self.usable()?;
        self.checked_end(payloads)?;
        if self.staged.is_empty() {
            self.staged_at = self.offset;
        }
        let mut buf = std::mem::take(&mut self.staged);
        for payload in payloads {
            self.encode_record(payload, &mut buf);
        }
        self.offset = self.staged_at + buf.len() as u64;
        self.staged = buf;
        Ok(())
    }

    /// Hands out the staged records with the end marker after them, and
    /// where to write them; they count as written from now on. The caller
    /// writes them before anything else is written to the file (a lock of
    /// its own serializes that) and [`Self::poison`]s the appender if the
    /// write fails.
    pub fn take_staged(&mut self) -> Option<(u64, Vec<u8>)> {
        if self.staged.is_empty() {
            return None;
        }
        let mut bytes = std::mem::take(&mut self.staged);
        bytes.extend_from_slice(&END_MARKER);
        Some((self.staged_at, bytes))
    }

    /// Stages `record`, prepared ahead ([`PreparedRecord::new`]), as
    /// [`Self::stage`] stages a payload: only its header is made here.
    pub fn stage_prepared(&mut self, record: &PreparedRecord) -> io::Result<()> {
        self.usable()?;
        self.checked_offset(record.record_len())?;
        if self.staged.is_empty() {
            self.staged_at = self.offset;
        }
        let header = RecordHeader {
            file_id: self.file_id,
            stored_len: record.stored.len() as u32,
            raw_len: record.raw_len,
            payload_crc: record.crc,
            synced_end: self.synced_end as u32,
            codec: record.codec,
        };
        self.staged.extend_from_slice(&header.encode());
        self.staged.extend_from_slice(&record.stored);
        self.offset = self.staged_at + self.staged.len() as u64;
        Ok(())
    }

    /// Where records of `payloads` would end, after checking them.
    fn checked_end(&self, payloads: &[&[u8]]) -> io::Result<u64> {
        for payload in payloads {
            check_payload_len(payload)?;
        }
        self.checked_offset(Self::records_len(payloads))
    }

    /// Where `bytes` of records would end, refused past what `synced_end`
    /// can name (with room for the end marker's header).
    fn checked_offset(&self, bytes: u64) -> io::Result<u64> {
        let end = self.offset + bytes + RECORD_HEADER_LEN as u64;
        if end > u32::MAX as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("appending would take the file to {end} bytes, over 4 GiB"),
            ));
        }
        Ok(end)
    }

    /// Makes every appended byte durable (`sync_data`), staged ones written
    /// first, and advances `synced_end` to the end of the records.
    pub fn sync(&mut self) -> io::Result<()> {
        self.usable()?;
        if let Some((at, bytes)) = self.take_staged() {
            if let Err(e) = self.file.write_at(at, &bytes) {
                self.failed = true;
                return Err(e);
            }
        }
        if let Err(e) = self.file.sync_data() {
            // The kernel may have dropped the dirty pages: what the file holds
            // is unknown (fsync errors are not retried).
            self.failed = true;
            return Err(e);
        }
        self.synced_end = self.offset;
        Ok(())
    }

    /// Records a sync of [`Self::file`] made outside this appender (so that
    /// appends need not wait for it): `end` is where the records stood
    /// when that sync began, and a successful sync made every byte before
    /// it durable. `synced_end` advances to it, never backwards and never
    /// past the records.
    pub fn note_synced(&mut self, end: u64) {
        self.synced_end = self.synced_end.max(end.min(self.offset));
    }

    /// Refuses every later call, as after a failed write or sync of its own:
    /// a sync made outside (see [`Self::note_synced`]) failed.
    pub fn poison(&mut self) {
        self.failed = true;
    }

    /// Whether a write or sync failed: every later call is refused.
    pub fn failed(&self) -> bool {
        self.failed
    }

    fn usable(&self) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other(
                "an earlier write or sync of this file failed",
            ));
        }
        Ok(())
    }

    /// Encodes one record (header and stored payload) onto `out`.
    fn encode_record(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        let (stored, codec) = stored_form(payload, self.compress_min_bytes, &mut self.compressed);
        // Lengths fit in u32: checked against RECORD_PAYLOAD_MAX by `append`.
        let header = RecordHeader {
            file_id: self.file_id,
            stored_len: stored.len() as u32,
            raw_len: payload.len() as u32,
            payload_crc: crc32c(stored),
            synced_end: self.synced_end as u32,
            codec,
        };
        out.extend_from_slice(&header.encode());
        out.extend_from_slice(stored);
    }
}
