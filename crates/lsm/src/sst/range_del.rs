//! Range tombstones: each deletes every version older than it of every user
//! key in `[start, end)`. A file keeps them in their own block, apart from
//! the point entries, so that point lookups and scans of data blocks never
//! step over them and a reader can hand the whole list to the layer that
//! applies them across files.
//!
//! ```text
//! entry = internal key (start, seqno, RangeDelete) -> end user key
//! ```
//!
//! Entries are in internal-key order (start ascending, newer first).
//!
//! Invariants:
//! - `start < end` for every tombstone; the writer refuses an empty range
//!   and [`decode`] refuses a file that holds one.

use std::sync::Arc;

use strata_codec::DecodeError;

use super::block::{Block, KeyOrder};
use super::block_builder::BlockBuilder;
use crate::key::{self, InternalKey, ValueKind};

pub use crate::iter::RangeTombstone;

/// The raw bytes of a range-deletion block; `tombstones` must be sorted by
/// internal key of their start.
pub fn encode(tombstones: &[RangeTombstone], restart_interval: usize) -> Vec<u8> {
    let mut b = BlockBuilder::new(restart_interval);
    for t in tombstones {
        let k = InternalKey::new(&t.start, t.seqno, ValueKind::RangeDelete);
        b.add(k.encoded(), &t.end);
    }
    b.finish()
}

/// Decodes the raw bytes of a range-deletion block.
pub fn decode(raw: Vec<u8>) -> Result<Vec<RangeTombstone>, DecodeError> {
    let block = Arc::new(Block::decode(raw, KeyOrder::Internal)?);
    let mut out = Vec::with_capacity(block.entries());
    let mut it = block.iter();
    it.first();
    while it.valid() {
        let (start, seqno, kind) = key::parse(it.key())?;
        if kind != ValueKind::RangeDelete {
            return Err(DecodeError::invalid(
                "range tombstone",
                0,
                format!("kind {kind:?}"),
            ));
        }
        if start >= it.value() {
            return Err(DecodeError::invalid("range tombstone", 0, "empty range"));
        }
        out.push(RangeTombstone {
            start: start.to_vec(),
            end: it.value().to_vec(),
            seqno,
        });
        it.next();
    }
    Ok(out)
}
