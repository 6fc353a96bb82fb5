//! The frozen pieces of the blob file format: the header, the footer, the
//! record layout inside a block, and the blob reference an SST stores in
//! place of a separated value. The spec is `docs/format/blob.md`; change
//! nothing here without it.
//!
//! Invariants:
//! - The header is exactly [`HEADER_LEN`] bytes at offset 0, the footer
//!   exactly [`FOOTER_LEN`] bytes at the very end; each ends its checked
//!   bytes with a crc32c, so a torn or foreign file is refused whole.
//! - A flag bit this version does not know is refused, never ignored: a
//!   later writer that sets one means bytes this reader would misread.
//! - A blob reference names a block by its stored extent and a record by
//!   its offset in the decompressed block; every field is bounded before use.

use strata_codec::{crc32c, put_varint, DecodeError, Reader};

use crate::key::{SeqNo, MAX_SEQNO};
use crate::sst::format::{Compression, BLOCK_TRAILER_LEN, MAX_BLOCK_LEN, MAX_ENTRY_LEN};

/// The 8 bytes that open and end every blob file ("STRABLOB").
pub const MAGIC: u64 = u64::from_le_bytes(*b"STRABLOB");

/// The format version this code writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Bytes of the header: `u64 magic | u32 version | u32 flags | u32 column
/// family | u8 compression | 3 zero bytes | u32 crc32c`.
pub const HEADER_LEN: usize = 28;

/// Bytes of the footer: `u64 block_count | u64 record_count | u64
/// value_bytes | u64 data_end | u32 version | u32 crc32c | u64 magic`.
pub const FOOTER_LEN: usize = 48;

/// Bytes of the length that precedes each stored block.
pub const BLOCK_LEN_PREFIX: usize = 4;

/// Flag bits version 1 understands: bit 0, the file carries a zstd
/// dictionary (`dictionary.rs`).
pub const KNOWN_FLAGS: u32 = super::dictionary::FLAG_DICTIONARY;

/// The first byte of every encoded [`BlobRef`]; a later layout takes another.
const REF_TAG_BLOCK: u8 = 1;

/// The longest an encoded [`BlobRef`] can be: the tag and five varints.
pub const MAX_REF_LEN: usize = 1 + 10 + 10 + 5 + 5 + 5;

const _: () = assert!(HEADER_LEN == 8 + 4 + 4 + 4 + 1 + 3 + 4);
const _: () = assert!(FOOTER_LEN == 4 * 8 + 4 + 4 + 8);
const _: () = assert!(MAX_BLOCK_LEN <= u32::MAX as u64);

/// What the header says of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Flag bits (see [`KNOWN_FLAGS`]).
    pub flags: u32,
    /// The column family whose values the file holds.
    pub column_family: u32,
    /// The compression the writer was asked for; a block may still be stored
    /// raw when compressing would not pay (its own trailer says which).
    pub compression: Compression,
}

impl Header {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&self.flags.to_le_bytes());
        out[16..20].copy_from_slice(&self.column_family.to_le_bytes());
        out[20] = self.compression as u8;
        let crc = crc32c(&out[..24]);
        out[24..28].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and checks the first [`HEADER_LEN`] bytes of a file.
    pub fn decode(buf: &[u8]) -> Result<Header, DecodeError> {
        let Some(buf) = buf.get(..HEADER_LEN) else {
            return Err(DecodeError::Truncated {
                offset: buf.len(),
                needed: HEADER_LEN - buf.len(),
            });
        };
        let mut r = Reader::new(buf);
        let magic = r.u64()?;
        if magic != MAGIC {
            return Err(DecodeError::invalid(
                "blob header magic",
                0,
                format!("{magic:#018x}"),
            ));
        }
        let want = u32::from_le_bytes(buf[24..28].try_into().expect("4 bytes"));
        let got = crc32c(&buf[..24]);
        if want != got {
            return Err(DecodeError::invalid(
                "blob header checksum",
                24,
                format!("stored {want:#010x}, computed {got:#010x}"),
            ));
        }
        let version = r.u32()?;
        if version != FORMAT_VERSION {
            return Err(DecodeError::invalid(
                "blob format version",
                8,
                format!("{version}, this build reads {FORMAT_VERSION}"),
            ));
        }
        let flags = r.u32()?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(DecodeError::invalid(
                "blob header flags",
                12,
                format!("unknown bits {flags:#x}"),
            ));
        }
        let column_family = r.u32()?;
        let c = r.u8()?;
        let compression = Compression::from_u8(c)
            .ok_or_else(|| DecodeError::invalid("blob compression", 20, format!("{c}")))?;
        if buf[21..24] != [0, 0, 0] {
            return Err(DecodeError::invalid("blob header padding", 21, "not zero"));
        }
        Ok(Header {
            flags,
            column_family,
            compression,
        })
    }
}

/// What the footer says of a finished file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footer {
    /// Blocks in the file.
    pub block_count: u64,
    /// Records in the file.
    pub record_count: u64,
    /// The sum of the records' value lengths: what garbage is measured in.
    pub value_bytes: u64,
    /// Where the blocks end and the footer starts.
    pub data_end: u64,
}

impl Footer {
    /// The footer's bytes.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        out[0..8].copy_from_slice(&self.block_count.to_le_bytes());
        out[8..16].copy_from_slice(&self.record_count.to_le_bytes());
        out[16..24].copy_from_slice(&self.value_bytes.to_le_bytes());
        out[24..32].copy_from_slice(&self.data_end.to_le_bytes());
        out[32..36].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        let crc = crc32c(&out[..36]);
        out[36..40].copy_from_slice(&crc.to_le_bytes());
        out[40..48].copy_from_slice(&MAGIC.to_le_bytes());
        out
    }

    /// Decodes and checks the last [`FOOTER_LEN`] bytes of a file.
    pub fn decode(buf: &[u8]) -> Result<Footer, DecodeError> {
        if buf.len() != FOOTER_LEN {
            return Err(DecodeError::invalid(
                "blob footer length",
                0,
                format!("{} bytes, not {FOOTER_LEN}", buf.len()),
            ));
        }
        let magic = u64::from_le_bytes(buf[40..48].try_into().expect("8 bytes"));
        if magic != MAGIC {
            return Err(DecodeError::invalid(
                "blob footer magic",
                40,
                format!("{magic:#018x}"),
            ));
        }
        let want = u32::from_le_bytes(buf[36..40].try_into().expect("4 bytes"));
        let got = crc32c(&buf[..36]);
        if want != got {
            return Err(DecodeError::invalid(
                "blob footer checksum",
                36,
                format!("stored {want:#010x}, computed {got:#010x}"),
            ));
        }
        let mut r = Reader::new(buf);
        let footer = Footer {
            block_count: r.u64()?,
            record_count: r.u64()?,
            value_bytes: r.u64()?,
            data_end: r.u64()?,
        };
        let version = r.u32()?;
        if version != FORMAT_VERSION {
            return Err(DecodeError::invalid(
                "blob format version",
                32,
                format!("{version}, this build reads {FORMAT_VERSION}"),
            ));
        }
        Ok(footer)
    }
}

/// Where a separated value lives: the value an SST holds, with kind
/// `BlobIndex`, in place of the value itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobRef {
    /// The blob file's number (from the same allocator as SSTs).
    pub file_number: u64,
    /// Offset of the stored block (after its length prefix).
    pub block_offset: u64,
    /// Bytes of the stored block, trailer included.
    pub block_size: u32,
    /// Offset of the record in the decompressed block.
    pub record_offset: u32,
    /// Length of the value.
    pub value_len: u32,
}

impl BlobRef {
    /// Appends the encoded reference to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(REF_TAG_BLOCK);
        put_varint(out, self.file_number);
        put_varint(out, self.block_offset);
        put_varint(out, u64::from(self.block_size));
        put_varint(out, u64::from(self.record_offset));
        put_varint(out, u64::from(self.value_len));
    }

    /// The encoded reference.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAX_REF_LEN);
        self.encode_into(&mut out);
        out
    }

    /// Decodes a whole encoded reference (trailing bytes are an error) and
    /// checks its fields against the format's bounds.
    pub fn decode(buf: &[u8]) -> Result<BlobRef, DecodeError> {
        let mut r = Reader::new(buf);
        let tag = r.u8()?;
        if tag != REF_TAG_BLOCK {
            return Err(DecodeError::invalid("blob ref tag", 0, format!("{tag}")));
        }
        let file_number = r.varint()?;
        let block_offset = r.varint()?;
        let u32_field = |r: &mut Reader<'_>, what: &'static str| -> Result<u32, DecodeError> {
            let at = r.position();
            let v = r.varint()?;
            u32::try_from(v).map_err(|_| DecodeError::invalid(what, at, format!("{v}")))
        };
        let block_size = u32_field(&mut r, "blob ref block size")?;
        let record_offset = u32_field(&mut r, "blob ref record offset")?;
        let value_len = u32_field(&mut r, "blob ref value length")?;
        if !r.is_empty() {
            return Err(DecodeError::invalid(
                "blob ref",
                r.position(),
                format!("{} trailing bytes", r.remaining()),
            ));
        }
        let r = BlobRef {
            file_number,
            block_offset,
            block_size,
            record_offset,
            value_len,
        };
        r.check_bounds()?;
        Ok(r)
    }

    /// Checks what can be checked without the file: a block no smaller than
    /// its trailer nor larger than any block, a value no longer than any.
    fn check_bounds(&self) -> Result<(), DecodeError> {
        let size = u64::from(self.block_size);
        if size < BLOCK_TRAILER_LEN as u64 || size > MAX_BLOCK_LEN {
            return Err(DecodeError::invalid(
                "blob ref block size",
                0,
                format!("{size}"),
            ));
        }
        if self.value_len as usize > MAX_ENTRY_LEN {
            return Err(DecodeError::invalid(
                "blob ref value length",
                0,
                format!("{}", self.value_len),
            ));
        }
        if u64::from(self.record_offset) >= MAX_BLOCK_LEN {
            return Err(DecodeError::invalid(
                "blob ref record offset",
                0,
                format!("{}", self.record_offset),
            ));
        }
        Ok(())
    }
}

/// One record of a block: the key and sequence number it was written
/// under, so that a block can be read alone (GC, `strata-ctl`) and a
/// reference can be checked against the key that led to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobRecord<'a> {
    /// The user key.
    pub key: &'a [u8],
    /// The sequence number of the write the value came from.
    pub seqno: SeqNo,
    /// The value.
    pub value: &'a [u8],
}

/// Appends `varint key_len | key | u64 seqno | varint value_len | value`.
pub fn encode_record(out: &mut Vec<u8>, key: &[u8], seqno: SeqNo, value: &[u8]) {
    put_varint(out, key.len() as u64);
    out.extend_from_slice(key);
    out.extend_from_slice(&seqno.to_le_bytes());
    put_varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// Decodes the record at `offset` of a decompressed block; returns it and
/// the offset of the next one.
pub fn decode_record(block: &[u8], offset: usize) -> Result<(BlobRecord<'_>, usize), DecodeError> {
    let Some(rest) = block.get(offset..) else {
        return Err(DecodeError::invalid(
            "blob record offset",
            offset,
            format!("past the block's {} bytes", block.len()),
        ));
    };
    let mut r = Reader::new(rest);
    let key = r.length_prefixed()?;
    let seqno = r.u64()?;
    if seqno > MAX_SEQNO {
        return Err(DecodeError::invalid(
            "blob record seqno",
            offset + r.position() - 8,
            format!("{seqno}"),
        ));
    }
    let value = r.length_prefixed()?;
    Ok((BlobRecord { key, seqno, value }, offset + r.position()))
}
