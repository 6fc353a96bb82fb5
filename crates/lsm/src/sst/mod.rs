//! SST files: the lsm's sorted string tables, immutable once written.
//!
//! An [`SstWriter`] turns entries in internal-key order into a file of
//! checksummed, optionally compressed blocks (data, filters, range
//! deletions, index, properties, meta-index) and a fixed-size footer; an
//! [`SstReader`] opens one and answers point lookups and scans, reading
//! blocks through a shared [`BlockCache`](crate::cache::BlockCache). The
//! bytes are specified in `docs/format/sst.md`.
//!
//! One concept per file:
//! - `format`: frozen constants, block handles, the footer;
//! - `block_builder`, `block`: the keyed block layout (prefix compression,
//!   restart points), its validating decoder and its cursor;
//! - `stored_block`: compression and the checksummed block trailer;
//! - `filter`: the bloom filters; `index`: separators and partitions;
//! - `properties`, `meta_index`, `range_del`: the meta blocks;
//! - `file_blocks`: reading blocks, one by one or from a span read at once;
//! - `options`, `writer`, `reader`, `iter`: the public face.
//!
//! Invariants every file of this module keeps:
//! - No decoder panics on any input; a bad byte is a typed error naming the
//!   file and the block offset, never a wrong answer.
//! - Every integer on disk is fixed-width little-endian or a LEB128 varint;
//!   every tag has an explicit discriminant that is never reused.

mod block;
mod block_builder;
mod file_blocks;
mod filter;
pub mod format;
mod index;
mod iter;
mod meta_index;
mod options;
mod properties;
mod range_del;
mod reader;
mod stored_block;
mod writer;

pub use block::{Block, BlockIter, KeyOrder};
pub use block_builder::BlockBuilder;
pub(crate) use file_blocks::read_exact;
pub use filter::{BloomFilter, FilterBuilder};
pub use format::{BlockHandle, Compression, Footer, IndexKind};
pub use index::separator;
pub use iter::{lookup_key, SstIter};
pub use meta_index::MetaIndex;
pub use options::SstWriterOptions;
pub use properties::{Properties, PropertiesCollector};
pub use range_del::{decode as decode_range_deletions, RangeTombstone};
pub use reader::SstReader;
pub(crate) use stored_block::{
    check as check_block, compressed_parts, seal_compressed, unseal_checked,
};
pub use stored_block::{seal as seal_block, unseal as unseal_block};
pub use writer::{SstFileInfo, SstWriter};
