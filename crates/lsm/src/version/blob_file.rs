//! `BlobFileMeta`: what a version knows of one blob file, shared by `Arc`
//! between every version, snapshot and iterator that can reach it, exactly
//! as `FileMeta` is for SSTs (see `file_meta.rs` for the life cycle).
//!
//! A blob file is reachable through the references of the SSTs of the same
//! version, so a version holds a blob file for as long as any of its SSTs
//! may point into it; only an edit that names the file as deleted takes it
//! out (blob GC's, once no SST of the new version references it). A reader
//! that holds an old version holds its blob files with it, so no reference
//! it can follow ever points into a deleted file.
//!
//! Invariants: a blob file's number is unique among SSTs and blob files
//! alike (one allocator); a number is queued for deletion at most once.
//!
//! Concurrency contract: as `FileMeta`'s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use super::file_meta::{ObsoleteFile, ObsoleteFiles};
use super::FileNumber;
use crate::blob::format::{FOOTER_LEN, HEADER_LEN};
use crate::blob::BlobFileReader;

/// The description of a blob file as an edit records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileDesc {
    /// The file's number.
    pub number: FileNumber,
    /// The file's size in bytes.
    pub size: u64,
    /// Records in the file.
    pub record_count: u64,
    /// The sum of the records' value lengths (what garbage is counted in).
    pub value_bytes: u64,
}

impl BlobFileDesc {
    /// Checks the description's own consistency. Returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.size < (HEADER_LEN + FOOTER_LEN) as u64 {
            return Err(format!(
                "blob file {}: {} bytes is below a header and a footer",
                self.number, self.size
            ));
        }
        Ok(())
    }
}

/// A blob file as versions hold it.
#[derive(Debug)]
pub struct BlobFileMeta {
    desc: BlobFileDesc,
    obsolete: AtomicBool,
    queue: ObsoleteFiles,
    reader: OnceLock<Arc<BlobFileReader>>,
}

impl BlobFileMeta {
    /// Wraps a description; the builder does this for each added blob file.
    pub fn new(desc: BlobFileDesc, queue: ObsoleteFiles) -> BlobFileMeta {
        BlobFileMeta {
            desc,
            obsolete: AtomicBool::new(false),
            queue,
            reader: OnceLock::new(),
        }
    }

    /// Returns the description.
    pub fn desc(&self) -> &BlobFileDesc {
        &self.desc
    }

    /// Returns the file number.
    pub fn number(&self) -> FileNumber {
        self.desc.number
    }

    /// Returns the file's reader, opening it with `open` the first time.
    pub fn reader(
        &self,
        open: impl FnOnce() -> crate::Result<BlobFileReader>,
    ) -> crate::Result<Arc<BlobFileReader>> {
        if let Some(r) = self.reader.get() {
            return Ok(r.clone());
        }
        let r = Arc::new(open()?);
        Ok(self.reader.get_or_init(|| r).clone())
    }

    /// Records that an installed edit removed the file (the installer only).
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// Returns true once an installed edit has removed the file.
    pub fn is_obsolete(&self) -> bool {
        self.obsolete.load(Ordering::Acquire)
    }
}

impl Drop for BlobFileMeta {
    fn drop(&mut self) {
        drop(self.reader.take());
        if self.is_obsolete() {
            self.queue.send(ObsoleteFile::Blob(self.desc.number));
        }
    }
}
