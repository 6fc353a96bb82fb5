//! Reading an SST file's blocks: one at a time, or from a span of the file
//! read at once.
//!
//! Opening a file reads its meta blocks, which the writer lays out back to
//! back at its end (`docs/format/sst.md`, "File"): filters, range
//! deletions, index partitions, the index, properties, meta-index, footer.
//! Read one by one, that is a device read each when the file is cold, and a
//! point read that reached a partition not yet read waited for two reads
//! instead of one (a cold point read's p99.9 was about twice RocksDB's,
//! which reads a file's whole index when it opens it). A [`Span`] holds a
//! stretch of the file read with one call; a block wholly inside it is
//! checked and decoded from it, any other is read on its own, so a span
//! changes the number of reads and never what is accepted.
//!
//! Invariants: every block, from a span or not, passes the same checks
//! (its handle ends at or before the footer, at most [`MAX_BLOCK_LEN`], the
//! checksum, the decompression); a span is at most [`SPAN_MAX_BYTES`], so a
//! damaged footer cannot make an open allocate more than that.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_codec::DecodeError;
use strata_fs::File;

use super::format::{BlockHandle, BLOCK_TRAILER_LEN, MAX_BLOCK_LEN};
use super::stored_block::unseal;
use crate::error::{Error, Result};

/// The largest span an open reads at once. The meta blocks of a 64 MiB
/// file of 1 KiB values are about 300 KiB (a 60 KiB filter, 240 KiB of
/// index partitions); past this size they are read block by block.
pub(super) const SPAN_MAX_BYTES: u64 = 16 << 20;

/// The largest read buffer a thread keeps between reads (a larger block's
/// buffer is freed after it).
const STORED_KEPT_BYTES: usize = 256 << 10;

thread_local! {
    /// Each thread's buffer for a block's stored bytes (see `read_raw`).
    static STORED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads exactly `buf.len()` bytes at `offset`; a file that ends first is
/// corruption.
pub(crate) fn read_exact(file: &dyn File, path: &Path, offset: u64, buf: &mut [u8]) -> Result<()> {
    match file.read_exact_at(offset, buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(Error::corruption(
            path,
            offset,
            format!("file ends inside a {}-byte read", buf.len()),
        )),
        Err(e) => Err(Error::io("read", path)(e)),
    }
}

/// The file and the bounds its blocks must keep.
#[derive(Debug)]
pub(super) struct FileBlocks {
    pub(super) path: PathBuf,
    pub(super) file: Arc<dyn File>,
    /// Where the footer starts: every block ends at or before it.
    pub(super) data_end: u64,
}

/// Bytes of the file from `offset`, read with one call.
#[derive(Debug)]
pub(super) struct Span {
    offset: u64,
    bytes: Vec<u8>,
}

impl Span {
    /// The stored bytes (payload and trailer) of the block at `handle`, if
    /// they lie wholly inside the span.
    fn stored(&self, handle: BlockHandle) -> Option<&[u8]> {
        let start = handle.offset.checked_sub(self.offset)?;
        let end = start
            .checked_add(handle.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)?;
        self.bytes
            .get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }
}

impl FileBlocks {
    pub(super) fn corruption(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::corruption(&self.path, offset, reason)
    }

    /// Reads `[from, to)` with one call, or returns `None` (no error) when
    /// that is empty, reaches past the footer or exceeds [`SPAN_MAX_BYTES`]:
    /// its blocks are then read one by one, with their own checks.
    pub(super) fn read_span(&self, from: u64, to: u64) -> Result<Option<Span>> {
        if from >= to || to > self.data_end || to - from > SPAN_MAX_BYTES {
            return Ok(None);
        }
        let mut bytes = vec![0; (to - from) as usize];
        read_exact(&*self.file, &self.path, from, &mut bytes)?;
        Ok(Some(Span {
            offset: from,
            bytes,
        }))
    }

    /// Refuses a handle that ends past the footer or claims more than
    /// [`MAX_BLOCK_LEN`].
    fn check_handle(&self, handle: BlockHandle, what: &str) -> Result<()> {
        let end = handle.end().filter(|&e| e <= self.data_end);
        if end.is_none() || handle.size > MAX_BLOCK_LEN {
            return Err(self.corruption(
                handle.offset,
                format!(
                    "{what} block handle (offset {}, size {}) lies outside the file's {} data bytes",
                    handle.offset, handle.size, self.data_end
                ),
            ));
        }
        Ok(())
    }

    /// Reads, checks and decompresses the block at `handle`.
    pub(super) fn read_raw(&self, handle: BlockHandle, what: &str) -> Result<Vec<u8>> {
        self.check_handle(handle, what)?;
        // The stored bytes are read into a buffer the thread keeps: every
        // read of a compressed block would otherwise allocate, zero and free
        // them around the block it decompresses.
        STORED.with_borrow_mut(|buf| {
            buf.clear();
            buf.resize(handle.size as usize + BLOCK_TRAILER_LEN, 0);
            let read = read_exact(&*self.file, &self.path, handle.offset, buf);
            let raw = read.and_then(|()| {
                unseal(buf)
                    .map_err(|e| self.corruption(handle.offset, format!("{what} block: {e}")))
            });
            if buf.capacity() > STORED_KEPT_BYTES {
                *buf = Vec::new();
            }
            raw
        })
    }

    /// Reads a block and decodes it with `decode`.
    pub(super) fn read_decoded<T>(
        &self,
        handle: BlockHandle,
        what: &str,
        decode: impl FnOnce(Vec<u8>) -> std::result::Result<T, DecodeError>,
    ) -> Result<T> {
        self.decoded_from(None, handle, what, decode)
    }

    /// As [`FileBlocks::read_decoded`], taking the block's bytes from
    /// `span` when it holds them all.
    pub(super) fn decoded_from<T>(
        &self,
        span: Option<&Span>,
        handle: BlockHandle,
        what: &str,
        decode: impl FnOnce(Vec<u8>) -> std::result::Result<T, DecodeError>,
    ) -> Result<T> {
        let raw = match span.and_then(|s| s.stored(handle)) {
            Some(stored) => {
                self.check_handle(handle, what)?;
                unseal(stored)
                    .map_err(|e| self.corruption(handle.offset, format!("{what} block: {e}")))?
            }
            None => self.read_raw(handle, what)?,
        };
        decode(raw).map_err(|e| self.corruption(handle.offset, format!("{what} block: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::Compression;
    use strata_fs::{FaultFs, FileSystem, MemFs, Op};

    /// A file of three stored blocks ("a", "bb", "ccc" repeated) and the
    /// handles of each; `data_end` is the file's end.
    fn three_blocks() -> (FaultFs, FileBlocks, Vec<BlockHandle>) {
        let mem = Arc::new(MemFs::new());
        let path = Path::new("/f");
        let file = mem.create(path).unwrap();
        let mut at = 0u64;
        let mut handles = Vec::new();
        for raw in [vec![b'a'; 100], vec![b'b'; 200], vec![b'c'; 300]] {
            let (stored, _) = super::super::stored_block::seal(&raw, Compression::None, 0);
            file.write_at(at, &stored).unwrap();
            handles.push(BlockHandle {
                offset: at,
                size: (stored.len() - BLOCK_TRAILER_LEN) as u64,
            });
            at += stored.len() as u64;
        }
        let fs = FaultFs::new(mem);
        let blocks = FileBlocks {
            path: path.to_path_buf(),
            file: fs.open(path, false).unwrap(),
            data_end: at,
        };
        (fs, blocks, handles)
    }

    #[test]
    fn blocks_inside_a_span_are_decoded_without_a_read_and_others_are_read() {
        let (fs, blocks, h) = three_blocks();
        let span = blocks
            .read_span(h[1].offset, blocks.data_end)
            .unwrap()
            .unwrap();
        let reads = fs.count(Op::Read);
        for (i, want) in [(1, b'b'), (2, b'c')] {
            let raw = blocks.decoded_from(Some(&span), h[i], "test", Ok).unwrap();
            assert!(raw.iter().all(|&b| b == want) && raw.len() == 100 * i + 100);
        }
        assert_eq!(fs.count(Op::Read), reads, "both from the span");
        let raw = blocks.decoded_from(Some(&span), h[0], "test", Ok).unwrap();
        assert_eq!(raw, vec![b'a'; 100]);
        assert_eq!(
            fs.count(Op::Read),
            reads + 1,
            "the first block read on its own"
        );
    }

    #[test]
    fn a_span_is_none_when_empty_past_the_footer_or_too_large() {
        let (_, blocks, _) = three_blocks();
        let end = blocks.data_end;
        assert!(blocks.read_span(5, 5).unwrap().is_none());
        assert!(blocks.read_span(6, 5).unwrap().is_none());
        assert!(blocks.read_span(0, end + 1).unwrap().is_none());
        let big = FileBlocks {
            data_end: SPAN_MAX_BYTES + 10,
            ..blocks
        };
        assert!(big.read_span(0, SPAN_MAX_BYTES + 1).unwrap().is_none());
    }

    #[test]
    fn a_block_from_a_span_passes_the_same_checks_as_one_read_alone() {
        let (fs, blocks, h) = three_blocks();
        fs.flip_bit_on_read(&blocks.path, h[2].offset + 7, 1);
        let span = blocks.read_span(0, blocks.data_end).unwrap().unwrap();
        for span in [Some(&span), None] {
            let e = blocks.decoded_from(span, h[2], "test", Ok).unwrap_err();
            assert!(matches!(e, Error::Corruption { .. }), "{e:?}");
            assert!(blocks.decoded_from(span, h[1], "test", Ok).is_ok());
        }
        let past = BlockHandle {
            offset: h[2].offset,
            size: h[2].size + 1,
        };
        let e = blocks
            .decoded_from(Some(&span), past, "test", Ok)
            .unwrap_err();
        assert!(
            matches!(e, Error::Corruption { .. }),
            "past the footer: {e:?}"
        );
    }
}
