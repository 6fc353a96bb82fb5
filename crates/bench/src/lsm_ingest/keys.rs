//! The key layout of `lsm-ingest`: the writers' range and the ingested
//! files' ranges never meet, so that every ingestion is into a range no
//! writer touches, and every file into a range of its own.
//!
//! - Writer key: `{ u8 'w' | u8 writer | u64 BE index | filler }`, 16 bytes.
//!   Each writer owns the indexes `0..keys_per_writer` under its own byte.
//! - Ingested key: `{ u8 'i' | u32 BE file | u64 BE entry | filler }`, 16
//!   bytes. File `n` holds entries `0..entries` in order, so its keys sort
//!   as it writes them and no two files overlap.
//!
//! `'i' < 'w'`: every ingested range sorts below every writer's key.
//! Values are [`entry`](crate::workload::entry)'s bytes, half pseudo-random
//! and half a repeated motif (about 2:1 under LZ4), as the `lsm` workloads'.

use crate::workload::entry;

/// Bytes of every key.
pub const KEY_BYTES: usize = 16;
/// Bytes of every value.
pub const VALUE_BYTES: usize = 1024;
/// User bytes of one key and its value.
pub const PAIR_BYTES: u64 = (KEY_BYTES + VALUE_BYTES) as u64;
/// Most writers: the writer's number is one byte of its keys.
pub const WRITERS_MAX: usize = 255;

const WRITER_TAG: u8 = b'w';
const INGEST_TAG: u8 = b'i';
const FILLER: u8 = b'k';

const _: () = assert!(INGEST_TAG < WRITER_TAG);
const _: () = assert!(1 + 1 + 8 <= KEY_BYTES && 1 + 4 + 8 <= KEY_BYTES);

/// Returns key `index` of writer `writer`.
pub fn writer_key(writer: usize, index: u64) -> Vec<u8> {
    debug_assert!(writer <= WRITERS_MAX);
    let mut k = Vec::with_capacity(KEY_BYTES);
    k.push(WRITER_TAG);
    k.push(writer as u8);
    k.extend_from_slice(&index.to_be_bytes());
    k.resize(KEY_BYTES, FILLER);
    k
}

/// Returns key `entry` of ingested file `file`.
pub fn ingest_key(file: u32, entry: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_BYTES);
    k.push(INGEST_TAG);
    k.extend_from_slice(&file.to_be_bytes());
    k.extend_from_slice(&entry.to_be_bytes());
    k.resize(KEY_BYTES, FILLER);
    k
}

/// Returns the value of write `version` of stream `stream` (a writer, or
/// an ingested file offset past the writers).
pub fn value(stream: u64, version: u64) -> Vec<u8> {
    entry(stream, version, VALUE_BYTES)
}

/// The stream number of ingested file `file`'s values: past every writer.
pub fn file_stream(file: u32) -> u64 {
    (WRITERS_MAX as u64 + 1) + u64::from(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ingested_ranges_lie_apart_from_the_writers_and_from_each_other() {
        let last_ingested = ingest_key(u32::MAX, u64::MAX);
        let first_written = writer_key(0, 0);
        assert!(last_ingested < first_written);
        assert!(ingest_key(3, u64::MAX) < ingest_key(4, 0));
        assert!(ingest_key(3, 1) < ingest_key(3, 2));
        assert!(writer_key(1, u64::MAX) < writer_key(2, 0));
        for k in [last_ingested, first_written] {
            assert_eq!(k.len(), KEY_BYTES);
        }
        assert_eq!(value(1, 2).len(), VALUE_BYTES);
    }
}
