//! One in-memory file: what the page cache holds, what the disk holds, and the
//! operations in between.
//!
//! Invariants:
//! - `live` equals `durable` with every operation of `pending` applied in order.
//! - `pending` is empty right after a sync.

use std::io;

use super::rng::SplitMix64;
use super::CrashMode;

/// The largest file `MemFs` holds. Past it writes fail with `EFBIG` rather than
/// trying to allocate the memory (a stray offset must not abort the test).
const FILE_BYTES_MAX: u64 = 1 << 32;
const _: () = assert!(FILE_BYTES_MAX <= usize::MAX as u64);

/// An operation not yet made durable.
#[derive(Clone, Debug)]
pub(super) enum PendingOp {
    /// Bytes written at an offset (a gap before it reads as zeros).
    Write { offset: u64, data: Vec<u8> },
    /// The length set by `truncate` or `allocate`.
    SetLen(u64),
}

/// A file's contents, live and durable.
#[derive(Clone, Debug, Default)]
pub(super) struct Inode {
    pub(super) live: Vec<u8>,
    pub(super) durable: Vec<u8>,
    pending: Vec<PendingOp>,
}

impl Inode {
    /// Writes `data` at `offset` in the live image and logs it.
    pub(super) fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            // pwrite of nothing neither writes nor extends.
            return Ok(());
        }
        check_len(offset.checked_add(data.len() as u64))?;
        let op = PendingOp::Write {
            offset,
            data: data.to_vec(),
        };
        apply(&mut self.live, &op);
        self.pending.push(op);
        Ok(())
    }

    /// Sets the live length to `len` and logs it.
    pub(super) fn set_len(&mut self, len: u64) -> io::Result<()> {
        check_len(Some(len))?;
        if len == self.live.len() as u64 {
            return Ok(());
        }
        let op = PendingOp::SetLen(len);
        apply(&mut self.live, &op);
        self.pending.push(op);
        Ok(())
    }

    /// Makes the live image durable.
    pub(super) fn sync(&mut self) {
        self.durable.clone_from(&self.live);
        self.pending.clear();
    }

    /// Replaces both images by what the disk holds after a power loss.
    pub(super) fn crash(&mut self, mode: CrashMode, inode_id: u64) {
        let mut image = std::mem::take(&mut self.durable);
        if let CrashMode::KeepRandomPrefix { seed } = mode {
            // Mixing in the inode keeps each file's fate independent of how
            // many other files exist.
            let mut rng = SplitMix64::new(seed ^ inode_id.wrapping_mul(0xA24B_AED4_963E_E407));
            let kept = rng.up_to(self.pending.len() as u64) as usize;
            for (i, op) in self.pending[..kept].iter().enumerate() {
                match op {
                    PendingOp::Write { offset, data } if i + 1 == kept => {
                        let torn = rng.up_to(data.len() as u64) as usize;
                        let prefix = PendingOp::Write {
                            offset: *offset,
                            data: data[..torn].to_vec(),
                        };
                        apply(&mut image, &prefix);
                    }
                    op => apply(&mut image, op),
                }
            }
        }
        self.live.clone_from(&image);
        self.durable = image;
        self.pending.clear();
    }
}

fn check_len(end: Option<u64>) -> io::Result<()> {
    match end {
        Some(end) if end <= FILE_BYTES_MAX => Ok(()),
        _ => Err(io::Error::from_raw_os_error(libc::EFBIG)),
    }
}

/// Applies one operation to an image. Lengths were checked against
/// `FILE_BYTES_MAX` when the operation was logged, so the casts cannot truncate.
fn apply(image: &mut Vec<u8>, op: &PendingOp) {
    match op {
        PendingOp::Write { offset, data } => {
            if data.is_empty() {
                return;
            }
            let start = *offset as usize;
            let end = start + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[start..end].copy_from_slice(data);
        }
        PendingOp::SetLen(len) => image.resize(*len as usize, 0),
    }
}
