//! Byte-level building blocks shared by every Strata engine: fixed-width and
//! variable-width integers, checksums and block compression (LZ4, zstd, and
//! zstd with a trained dictionary).
//!
//! Invariants:
//! - Nothing here does I/O or allocates more than the caller's input implies.
//! - Every decoder takes untrusted bytes and returns [`DecodeError`], never panics.
//! - Integers on disk are little-endian; varints are LEB128 (at most 10 bytes for a `u64`).

mod checksum;
mod compress;
mod reader;
mod varint;
mod zstd_dict;

pub use checksum::{crc32c, crc32c_append, salted_crc32c};
pub use compress::{
    looks_incompressible, lz4_compress, lz4_compress_into, lz4_decompress, zstd_compress,
    zstd_decompress, ZSTD_DEFAULT_LEVEL,
};
pub use reader::Reader;
pub use varint::{put_varint, varint_len, MAX_VARINT_LEN};
pub use zstd_dict::{zstd_train_dictionary, ZstdDictCompressor, ZstdDictionary};

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before the value did.
    #[error("truncated input: needed {needed} more bytes at offset {offset}")]
    Truncated { offset: usize, needed: usize },
    /// A varint ran past 10 bytes or overflowed a `u64`.
    #[error("malformed varint at offset {offset}")]
    BadVarint { offset: usize },
    /// A value was well-formed but outside what the format allows.
    #[error("invalid {what} at offset {offset}: {detail}")]
    Invalid {
        what: &'static str,
        offset: usize,
        detail: String,
    },
    /// Compressed data did not decompress to the declared size.
    #[error("corrupt compressed block: {0}")]
    Decompress(String),
}

impl DecodeError {
    /// Returns an [`DecodeError::Invalid`] for `what` at `offset`.
    pub fn invalid(what: &'static str, offset: usize, detail: impl Into<String>) -> DecodeError {
        DecodeError::Invalid {
            what,
            offset,
            detail: detail.into(),
        }
    }
}
