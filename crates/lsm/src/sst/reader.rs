//! Opens an SST file and answers point lookups; scans go through
//! [`SstIter`](super::SstIter).
//!
//! `open` reads, in three reads (`file_blocks`): the footer (magic,
//! version, checksum); the top level of the index, the properties and the
//! meta-index; the filters, the range tombstones and the index partitions.
//! Those stay in memory for the reader's life. Data blocks are read on
//! demand through the block cache.
//!
//! Invariants:
//! - Every block read is bounds-checked against the file (a handle must end
//!   at or before the footer), verified by its checksum, decompressed within
//!   `MAX_BLOCK_LEN` and validated by [`Block::decode`] before use; a
//!   failure is `Error::Corruption` naming the file and the block's offset.
//! - Nothing a reader returns comes from bytes that failed a check.
//!
//! Concurrency: an `SstReader` is `Send + Sync` and cheap to clone (an
//! `Arc`); reads use positional I/O and take no lock of ours. The block
//! cache has its own internal locks.

use super::format::IndexKind;
use std::cmp::Ordering;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use strata_fs::FileSystem;

use super::block::{Block, BlockIter, KeyOrder};
use super::file_blocks::{read_exact, FileBlocks};
use super::filter::BloomFilter;
use super::format::{BlockHandle, Footer, FOOTER_LEN};
use super::iter::{lookup_key, lookup_trailer, ReaderHandle, SstIter};
use super::meta_index::{self, MetaIndex};
use super::properties::Properties;
use super::range_del::{self, RangeTombstone};
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::key::{self, SeqNo, ValueKind};
use smallvec::SmallVec;

/// A point lookup's answer: the entry's kind, seqno and value.
type Entry = (ValueKind, SeqNo, Vec<u8>);

/// A reader of one SST file.
#[derive(Debug, Clone)]
pub struct SstReader {
    pub(super) inner: Arc<ReaderInner>,
}

/// What an open file keeps in memory.
#[derive(Debug)]
pub(super) struct ReaderInner {
    blocks: FileBlocks,
    pub(super) file_number: u64,
    cache: Option<Arc<BlockCache>>,
    pub(super) footer: Footer,
    pub(super) index_top: Arc<Block>,
    /// A partitioned index's top level, decoded for point lookups (empty
    /// for a one-block index).
    partitions: Box<[Partition]>,
    whole_key_filter: Option<BloomFilter>,
    prefix_filter: Option<BloomFilter>,
    properties: Properties,
    meta_index: MetaIndex,
    range_tombstones: Vec<RangeTombstone>,
    /// An ingested file's seqno: every entry is stored at seqno 0 and
    /// presented at this one (`docs/lsm.md`, "Ingestion").
    pub(super) global_seqno: Option<SeqNo>,
}

/// One partition of the index as point lookups see it: the last separator
/// it holds, where it is, and the partition itself.
///
/// A point lookup reaches a partition on every call, so the open file keeps
/// every partition (RocksDB's default keeps a whole unpartitioned index in
/// memory the same way): a lookup then costs one block-cache probe, for the
/// data block, instead of two, and a cold read one device read. `open`
/// reads them all with one read (`file_blocks`); one it could not (a span
/// over `SPAN_MAX_BYTES`, a partition that fails its checks) is read on
/// first use, which reports its damage. The memory is the file's index,
/// about 30 bytes per data block, released when the table cache closes the
/// file.
#[derive(Debug)]
struct Partition {
    last_key: Box<[u8]>,
    handle: BlockHandle,
    pinned: OnceLock<Arc<Block>>,
}

/// Decodes the top level of a partitioned index into [`Partition`]s.
fn partitions_of(top: &Arc<Block>, blocks: &FileBlocks, index_at: u64) -> Result<Box<[Partition]>> {
    let mut out = Vec::with_capacity(top.entries());
    let mut it = top.iter();
    it.first();
    while it.valid() {
        let handle = BlockHandle::decode(it.value()).map_err(|e| {
            blocks.corruption(index_at, format!("index entry: bad block handle: {e}"))
        })?;
        out.push(Partition {
            last_key: it.key().into(),
            handle,
            pinned: OnceLock::new(),
        });
        it.next();
    }
    Ok(out.into_boxed_slice())
}

impl ReaderInner {
    pub(super) fn path(&self) -> &Path {
        &self.blocks.path
    }

    pub(super) fn corruption(&self, offset: u64, reason: impl Into<String>) -> Error {
        self.blocks.corruption(offset, reason)
    }

    /// `get_entry` for a file with no assigned seqno: a seek in the top
    /// level of the index, in the partition it names when the index is
    /// partitioned, then in one data block (the next one's first entry when
    /// the target sorts after the last key of the first), with no iterator
    /// state and no allocation but the value and two key buffers. A point
    /// read needs none of what an iterator keeps (bounds, direction, the
    /// order checks across blocks), and the iterator's layers cost a tenth
    /// of a warm read.
    fn point_lookup(&self, user_key: &[u8], snapshot: SeqNo) -> Result<Option<Entry>> {
        let mut target: SmallVec<[u8; 64]> = SmallVec::new();
        target.extend_from_slice(user_key);
        target.extend_from_slice(&lookup_trailer(snapshot).to_le_bytes());
        if self.footer.index_kind == IndexKind::Single {
            let mut index = self.index_top.iter_ref();
            index.seek(&target);
            return Ok(self.lookup_in_blocks(index, &target, user_key)?.flatten());
        }
        let first = self
            .partitions
            .partition_point(|p| key::compare(&p.last_key, &target) == Ordering::Less);
        for partition in &self.partitions[first..] {
            let block = self.pinned_partition(partition)?;
            let mut index = block.iter_ref();
            index.seek(&target);
            if let Some(found) = self.lookup_in_blocks(index, &target, user_key)? {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Looks `target` up in the data blocks that `index` names from its
    /// position on: `Some(answer)` once a block holds an entry at or after
    /// the target, `None` when the index runs out first (a partitioned
    /// index then goes on in the next partition).
    fn lookup_in_blocks<B: std::ops::Deref<Target = Block>>(
        &self,
        mut index: BlockIter<B>,
        target: &[u8],
        user_key: &[u8],
    ) -> Result<Option<Option<Entry>>> {
        while index.valid() {
            let handle = self.index_handle(index.value())?;
            let block = self.read_block(handle, KeyOrder::Internal, "data")?;
            let mut it = block.iter_ref();
            it.seek(target);
            if it.valid() {
                let (found, seqno, kind) = key::parse(it.key()).map_err(|e| {
                    self.corruption(handle.offset, format!("data block: bad key: {e}"))
                })?;
                if kind == ValueKind::RangeDelete {
                    return Err(self.corruption(
                        handle.offset,
                        "data block: a range deletion among point entries",
                    ));
                }
                if found != user_key {
                    return Ok(Some(None));
                }
                return Ok(Some(Some((kind, seqno, it.value().to_vec()))));
            }
            index.next();
        }
        Ok(None)
    }

    /// `partition`'s block, read (through the cache, without filling it:
    /// the reader keeps it) on first use.
    fn pinned_partition<'a>(&self, partition: &'a Partition) -> Result<&'a Arc<Block>> {
        if let Some(block) = partition.pinned.get() {
            return Ok(block);
        }
        let block = self.read_block_filling(
            partition.handle,
            KeyOrder::Internal,
            "index partition",
            false,
        )?;
        Ok(partition.pinned.get_or_init(|| block))
    }

    /// The index partition at `handle`, as the open file keeps it (read
    /// now if `open` could not); a handle naming no partition of the top
    /// level is read through the cache like any block.
    pub(super) fn index_partition(&self, handle: BlockHandle) -> Result<Arc<Block>> {
        let at = self
            .partitions
            .binary_search_by_key(&handle.offset, |p| p.handle.offset);
        match at.ok().map(|i| &self.partitions[i]) {
            Some(p) if p.handle == handle => self.pinned_partition(p).cloned(),
            _ => self.read_block(handle, KeyOrder::Internal, "index partition"),
        }
    }

    fn index_handle(&self, value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode(value).map_err(|e| {
            self.corruption(
                self.footer.index.offset,
                format!("index entry: bad block handle: {e}"),
            )
        })
    }

    /// The decoded block at `handle`, from the cache or the file (and then
    /// into the cache).
    pub(super) fn read_block(
        &self,
        handle: BlockHandle,
        order: KeyOrder,
        what: &str,
    ) -> Result<Arc<Block>> {
        self.read_block_filling(handle, order, what, true)
    }

    /// As `read_block`; a block read from the file goes into the cache only
    /// with `fill` (compaction reads every block of its inputs once, and
    /// would evict what readers use).
    pub(super) fn read_block_filling(
        &self,
        handle: BlockHandle,
        order: KeyOrder,
        what: &str,
        fill: bool,
    ) -> Result<Arc<Block>> {
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.get(self.file_number, handle.offset) {
                if block.order() == order {
                    return Ok(block);
                }
            }
        }
        let block = Arc::new(
            self.blocks
                .read_decoded(handle, what, |raw| Block::decode(raw, order))?,
        );
        if let (Some(cache), true) = (&self.cache, fill) {
            cache.insert(self.file_number, handle.offset, Arc::clone(&block));
        }
        Ok(block)
    }
}

impl SstReader {
    /// Opens the SST file at `path`. `file_number` names the file in the
    /// block cache and must never have named another file; `cache` may be
    /// shared by many readers, or absent (every block is then read from the
    /// file each time).
    pub fn open(
        fs: &dyn FileSystem,
        path: &Path,
        file_number: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<SstReader> {
        SstReader::open_assigned(fs, path, file_number, cache, 0)
    }

    /// Opens the SST file at `path` as [`SstReader::open`] does, as a file
    /// of a version that records `assigned` as its seqno. When every entry
    /// of the file is stored at seqno 0 (its properties say so: an
    /// ingested file, since nothing else writes seqno 0) and `assigned` is
    /// above 0, the reader presents every entry and range deletion at
    /// `assigned` instead: keys, seqnos, seeks and lookups all see the
    /// assigned seqno. Any other file reads as stored.
    pub fn open_assigned(
        fs: &dyn FileSystem,
        path: &Path,
        file_number: u64,
        cache: Option<Arc<BlockCache>>,
        assigned: SeqNo,
    ) -> Result<SstReader> {
        let file = fs.open(path, false).map_err(Error::io("open", path))?;
        let file_size = file.len().map_err(Error::io("stat", path))?;
        if file_size < FOOTER_LEN as u64 {
            return Err(Error::corruption(
                path,
                0,
                format!("{file_size} bytes is too short for an SST file (footer is {FOOTER_LEN})"),
            ));
        }
        let data_end = file_size - FOOTER_LEN as u64;
        let mut buf = [0u8; FOOTER_LEN];
        read_exact(&*file, path, data_end, &mut buf)?;
        let footer = Footer::decode(&buf)
            .map_err(|e| Error::corruption(path, data_end, format!("footer: {e}")))?;
        let blocks = FileBlocks {
            path: path.to_path_buf(),
            file,
            data_end,
        };
        // Three reads for every meta block, where the file is laid out as
        // the writer lays it out (`file_blocks`): the index, properties and
        // meta-index behind it; then what lies between the data and the
        // index (filters, range deletions, index partitions).
        let behind = blocks.read_span(footer.index.offset, data_end)?;
        let meta_index = blocks.decoded_from(
            behind.as_ref(),
            footer.meta_index,
            "meta-index",
            MetaIndex::decode,
        )?;
        let props_handle = meta_index.get(meta_index::PROPERTIES).ok_or_else(|| {
            blocks.corruption(
                footer.meta_index.offset,
                "meta-index names no properties block",
            )
        })?;
        let properties = blocks.decoded_from(
            behind.as_ref(),
            props_handle,
            "properties",
            Properties::decode,
        )?;
        // The top level is read around the cache: it stays pinned here.
        let index_top = Arc::new(blocks.decoded_from(
            behind.as_ref(),
            footer.index,
            "index",
            |raw| Block::decode(raw, KeyOrder::Internal),
        )?);
        drop(behind);
        let partitions = match footer.index_kind {
            IndexKind::Single => Box::default(),
            IndexKind::Partitioned => partitions_of(&index_top, &blocks, footer.index.offset)?,
        };
        let before_index = meta_index
            .blocks
            .values()
            .map(|h| h.offset)
            .chain(partitions.iter().map(|p| p.handle.offset))
            .filter(|&offset| offset < footer.index.offset)
            .min();
        let before = match before_index {
            Some(from) => blocks.read_span(from, footer.index.offset)?,
            None => None,
        };
        let filter = |name: &str| -> Result<Option<BloomFilter>> {
            meta_index
                .get(name)
                .map(|h| {
                    blocks.decoded_from(before.as_ref(), h, "filter", |raw| {
                        BloomFilter::decode(&raw)
                    })
                })
                .transpose()
        };
        let whole_key_filter = filter(meta_index::WHOLE_KEY_FILTER)?;
        let prefix_filter = filter(meta_index::PREFIX_FILTER)?;
        if prefix_filter.is_some() && properties.prefix_len.is_none() {
            return Err(blocks.corruption(
                footer.meta_index.offset,
                "a prefix filter without a prefix length",
            ));
        }
        let mut range_tombstones = match meta_index.get(meta_index::RANGE_DELETIONS) {
            Some(h) => {
                blocks.decoded_from(before.as_ref(), h, "range-deletion", range_del::decode)?
            }
            None => Vec::new(),
        };
        let global_seqno = (assigned > 0
            && properties.largest_seqno == 0
            && range_tombstones.iter().all(|t| t.seqno == 0))
        .then_some(assigned);
        if let Some(g) = global_seqno {
            for t in &mut range_tombstones {
                t.seqno = g;
            }
        }
        // With the partitions read, a cold point read is one device read
        // (its data block), as in a file of a one-block index. One not in
        // the span, or damaged, is left to its first use, which reads it
        // again and reports what it finds: a damaged partition fails the
        // lookups that need it, not the open.
        if let Some(before) = &before {
            for p in partitions.iter() {
                let decoded =
                    blocks.decoded_from(Some(before), p.handle, "index partition", |raw| {
                        Block::decode(raw, KeyOrder::Internal)
                    });
                if let Ok(block) = decoded {
                    let _ = p.pinned.set(Arc::new(block));
                }
            }
        }
        Ok(SstReader {
            inner: Arc::new(ReaderInner {
                blocks,
                file_number,
                cache,
                footer,
                index_top,
                partitions,
                whole_key_filter,
                prefix_filter,
                properties,
                meta_index,
                range_tombstones,
                global_seqno,
            }),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.inner.path()
    }

    /// The seqno every entry is presented at, for an ingested file opened
    /// with [`SstReader::open_assigned`]; `None` for any other.
    pub fn global_seqno(&self) -> Option<SeqNo> {
        self.inner.global_seqno
    }

    /// The names and handles of the file's meta blocks.
    pub fn meta_index(&self) -> &MetaIndex {
        &self.inner.meta_index
    }

    /// The file's footer.
    pub fn footer(&self) -> Footer {
        self.inner.footer
    }

    /// The file's number (its name in the block cache).
    pub fn file_number(&self) -> u64 {
        self.inner.file_number
    }

    /// The file's properties.
    pub fn properties(&self) -> &Properties {
        &self.inner.properties
    }

    /// The file's range tombstones, in order of start key (newest first
    /// among equal starts). `get` and the iterator do not apply them: a
    /// tombstone also hides older versions in other files, so the layer above
    /// applies them across files.
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.inner.range_tombstones
    }

    /// False when no version of `user_key` is in the file (per the whole-key
    /// filter); true when one may be. True when the file has no filter.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.inner
            .whole_key_filter
            .as_ref()
            .is_none_or(|f| f.may_contain(user_key))
    }

    /// False when no user key starting with the first `prefix_len` bytes of
    /// `key` is in the file (per the prefix filter); true when one may be,
    /// when `key` is shorter than the prefix length, or without a prefix filter.
    pub fn may_contain_prefix(&self, key: &[u8]) -> bool {
        let (Some(f), Some(n)) = (&self.inner.prefix_filter, self.inner.properties.prefix_len)
        else {
            return true;
        };
        key.get(..n as usize).is_none_or(|p| f.may_contain(p))
    }

    /// The newest version of `user_key` with a sequence number at or below
    /// `snapshot`: its kind (`Put`, `Delete` or `BlobIndex`) and value.
    /// Consults the filters first.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Result<Option<(ValueKind, Vec<u8>)>> {
        Ok(self
            .get_entry(user_key, snapshot)?
            .map(|(kind, _, value)| (kind, value)))
    }

    /// Like [`SstReader::get`], with the version's sequence number (which a
    /// reader compares with range tombstones).
    pub fn get_entry(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(ValueKind, SeqNo, Vec<u8>)>> {
        if !self.may_contain(user_key) || !self.may_contain_prefix(user_key) {
            return Ok(None);
        }
        let inner = &self.inner;
        if inner.global_seqno.is_none() {
            return inner.point_lookup(user_key, snapshot);
        }
        let mut it = self.iter();
        it.seek(&lookup_key(user_key, snapshot))?;
        if it.valid() && it.user_key() == user_key {
            return Ok(Some((it.kind(), it.seqno(), it.value().to_vec())));
        }
        Ok(None)
    }

    /// Every data block's index entry, in order: the separator key (at or
    /// above the block's last key) and the block's handle. Reads the index
    /// partitions, if any, checking them; for `strata-ctl` and checks.
    pub fn data_blocks(&self) -> Result<Vec<(Vec<u8>, BlockHandle)>> {
        let inner = &self.inner;
        let entries = |block: &Arc<Block>, what: &str| -> Result<Vec<(Vec<u8>, BlockHandle)>> {
            let mut out = Vec::new();
            let mut it = block.iter();
            it.first();
            while it.valid() {
                let handle = BlockHandle::decode(it.value()).map_err(|e| {
                    inner.corruption(inner.footer.index.offset, format!("{what} entry: {e}"))
                })?;
                out.push((it.key().to_vec(), handle));
                it.next();
            }
            Ok(out)
        };
        let top = entries(&inner.index_top, "index")?;
        match inner.footer.index_kind {
            IndexKind::Single => Ok(top),
            IndexKind::Partitioned => {
                let mut out = Vec::new();
                for (_, handle) in top {
                    let part = inner.read_block(handle, KeyOrder::Internal, "index partition")?;
                    out.extend(entries(&part, "index partition")?);
                }
                Ok(out)
            }
        }
    }

    /// Reads the data block at `handle` (checked and decompressed) and
    /// returns its entry count.
    pub fn data_block_entries(&self, handle: BlockHandle) -> Result<usize> {
        Ok(self
            .inner
            .read_block(handle, KeyOrder::Internal, "data")?
            .entries())
    }

    /// An iterator over the file's data entries, positioned nowhere.
    pub fn iter(&self) -> SstIter {
        SstIter::new(ReaderHandle::Owned(Arc::clone(&self.inner)), None, None)
    }

    /// As [`SstReader::iter`], for a compaction: blocks it reads from the
    /// file do not go into the block cache.
    pub fn iter_without_filling_cache(&self) -> SstIter {
        let mut it = SstIter::new(ReaderHandle::Owned(Arc::clone(&self.inner)), None, None);
        it.stop_filling_cache();
        it
    }

    /// An iterator over the entries whose user key is in `[lower, upper)`
    /// (either bound may be absent).
    pub fn iter_bounded(&self, lower: Option<Arc<[u8]>>, upper: Option<Arc<[u8]>>) -> SstIter {
        SstIter::new(ReaderHandle::Owned(Arc::clone(&self.inner)), lower, upper)
    }

    /// [`Self::iter_bounded`], consuming this handle: no reference count
    /// is taken and dropped on the shared reader, whose count every reader
    /// thread of the file touches.
    pub fn into_iter_bounded(self, lower: Option<Arc<[u8]>>, upper: Option<Arc<[u8]>>) -> SstIter {
        SstIter::new(ReaderHandle::Owned(self.inner), lower, upper)
    }

    /// [`Self::into_iter_bounded`] without a reference count of the
    /// iterator's own: the count is shared by every iterator over the file.
    ///
    /// # Safety
    /// The reader must outlive the iterator: the caller keeps this
    /// `SstReader` or a clone of it (they share what the iterator points
    /// at) alive for as long as the iterator lives.
    #[inline]
    pub(crate) unsafe fn iter_borrowed(
        &self,
        lower: Option<Arc<[u8]>>,
        upper: Option<Arc<[u8]>>,
    ) -> SstIter {
        let inner = std::ptr::NonNull::from(&*self.inner);
        SstIter::new(ReaderHandle::Borrowed(inner), lower, upper)
    }
}
