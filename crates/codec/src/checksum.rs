//! CRC-32C (Castagnoli), hardware-accelerated where the CPU has it.

/// Returns the CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends `crc` (the CRC-32C of earlier bytes) with `data`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// Returns the CRC-32C of `salt` (little-endian) followed by `data`.
///
/// Salting a record's checksum with the identity of the file it lives in means
/// that bytes left over from an earlier use of the same blocks (a recycled file)
/// can never verify as records of the current file.
#[inline]
pub fn salted_crc32c(salt: u64, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&salt.to_le_bytes()), data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn salt_changes_checksum() {
        let data = b"entry bytes";
        assert_ne!(salted_crc32c(1, data), salted_crc32c(2, data));
        assert_eq!(salted_crc32c(7, data), salted_crc32c(7, data));
    }

    #[test]
    fn append_matches_whole() {
        let a = b"hello ";
        let b = b"world";
        assert_eq!(crc32c_append(crc32c(a), b), crc32c(b"hello world"));
    }
}
