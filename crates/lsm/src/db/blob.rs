//! Separated values on the read path: a `BlobIndex` entry's reference is
//! followed into the blob file of the same version (the reader's read
//! state holds that version, so the file cannot be deleted under it), and
//! the value is checked against the key that led there. And the online
//! switch of the separation threshold.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use strata_fs::FileSystem;

use super::cf::{ColumnFamily, SEPARATION_OFF};
use super::options::check_min_blob_size;
use super::Db;
use crate::blob::{BlobBlock, BlobFileReader, BlobRef, Span};
use crate::cache::BlockCache;
use crate::compaction::blob_file_name;
use crate::error::{Error, Result};
use crate::version::Version;

/// A column family's blob files, as its current version counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlobFileStats {
    /// Blob files.
    pub files: u64,
    /// Their bytes on disk.
    pub file_bytes: u64,
    /// The value bytes they hold.
    pub value_bytes: u64,
    /// The value bytes the family's SSTs reference: the live ones.
    pub live_bytes: u64,
}

impl Db {
    /// The blob files of `cf` in its current version: counts, bytes, and
    /// live bytes (exact, from the SSTs' references).
    pub fn blob_file_stats(&self, cf: &ColumnFamily) -> Result<BlobFileStats> {
        self.inner().check_open()?;
        let state = cf.live()?;
        let rs = state.installer.load();
        let mut out = BlobFileStats::default();
        for b in rs.version.blob_files() {
            out.files += 1;
            out.file_bytes += b.desc().size;
            out.value_bytes += b.desc().value_bytes;
            out.live_bytes += rs.version.blob_live(b.number()).bytes;
        }
        Ok(out)
    }

    /// Changes the separation threshold of `cf` on the open database:
    /// flushes and compactions that start from now on move values of at
    /// least `min_blob_size` bytes to blob files (`None`: keep new outputs
    /// inline). Values already written stay where they are until a
    /// compaction rewrites them. Not persisted: the next open takes the
    /// threshold from its options.
    pub fn set_min_blob_size(&self, cf: &ColumnFamily, min_blob_size: Option<u64>) -> Result<()> {
        self.inner().check_open()?;
        let state = cf.live()?;
        if let Some(min) = min_blob_size {
            check_min_blob_size(min)?;
        }
        state
            .min_blob_size
            .store(min_blob_size.unwrap_or(SEPARATION_OFF), Ordering::Release);
        Ok(())
    }
}

/// Where a reader finds blob files: borrowed from the engine, so that a
/// point read follows its reference without allocating anything but the
/// value.
#[derive(Clone, Copy)]
pub(crate) struct BlobSource<'a> {
    pub fs: &'a dyn FileSystem,
    pub dir: &'a Path,
    /// The block cache, when the reader fills it (compaction does not).
    pub cache: Option<&'a BlockCache>,
}

impl BlobSource<'_> {
    /// Decodes a `BlobIndex` entry's value.
    pub(crate) fn decode_ref(&self, key: &[u8], reference: &[u8]) -> Result<BlobRef> {
        BlobRef::decode(reference).map_err(|e| {
            Error::corruption(self.dir, 0, format!("blob reference of key {key:?}: {e}"))
        })
    }

    /// The value `r` points at, in a blob file of `version`, written under
    /// `key`.
    pub(crate) fn value(&self, version: &Version, key: &[u8], r: &BlobRef) -> Result<Vec<u8>> {
        let (reader, block) = self.block(version, r)?;
        reader.value_in(&block, r, key).map(<[u8]>::to_vec)
    }

    /// The block `r` points into, through the cache, with its file's reader.
    fn block(
        &self,
        version: &Version,
        r: &BlobRef,
    ) -> Result<(Arc<BlobFileReader>, Arc<BlobBlock>)> {
        let reader = self.reader(version, r.file_number)?;
        let block = match self.cached_block(r) {
            Some(b) => b,
            None => self.read_block(&reader, r)?,
        };
        Ok((reader, block))
    }

    /// The block `r` points into, if the cache holds it.
    fn cached_block(&self, r: &BlobRef) -> Option<Arc<BlobBlock>> {
        self.cache
            .and_then(|c| c.get_blob(r.file_number, r.block_offset))
            // A cached block was read for its own extent: a reference naming
            // another size at this offset is checked by reading.
            .filter(|b| b.stored_len() == r.block_size)
    }

    /// Reads the block `r` points into, and caches it if the cache admits
    /// it (read before, lately).
    fn read_block(&self, reader: &BlobFileReader, r: &BlobRef) -> Result<Arc<BlobBlock>> {
        let b = Arc::new(reader.read_block(r.block_offset, r.block_size)?);
        if let Some(c) = self.cache {
            if c.admits_blob(r.file_number, r.block_offset) {
                c.insert_blob(r.file_number, r.block_offset, b.clone());
            }
        }
        Ok(b)
    }

    fn reader(&self, version: &Version, number: u64) -> Result<Arc<BlobFileReader>> {
        let path = || self.dir.join(blob_file_name(number));
        let meta = version.blob_file(number).ok_or_else(|| {
            Error::corruption(
                path(),
                0,
                "a reference points into a blob file the version does not hold",
            )
        })?;
        meta.reader(|| BlobFileReader::open(self.fs, &path(), number))
    }
}

/// Bytes a scan asks to be read ahead in a blob file it reads forward.
const READAHEAD_BYTES: u64 = 1 << 20;

/// Bytes a scan reads at once from a blob file it reads forward.
const SPAN_BYTES: u64 = 32 << 10;

/// Bytes a batched scan reads from one blob file at once, at most: the
/// batch's blocks of that file, which it asked for ahead.
const RANGE_SPAN_MAX: u64 = 256 << 10;

/// Blob files a scan keeps its place in (and a span of, at most 8 MiB of
/// spans); past it, the file read longest ago is forgotten. A scan after
/// random overwrites reads from every blob file in turn (about 70 at 4 GiB
/// of 1 KiB values): a bound of 64 that dropped all spans at once read each
/// span again and again, 30% of the scan.
const FILES_MAX: usize = 256;

/// Follows blob references for one iterator or compaction. Keeps the last
/// block read, so values written together (one block holds many small
/// ones) cost one read of it.
///
/// A compaction reads ahead in each blob file it reads forward: a flush or
/// compaction writes a blob file in key order, so reading references in key
/// order reads each file front to back, interleaved with the others. From
/// the second forward read of a file on, the next [`READAHEAD_BYTES`] are
/// asked for, half a window before the reads reach them, and the file is
/// read [`SPAN_BYTES`] at once, the next blocks taken from there. A seek
/// elsewhere starts over.
///
/// An iterator ([`BlobValues::for_iterator`]) reads no window: a seek and a
/// few moves fetch a block at a time through the block cache, and a scan
/// fetches in batches that ask for exactly their blocks
/// ([`BlobValues::fetch_in_range`], `super::scan_ahead`). Blocks taken from
/// a span are not put in the block cache: a scan would evict what point
/// reads keep there.
#[derive(Debug)]
pub(crate) struct BlobValues {
    fs: Arc<dyn FileSystem>,
    dir: Arc<Path>,
    cache: Option<Arc<BlockCache>>,
    last: Option<(Arc<BlobFileReader>, Arc<BlobBlock>)>,
    /// How each blob file is being read, by number.
    files: HashMap<u64, FileRead>,
    /// Counts block reads, to find the file read longest ago.
    tick: u64,
    /// The stored bytes of the file a batch reads now
    /// ([`Self::fetch_in_range`]): its references come in (file, offset)
    /// order, so one span serves them all.
    batch_span: Span,
    /// Whether [`Self::fetch`] reads ahead in files read forward; off for
    /// iterators, whose scans ask for their batches' blocks instead
    /// (`super::scan_ahead`).
    windows: bool,
}

/// Where a scan is in one blob file.
#[derive(Debug)]
struct FileRead {
    /// Where the last block read starts (`u64::MAX` before the first).
    last: u64,
    /// How far ahead was asked for (0 until the file is read forward).
    asked: u64,
    /// The span last read (empty until the file is read forward).
    span: Span,
    /// The `tick` of its last block read.
    used: u64,
}

impl BlobValues {
    pub(crate) fn new(
        fs: Arc<dyn FileSystem>,
        dir: &Arc<Path>,
        cache: Option<Arc<BlockCache>>,
    ) -> BlobValues {
        BlobValues {
            fs,
            dir: dir.clone(),
            cache,
            last: None,
            files: HashMap::new(),
            tick: 0,
            batch_span: Span::default(),
            windows: true,
        }
    }

    /// The same, for an iterator: [`Self::fetch`] reads one block at a time
    /// (through the cache), and only batches read ahead
    /// ([`Self::fetch_in_range`]), so that a seek and a few moves read no
    /// more than they use.
    pub(crate) fn for_iterator(
        fs: Arc<dyn FileSystem>,
        dir: &Arc<Path>,
        cache: Option<Arc<BlockCache>>,
    ) -> BlobValues {
        BlobValues {
            windows: false,
            ..BlobValues::new(fs, dir, cache)
        }
    }

    fn source(&self) -> BlobSource<'_> {
        BlobSource {
            fs: &*self.fs,
            dir: &self.dir,
            cache: self.cache.as_deref(),
        }
    }

    /// Decodes a `BlobIndex` entry's value.
    pub(crate) fn decode_ref(&self, key: &[u8], reference: &[u8]) -> Result<BlobRef> {
        self.source().decode_ref(key, reference)
    }

    /// The value `r` points at, in a blob file of `version`, written under
    /// `key`; appended to `out`.
    pub(crate) fn fetch(
        &mut self,
        version: &Version,
        key: &[u8],
        r: &BlobRef,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if !self.holds(r) {
            let reader = self.source().reader(version, r.file_number)?;
            let cached_block = self.source().cached_block(r);
            let block = if self.windows {
                let file = self.file_read(r.file_number);
                let forward = file.read_ahead(&reader, r);
                match cached_block {
                    Some(b) => b,
                    None if forward => Arc::new(file.block_from_span(&reader, r)?),
                    None => self.source().read_block(&reader, r)?,
                }
            } else {
                match cached_block {
                    Some(b) => b,
                    None => self.source().read_block(&reader, r)?,
                }
            };
            self.last = Some((reader, block));
        }
        self.value_from_last(key, r, out)
    }

    /// Whether the block `r` points into is the last one read.
    fn holds(&self, r: &BlobRef) -> bool {
        self.last.as_ref().is_some_and(|(reader, block)| {
            reader.file_number() == r.file_number
                && block.offset == r.block_offset
                && block.stored_len() == r.block_size
        })
    }

    /// Appends the value `r` points at in the last block read to `out`.
    fn value_from_last(&self, key: &[u8], r: &BlobRef, out: &mut Vec<u8>) -> Result<()> {
        let (reader, block) = self.last.as_ref().expect("a block was read");
        out.extend_from_slice(reader.value_in(block, r, key)?);
        Ok(())
    }

    /// Asks the OS for `len` bytes at `offset` of blob file `number` of
    /// `version`, in the background: the blocks of a scan's next batch. A
    /// hint: a file that cannot be opened is reported by the read of a
    /// value in it, if one comes.
    pub(crate) fn read_ahead(&self, version: &Version, number: u64, offset: u64, len: u64) {
        let Ok(reader) = self.source().reader(version, number) else {
            return;
        };
        // Nothing past the blocks: a window may reach beyond them.
        let end = offset.saturating_add(len).min(reader.footer().data_end);
        if end > offset {
            reader.read_ahead(offset, end - offset);
        }
    }

    /// [`Self::fetch`] for a batch of references taken in (file, offset)
    /// order whose blocks were asked for ahead: no window is asked for, and
    /// a block neither cached nor in its file's span is read together with
    /// the batch's next blocks of that file, up to `range_end` (at most
    /// [`RANGE_SPAN_MAX`]), in one read.
    pub(crate) fn fetch_in_range(
        &mut self,
        version: &Version,
        key: &[u8],
        r: &BlobRef,
        range_end: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if !self.holds(r) {
            let reader = self.source().reader(version, r.file_number)?;
            let block = match self.source().cached_block(r) {
                Some(b) => b,
                None => Arc::new(block_from_range(
                    &mut self.batch_span,
                    &reader,
                    r,
                    range_end,
                )?),
            };
            self.last = Some((reader, block));
        }
        self.value_from_last(key, r, out)
    }

    /// The read state of file `number`, made (forgetting the file read
    /// longest ago when [`FILES_MAX`] are kept) if new.
    fn file_read(&mut self, number: u64) -> &mut FileRead {
        self.tick += 1;
        if !self.files.contains_key(&number) && self.files.len() >= FILES_MAX {
            let oldest = self.files.iter().min_by_key(|(_, f)| f.used);
            if let Some(&old) = oldest.map(|(n, _)| n) {
                self.files.remove(&old);
            }
        }
        let file = self.files.entry(number).or_insert_with(|| FileRead {
            last: u64::MAX,
            asked: 0,
            span: Span::default(),
            used: 0,
        });
        file.used = self.tick;
        file
    }
}

impl FileRead {
    /// Asks for the file ahead of a forward read; true when `r` continues
    /// a forward read of its file.
    fn read_ahead(&mut self, reader: &BlobFileReader, r: &BlobRef) -> bool {
        let end = r.block_offset.saturating_add(u64::from(r.block_size));
        // The same block again is no seek: a scan over scattered values
        // comes back to a block after reading other files' (measured: taking
        // it for one re-asked the whole window at almost every block, and
        // the kernel's walk of those cached pages took 45% of a 1 KiB scan).
        let forward = self.last != u64::MAX && r.block_offset >= self.last;
        self.last = r.block_offset;
        if !forward {
            self.asked = 0;
            return false;
        }
        if end.saturating_add(READAHEAD_BYTES / 2) <= self.asked {
            return true;
        }
        let from = self.asked.max(end);
        let to = end.saturating_add(READAHEAD_BYTES);
        reader.read_ahead(from, to - from);
        self.asked = to;
        true
    }

    /// The block `r` points into, from the file's span, which is read
    /// anew from the block on when it does not hold it.
    fn block_from_span(&mut self, reader: &BlobFileReader, r: &BlobRef) -> Result<BlobBlock> {
        let (offset, size) = (r.block_offset, r.block_size);
        if let Some(b) = reader.block_in_span(&self.span, offset, size) {
            return b;
        }
        reader.read_span(offset, SPAN_BYTES.max(u64::from(size)), &mut self.span)?;
        reader
            .block_in_span(&self.span, offset, size)
            .unwrap_or_else(|| reader.read_block(offset, size))
    }
}

/// The block `r` points into, from `span`, which is read anew from the
/// block to `range_end` (at least the block, at most [`RANGE_SPAN_MAX`])
/// when it does not hold it.
fn block_from_range(
    span: &mut Span,
    reader: &BlobFileReader,
    r: &BlobRef,
    range_end: u64,
) -> Result<BlobBlock> {
    let (offset, size) = (r.block_offset, r.block_size);
    if let Some(b) = reader.block_in_span(span, offset, size) {
        return b;
    }
    let len = range_end
        .saturating_sub(offset)
        .clamp(u64::from(size), RANGE_SPAN_MAX.max(u64::from(size)));
    reader.read_span(offset, len, span)?;
    reader
        .block_in_span(span, offset, size)
        .unwrap_or_else(|| reader.read_block(offset, size))
}
