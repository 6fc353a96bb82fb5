//! Writes one SST file from entries given in internal-key order: flush,
//! compaction, ingestion and region snapshots all build files this way.
//!
//! ```text
//! file = data_block* [whole_key_filter] [prefix_filter] [range_deletions]
//!        index_partition* index properties meta_index footer
//! ```
//!
//! Invariants:
//! - Data entries arrive in strictly ascending internal-key order, never of
//!   kind `RangeDelete` (those go through [`SstWriter::add_range_delete`]);
//!   the writer checks both before anything reaches the file.
//! - After an I/O error the writer refuses every further call: the file is
//!   unspecified and the caller deletes it.
//! - [`SstWriter::finish`] syncs the file's data. Making its name durable
//!   (a directory sync) is the caller's, who usually creates several files.
//!
//! Concurrency: a writer is owned by one thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_fs::{File, FileSystem, WritebackPacer};

use super::block_builder::BlockBuilder;
use super::filter::FilterBuilder;
use super::format::{BlockHandle, Compression, Footer, IndexKind, MAX_ENTRY_LEN};
use super::index::{self, IndexBuilder};
use super::meta_index::{self, MetaIndex};
use super::options::SstWriterOptions;
use super::properties::{Properties, PropertiesCollector, RESERVED_PREFIX};
use super::range_del::{self, RangeTombstone};
use super::stored_block::seal;
use crate::blob::BlobRef;
use crate::error::{Error, Result};
use crate::key::{self, SeqNo, ValueKind, MAX_SEQNO};

/// Bytes buffered before a write to the file.
const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// What a finished file is.
#[derive(Debug, Clone)]
pub struct SstFileInfo {
    /// The file's path.
    pub path: PathBuf,
    /// The file's size in bytes.
    pub file_size: u64,
    /// Its properties, as stored.
    pub properties: Properties,
}

/// Builds an SST file.
#[derive(Debug)]
pub struct SstWriter {
    path: PathBuf,
    file: Arc<dyn File>,
    options: SstWriterOptions,
    /// Bytes written to the file or buffered in `pending`.
    offset: u64,
    pending: Vec<u8>,
    data_block: BlockBuilder,
    index: IndexBuilder,
    /// The last data block written, whose index entry waits for the next
    /// key so that its separator can be shortened.
    unindexed: Option<BlockHandle>,
    last_key: Vec<u8>,
    filter: Option<FilterBuilder>,
    prefix_filter: Option<FilterBuilder>,
    range_deletions: Vec<RangeTombstone>,
    props: Properties,
    /// The blob file the last references named and their value bytes, not
    /// yet in `props.blob_refs`: a compaction's references come in runs
    /// into one file, and a map lookup per entry showed in GC's profile.
    blob_run: Option<(u64, u64)>,
    collectors: Vec<Box<dyn PropertiesCollector>>,
    failed: bool,
    writeback: WritebackPacer,
}

impl SstWriter {
    /// Creates the file at `path` (which must not exist) for writing.
    pub fn create(
        fs: &dyn FileSystem,
        path: &Path,
        options: SstWriterOptions,
    ) -> Result<SstWriter> {
        options.validate()?;
        let file = fs.create(path).map_err(Error::io("create", path))?;
        let props = Properties {
            compression: options.compression,
            bloom_bits_per_key: options.bloom_bits_per_key,
            prefix_len: options.prefix_len.map(|n| n as u32),
            block_size: options.block_size_bytes as u64,
            restart_interval: options.restart_interval as u32,
            ..Properties::default()
        };
        let bits = options.bloom_bits_per_key;
        Ok(SstWriter {
            path: path.to_path_buf(),
            file,
            data_block: BlockBuilder::new(options.restart_interval),
            index: IndexBuilder::new(options.index_partition_bytes),
            filter: (bits > 0).then(|| FilterBuilder::new(bits)),
            prefix_filter: options
                .prefix_len
                .filter(|_| bits > 0)
                .map(|_| FilterBuilder::new(bits)),
            options,
            offset: 0,
            pending: Vec::new(),
            unindexed: None,
            last_key: Vec::new(),
            range_deletions: Vec::new(),
            props,
            blob_run: None,
            collectors: Vec::new(),
            writeback: WritebackPacer::new(crate::WRITEBACK_BYTES, 0),
            failed: false,
        })
    }

    /// Adds a properties collector. Collectors must be added before the
    /// first entry, so that each sees the whole file.
    pub fn add_collector(&mut self, collector: Box<dyn PropertiesCollector>) -> Result<()> {
        if self.props.num_entries > 0 || !self.range_deletions.is_empty() {
            return Err(Error::InvalidArgument(
                "sst writer: collectors must be added before the first entry".into(),
            ));
        }
        self.collectors.push(collector);
        Ok(())
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::InvalidArgument(format!(
                "sst writer for {} failed earlier; delete the file",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Adds an entry: `internal_key` is an encoded [`crate::InternalKey`]
    /// after every key added so far.
    pub fn add(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        self.check_usable()?;
        let (user_key, seqno, kind) = key::parse(internal_key)
            .map_err(|e| Error::InvalidArgument(format!("sst writer: bad internal key: {e}")))?;
        if kind == ValueKind::RangeDelete {
            return Err(Error::InvalidArgument(
                "sst writer: range deletions go through add_range_delete".into(),
            ));
        }
        if self.props.num_entries > 0 && key::compare(&self.last_key, internal_key).is_ge() {
            return Err(Error::InvalidArgument(
                "sst writer: keys must be added in strictly ascending order".into(),
            ));
        }
        if internal_key.len() + value.len() > MAX_ENTRY_LEN {
            return Err(Error::InvalidArgument(format!(
                "sst writer: entry of {} bytes exceeds {MAX_ENTRY_LEN}",
                internal_key.len() + value.len()
            )));
        }
        if let Some(handle) = self.unindexed.take() {
            self.index
                .add(index::separator(&self.last_key, internal_key), handle);
        }
        if let Some(f) = &mut self.filter {
            f.add(user_key);
        }
        if let (Some(f), Some(n)) = (&mut self.prefix_filter, self.options.prefix_len) {
            if user_key.len() >= n {
                f.add(&user_key[..n]);
            }
        }
        if kind == ValueKind::BlobIndex {
            let r = BlobRef::decode(value).map_err(|e| {
                Error::InvalidArgument(format!("sst writer: a blob index without a reference: {e}"))
            })?;
            let bytes = u64::from(r.value_len);
            match &mut self.blob_run {
                Some((file, run)) if *file == r.file_number => *run += bytes,
                run => {
                    if let Some((file, bytes)) = run.replace((r.file_number, bytes)) {
                        *self.props.blob_refs.entry(file).or_default() += bytes;
                    }
                }
            }
        }
        for c in &mut self.collectors {
            c.add(user_key, value, kind, seqno);
        }
        let p = &mut self.props;
        p.num_entries += 1;
        p.num_deletions += (kind == ValueKind::Delete) as u64;
        p.raw_key_bytes += user_key.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        if p.num_entries == 1 {
            widen(p, user_key, user_key, seqno);
        } else {
            // Keys ascend: the largest is the last one, taken at `finish`
            // (a copy per new key here showed in compaction profiles).
            p.smallest_seqno = p.smallest_seqno.min(seqno);
            p.largest_seqno = p.largest_seqno.max(seqno);
        }
        self.data_block.add(internal_key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);
        if self.data_block.estimated_len() >= self.options.block_size_bytes {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Adds a range tombstone deleting `[start, end)` as of `seqno`. Range
    /// tombstones may come in any order, before, between or after entries.
    pub fn add_range_delete(&mut self, start: &[u8], end: &[u8], seqno: SeqNo) -> Result<()> {
        self.check_usable()?;
        if start >= end {
            return Err(Error::InvalidArgument(
                "sst writer: a range deletion needs start < end".into(),
            ));
        }
        if seqno > MAX_SEQNO {
            return Err(Error::InvalidArgument(format!(
                "sst writer: seqno {seqno} exceeds {MAX_SEQNO}"
            )));
        }
        if start.len() + end.len() > MAX_ENTRY_LEN {
            return Err(Error::InvalidArgument(
                "sst writer: range deletion too large".into(),
            ));
        }
        widen(&mut self.props, start, end, seqno);
        self.props.num_range_deletions += 1;
        self.range_deletions.push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seqno,
        });
        Ok(())
    }

    /// Bytes the file would take if finished now, roughly (for compaction
    /// to cut output files).
    pub fn estimated_file_size(&self) -> u64 {
        self.offset + self.data_block.estimated_len() as u64
    }

    fn write_block(&mut self, raw: &[u8], compression: Compression) -> Result<BlockHandle> {
        let (stored, _) = seal(raw, compression, self.options.zstd_level);
        let handle = BlockHandle {
            offset: self.offset,
            size: (stored.len() - super::format::BLOCK_TRAILER_LEN) as u64,
        };
        self.append(&stored)?;
        Ok(handle)
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.pending.extend_from_slice(bytes);
        self.offset += bytes.len() as u64;
        if self.pending.len() >= WRITE_BUFFER_BYTES {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<()> {
        let at = self.offset - self.pending.len() as u64;
        if let Err(e) = self.file.write_at(at, &self.pending) {
            self.failed = true;
            return Err(Error::io("write", &self.path)(e));
        }
        self.pending.clear();
        self.writeback.wrote(self.file.as_ref(), self.offset);
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let raw = self.data_block.finish();
        let start = self.offset;
        let handle = self.write_block(&raw, self.options.compression)?;
        self.props.num_data_blocks += 1;
        self.props.data_bytes += self.offset - start;
        self.unindexed = Some(handle);
        Ok(())
    }

    /// Writes the filter, range-deletion, index, properties and meta-index
    /// blocks and the footer, syncs the file, and returns what it holds.
    pub fn finish(mut self) -> Result<SstFileInfo> {
        self.check_usable()?;
        if self.props.num_entries > 0 {
            let (user_key, seqno, _) = key::parse(&self.last_key)
                .map_err(|e| Error::InvalidArgument(format!("sst writer: bad last key: {e}")))?;
            widen(&mut self.props, user_key, user_key, seqno);
        }
        if let Some((file, bytes)) = self.blob_run.take() {
            *self.props.blob_refs.entry(file).or_default() += bytes;
        }
        self.flush_data_block()?;
        if let Some(handle) = self.unindexed.take() {
            let last = std::mem::take(&mut self.last_key);
            self.index.add(last, handle);
        }
        let mut meta = MetaIndex::default();
        for (name, filter) in [
            (meta_index::WHOLE_KEY_FILTER, self.filter.take()),
            (meta_index::PREFIX_FILTER, self.prefix_filter.take()),
        ] {
            if let Some(f) = filter {
                let start = self.offset;
                let handle = self.write_block(&f.finish(), Compression::None)?;
                self.props.filter_bytes += self.offset - start;
                meta.blocks.insert(name.to_string(), handle);
            }
        }
        let mut tombstones = std::mem::take(&mut self.range_deletions);
        tombstones.sort_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then(b.seqno.cmp(&a.seqno))
                .then(a.end.cmp(&b.end))
        });
        for t in &tombstones {
            for c in &mut self.collectors {
                c.add(&t.start, &t.end, ValueKind::RangeDelete, t.seqno);
            }
        }
        if !tombstones.is_empty() {
            let raw = range_del::encode(&tombstones, self.options.restart_interval);
            let handle = self.write_block(&raw, self.options.compression)?;
            meta.blocks
                .insert(meta_index::RANGE_DELETIONS.to_string(), handle);
        }
        let index_start = self.offset;
        let partitions = self.index.partitions();
        let (index_handle, index_kind) = if partitions.len() == 1 {
            let (_, raw) = &partitions[0];
            (
                self.write_block(raw, self.options.compression)?,
                IndexKind::Single,
            )
        } else {
            let mut top = Vec::with_capacity(partitions.len());
            for (last, raw) in &partitions {
                top.push((
                    last.clone(),
                    self.write_block(raw, self.options.compression)?,
                ));
            }
            self.props.index_partitions = partitions.len() as u64;
            let raw = index::top_level(&top);
            (
                self.write_block(&raw, self.options.compression)?,
                IndexKind::Partitioned,
            )
        };
        self.props.index_bytes = self.offset - index_start;
        for c in &mut self.collectors {
            for (name, value) in c.finish() {
                if name.starts_with(RESERVED_PREFIX) {
                    return Err(Error::InvalidArgument(format!(
                        "sst writer: property name {name:?} uses the reserved prefix {RESERVED_PREFIX:?}"
                    )));
                }
                if self.props.user.insert(name.clone(), value).is_some() {
                    return Err(Error::InvalidArgument(format!(
                        "sst writer: two collectors emit the property {name:?}"
                    )));
                }
            }
        }
        let handle = self.write_block(&self.props.encode(), Compression::None)?;
        meta.blocks
            .insert(meta_index::PROPERTIES.to_string(), handle);
        let meta_handle = self.write_block(&meta.encode(), Compression::None)?;
        let footer = Footer {
            meta_index: meta_handle,
            index: index_handle,
            index_kind,
        };
        self.append(&footer.encode())?;
        self.flush_pending()?;
        if let Err(e) = self.file.sync_data() {
            self.failed = true;
            return Err(Error::io("sync", &self.path)(e));
        }
        Ok(SstFileInfo {
            path: self.path.clone(),
            file_size: self.offset,
            properties: std::mem::take(&mut self.props),
        })
    }
}

/// Widens the properties' key and sequence-number ranges.
fn widen(p: &mut Properties, smallest: &[u8], largest: &[u8], seqno: SeqNo) {
    let first = p.smallest_key.is_none();
    if p.smallest_key.as_deref().is_none_or(|k| smallest < k) {
        p.smallest_key = Some(smallest.to_vec());
    }
    if p.largest_key.as_deref().is_none_or(|k| largest > k) {
        p.largest_key = Some(largest.to_vec());
    }
    if first || seqno < p.smallest_seqno {
        p.smallest_seqno = seqno;
    }
    p.largest_seqno = p.largest_seqno.max(seqno);
}
