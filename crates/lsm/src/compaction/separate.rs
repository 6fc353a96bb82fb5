//! Key-value separation inside a sorted run: values of at least
//! `min_value_bytes` leave for blob files, and the SST gets a `BlobIndex`
//! entry holding their reference.
//!
//! A reference names its block's stored size, known only once the block is
//! sealed, so the entries of a run wait here, in order, until the open blob
//! block seals: then each goes to the SST, a separated one with its
//! reference. Inline entries between two separated values wait too (order
//! is the SST's law); the wait is bounded by sealing early once the queue
//! holds [`QUEUE_BYTES_MAX`] bytes.
//!
//! Invariants:
//! - Every blob file is finished (synced) before the run's directory sync,
//!   and listed as created before it exists, so a failed run removes it.
//! - A blob file is closed once it reaches `target_file_bytes`, always
//!   between two blocks.

use std::path::PathBuf;

use super::output::{blob_file_name, OutputContext};
use crate::blob::{BlobFileWriter, BlobRef, BlobWriterOptions};
use crate::error::Result;
use crate::key::{InternalKey, SeqNo, ValueKind};
use crate::version::BlobFileDesc;

/// Bytes of entries that may wait for a block seal before it is forced.
const QUEUE_BYTES_MAX: usize = 1 << 20;

/// How a run separates values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobOutput {
    /// Values of at least this many bytes go to blob files.
    pub min_value_bytes: u64,
    /// The layout of each blob file.
    pub writer_options: BlobWriterOptions,
    /// Size at which a blob file is closed (between two blocks).
    pub target_file_bytes: u64,
    /// The column family, recorded in each blob file's header.
    pub column_family: u32,
}

/// An entry waiting for its block to seal.
enum Queued {
    Inline {
        ikey: Vec<u8>,
        value: Vec<u8>,
    },
    /// A separated value: its key (kind `BlobIndex`) and its index among
    /// the open block's records.
    Blob {
        ikey: Vec<u8>,
        record: usize,
    },
}

/// What a seal releases: the entries in order, and the references of the
/// separated ones.
pub(super) struct Released {
    queue: Vec<Queued>,
    refs: Vec<BlobRef>,
}

impl Released {
    /// Hands each entry to `add` in order, a separated one with its
    /// encoded reference as the value.
    pub(super) fn for_each(self, mut add: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        let mut encoded = Vec::new();
        for q in self.queue {
            match q {
                Queued::Inline { ikey, value } => add(&ikey, &value)?,
                Queued::Blob { ikey, record } => {
                    encoded.clear();
                    self.refs[record].encode_into(&mut encoded);
                    add(&ikey, &encoded)?;
                }
            }
        }
        Ok(())
    }
}

/// The blob side of a run's outputs.
pub(super) struct BlobSink {
    options: BlobOutput,
    writer: Option<BlobFileWriter>,
    queue: Vec<Queued>,
    queued_bytes: usize,
    block_records: usize,
    /// Finished blob files.
    pub(super) done: Vec<BlobFileDesc>,
    /// Bytes of the finished blob files.
    pub(super) bytes_written: u64,
    /// Bytes already charged to the rate limiter (of the open file).
    charged: u64,
}

impl BlobSink {
    pub(super) fn new(options: BlobOutput) -> BlobSink {
        BlobSink {
            options,
            writer: None,
            queue: Vec::new(),
            queued_bytes: 0,
            block_records: 0,
            done: Vec::new(),
            bytes_written: 0,
            charged: 0,
        }
    }

    /// Whether a `kind` value of `len` bytes is separated.
    pub(super) fn separates(&self, kind: ValueKind, len: usize) -> bool {
        kind == ValueKind::Put && len as u64 >= self.options.min_value_bytes
    }

    /// Whether entries wait for a seal (so an inline one must queue too).
    pub(super) fn is_waiting(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Queues a separated value; true when the block should seal now.
    pub(super) fn add_blob(
        &mut self,
        ctx: &OutputContext,
        created: &mut Vec<PathBuf>,
        user_key: &[u8],
        seqno: SeqNo,
        value: &[u8],
    ) -> Result<bool> {
        if self.writer.is_none() {
            let number = (ctx.new_file_number)();
            let path = ctx.dir.join(blob_file_name(number));
            // Listed before creation: a failed create may still leave a file.
            created.push(path.clone());
            self.writer = Some(BlobFileWriter::create(
                ctx.fs,
                &path,
                number,
                self.options.column_family,
                self.options.writer_options,
            )?);
            self.charged = 0;
        }
        let writer = self.writer.as_mut().expect("opened above");
        writer.add(user_key, seqno, value)?;
        let ikey = InternalKey::new(user_key, seqno, ValueKind::BlobIndex);
        self.queued_bytes += ikey.encoded().len() + 16;
        self.queue.push(Queued::Blob {
            ikey: ikey.encoded().to_vec(),
            record: self.block_records,
        });
        self.block_records += 1;
        Ok(writer.block_full() || self.queued_bytes >= QUEUE_BYTES_MAX)
    }

    /// Queues an inline entry behind separated ones; true when the queue
    /// should be released now.
    pub(super) fn add_inline(&mut self, ikey: &[u8], value: &[u8]) -> bool {
        self.queued_bytes += ikey.len() + value.len();
        self.queue.push(Queued::Inline {
            ikey: ikey.to_vec(),
            value: value.to_vec(),
        });
        self.queued_bytes >= QUEUE_BYTES_MAX
    }

    /// Seals the open block and releases the queue; closes the blob file
    /// once it has reached its target size.
    pub(super) fn seal(&mut self, ctx: &OutputContext) -> Result<Released> {
        let refs = match self.writer.as_mut() {
            Some(w) => w.seal_block()?,
            None => Vec::new(),
        };
        self.block_records = 0;
        self.queued_bytes = 0;
        if let Some(w) = &self.writer {
            let size = w.file_size();
            if let Some(limiter) = ctx.rate_limiter {
                limiter.request(size - self.charged);
            }
            self.charged = size;
            if size >= self.options.target_file_bytes {
                self.close()?;
            }
        }
        Ok(Released {
            queue: std::mem::take(&mut self.queue),
            refs,
        })
    }

    /// Finishes the open blob file, if any (after a seal).
    pub(super) fn close(&mut self) -> Result<()> {
        let Some(w) = self.writer.take() else {
            return Ok(());
        };
        let info = w.finish()?;
        self.bytes_written += info.file_size;
        self.done.push(BlobFileDesc {
            number: info.file_number,
            size: info.file_size,
            record_count: info.footer.record_count,
            value_bytes: info.footer.value_bytes,
        });
        Ok(())
    }

    /// Drops the open writer and everything finished (the run failed; its
    /// files are removed by the caller).
    pub(super) fn abandon(&mut self) {
        self.writer = None;
        self.queue.clear();
        self.done.clear();
    }
}
