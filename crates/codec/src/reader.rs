//! A bounds-checked cursor over untrusted bytes.

use crate::DecodeError;

/// Reads little-endian integers, varints and byte slices from a buffer,
/// returning [`DecodeError`] instead of panicking when the bytes run out.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Returns the offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Returns how many bytes are left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Returns true when every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Takes the next `n` bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                offset: self.pos,
                needed: n - self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Takes a varint length followed by that many bytes.
    #[inline]
    pub fn length_prefixed(&mut self) -> Result<&'a [u8], DecodeError> {
        let start = self.pos;
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| DecodeError::Invalid {
            what: "length",
            offset: start,
            detail: format!("{len} does not fit in memory"),
        })?;
        self.bytes(len)
    }

    /// Reads one byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.bytes(1)?[0])
    }

    /// Reads a little-endian `u16`.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// Reads a little-endian `u32`.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a little-endian `u64`.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Reads a LEB128 varint of at most 10 bytes that fits in a `u64`.
    #[inline]
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        // Most varints are lengths under 128, one byte: decided inline.
        // (Block seeks decode a few hundred per point read; without this
        // the call alone was 7% of a read-heavy profile.)
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.varint_multi_byte()
    }

    #[inline(never)]
    fn varint_multi_byte(&mut self) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut v: u64 = 0;
        for i in 0..crate::MAX_VARINT_LEN {
            let b = match self.buf.get(self.pos) {
                Some(b) => *b,
                None => {
                    return Err(DecodeError::Truncated {
                        offset: self.pos,
                        needed: 1,
                    })
                }
            };
            self.pos += 1;
            let low = (b & 0x7f) as u64;
            // The tenth byte may carry only the top bit of a u64.
            if i == 9 && low > 1 {
                return Err(DecodeError::BadVarint { offset: start });
            }
            v |= low << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::BadVarint { offset: start })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_is_typed() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(
            r.u32(),
            Err(DecodeError::Truncated {
                offset: 0,
                needed: 1
            })
        );
        assert_eq!(r.u16().unwrap(), 0x0201);
    }

    #[test]
    fn overlong_varint_is_rejected() {
        let bytes = [0xffu8; 11];
        assert_eq!(
            Reader::new(&bytes).varint(),
            Err(DecodeError::BadVarint { offset: 0 })
        );
        let mut ten = [0xffu8; 10];
        ten[9] = 0x02;
        assert!(Reader::new(&ten).varint().is_err());
    }

    #[test]
    fn huge_length_prefix_is_an_error() {
        let mut buf = Vec::new();
        crate::put_varint(&mut buf, u64::MAX);
        assert!(Reader::new(&buf).length_prefixed().is_err());
    }
}
