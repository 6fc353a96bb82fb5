//! A blob file's zstd dictionary (`docs/format/blob.md`, "Dictionary"):
//! trained by the writer from the file's first blocks, stored between the
//! last block and the footer, and named by header flag bit 0.
//!
//! Why after the blocks: a writer hands out the references into a block as
//! soon as it seals it, so it cannot hold the first blocks back until the
//! dictionary exists. The blocks written while it samples are compressed
//! without it (their trailers say plain zstd), the rest with it (trailer
//! code [`COMPRESSION_ZSTD_DICTIONARY`]), and the dictionary is written at
//! the end, where the reader finds it from the footer's position.
//!
//! Invariants:
//! - The section is `dictionary | u32 len | u32 crc32c(dictionary | len)`,
//!   exactly the bytes from the footer's `data_end` to the footer.
//! - `len` is at most [`MAX_DICTIONARY_BYTES`], checked before any read.

use strata_codec::{crc32c, crc32c_append, DecodeError};

/// Header flag: the file carries a dictionary section.
pub const FLAG_DICTIONARY: u32 = 1;

/// A block trailer's compression byte for zstd with the file's dictionary
/// (SST blocks use 0 to 2 only; a blob file adds this one).
pub const COMPRESSION_ZSTD_DICTIONARY: u8 = 3;

/// The largest dictionary a writer trains and a reader accepts.
pub const MAX_DICTIONARY_BYTES: usize = 1 << 20;

/// The smallest dictionary worth training (zstd's own floor is near it).
pub const MIN_DICTIONARY_BYTES: usize = 256;

/// Bytes after the dictionary: its length and checksum.
pub const SECTION_TRAILER_LEN: usize = 8;

/// Bytes of the first blocks a writer samples per byte of dictionary.
/// zstd's guidance is about a hundred; blob blocks are few kilobytes and a
/// file's first ones are all there is to learn from, so fewer, and the
/// blocks compressed without the dictionary are fewer too.
pub const SAMPLE_BYTES_PER_DICTIONARY_BYTE: usize = 32;

/// The most bytes a writer samples, whatever the dictionary's size.
pub const MAX_SAMPLE_BYTES: usize = 4 << 20;

/// The section's bytes for `dictionary`.
pub fn encode_section(dictionary: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(dictionary.len() + SECTION_TRAILER_LEN);
    out.extend_from_slice(dictionary);
    out.extend_from_slice(&(dictionary.len() as u32).to_le_bytes());
    let crc = crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The dictionary's length, from the section's trailer (the
/// [`SECTION_TRAILER_LEN`] bytes before the footer), bounded.
pub fn dictionary_len(trailer: &[u8; SECTION_TRAILER_LEN]) -> Result<usize, DecodeError> {
    let [a, b, c, d, ..] = *trailer;
    let len = u32::from_le_bytes([a, b, c, d]) as usize;
    if !(MIN_DICTIONARY_BYTES..=MAX_DICTIONARY_BYTES).contains(&len) {
        return Err(DecodeError::invalid(
            "dictionary length",
            0,
            format!("{len} bytes, outside {MIN_DICTIONARY_BYTES}..={MAX_DICTIONARY_BYTES}"),
        ));
    }
    Ok(len)
}

/// Checks a whole section (dictionary and trailer) and returns the
/// dictionary.
pub fn decode_section(section: &[u8]) -> Result<&[u8], DecodeError> {
    let Some(len) = section.len().checked_sub(SECTION_TRAILER_LEN) else {
        return Err(DecodeError::Truncated {
            offset: section.len(),
            needed: SECTION_TRAILER_LEN - section.len(),
        });
    };
    let mut trailer = [0u8; SECTION_TRAILER_LEN];
    trailer.copy_from_slice(&section[len..]);
    if dictionary_len(&trailer)? != len {
        return Err(DecodeError::invalid(
            "dictionary length",
            len,
            format!("the section holds {len} bytes before its trailer"),
        ));
    }
    let [.., e, f, g, h] = trailer;
    let want = u32::from_le_bytes([e, f, g, h]);
    let got = crc32c_append(crc32c(&section[..len]), &trailer[..4]);
    if want != got {
        return Err(DecodeError::invalid(
            "dictionary checksum",
            len + 4,
            format!("stored {want:#010x}, computed {got:#010x}"),
        ));
    }
    Ok(&section[..len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_round_trips_and_every_flip_is_refused() {
        let dictionary: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let section = encode_section(&dictionary);
        assert_eq!(decode_section(&section).unwrap(), &dictionary[..]);
        for i in 0..section.len() {
            let mut bad = section.clone();
            bad[i] ^= 0x10;
            assert!(decode_section(&bad).is_err(), "flip at {i} accepted");
        }
        assert!(decode_section(&section[1..]).is_err());
        assert!(decode_section(&section[..7]).is_err());
    }

    #[test]
    fn lengths_outside_the_bounds_are_refused_before_a_read() {
        for len in [0u32, 255, (MAX_DICTIONARY_BYTES + 1) as u32, u32::MAX] {
            let mut trailer = [0u8; SECTION_TRAILER_LEN];
            trailer[..4].copy_from_slice(&len.to_le_bytes());
            assert!(dictionary_len(&trailer).is_err(), "{len}");
        }
    }
}
