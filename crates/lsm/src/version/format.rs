//! The frozen field tags of a version edit's payload (`docs/format/manifest.md`).
//!
//! A tag is one byte, written before its field. Values are on disk: never
//! change or reuse one; a retired tag stays listed here as a tombstone.

/// Never a tag: zeroed bytes (a torn or preallocated tail) fail to decode.
pub const TAG_RESERVED: u8 = 0;
/// `varint cf`: the column family the edit changes (0 when absent).
pub const TAG_COLUMN_FAMILY: u8 = 1;
/// `varint log_number`: WALs below it hold no unflushed data.
pub const TAG_LOG_NUMBER: u8 = 2;
/// `varint next_file_number`.
pub const TAG_NEXT_FILE_NUMBER: u8 = 3;
/// `varint last_seqno`.
pub const TAG_LAST_SEQNO: u8 = 4;
/// `varint level | varint number`: a file the edit removes.
pub const TAG_DELETED_FILE: u8 = 5;
/// `varint level | varint number | varint size | varint smallest_len |
/// smallest | varint largest_len | largest | varint smallest_seqno | varint
/// largest_seqno`: a file the edit adds, which may hold range tombstones.
/// Decoded only: the encoder writes [`TAG_ADDED_FILE_FLAGS`].
pub const TAG_ADDED_FILE: u8 = 6;
/// `varint number | varint size | varint record_count | varint
/// value_bytes`: a blob file the edit adds.
pub const TAG_ADDED_BLOB_FILE: u8 = 7;
/// `varint number`: a blob file the edit removes.
pub const TAG_DELETED_BLOB_FILE: u8 = 8;
/// `varint number | varint count | (varint blob_number | varint bytes)*`:
/// the blob references of a file the same edit adds (absent: none).
pub const TAG_FILE_BLOB_REFS: u8 = 9;
/// [`TAG_ADDED_FILE`]'s fields, then `varint flags`: a file the edit adds.
/// Flag bit 0 ([`FILE_FLAG_RANGE_TOMBSTONES`]): the file may hold range
/// tombstones; every other bit is 0.
pub const TAG_ADDED_FILE_FLAGS: u8 = 10;
// Next free tag: 11.

/// `TAG_ADDED_FILE_FLAGS`'s bit: the file may hold range tombstones.
pub const FILE_FLAG_RANGE_TOMBSTONES: u64 = 1;

/// The longest internal key an added file may name: a user key of
/// `crate::batch::KEY_BYTES_MAX` bytes and its 8-byte trailer.
pub const FILE_KEY_BYTES_MAX: usize = crate::batch::KEY_BYTES_MAX + crate::key::TRAILER_LEN;

const _: () = assert!(TAG_ADDED_FILE > TAG_RESERVED);
