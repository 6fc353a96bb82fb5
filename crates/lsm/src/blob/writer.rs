//! Writes one blob file: flush, compaction and GC move values out of the tree
//! this way (never the foreground write path).
//!
//! Values are packed into small blocks, compressed per block rather than per
//! value (a 1 KiB value alone compresses badly; sixteen neighbours do well),
//! and each block is sealed before the references into it are handed out,
//! because a reference names the block's stored size. The caller adds the
//! values of a run of keys, calls [`BlobFileWriter::seal_block`] when
//! [`BlobFileWriter::block_full`] says so (or at the end of its run), and
//! only then writes the keys' references into its SST.
//!
//! Invariants:
//! - After an I/O error the writer refuses every further call: the file is
//!   unspecified and the caller deletes it.
//! - [`BlobFileWriter::finish`] refuses while records wait in an unsealed
//!   block (their references were never handed out), then writes the footer
//!   and syncs the file's data. The directory sync is the caller's.
//!
//! Concurrency: a writer is owned by one thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_fs::{File, FileSystem, WritebackPacer};

use strata_codec::{zstd_train_dictionary, ZstdDictCompressor};

use super::dictionary::{
    encode_section, COMPRESSION_ZSTD_DICTIONARY, FLAG_DICTIONARY, MAX_DICTIONARY_BYTES,
    MAX_SAMPLE_BYTES, MIN_DICTIONARY_BYTES, SAMPLE_BYTES_PER_DICTIONARY_BYTE,
};
use super::format::{encode_record, BlobRef, Footer, Header, BLOCK_LEN_PREFIX, HEADER_LEN};
use crate::error::{Error, Result};
use crate::key::{SeqNo, MAX_SEQNO};
use crate::sst::format::{Compression, MAX_BLOCK_SIZE, MAX_ENTRY_LEN};
use crate::sst::{seal_block, seal_compressed};

/// Bytes buffered before a write to the file.
const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// How a blob file is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobWriterOptions {
    /// Decompressed bytes at which a block is full. Larger blocks compress
    /// better and scan faster; smaller ones cost a point read less.
    pub block_size_bytes: usize,
    /// How blocks are compressed (a block that would not shrink by an eighth
    /// is stored raw).
    pub compression: Compression,
    /// The zstd level, when `compression` is zstd.
    pub zstd_level: i32,
    /// With zstd: the most bytes of a dictionary the writer trains from the
    /// file's first blocks and compresses the rest with (0: none). Values
    /// too small to compress well alone, and alike across a file, gain
    /// most. Ignored with another compression.
    pub zstd_dictionary_bytes: usize,
}

/// The default block size: a point read decompresses its value's whole
/// block, so a value of 1 KiB or more sits alone (as RocksDB's BlobDB and
/// Titan compress each value), and smaller ones share a block up to 1 KiB.
/// At 1 KiB values (2 GiB, LZ4, `docs/lsm.md`) point reads ran 19% faster
/// than with 4 KiB blocks and scans 4% faster, for 4% more bytes.
pub const DEFAULT_BLOCK_SIZE: usize = 1 << 10;

impl Default for BlobWriterOptions {
    fn default() -> Self {
        BlobWriterOptions {
            block_size_bytes: DEFAULT_BLOCK_SIZE,
            compression: Compression::Lz4,
            zstd_level: strata_codec::ZSTD_DEFAULT_LEVEL,
            zstd_dictionary_bytes: 0,
        }
    }
}

impl BlobWriterOptions {
    /// Checks every field against its bounds.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_BLOCK_SIZE).contains(&self.block_size_bytes) {
            return Err(Error::InvalidArgument(
                "blob options: block_size_bytes must be 1..=16 MiB".into(),
            ));
        }
        let dictionary = self.zstd_dictionary_bytes;
        if dictionary != 0 && !(MIN_DICTIONARY_BYTES..=MAX_DICTIONARY_BYTES).contains(&dictionary) {
            return Err(Error::InvalidArgument(format!(
                "blob options: zstd_dictionary_bytes must be 0 or \
                 {MIN_DICTIONARY_BYTES}..={MAX_DICTIONARY_BYTES}, not {dictionary}"
            )));
        }
        Ok(())
    }
}

/// What a finished blob file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobFileInfo {
    /// The file's path.
    pub path: PathBuf,
    /// The file's number.
    pub file_number: u64,
    /// The file's size in bytes.
    pub file_size: u64,
    /// What its footer says.
    pub footer: Footer,
}

/// Builds a blob file.
#[derive(Debug)]
pub struct BlobFileWriter {
    path: PathBuf,
    file: Arc<dyn File>,
    file_number: u64,
    options: BlobWriterOptions,
    /// Bytes written to the file or buffered in `pending`.
    offset: u64,
    /// Bytes written to the file.
    flushed: u64,
    pending: Vec<u8>,
    /// The open block's decompressed bytes.
    block: Vec<u8>,
    /// Each record of the open block: its offset in `block`, its value length.
    block_records: Vec<(u32, u32)>,
    footer: Footer,
    header: Header,
    dictionary: Dictionary,
    failed: bool,
    writeback: WritebackPacer,
}

/// Where a writer stands with its dictionary.
enum Dictionary {
    /// None wanted, or none could be trained.
    Off,
    /// Gathering the raw blocks (`samples`, each of `sizes`) it will train
    /// on, and the size each was stored at without a dictionary.
    Sampling {
        samples: Vec<u8>,
        sizes: Vec<usize>,
        stored: Vec<usize>,
        budget: usize,
    },
    /// Trained: the rest of the file's blocks are compressed with it.
    Trained {
        raw: Vec<u8>,
        compressor: ZstdDictCompressor,
    },
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dictionary::Off => f.write_str("Off"),
            Dictionary::Sampling { samples, .. } => write!(f, "Sampling({} bytes)", samples.len()),
            Dictionary::Trained { raw, .. } => write!(f, "Trained({} bytes)", raw.len()),
        }
    }
}

impl BlobFileWriter {
    /// Creates the file at `path` (which must not exist) for the values of
    /// `column_family`, as file `file_number`.
    pub fn create(
        fs: &dyn FileSystem,
        path: &Path,
        file_number: u64,
        column_family: u32,
        options: BlobWriterOptions,
    ) -> Result<BlobFileWriter> {
        options.validate()?;
        let file = fs.create(path).map_err(Error::io("create", path))?;
        let header = Header {
            flags: 0,
            column_family,
            compression: options.compression,
        };
        let mut pending = Vec::with_capacity(WRITE_BUFFER_BYTES);
        pending.extend_from_slice(&header.encode());
        let dictionary = match (options.compression, options.zstd_dictionary_bytes) {
            (Compression::Zstd, bytes) if bytes > 0 => Dictionary::Sampling {
                samples: Vec::new(),
                sizes: Vec::new(),
                stored: Vec::new(),
                budget: (bytes * SAMPLE_BYTES_PER_DICTIONARY_BYTE).min(MAX_SAMPLE_BYTES),
            },
            _ => Dictionary::Off,
        };
        Ok(BlobFileWriter {
            path: path.to_path_buf(),
            file,
            file_number,
            options,
            offset: HEADER_LEN as u64,
            flushed: 0,
            pending,
            block: Vec::new(),
            block_records: Vec::new(),
            footer: Footer::default(),
            header,
            dictionary,
            failed: false,
            writeback: WritebackPacer::new(crate::WRITEBACK_BYTES, 0),
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

    /// Adds a record to the open block. Its reference comes from the next
    /// [`seal_block`](Self::seal_block).
    pub fn add(&mut self, key: &[u8], seqno: SeqNo, value: &[u8]) -> Result<()> {
        self.check_usable()?;
        if key.len() + value.len() > MAX_ENTRY_LEN {
            return Err(Error::InvalidArgument(format!(
                "blob writer: key and value of {} bytes exceed {MAX_ENTRY_LEN}",
                key.len() + value.len()
            )));
        }
        if seqno > MAX_SEQNO {
            return Err(Error::InvalidArgument(format!(
                "blob writer: seqno {seqno} exceeds {MAX_SEQNO}"
            )));
        }
        // Both fit in u32: a block closes at 16 MiB at most, plus one record.
        let at = self.block.len() as u32;
        encode_record(&mut self.block, key, seqno, value);
        self.block_records.push((at, value.len() as u32));
        self.footer.value_bytes += value.len() as u64;
        Ok(())
    }

    /// Whether the open block has reached its target size.
    pub fn block_full(&self) -> bool {
        self.block.len() >= self.options.block_size_bytes
    }

    /// Records added since the last seal.
    pub fn unsealed_records(&self) -> usize {
        self.block_records.len()
    }

    /// Bytes written so far, the open block excluded: where the file stands.
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    /// Compresses and writes the open block; returns the references of its
    /// records, in the order they were added (none when the block is empty).
    pub fn seal_block(&mut self) -> Result<Vec<BlobRef>> {
        self.check_usable()?;
        if self.block_records.is_empty() {
            return Ok(Vec::new());
        }
        let stored = self.compress_block();
        let block_offset = self.offset + BLOCK_LEN_PREFIX as u64;
        let block_size = stored.len() as u32;
        self.pending.extend_from_slice(&block_size.to_le_bytes());
        self.pending.extend_from_slice(&stored);
        self.offset = block_offset + stored.len() as u64;
        let refs = self
            .block_records
            .drain(..)
            .map(|(record_offset, value_len)| BlobRef {
                file_number: self.file_number,
                block_offset,
                block_size,
                record_offset,
                value_len,
            })
            .collect::<Vec<_>>();
        self.footer.block_count += 1;
        self.footer.record_count += refs.len() as u64;
        self.block.clear();
        if self.pending.len() >= WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        Ok(refs)
    }

    /// The open block, stored: compressed with the dictionary once there
    /// is one, and sampled for it while there is not.
    fn compress_block(&mut self) -> Vec<u8> {
        if let Dictionary::Trained { compressor, .. } = &mut self.dictionary {
            let compressed = compressor.compress(&self.block);
            return seal_compressed(
                &self.block,
                compressed.as_deref(),
                COMPRESSION_ZSTD_DICTIONARY,
            )
            .0;
        }
        let (block, _) = seal_block(
            &self.block,
            self.options.compression,
            self.options.zstd_level,
        );
        if let Dictionary::Sampling {
            samples,
            sizes,
            stored,
            budget,
        } = &mut self.dictionary
        {
            samples.extend_from_slice(&self.block);
            sizes.push(self.block.len());
            stored.push(block.len());
            if samples.len() >= *budget {
                self.dictionary = train(
                    samples,
                    sizes,
                    stored,
                    self.options.zstd_dictionary_bytes,
                    self.options.zstd_level,
                );
            }
        }
        block
    }

    /// Writes the footer and syncs the file's data. Refused while records
    /// wait unsealed.
    pub fn finish(mut self) -> Result<BlobFileInfo> {
        self.check_usable()?;
        if !self.block_records.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "blob writer: {} records were added after the last seal_block",
                self.block_records.len()
            )));
        }
        self.footer.data_end = self.offset;
        if let Dictionary::Trained { raw, .. } = &self.dictionary {
            let section = encode_section(raw);
            self.pending.extend_from_slice(&section);
            self.offset += section.len() as u64;
            self.header.flags |= FLAG_DICTIONARY;
        }
        let footer = self.footer;
        self.pending.extend_from_slice(&footer.encode());
        self.offset += super::format::FOOTER_LEN as u64;
        self.flush()?;
        if self.header.flags & FLAG_DICTIONARY != 0 {
            // The header went out before the dictionary existed; its flag
            // is set now, before the sync that makes the file whole.
            let written = self.file.write_at(0, &self.header.encode());
            if let Err(e) = written {
                self.failed = true;
                return Err(Error::io("write", &self.path)(e));
            }
        }
        let path = self.path.clone();
        let synced = self.file.sync_data().map_err(Error::io("sync", &path));
        if let Err(e) = synced {
            self.failed = true;
            return Err(e);
        }
        Ok(BlobFileInfo {
            path,
            file_number: self.file_number,
            file_size: self.offset,
            footer,
        })
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let written = self.file.write_at(self.flushed, &self.pending);
        if let Err(e) = written {
            self.failed = true;
            return Err(Error::io("write", &self.path)(e));
        }
        self.flushed += self.pending.len() as u64;
        self.pending.clear();
        self.writeback.wrote(self.file.as_ref(), self.flushed);
        Ok(())
    }

    /// Bytes of the dictionary this file will carry (0 while sampling or
    /// without one).
    pub fn dictionary_bytes(&self) -> usize {
        match &self.dictionary {
            Dictionary::Trained { raw, .. } => raw.len(),
            _ => 0,
        }
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::InvalidArgument(format!(
                "blob writer for {}: an earlier write failed",
                self.path.display()
            )));
        }
        Ok(())
    }
}

/// Sampled blocks a trained dictionary is tried on before it is kept.
const TRIAL_BLOCKS: usize = 8;

/// Trains the dictionary from the sampled blocks, each stored at `stored`
/// bytes without it. `Off` when zstd cannot train one (too few or too
/// alike samples), or when it does not shrink the last sampled blocks by a
/// twentieth (blocks large enough to hold their own repeats gain nothing,
/// and measured on alike records at 16 KiB they even grew): the file goes
/// on without one.
fn train(
    samples: &[u8],
    sizes: &[usize],
    stored: &[usize],
    max_bytes: usize,
    level: i32,
) -> Dictionary {
    let Some(raw) = zstd_train_dictionary(samples, sizes, max_bytes) else {
        return Dictionary::Off;
    };
    if !(MIN_DICTIONARY_BYTES..=MAX_DICTIONARY_BYTES).contains(&raw.len()) {
        return Dictionary::Off;
    }
    let Some(mut compressor) = ZstdDictCompressor::new(&raw, level) else {
        return Dictionary::Off;
    };
    let trial = sizes.len().min(TRIAL_BLOCKS);
    let mut end = samples.len();
    let (mut with, mut without) = (0, 0);
    for (size, plain) in sizes.iter().zip(stored).rev().take(trial) {
        let block = &samples[end - size..end];
        end -= size;
        let compressed = compressor.compress(block);
        with += seal_compressed(block, compressed.as_deref(), COMPRESSION_ZSTD_DICTIONARY)
            .0
            .len();
        without += plain;
    }
    if with * 20 > without * 19 {
        return Dictionary::Off;
    }
    Dictionary::Trained { raw, compressor }
}
