//! One in-memory file: what the page cache holds, what the disk holds, and the
//! operations in between.
//!
//! A crash keeps either a prefix of the operations (`crash`) or, page by page,
//! the durable or the live bytes (`crash_pages`).
//!
//! Invariants:
//! - `live` equals `durable` with every operation of `pending` applied in order.
//! - `pending` is empty right after a sync.

use std::io;

use super::crash::{stream, CrashMode, FILE_STREAM};

/// The largest file `MemFs` holds. Past it writes fail with `EFBIG` rather than
/// trying to allocate the memory (a stray offset must not abort the test).
const FILE_BYTES_MAX: u64 = 1 << 32;
const _: () = assert!(FILE_BYTES_MAX <= usize::MAX as u64);

/// The unit in which a crash keeps or loses unsynced bytes: the page cache
/// writes a file back in pages, in any order.
pub(super) const PAGE_BYTES: u64 = 4096;
const _: () = assert!(FILE_BYTES_MAX.is_multiple_of(PAGE_BYTES));

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
            let mut rng = stream(seed, FILE_STREAM, inode_id);
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

    /// Returns every length the file had since its last sync, in order: the
    /// durable length first, the live length last.
    pub(super) fn len_history(&self) -> Vec<u64> {
        let mut len = self.durable.len() as u64;
        let mut lens = vec![len];
        for op in &self.pending {
            len = match op {
                PendingOp::Write { offset, data } => len.max(offset + data.len() as u64),
                PendingOp::SetLen(new) => *new,
            };
            lens.push(len);
        }
        lens
    }

    /// Returns the indexes of the pages whose live bytes differ from their
    /// durable bytes, each image read as zeros past its end.
    pub(super) fn unsynced_pages(&self) -> Vec<u64> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        let end = self.live.len().max(self.durable.len()) as u64;
        (0..end.div_ceil(PAGE_BYTES))
            .filter(|&page| {
                let range = page_range(page, end);
                !padded_eq(
                    within(&self.live, range.clone()),
                    within(&self.durable, range),
                )
            })
            .collect()
    }

    /// Replaces both images by what the disk holds after a power loss that
    /// left the file `len` bytes long (one of `len_history`) and wrote back
    /// each unsynced page for which `keep` returns true. `keep` is asked about
    /// the pages `unsynced_pages` lists that start before `len`, in order; the
    /// other pages hold their durable bytes (zeros past the durable length).
    pub(super) fn crash_pages(&mut self, len: u64, mut keep: impl FnMut(u64) -> bool) {
        let kept: Vec<u64> = self
            .unsynced_pages()
            .into_iter()
            .filter(|&page| page * PAGE_BYTES < len)
            .filter(|&page| keep(page))
            .collect();
        let mut image = std::mem::take(&mut self.durable);
        // `len` is a length the file had, so it was checked against
        // `FILE_BYTES_MAX`; the casts cannot truncate.
        image.resize(len as usize, 0);
        for page in kept {
            let range = page_range(page, len);
            let (start, end) = (range.start as usize, range.end as usize);
            let live = within(&self.live, range);
            image[start..start + live.len()].copy_from_slice(live);
            image[start + live.len()..end].fill(0);
        }
        self.live.clone_from(&image);
        self.durable = image;
        self.pending.clear();
    }
}

/// Returns the byte range of `page`, cut at `end`.
fn page_range(page: u64, end: u64) -> std::ops::Range<u64> {
    page * PAGE_BYTES..((page + 1) * PAGE_BYTES).min(end)
}

/// Returns the bytes of `image` in `range` that it holds; the rest of the
/// range lies past its end. Ranges are below `FILE_BYTES_MAX`, so the casts
/// cannot truncate.
fn within(image: &[u8], range: std::ops::Range<u64>) -> &[u8] {
    let start = (range.start as usize).min(image.len());
    let end = (range.end as usize).min(image.len());
    &image[start..end]
}

/// Tells whether two images agree on a range, given the bytes each holds in
/// it (from `within`) and reading zeros past the shorter one.
fn padded_eq(a: &[u8], b: &[u8]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long[..short.len()] == *short && long[short.len()..].iter().all(|&byte| byte == 0)
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
