//! The block cache: decoded, validated blocks shared by every reader of
//! every SST file, and the decompressed blocks of blob files, under one
//! budget in bytes.
//!
//! Built on `quick_cache` (its sharded `sync::Cache` with a weighter): it is
//! maintained, has no background threads, and its CLOCK-PRO-style policy keeps
//! hot blocks resident when a long scan streams cold ones through (a plain LRU
//! would be flushed by the scan). `moka` has the same API but spawns
//! housekeeping work and weighs more; a block cache is on every read's path,
//! so the lighter crate wins.
//!
//! Invariants:
//! - Keys are `(file number, block offset)`. The engine never reuses a file
//!   number, so a cached block can never be mistaken for a block of another
//!   file; a deleted file's blocks merely age out, or are dropped at once by
//!   [`BlockCache::evict_file`].
//! - Only blocks that passed their checksum and [`Block::decode`] are inserted.
//!
//! Blob blocks read by point lookups enter on their second read within a
//! window ([`admission`]); SST blocks enter on their first.
//!
//! Concurrency: every method takes `&self`; the cache shards its lock
//! internally. No lock of ours is held while it is called.

mod admission;

use std::sync::Arc;

use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::Weighter;
use rustc_hash::FxBuildHasher;

use crate::blob::BlobBlock;
use crate::sst::Block;
use admission::Doorkeeper;

/// Bytes charged per cached block on top of its contents (the `Block`
/// struct, the `Arc` and the cache's own slot), so that many tiny blocks
/// cannot exceed the budget unseen.
const PER_BLOCK_OVERHEAD: u64 = 96;

/// A block's cache key: (file number, offset of the block in the file).
pub type BlockKey = (u64, u64);

/// A cached block: an SST's, decoded, or a blob file's, decompressed.
/// File numbers are unique across both kinds, so one key space serves.
#[derive(Debug, Clone)]
enum Cached {
    Table(Arc<Block>),
    Blob(Arc<BlobBlock>),
}

#[derive(Debug, Clone)]
struct BlockWeighter;

impl Weighter<BlockKey, Cached> for BlockWeighter {
    fn weight(&self, _key: &BlockKey, block: &Cached) -> u64 {
        let len = match block {
            Cached::Table(b) => b.len(),
            Cached::Blob(b) => b.raw().len(),
        };
        len as u64 + PER_BLOCK_OVERHEAD
    }
}

/// A cache of decoded blocks, shared across files and threads.
pub struct BlockCache {
    /// Hashed with Fx, not SipHash: keys are the engine's file numbers and
    /// offsets, never chosen by a user, and every block read hashes one.
    cache: Cache<BlockKey, Cached, BlockWeighter, FxBuildHasher>,
    /// The blob blocks read once lately.
    doorkeeper: Doorkeeper,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity_bytes", &self.cache.capacity())
            .field("used_bytes", &self.cache.weight())
            .field("blocks", &self.cache.len())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding up to about `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: u64) -> BlockCache {
        // The item estimate only sizes the initial tables; assume 4 KiB blocks.
        let items = (capacity_bytes / 4096).clamp(16, 1 << 24) as usize;
        BlockCache {
            cache: Cache::with(
                items,
                capacity_bytes,
                BlockWeighter,
                FxBuildHasher,
                DefaultLifecycle::default(),
            ),
            doorkeeper: Doorkeeper::new(capacity_bytes),
        }
    }

    /// The cached block at `offset` of SST file `file_number`, if any.
    pub fn get(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        match self.cache.get(&(file_number, offset))? {
            Cached::Table(b) => Some(b),
            Cached::Blob(_) => None,
        }
    }

    /// Caches a block of an SST file.
    pub fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        self.cache
            .insert((file_number, offset), Cached::Table(block));
    }

    /// The cached block at `offset` of blob file `file_number`, if any.
    pub fn get_blob(&self, file_number: u64, offset: u64) -> Option<Arc<BlobBlock>> {
        match self.cache.get(&(file_number, offset))? {
            Cached::Blob(b) => Some(b),
            Cached::Table(_) => None,
        }
    }

    /// True when a blob block just read, at `offset` of `file_number`,
    /// should be cached: it was read before, lately ([`admission`]).
    pub fn admits_blob(&self, file_number: u64, offset: u64) -> bool {
        self.doorkeeper.seen_before((file_number, offset))
    }

    /// Caches a block of a blob file (checked and decompressed).
    pub fn insert_blob(&self, file_number: u64, offset: u64, block: Arc<BlobBlock>) {
        self.cache
            .insert((file_number, offset), Cached::Blob(block));
    }

    /// Drops every cached block of `file_number` (after the file is deleted).
    /// Walks the whole cache: call it for memory's sake, not correctness.
    pub fn evict_file(&self, file_number: u64) {
        self.cache.retain(|&(f, _), _| f != file_number);
    }

    /// Bytes charged for the cached blocks.
    pub fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// The capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.cache.capacity()
    }

    /// Blocks cached.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.cache.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::{Block, KeyOrder};

    fn block(n: usize) -> Arc<Block> {
        let mut b = crate::sst::BlockBuilder::new(16);
        b.add(b"k", &vec![7u8; n]);
        Arc::new(Block::decode(b.finish(), KeyOrder::Bytewise).unwrap())
    }

    #[test]
    fn bounded_by_bytes_and_evicts_a_file() {
        let cache = BlockCache::new(64 * 1024);
        for i in 0..100u64 {
            cache.insert(i % 3, i * 4096, block(4000));
        }
        assert!(cache.used_bytes() <= 64 * 1024, "{cache:?}");
        cache.insert(7, 0, block(10));
        assert!(cache.get(7, 0).is_some());
        cache.evict_file(7);
        assert!(cache.get(7, 0).is_none());
    }
}
