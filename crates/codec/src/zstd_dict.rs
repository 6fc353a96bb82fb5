//! zstd with a trained dictionary: for files of many small blocks whose
//! contents resemble each other (blob files of small values), where each
//! block compressed alone finds few repeats and a dictionary built from the
//! file's first blocks supplies them.
//!
//! Training and both directions use the reference library through the
//! `zstd` crate (its dictionary builder is the `zdict_builder` feature).
//!
//! Invariants:
//! - Decompression allocates at most the length the caller allows, whatever
//!   the frame claims, and returns [`DecodeError`] on any bad input (as
//!   [`crate::zstd_decompress`] does).
//! - A dictionary is any bytes: zstd reads bytes without its dictionary magic
//!   as raw content, so a damaged dictionary can only make decompression fail
//!   or differ, which the caller's checksums and lengths catch.

use std::cell::RefCell;

use zstd::dict::DecoderDictionary;
use zstd::zstd_safe::DCtx;

use crate::DecodeError;

/// Trains a dictionary of at most `max_bytes` from `samples`, the
/// concatenation of samples of `sizes` bytes each. `None` when zstd cannot
/// build one (too few or too uniform samples): the caller compresses
/// without.
pub fn zstd_train_dictionary(samples: &[u8], sizes: &[usize], max_bytes: usize) -> Option<Vec<u8>> {
    let total = sizes
        .iter()
        .try_fold(0usize, |sum, &size| sum.checked_add(size));
    if total != Some(samples.len()) || sizes.len() < 8 || max_bytes < 256 {
        return None;
    }
    zstd::dict::from_continuous(samples, sizes, max_bytes)
        .ok()
        .filter(|d| !d.is_empty())
}

/// Compresses blocks with one dictionary at one level. Owned by one writer.
pub struct ZstdDictCompressor {
    inner: zstd::bulk::Compressor<'static>,
}

impl std::fmt::Debug for ZstdDictCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdDictCompressor").finish_non_exhaustive()
    }
}

impl ZstdDictCompressor {
    /// A compressor with `dictionary` loaded at `level` (clamped to zstd's
    /// range). `None` if zstd refuses (an allocation failure).
    pub fn new(dictionary: &[u8], level: i32) -> Option<ZstdDictCompressor> {
        let range = zstd::compression_level_range();
        let level = level.clamp(*range.start(), *range.end());
        let inner = zstd::bulk::Compressor::with_dictionary(level, dictionary).ok()?;
        Some(ZstdDictCompressor { inner })
    }

    /// `data` as one zstd frame; `None` if zstd fails (the caller then
    /// stores the block uncompressed).
    pub fn compress(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        self.inner.compress(data).ok()
    }
}

/// A dictionary prepared for decompression, shared by every reader of the
/// file that carries it.
pub struct ZstdDictionary {
    prepared: DecoderDictionary<'static>,
    len: usize,
}

impl std::fmt::Debug for ZstdDictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdDictionary")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// Each thread's decompression context: creating one per block would
    /// allocate its workspace (about 100 KiB) on every read.
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

impl ZstdDictionary {
    /// Prepares `dictionary` (any bytes) for decompression.
    pub fn new(dictionary: &[u8]) -> ZstdDictionary {
        ZstdDictionary {
            prepared: DecoderDictionary::copy(dictionary),
            len: dictionary.len(),
        }
    }

    /// The dictionary's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty dictionary.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Decompresses one frame made with this dictionary that must expand to
    /// exactly `uncompressed_len` bytes (at most that many are allocated).
    pub fn decompress(&self, data: &[u8], uncompressed_len: usize) -> Result<Vec<u8>, DecodeError> {
        let mut out = Vec::with_capacity(uncompressed_len);
        let written = DCTX.with_borrow_mut(|slot| {
            let dctx = slot.get_or_insert_with(DCtx::create);
            dctx.decompress_using_ddict(&mut out, data, self.prepared.as_ddict())
        });
        written.map_err(|code| {
            DecodeError::Decompress(zstd::zstd_safe::get_error_name(code).to_string())
        })?;
        crate::compress::exact_len(out, uncompressed_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records that share field names and shapes, as JSON values do.
    fn records(n: usize, seed: u64) -> Vec<Vec<u8>> {
        (0..n as u64)
            .map(|i| {
                let x = (i + seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                format!(
                    "{{\"user_id\":{},\"name\":\"user-{:x}\",\"email\":\"u{:x}@example.com\",\
                     \"plan\":\"{}\",\"balance\":{},\"tags\":[\"alpha\",\"beta\"]}}",
                    x % 100_000,
                    x >> 40,
                    x >> 20,
                    ["free", "pro", "team"][(x % 3) as usize],
                    x % 9_999
                )
                .into_bytes()
            })
            .collect()
    }

    #[test]
    fn a_trained_dictionary_round_trips_and_beats_plain_zstd_on_small_blocks() {
        let samples = records(2000, 1);
        let sizes: Vec<usize> = samples.iter().map(Vec::len).collect();
        let dict = zstd_train_dictionary(&samples.concat(), &sizes, 8 << 10).unwrap();
        assert!(!dict.is_empty() && dict.len() <= 8 << 10);
        let mut compressor = ZstdDictCompressor::new(&dict, 3).unwrap();
        let decompressor = ZstdDictionary::new(&dict);
        let (mut with, mut without) = (0, 0);
        for block in records(200, 7_000) {
            let c = compressor.compress(&block).unwrap();
            assert_eq!(decompressor.decompress(&c, block.len()).unwrap(), block);
            assert!(decompressor.decompress(&c, block.len() - 1).is_err());
            with += c.len();
            without += crate::zstd_compress(&block, 3).unwrap().len();
        }
        assert!(with * 2 < without, "with {with} bytes, without {without}");
    }

    #[test]
    fn too_few_samples_or_sizes_that_disagree_train_nothing() {
        let samples = records(4, 1);
        let sizes: Vec<usize> = samples.iter().map(Vec::len).collect();
        assert!(zstd_train_dictionary(&samples.concat(), &sizes, 4096).is_none());
        let samples = records(100, 1);
        let mut sizes: Vec<usize> = samples.iter().map(Vec::len).collect();
        sizes[0] += 1;
        assert!(zstd_train_dictionary(&samples.concat(), &sizes, 4096).is_none());
    }

    #[test]
    fn garbage_and_a_wrong_dictionary_are_errors_not_panics() {
        let samples = records(500, 1);
        let sizes: Vec<usize> = samples.iter().map(Vec::len).collect();
        let dict = zstd_train_dictionary(&samples.concat(), &sizes, 4096).unwrap();
        let block = records(1, 9).concat();
        let c = ZstdDictCompressor::new(&dict, 3)
            .unwrap()
            .compress(&block)
            .unwrap();
        let other = ZstdDictionary::new(b"not the dictionary the frame was made with");
        assert!(other.decompress(&c, block.len()).is_err());
        let d = ZstdDictionary::new(&dict);
        for n in 0..64u8 {
            let garbage: Vec<u8> = (0..n).map(|i| i.wrapping_mul(31) ^ n).collect();
            let _ = d.decompress(&garbage, 100);
        }
    }
}
