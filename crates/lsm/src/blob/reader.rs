//! Reads one blob file: a value by its reference (the read path), a block
//! whole (scans that fetch many values of one block at once), or every record
//! in file order (GC, re-inlining, `strata-ctl`).
//!
//! Invariants:
//! - Opening checks the header and the footer, and that the footer sits
//!   where the blocks end: a file cut short or never finished is refused.
//! - Every extent read is bounded by the file's blocks before any I/O, every
//!   block is checked by its checksum before a byte of it is used, and a
//!   value is returned only when the record it came from carries the key
//!   the caller looked up and the length the reference promised: damage and
//!   a wrong reference are typed errors, never another key's value.
//!
//! Concurrency: a reader is `Sync`; every method takes `&self`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_codec::{DecodeError, ZstdDictionary};
use strata_fs::{File, FileSystem};

use super::dictionary::{
    decode_section, dictionary_len, COMPRESSION_ZSTD_DICTIONARY, FLAG_DICTIONARY,
    SECTION_TRAILER_LEN,
};
use super::format::{
    decode_record, BlobRecord, BlobRef, Footer, Header, BLOCK_LEN_PREFIX, FOOTER_LEN, HEADER_LEN,
};
use crate::error::{Error, Result};
use crate::sst::format::{BLOCK_TRAILER_LEN, MAX_BLOCK_LEN};
use crate::sst::{check_block, compressed_parts, read_exact, unseal_checked};

/// An open blob file.
#[derive(Debug)]
pub struct BlobFileReader {
    path: PathBuf,
    file: Arc<dyn File>,
    file_number: u64,
    header: Header,
    footer: Footer,
    /// The file's zstd dictionary, when its header says it has one.
    dictionary: Option<ZstdDictionary>,
}

/// A block read and checked: its records, decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobBlock {
    /// Offset of the stored block in its file.
    pub offset: u64,
    stored_len: u32,
    raw: Vec<u8>,
}

impl BlobBlock {
    /// The decompressed bytes.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// The stored size it was read as (trailer included).
    pub fn stored_len(&self) -> u32 {
        self.stored_len
    }
}

/// Stored bytes of a blob file read at once ([`BlobFileReader::read_span`]).
#[derive(Debug, Default)]
pub struct Span {
    /// The number of the file it was read from: a span shared by the files
    /// of a scan holds one file's bytes at a time.
    file_number: u64,
    offset: u64,
    bytes: Vec<u8>,
}

impl Span {
    /// The stored bytes of the extent at `offset` of `size`, if held whole.
    fn get(&self, offset: u64, size: u32) -> Option<&[u8]> {
        let from = usize::try_from(offset.checked_sub(self.offset)?).ok()?;
        self.bytes.get(from..from.checked_add(size as usize)?)
    }
}

impl BlobFileReader {
    /// Opens the blob file at `path` as file `file_number`.
    pub fn open(fs: &dyn FileSystem, path: &Path, file_number: u64) -> Result<BlobFileReader> {
        let file = fs.open(path, false).map_err(Error::io("open", path))?;
        let file_size = file.len().map_err(Error::io("stat", path))?;
        if file_size < (HEADER_LEN + FOOTER_LEN) as u64 {
            return Err(Error::corruption(
                path,
                0,
                format!("{file_size} bytes is too short for a blob file"),
            ));
        }
        let mut head = [0u8; HEADER_LEN];
        read_exact(&*file, path, 0, &mut head)?;
        let header = Header::decode(&head)
            .map_err(|e| Error::corruption(path, 0, format!("header: {e}")))?;
        let footer_at = file_size - FOOTER_LEN as u64;
        let mut foot = [0u8; FOOTER_LEN];
        read_exact(&*file, path, footer_at, &mut foot)?;
        let footer = Footer::decode(&foot)
            .map_err(|e| Error::corruption(path, footer_at, format!("footer: {e}")))?;
        let dictionary = if header.flags & FLAG_DICTIONARY != 0 {
            Some(read_dictionary(&*file, path, footer_at)?)
        } else {
            None
        };
        let blocks_end = footer_at - dictionary.as_ref().map_or(0, |d| section_len(d.len()));
        if footer.data_end != blocks_end {
            return Err(Error::corruption(
                path,
                footer_at,
                format!(
                    "footer says the blocks end at {}, the file at {blocks_end}",
                    footer.data_end
                ),
            ));
        }
        Ok(BlobFileReader {
            path: path.to_path_buf(),
            file,
            file_number,
            header,
            footer,
            dictionary,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's number.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// Asks the OS to read `len` bytes at `offset` ahead, in the
    /// background. A hint: its error is ignored (the read that follows
    /// reports any real one).
    pub fn read_ahead(&self, offset: u64, len: u64) {
        let _ = self.file.will_need(offset, len);
    }

    /// What the header says.
    pub fn header(&self) -> Header {
        self.header
    }

    /// What the footer says.
    pub fn footer(&self) -> Footer {
        self.footer
    }

    /// Reads and checks the stored block at `offset` of `size` bytes.
    pub fn read_block(&self, offset: u64, size: u32) -> Result<BlobBlock> {
        self.check_extent(offset, size)?;
        let mut stored = vec![0u8; size as usize];
        read_exact(&*self.file, &self.path, offset, &mut stored)?;
        self.unseal(offset, &stored)
    }

    /// Reads the stored bytes from `offset` on, `len` of them or up to the
    /// end of the blocks, at once, into `span` (its buffer reused): a scan
    /// then takes the blocks it meets there
    /// ([`BlobFileReader::block_in_span`]) without a read each.
    pub fn read_span(&self, offset: u64, len: u64, span: &mut Span) -> Result<()> {
        let end = offset.saturating_add(len).min(self.footer.data_end);
        span.bytes.clear();
        span.file_number = self.file_number;
        span.offset = offset;
        if offset < HEADER_LEN as u64 || offset >= end {
            return Err(
                self.corruption(offset, format!("a span at {offset} is outside the blocks"))
            );
        }
        span.bytes.resize((end - offset) as usize, 0);
        let read = read_exact(&*self.file, &self.path, offset, &mut span.bytes);
        if read.is_err() {
            span.bytes.clear();
        }
        read
    }

    /// Checks the stored block at `offset` of `size` bytes, taken from
    /// `span`; `None` when the span does not hold all of it.
    pub fn block_in_span(&self, span: &Span, offset: u64, size: u32) -> Option<Result<BlobBlock>> {
        if span.file_number != self.file_number {
            return None;
        }
        let stored = span.get(offset, size)?;
        Some(
            self.check_extent(offset, size)
                .and_then(|()| self.unseal(offset, stored)),
        )
    }

    /// Refuses an extent that is not within the file's blocks.
    fn check_extent(&self, offset: u64, size: u32) -> Result<()> {
        let first = (HEADER_LEN + BLOCK_LEN_PREFIX) as u64;
        let size64 = u64::from(size);
        let in_bounds = offset >= first
            && size64 >= BLOCK_TRAILER_LEN as u64
            && size64 <= MAX_BLOCK_LEN
            && offset
                .checked_add(size64)
                .is_some_and(|end| end <= self.footer.data_end);
        if !in_bounds {
            return Err(self.corruption(
                offset,
                format!(
                    "a {size}-byte block at {offset} is outside the blocks ({first}..{})",
                    self.footer.data_end
                ),
            ));
        }
        Ok(())
    }

    /// Bytes of the file's zstd dictionary (0 without one).
    pub fn dictionary_bytes(&self) -> usize {
        self.dictionary.as_ref().map_or(0, ZstdDictionary::len)
    }

    /// Checks and decompresses the stored block read at `offset`.
    fn unseal(&self, offset: u64, stored: &[u8]) -> Result<BlobBlock> {
        let raw = self
            .decompress(stored)
            .map_err(|e| self.corruption(offset, format!("block: {e}")))?;
        if raw.is_empty() {
            return Err(self.corruption(offset, "an empty block"));
        }
        Ok(BlobBlock {
            offset,
            stored_len: stored.len() as u32,
            raw,
        })
    }

    /// A stored block's raw bytes: an SST block's codes, plus zstd with the
    /// file's dictionary.
    fn decompress(&self, stored: &[u8]) -> std::result::Result<Vec<u8>, DecodeError> {
        let (payload, code) = check_block(stored)?;
        if code != COMPRESSION_ZSTD_DICTIONARY {
            return unseal_checked(payload, code);
        }
        let Some(dictionary) = &self.dictionary else {
            return Err(DecodeError::invalid(
                "compression",
                payload.len(),
                "zstd with a dictionary, in a file without one",
            ));
        };
        let (raw_len, compressed) = compressed_parts(payload)?;
        dictionary.decompress(compressed, raw_len)
    }

    /// The value `r` points at, which must have been written under `key`.
    pub fn get(&self, r: &BlobRef, key: &[u8]) -> Result<Vec<u8>> {
        if r.file_number != self.file_number {
            return Err(Error::InvalidArgument(format!(
                "a reference into blob file {} asked of file {}",
                r.file_number, self.file_number
            )));
        }
        let block = self.read_block(r.block_offset, r.block_size)?;
        self.value_in(&block, r, key).map(<[u8]>::to_vec)
    }

    /// The value `r` points at in `block` (read for `r`'s extent), which
    /// must have been written under `key`.
    pub fn value_in<'b>(&self, block: &'b BlobBlock, r: &BlobRef, key: &[u8]) -> Result<&'b [u8]> {
        if block.offset != r.block_offset || block.stored_len != r.block_size {
            return Err(Error::InvalidArgument(format!(
                "a reference into the block at {} asked of the block at {}",
                r.block_offset, block.offset
            )));
        }
        let (record, _) = decode_record(&block.raw, r.record_offset as usize)
            .map_err(|e| self.corruption(r.block_offset, format!("record: {e}")))?;
        if record.key != key || record.value.len() != r.value_len as usize {
            return Err(self.corruption(
                r.block_offset,
                format!(
                    "record at {} holds a {}-byte value of another key or length \
                     than the reference's {}-byte value",
                    r.record_offset,
                    record.value.len(),
                    r.value_len
                ),
            ));
        }
        Ok(record.value)
    }

    /// Visits every record in file order with its reference, checking every
    /// block and, at the end, the footer's counts.
    pub fn for_each_record(
        &self,
        mut visit: impl FnMut(BlobRef, BlobRecord<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut seen = Footer {
            data_end: self.footer.data_end,
            ..Footer::default()
        };
        let mut pos = HEADER_LEN as u64;
        while pos < self.footer.data_end {
            if pos + BLOCK_LEN_PREFIX as u64 > self.footer.data_end {
                return Err(self.corruption(pos, "a block length cut by the footer"));
            }
            let mut len = [0u8; BLOCK_LEN_PREFIX];
            read_exact(&*self.file, &self.path, pos, &mut len)?;
            let size = u32::from_le_bytes(len);
            let block = self.read_block(pos + BLOCK_LEN_PREFIX as u64, size)?;
            let mut at = 0;
            while at < block.raw.len() {
                let (record, next) = decode_record(&block.raw, at)
                    .map_err(|e| self.corruption(block.offset, format!("record: {e}")))?;
                let r = BlobRef {
                    file_number: self.file_number,
                    block_offset: block.offset,
                    block_size: size,
                    record_offset: at as u32,
                    value_len: record.value.len() as u32,
                };
                seen.record_count += 1;
                seen.value_bytes += record.value.len() as u64;
                visit(r, record)?;
                at = next;
            }
            seen.block_count += 1;
            pos = block.offset + u64::from(size);
        }
        if seen != self.footer {
            return Err(self.corruption(
                self.footer.data_end,
                format!(
                    "the footer says {:?}, the blocks hold {seen:?}",
                    self.footer
                ),
            ));
        }
        Ok(())
    }

    fn corruption(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::corruption(&self.path, offset, reason)
    }
}

/// Bytes of a dictionary section holding `dictionary_len` bytes.
fn section_len(dictionary_len: usize) -> u64 {
    (dictionary_len + SECTION_TRAILER_LEN) as u64
}

/// Reads and checks the dictionary section that ends at `footer_at`.
fn read_dictionary(file: &dyn File, path: &Path, footer_at: u64) -> Result<ZstdDictionary> {
    let corrupt =
        |offset: u64, e: DecodeError| Error::corruption(path, offset, format!("dictionary: {e}"));
    let first = (HEADER_LEN + SECTION_TRAILER_LEN) as u64;
    if footer_at < first {
        return Err(Error::corruption(
            path,
            footer_at,
            "no room for a dictionary",
        ));
    }
    let trailer_at = footer_at - SECTION_TRAILER_LEN as u64;
    let mut trailer = [0u8; SECTION_TRAILER_LEN];
    read_exact(file, path, trailer_at, &mut trailer)?;
    let len = dictionary_len(&trailer).map_err(|e| corrupt(trailer_at, e))?;
    let Some(at) = footer_at
        .checked_sub(section_len(len))
        .filter(|&at| at >= HEADER_LEN as u64)
    else {
        return Err(Error::corruption(
            path,
            trailer_at,
            format!("a {len}-byte dictionary does not fit before the footer"),
        ));
    };
    let mut section = vec![0u8; section_len(len) as usize];
    read_exact(file, path, at, &mut section)?;
    let raw = decode_section(&section).map_err(|e| corrupt(at, e))?;
    Ok(ZstdDictionary::new(raw))
}
