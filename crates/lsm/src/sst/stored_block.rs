//! How a block's bytes are stored: optionally compressed, then followed by a
//! trailer that checks them.
//!
//! ```text
//! stored block = payload { u8 compression | u32 crc32c(payload | compression) }
//! payload      = raw bytes                              (compression 0)
//!              | { varint raw_len | compressed bytes }  (compression 1 = LZ4, 2 = zstd)
//! ```
//!
//! The checksum covers the compression byte too, so a flipped type byte can
//! never make good bytes decode as another compression. A block is stored
//! raw unless compressing saves at least an eighth: decompressing costs every
//! read, and a small saving is not worth it.
//!
//! Invariants:
//! - [`unseal`] checks the checksum before it looks at any other byte, and
//!   bounds `raw_len` by [`MAX_BLOCK_LEN`] before decompressing, so no bad
//!   file can make a reader allocate more than that.

use strata_codec::{
    crc32c, crc32c_append, lz4_compress, lz4_decompress, put_varint, zstd_compress,
    zstd_decompress, DecodeError, Reader,
};

use super::format::{Compression, BLOCK_TRAILER_LEN, MAX_BLOCK_LEN};

/// Compresses `raw` as asked (falling back to no compression when it saves
/// less than an eighth) and appends the trailer. Returns the stored bytes,
/// trailer included, and the compression used.
pub fn seal(raw: &[u8], compression: Compression, zstd_level: i32) -> (Vec<u8>, Compression) {
    let compressed = match compression {
        Compression::None => None,
        Compression::Lz4 => Some(lz4_compress(raw)),
        Compression::Zstd => zstd_compress(raw, zstd_level),
    };
    let (stored, code) = seal_compressed(raw, compressed.as_deref(), compression as u8);
    let used = if code == compression as u8 {
        compression
    } else {
        Compression::None
    };
    (stored, used)
}

/// Stores `raw` as `compressed` under the compression byte `code` when that
/// saves at least an eighth, else raw (code 0), and appends the trailer.
/// Returns the stored bytes and the code used. For a file format that adds
/// codes of its own (a blob file's dictionary).
pub fn seal_compressed(raw: &[u8], compressed: Option<&[u8]>, code: u8) -> (Vec<u8>, u8) {
    let mut out = Vec::with_capacity(raw.len() + BLOCK_TRAILER_LEN + 10);
    let used = match compressed {
        Some(c) if c.len() + 10 <= raw.len() - raw.len() / 8 => {
            put_varint(&mut out, raw.len() as u64);
            out.extend_from_slice(c);
            code
        }
        _ => {
            out.extend_from_slice(raw);
            Compression::None as u8
        }
    };
    out.push(used);
    let crc = crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    (out, used)
}

/// Checks a stored block (payload and trailer) and returns its raw bytes.
pub fn unseal(stored: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let (payload, code) = check(stored)?;
    unseal_checked(payload, code)
}

/// Checks a stored block's checksum and returns its payload and its
/// compression byte, which is not interpreted.
pub fn check(stored: &[u8]) -> Result<(&[u8], u8), DecodeError> {
    let Some(payload_len) = stored.len().checked_sub(BLOCK_TRAILER_LEN) else {
        return Err(DecodeError::Truncated {
            offset: 0,
            needed: BLOCK_TRAILER_LEN - stored.len(),
        });
    };
    let (payload, trailer) = stored.split_at(payload_len);
    let want = u32::from_le_bytes(trailer[1..5].try_into().expect("4 bytes"));
    let got = crc32c_append(crc32c(payload), &trailer[..1]);
    if want != got {
        return Err(DecodeError::invalid(
            "block checksum",
            payload_len,
            format!("stored {want:#010x}, computed {got:#010x}"),
        ));
    }
    Ok((payload, trailer[0]))
}

/// The raw bytes of a payload that [`check`] passed, stored under `code`
/// (one of [`Compression`]'s).
pub fn unseal_checked(payload: &[u8], code: u8) -> Result<Vec<u8>, DecodeError> {
    let compression = Compression::from_u8(code)
        .ok_or_else(|| DecodeError::invalid("compression", payload.len(), format!("{code}")))?;
    let decompress = match compression {
        Compression::None => return Ok(payload.to_vec()),
        Compression::Lz4 => lz4_decompress,
        Compression::Zstd => zstd_decompress,
    };
    let (raw_len, compressed) = compressed_parts(payload)?;
    decompress(compressed, raw_len)
}

/// A compressed payload's raw length, bounded by [`MAX_BLOCK_LEN`], and its
/// compressed bytes.
pub fn compressed_parts(payload: &[u8]) -> Result<(usize, &[u8]), DecodeError> {
    let mut r = Reader::new(payload);
    let raw_len = r.varint()?;
    if raw_len > MAX_BLOCK_LEN {
        return Err(DecodeError::invalid(
            "block length",
            0,
            format!("{raw_len} bytes exceeds the limit of {MAX_BLOCK_LEN}"),
        ));
    }
    Ok((raw_len as usize, &payload[r.position()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_each_compression_and_raw_fallback() {
        let text: Vec<u8> = b"abcdefgh".repeat(200);
        let noise = strata_test_support::noise(1, 1600);
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let (stored, used) = seal(&text, c, 3);
            assert_eq!(used, c);
            assert_eq!(unseal(&stored).unwrap(), text);
            let (stored, used) = seal(&noise, c, 3);
            assert_eq!(used, Compression::None, "incompressible bytes stored raw");
            assert_eq!(unseal(&stored).unwrap(), noise);
        }
    }

    #[test]
    fn every_flip_is_detected() {
        let text: Vec<u8> = b"0123456789".repeat(30);
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let (stored, _) = seal(&text, c, 3);
            for i in 0..stored.len() {
                let mut bad = stored.clone();
                bad[i] ^= 0x01;
                assert!(unseal(&bad).is_err(), "{c:?}: flip at {i} accepted");
            }
            assert!(unseal(&stored[..stored.len() - 1]).is_err());
        }
    }
}
