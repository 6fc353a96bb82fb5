//! The files of one sorted run: SST output cutting at user-key changes,
//! the range tombstones each file carries, the blob files separated values
//! go to (through `separate.rs`), and the removal of everything on error.
//! The rules are in `output.rs`'s module doc ("Range tombstones travel
//! beside the point stream", "Output cutting").

use std::path::PathBuf;

use super::grandparents::OutputCutter;
use super::output::{sst_file_name, OutputContext};
use super::separate::BlobSink;
use crate::error::{Error, Result};
use crate::iter::RangeTombstone;
use crate::key::{self, InternalKey, SeqNo, ValueKind, MAX_SEQNO};
use crate::sst::SstWriter;
use crate::version::{FileDesc, FileNumber};

/// Bytes of output written between two rate-limiter requests.
const RATE_CHUNK_BYTES: u64 = 64 << 10;

/// The file being written.
struct Current {
    writer: SstWriter,
    number: FileNumber,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
    /// Bytes already charged to the rate limiter.
    charged: u64,
}

impl Current {
    fn last_user_key(&self) -> &[u8] {
        &self.last_key[..self.last_key.len() - key::TRAILER_LEN]
    }
}

/// The output files of a run.
pub(super) struct Outputs<'c, 'a> {
    ctx: &'c OutputContext<'a>,
    /// Finished files.
    pub(super) done: Vec<FileDesc>,
    /// Every path created (finished or not), removed if the run fails.
    created: Vec<PathBuf>,
    current: Option<Current>,
    /// The inclusive lower bound of the next file's key range (None: the
    /// bottom of the key space).
    lower: Option<Vec<u8>>,
    /// The range tombstones to write, by start.
    pub(super) tombstones: Vec<RangeTombstone>,
    /// Where separated values go, when the run separates.
    pub(super) blob: Option<BlobSink>,
    /// Decides where each file ends.
    cutter: OutputCutter<'a>,
}

impl<'c, 'a> Outputs<'c, 'a> {
    pub(super) fn new(ctx: &'c OutputContext<'a>) -> Self {
        Outputs {
            ctx,
            done: Vec::new(),
            created: Vec::new(),
            current: None,
            lower: None,
            tombstones: Vec::new(),
            blob: ctx.blob.map(BlobSink::new),
            cutter: OutputCutter::new(ctx.grandparents, ctx.target_file_bytes),
        }
    }

    /// Writes one entry of the run: a value large enough leaves for a blob
    /// file, and every entry waits behind separated ones for their block.
    pub(super) fn put(
        &mut self,
        user_key: &[u8],
        seqno: SeqNo,
        kind: ValueKind,
        value: &[u8],
    ) -> Result<()> {
        let Some(blob) = self.blob.as_mut() else {
            return self.add(InternalKey::new(user_key, seqno, kind).encoded(), value);
        };
        let release = if blob.separates(kind, value.len()) {
            blob.add_blob(self.ctx, &mut self.created, user_key, seqno, value)?
        } else if blob.is_waiting() {
            blob.add_inline(InternalKey::new(user_key, seqno, kind).encoded(), value)
        } else {
            return self.add(InternalKey::new(user_key, seqno, kind).encoded(), value);
        };
        if release {
            self.release()?;
        }
        Ok(())
    }

    /// Seals the open blob block and writes the entries that waited for it.
    fn release(&mut self) -> Result<()> {
        let Some(blob) = self.blob.as_mut() else {
            return Ok(());
        };
        let released = blob.seal(self.ctx)?;
        released.for_each(|ikey, value| self.add(ikey, value))
    }

    fn open(&mut self) -> Result<Current> {
        let number = (self.ctx.new_file_number)();
        let path = self.ctx.dir.join(sst_file_name(number));
        // Listed before creation: a failed create may still leave a file.
        self.created.push(path.clone());
        let mut writer = SstWriter::create(self.ctx.fs, &path, self.ctx.writer_options.clone())?;
        if let Some(make) = self.ctx.collectors {
            for c in make() {
                writer.add_collector(c)?;
            }
        }
        Ok(Current {
            writer,
            number,
            first_key: Vec::new(),
            last_key: Vec::new(),
            charged: 0,
        })
    }

    fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let user_key = &ikey[..ikey.len() - key::TRAILER_LEN];
        let new_key = self
            .current
            .as_ref()
            .is_none_or(|cur| cur.last_user_key() != user_key);
        if new_key {
            let open = self
                .current
                .as_ref()
                .map(|c| c.writer.estimated_file_size());
            let close = self.cutter.close_before(user_key, open);
            // The cutter closes only an open output (it was given a size).
            if let Some(cur) = self.current.as_ref().filter(|_| close) {
                let mut hi = cur.last_user_key().to_vec();
                hi.push(0);
                self.close(Some(hi))?;
            }
        }
        if self.current.is_none() {
            let cur = self.open()?;
            self.current = Some(cur);
        }
        let cur = self.current.as_mut().expect("opened above");
        cur.writer.add(ikey, value)?;
        if cur.first_key.is_empty() {
            cur.first_key = ikey.to_vec();
        }
        cur.last_key.clear();
        cur.last_key.extend_from_slice(ikey);
        if let Some(limiter) = self.ctx.rate_limiter {
            let written = cur.writer.estimated_file_size();
            if written >= cur.charged + RATE_CHUNK_BYTES {
                limiter.request(written - cur.charged);
                cur.charged = written;
            }
        }
        Ok(())
    }

    /// Finishes the current file, whose key range ends before `hi` (None:
    /// the top of the key space), with the tombstones that meet its range.
    fn close(&mut self, hi: Option<Vec<u8>>) -> Result<()> {
        let Some(mut cur) = self.current.take() else {
            return Ok(());
        };
        let lo = self.lower.take();
        let mut smallest: Option<InternalKey> = (!cur.first_key.is_empty())
            .then(|| InternalKey::decode(&cur.first_key).expect("added keys parse"));
        let mut largest: Option<InternalKey> = (!cur.last_key.is_empty())
            .then(|| InternalKey::decode(&cur.last_key).expect("added keys parse"));
        for t in &self.tombstones {
            let start = match &lo {
                Some(lo) if lo > &t.start => lo.as_slice(),
                _ => t.start.as_slice(),
            };
            let (end, cut) = match &hi {
                Some(hi) if hi < &t.end => (hi.as_slice(), true),
                _ => (t.end.as_slice(), false),
            };
            if start >= end {
                continue;
            }
            cur.writer.add_range_delete(start, end, t.seqno)?;
            let s = InternalKey::new(start, t.seqno, ValueKind::RangeDelete);
            if smallest.as_ref().is_none_or(|k| s < *k) {
                smallest = Some(s);
            }
            // An end cut at `hi` covers only keys up to the file's last
            // point key, which `largest` already holds.
            if !cut {
                let e = InternalKey::new(end, MAX_SEQNO, ValueKind::RangeDelete);
                if largest.as_ref().is_none_or(|k| e > *k) {
                    largest = Some(e);
                }
            }
        }
        let info = cur.writer.finish()?;
        if let Some(limiter) = self.ctx.rate_limiter {
            limiter.request(info.file_size.saturating_sub(cur.charged));
        }
        let (Some(smallest), Some(largest)) = (smallest, largest) else {
            return Err(Error::InvalidArgument(format!(
                "sorted run: output {} would be empty",
                cur.number
            )));
        };
        self.done.push(FileDesc {
            number: cur.number,
            size: info.file_size,
            smallest,
            largest,
            smallest_seqno: info.properties.smallest_seqno,
            largest_seqno: info.properties.largest_seqno,
            blob_refs: info.properties.blob_refs.into_iter().collect(),
            range_tombstones: info.properties.num_range_deletions > 0,
        });
        self.lower = hi;
        Ok(())
    }

    /// Closes the last file (opening one for tombstones alone if they reach
    /// past the last point key) and syncs the directory.
    pub(super) fn finish(&mut self) -> Result<()> {
        self.release()?;
        if let Some(blob) = &mut self.blob {
            blob.close()?;
        }
        if self.current.is_none() {
            let lo = self.lower.as_deref();
            if self
                .tombstones
                .iter()
                .any(|t| lo.is_none_or(|lo| lo < t.end.as_slice()))
            {
                let cur = self.open()?;
                self.current = Some(cur);
            }
        }
        self.close(None)?;
        if !self.created.is_empty() {
            self.ctx
                .fs
                .sync_dir(self.ctx.dir)
                .map_err(Error::io("sync directory", self.ctx.dir))?;
        }
        Ok(())
    }

    /// Removes every file the run created; the run's error is what the
    /// caller needs, so a failure to remove is ignored (the engine deletes
    /// files no version names at its next start).
    pub(super) fn abandon(&mut self) {
        self.current = None;
        if let Some(blob) = &mut self.blob {
            blob.abandon();
        }
        for path in &self.created {
            let _ = self.ctx.fs.remove(path);
        }
        self.done.clear();
    }
}
