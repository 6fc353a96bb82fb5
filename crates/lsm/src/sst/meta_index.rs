//! The meta-index: a keyed block in bytewise order naming the file's other
//! blocks, so a reader finds them without knowing their order in the file,
//! and a later writer can add blocks an older reader skips.
//!
//! ```text
//! entry = name -> { varint offset | varint size }   (a block handle)
//! ```
//!
//! Names (on disk, never renamed): [`PROPERTIES`] (required),
//! [`WHOLE_KEY_FILTER`], [`PREFIX_FILTER`], [`RANGE_DELETIONS`] (each
//! present only when the file has one).

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_codec::DecodeError;

use super::block::{Block, KeyOrder};
use super::block_builder::BlockBuilder;
use super::format::BlockHandle;

/// The properties block.
pub const PROPERTIES: &str = "strata.properties";
/// The bloom filter over whole user keys.
pub const WHOLE_KEY_FILTER: &str = "strata.filter.whole_key";
/// The bloom filter over fixed-length user-key prefixes.
pub const PREFIX_FILTER: &str = "strata.filter.prefix";
/// The range-deletion block.
pub const RANGE_DELETIONS: &str = "strata.range_deletions";

/// The decoded meta-index: block name -> handle.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetaIndex {
    /// Handles by name.
    pub blocks: BTreeMap<String, BlockHandle>,
}

impl MetaIndex {
    /// The raw bytes of the meta-index block.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = BlockBuilder::new(16);
        for (name, handle) in &self.blocks {
            b.add(name.as_bytes(), &handle.encode());
        }
        b.finish()
    }

    /// Decodes the raw bytes of a meta-index block.
    pub fn decode(raw: Vec<u8>) -> Result<MetaIndex, DecodeError> {
        let block = Arc::new(Block::decode(raw, KeyOrder::Bytewise)?);
        let mut blocks = BTreeMap::new();
        let mut it = block.iter();
        it.first();
        while it.valid() {
            let name = String::from_utf8(it.key().to_vec())
                .map_err(|_| DecodeError::invalid("meta-index name", 0, "not UTF-8"))?;
            let handle = BlockHandle::decode(it.value())?;
            if blocks.insert(name, handle).is_some() {
                return Err(DecodeError::invalid(
                    "meta-index",
                    0,
                    "a name appears twice",
                ));
            }
            it.next();
        }
        Ok(MetaIndex { blocks })
    }

    /// The handle of the block called `name`.
    pub fn get(&self, name: &str) -> Option<BlockHandle> {
        self.blocks.get(name).copied()
    }
}
