//! Builds the uncompressed bytes of one keyed block (data, index, meta-index,
//! properties and range-deletion blocks all share this layout):
//!
//! ```text
//! block   = entry* restart* u32 num_restarts
//! entry   = { varint shared | varint unshared | varint value_len | key[shared..] | value }
//! restart = u32 offset of an entry whose `shared` is 0
//! ```
//!
//! Keys share their prefix with the previous key (prefix compression), except
//! at a restart point every `restart_interval` entries, where the whole key is
//! stored: a reader binary-searches the restart points and then scans at most
//! `restart_interval` entries, and a damaged entry spoils only its run.
//!
//! Invariants:
//! - The caller adds keys in the block's order; the builder does not check it
//!   (the SST writer does, once, for every key it is given).
//! - The first entry is always a restart point, at offset 0.

use strata_codec::put_varint;

/// Accumulates entries of one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder with a restart point every `restart_interval` entries (at
    /// least 1).
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. The block's size must stay below 4 GiB (the writer
    /// cuts blocks long before).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.entries == 0 || self.since_restart == self.restart_interval {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Bytes the block will take once finished.
    pub fn estimated_len(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Entries added since the last `finish`.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// True when no entry was added since the last `finish`.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Returns the finished block's bytes and resets the builder for the next
    /// block.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.restarts.is_empty() {
            // An empty block still names one restart point so that its layout
            // is the same as every other block's.
            self.restarts.push(0);
        }
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }
}
