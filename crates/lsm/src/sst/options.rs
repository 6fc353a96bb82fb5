//! The options of an SST writer: every limit in one place, each with its
//! default, minimum and maximum. [`SstWriterOptions::validate`] checks them
//! before a file is created.

use super::format::{Compression, MAX_BLOCK_SIZE};
use crate::error::{Error, Result};

/// How an [`SstWriter`](super::SstWriter) lays out a file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SstWriterOptions {
    /// Uncompressed bytes after which a data block is cut. Default 4 KiB; 1
    /// to 16 MiB (tiny sizes exist for tests that want many blocks).
    pub block_size_bytes: usize,
    /// Entries between restart points. Default 16; 1 to 1024.
    pub restart_interval: usize,
    /// Compression of data and index blocks. Default LZ4.
    pub compression: Compression,
    /// zstd level when `compression` is zstd. Default 3; clamped to zstd's range.
    pub zstd_level: i32,
    /// Bloom filter bits per user key; 0 writes no filter. Default 10
    /// (about 1% false positives); at most 64.
    pub bloom_bits_per_key: u32,
    /// Length of the user-key prefixes a second bloom filter covers, if any
    /// (keys shorter than it are left out of that filter). 1 to 4096.
    pub prefix_len: Option<usize>,
    /// Bytes of index entries after which the index is split into
    /// partitions under a top-level index. Default 4 KiB; 1 to 16 MiB.
    pub index_partition_bytes: usize,
}

impl Default for SstWriterOptions {
    fn default() -> Self {
        SstWriterOptions {
            block_size_bytes: 4096,
            restart_interval: 16,
            compression: Compression::Lz4,
            zstd_level: strata_codec::ZSTD_DEFAULT_LEVEL,
            bloom_bits_per_key: 10,
            prefix_len: None,
            index_partition_bytes: 4096,
        }
    }
}

impl SstWriterOptions {
    /// Checks every field against its bounds.
    pub fn validate(&self) -> Result<()> {
        let check = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!("sst options: {what}")))
            }
        };
        check(
            (1..=MAX_BLOCK_SIZE).contains(&self.block_size_bytes),
            "block_size_bytes must be 1..=16 MiB",
        )?;
        check(
            (1..=1024).contains(&self.restart_interval),
            "restart_interval must be 1..=1024",
        )?;
        check(
            self.bloom_bits_per_key <= 64,
            "bloom_bits_per_key must be at most 64",
        )?;
        check(
            self.prefix_len.is_none_or(|n| (1..=4096).contains(&n)),
            "prefix_len must be 1..=4096",
        )?;
        check(
            (1..=MAX_BLOCK_SIZE).contains(&self.index_partition_bytes),
            "index_partition_bytes must be 1..=16 MiB",
        )
    }
}
