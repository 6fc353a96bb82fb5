//! A file's properties: counts, sizes, key and sequence-number ranges, and
//! user properties from pluggable collectors (TiKV keeps MVCC statistics and
//! blob-GC hints this way, so compaction can pick files without reading them).
//!
//! Stored as a keyed block in bytewise order, one entry per property: names
//! starting with `strata.` are the engine's, with the fixed-width values
//! listed in `docs/format/sst.md`; any other name is a collector's, its value
//! opaque bytes.
//!
//! Invariants:
//! - Collector names never start with [`RESERVED_PREFIX`] (the writer refuses
//!   them), and two collectors never emit the same name.
//! - A reader ignores `strata.` names it does not know, so a later writer may
//!   add properties without a new format version; it refuses a file that lacks
//!   any property listed here as required.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_codec::{put_varint, DecodeError, Reader};

use super::block::{Block, KeyOrder};
use super::block_builder::BlockBuilder;
use super::format::Compression;
use crate::key::{SeqNo, ValueKind};

/// The prefix of the engine's own property names.
pub const RESERVED_PREFIX: &str = "strata.";

/// Observes every entry written to a file and emits properties at the end.
///
/// One collector serves one file. It sees data entries in key order, then
/// range tombstones (kind [`ValueKind::RangeDelete`], value = exclusive end)
/// in order of start key.
pub trait PropertiesCollector: Send + std::fmt::Debug {
    /// Observes one entry.
    fn add(&mut self, user_key: &[u8], value: &[u8], kind: ValueKind, seqno: SeqNo);

    /// Returns the properties to store. Names must not start with
    /// [`RESERVED_PREFIX`].
    fn finish(&mut self) -> Vec<(String, Vec<u8>)>;
}

/// What a file holds, recorded by its writer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Properties {
    /// Data entries (every kind but range deletions).
    pub num_entries: u64,
    /// Point deletions among them.
    pub num_deletions: u64,
    /// Range tombstones.
    pub num_range_deletions: u64,
    /// Bytes of user keys of data entries, before prefix compression.
    pub raw_key_bytes: u64,
    /// Bytes of values of data entries.
    pub raw_value_bytes: u64,
    /// Data blocks.
    pub num_data_blocks: u64,
    /// Stored bytes of data blocks, trailers included.
    pub data_bytes: u64,
    /// Stored bytes of index blocks (partitions and top level), trailers included.
    pub index_bytes: u64,
    /// Stored bytes of filter blocks, trailers included.
    pub filter_bytes: u64,
    /// Index partitions (0 when the index is a single block).
    pub index_partitions: u64,
    /// The smallest user key of a data entry or range tombstone start, if any.
    pub smallest_key: Option<Vec<u8>>,
    /// The largest user key of a data entry or range tombstone end (an
    /// exclusive bound), if any.
    pub largest_key: Option<Vec<u8>>,
    /// The smallest sequence number in the file (0 when empty).
    pub smallest_seqno: SeqNo,
    /// The largest sequence number in the file (0 when empty).
    pub largest_seqno: SeqNo,
    /// The compression the writer was asked for (single blocks may be raw).
    pub compression: Compression,
    /// Bloom filter bits per key (0: no filter).
    pub bloom_bits_per_key: u32,
    /// The prefix length of the prefix filter, if the file has one.
    pub prefix_len: Option<u32>,
    /// The writer's target data block size.
    pub block_size: u64,
    /// The writer's restart interval.
    pub restart_interval: u32,
    /// Bytes of separated values the file's `BlobIndex` entries reference,
    /// by blob file number: what keeps each blob file's live bytes exact.
    pub blob_refs: BTreeMap<u64, u64>,
    /// Collectors' properties, by name.
    pub user: BTreeMap<String, Vec<u8>>,
}

// Names of the engine's properties: on disk, never rename one.
const NUM_ENTRIES: &str = "strata.num_entries";
const NUM_DELETIONS: &str = "strata.num_deletions";
const NUM_RANGE_DELETIONS: &str = "strata.num_range_deletions";
const RAW_KEY_BYTES: &str = "strata.raw_key_bytes";
const RAW_VALUE_BYTES: &str = "strata.raw_value_bytes";
const NUM_DATA_BLOCKS: &str = "strata.num_data_blocks";
const DATA_BYTES: &str = "strata.data_bytes";
const INDEX_BYTES: &str = "strata.index_bytes";
const FILTER_BYTES: &str = "strata.filter_bytes";
const INDEX_PARTITIONS: &str = "strata.index_partitions";
const SMALLEST_KEY: &str = "strata.smallest_key";
const LARGEST_KEY: &str = "strata.largest_key";
const SMALLEST_SEQNO: &str = "strata.smallest_seqno";
const LARGEST_SEQNO: &str = "strata.largest_seqno";
const COMPRESSION: &str = "strata.compression";
const BLOOM_BITS_PER_KEY: &str = "strata.bloom_bits_per_key";
const PREFIX_LEN: &str = "strata.prefix_len";
const BLOCK_SIZE: &str = "strata.block_size";
const RESTART_INTERVAL: &str = "strata.restart_interval";
const BLOB_REFS: &str = "strata.blob_refs";

impl Properties {
    /// The raw bytes of the properties block.
    pub fn encode(&self) -> Vec<u8> {
        let mut all: BTreeMap<&[u8], Vec<u8>> = BTreeMap::new();
        let u64s = |name: &'static str, v: u64| (name, v.to_le_bytes().to_vec());
        let fixed = [
            u64s(NUM_ENTRIES, self.num_entries),
            u64s(NUM_DELETIONS, self.num_deletions),
            u64s(NUM_RANGE_DELETIONS, self.num_range_deletions),
            u64s(RAW_KEY_BYTES, self.raw_key_bytes),
            u64s(RAW_VALUE_BYTES, self.raw_value_bytes),
            u64s(NUM_DATA_BLOCKS, self.num_data_blocks),
            u64s(DATA_BYTES, self.data_bytes),
            u64s(INDEX_BYTES, self.index_bytes),
            u64s(FILTER_BYTES, self.filter_bytes),
            u64s(INDEX_PARTITIONS, self.index_partitions),
            u64s(SMALLEST_SEQNO, self.smallest_seqno),
            u64s(LARGEST_SEQNO, self.largest_seqno),
            u64s(BLOCK_SIZE, self.block_size),
            (COMPRESSION, vec![self.compression as u8]),
            (
                BLOOM_BITS_PER_KEY,
                self.bloom_bits_per_key.to_le_bytes().to_vec(),
            ),
            (
                RESTART_INTERVAL,
                self.restart_interval.to_le_bytes().to_vec(),
            ),
        ];
        for (name, v) in fixed {
            all.insert(name.as_bytes(), v);
        }
        if let Some(p) = self.prefix_len {
            all.insert(PREFIX_LEN.as_bytes(), p.to_le_bytes().to_vec());
        }
        if let Some(k) = &self.smallest_key {
            all.insert(SMALLEST_KEY.as_bytes(), k.clone());
        }
        if let Some(k) = &self.largest_key {
            all.insert(LARGEST_KEY.as_bytes(), k.clone());
        }
        if !self.blob_refs.is_empty() {
            let mut v = Vec::new();
            for (&file, &bytes) in &self.blob_refs {
                put_varint(&mut v, file);
                put_varint(&mut v, bytes);
            }
            all.insert(BLOB_REFS.as_bytes(), v);
        }
        for (name, v) in &self.user {
            all.insert(name.as_bytes(), v.clone());
        }
        let mut b = BlockBuilder::new(16);
        for (name, v) in all {
            b.add(name, &v);
        }
        b.finish()
    }

    /// Decodes the raw bytes of a properties block.
    pub fn decode(raw: Vec<u8>) -> Result<Properties, DecodeError> {
        let block = Arc::new(Block::decode(raw, KeyOrder::Bytewise)?);
        let mut fields: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut it = block.iter();
        it.first();
        while it.valid() {
            if fields
                .insert(it.key().to_vec(), it.value().to_vec())
                .is_some()
            {
                return Err(DecodeError::invalid(
                    "property",
                    0,
                    format!("{:?} appears twice", String::from_utf8_lossy(it.key())),
                ));
            }
            it.next();
        }
        let mut p = Properties::default();
        let take = |fields: &mut BTreeMap<Vec<u8>, Vec<u8>>, name: &'static str| {
            fields.remove(name.as_bytes())
        };
        let fixed = |fields: &mut BTreeMap<Vec<u8>, Vec<u8>>, name: &'static str, width: usize| {
            let v = take(fields, name)
                .ok_or_else(|| DecodeError::invalid("property", 0, format!("{name} missing")))?;
            if v.len() != width {
                return Err(DecodeError::invalid(
                    "property",
                    0,
                    format!("{name} is {} bytes, want {width}", v.len()),
                ));
            }
            let mut a = [0u8; 8];
            a[..width].copy_from_slice(&v);
            Ok(u64::from_le_bytes(a))
        };
        p.num_entries = fixed(&mut fields, NUM_ENTRIES, 8)?;
        p.num_deletions = fixed(&mut fields, NUM_DELETIONS, 8)?;
        p.num_range_deletions = fixed(&mut fields, NUM_RANGE_DELETIONS, 8)?;
        p.raw_key_bytes = fixed(&mut fields, RAW_KEY_BYTES, 8)?;
        p.raw_value_bytes = fixed(&mut fields, RAW_VALUE_BYTES, 8)?;
        p.num_data_blocks = fixed(&mut fields, NUM_DATA_BLOCKS, 8)?;
        p.data_bytes = fixed(&mut fields, DATA_BYTES, 8)?;
        p.index_bytes = fixed(&mut fields, INDEX_BYTES, 8)?;
        p.filter_bytes = fixed(&mut fields, FILTER_BYTES, 8)?;
        p.index_partitions = fixed(&mut fields, INDEX_PARTITIONS, 8)?;
        p.smallest_seqno = fixed(&mut fields, SMALLEST_SEQNO, 8)?;
        p.largest_seqno = fixed(&mut fields, LARGEST_SEQNO, 8)?;
        p.block_size = fixed(&mut fields, BLOCK_SIZE, 8)?;
        let c = fixed(&mut fields, COMPRESSION, 1)? as u8;
        p.compression = Compression::from_u8(c)
            .ok_or_else(|| DecodeError::invalid("property", 0, format!("compression {c}")))?;
        p.bloom_bits_per_key = fixed(&mut fields, BLOOM_BITS_PER_KEY, 4)? as u32;
        p.restart_interval = fixed(&mut fields, RESTART_INTERVAL, 4)? as u32;
        if fields.contains_key(PREFIX_LEN.as_bytes()) {
            p.prefix_len = Some(fixed(&mut fields, PREFIX_LEN, 4)? as u32);
        }
        p.smallest_key = take(&mut fields, SMALLEST_KEY);
        p.largest_key = take(&mut fields, LARGEST_KEY);
        if let Some(v) = take(&mut fields, BLOB_REFS) {
            let mut r = Reader::new(&v);
            while !r.is_empty() {
                let file = r.varint()?;
                let bytes = r.varint()?;
                if p.blob_refs.insert(file, bytes).is_some() {
                    return Err(DecodeError::invalid(
                        "property",
                        r.position(),
                        format!("{BLOB_REFS} names blob file {file} twice"),
                    ));
                }
            }
        }
        for (name, v) in fields {
            let name = String::from_utf8(name).map_err(|_| {
                DecodeError::invalid("property", 0, "a user property's name is not UTF-8")
            })?;
            if !name.starts_with(RESERVED_PREFIX) {
                p.user.insert(name, v);
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_user_properties_and_unknown_engine_names() {
        let mut p = Properties {
            num_entries: 7,
            num_deletions: 2,
            smallest_key: Some(b"a".to_vec()),
            largest_key: Some(b"zz".to_vec()),
            largest_seqno: 99,
            compression: Compression::Zstd,
            prefix_len: Some(4),
            ..Properties::default()
        };
        p.user.insert("tikv.mvcc".into(), vec![1, 2, 3]);
        p.blob_refs.insert(12, 4096);
        p.blob_refs.insert(1 << 40, 0);
        let raw = p.encode();
        assert_eq!(Properties::decode(raw.clone()).unwrap(), p);
        // Missing a required property.
        let mut b = BlockBuilder::new(16);
        b.add(b"strata.num_entries", &[0; 8]);
        assert!(Properties::decode(b.finish()).is_err());
    }
}
