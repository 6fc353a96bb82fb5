//! Incompressible bytes for tests that need a codec to give up or a file to
//! grow by what is written.

/// `len` pseudo-random bytes (xorshift64), no compressor shrinks them;
/// the same for the same `seed`, different for each.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
