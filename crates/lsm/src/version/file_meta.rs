//! `FileMeta`: what a version knows of one SST file at one level, shared by
//! `Arc` between every version, snapshot and iterator that can reach it, and
//! the obsolete-file queue the file's last owner feeds.
//!
//! A file's life: a flush, compaction or ingestion writes it and an edit
//! adds it ([`FileDesc`] in the edit; the builder wraps it in a new
//! `Arc<FileMeta>` over a new `TableFile`). Versions built later share that
//! `Arc`. An edit that removes the file makes the installer call
//! [`FileMeta::mark_obsolete`] once the new version is installed; the `Drop`
//! of the `TableFile` (when the last version, snapshot or iterator that could
//! read it lets go) then sends the file number to the [`ObsoleteFiles`]
//! queue, which the engine's deleter drains.
//!
//! Why the level is not in `FileMeta` (only whether it is an L0 entry): a
//! compaction may move a file to another level without rewriting it (a
//! trivial move: an edit that deletes and adds the same number). The builder
//! keeps the same `Arc` for the moved file, so an old version that still
//! reads it at its old level keeps the file alive. A move into or out of L0
//! makes a new `FileMeta` over the same `TableFile` (`FileMeta::placed`):
//! L0's entries keep their file's open reader, which must not follow the
//! file down; the file still has one owner of its deletion. The level is
//! where a version places the `Arc` (and what [`crate::version::Version`]
//! lookups return beside it).
//!
//! Invariants:
//! - Only an installed edit marks a file obsolete, and only a file the new
//!   version no longer holds: an old version being dropped never marks
//!   anything, so a file present in the current version is never queued.
//! - A number is queued at most once: the one `TableFile` of a number is
//!   dropped once (moves share it, numbers are never reused).
//! - `smallest <= largest` (internal key order) and `smallest_seqno <=
//!   largest_seqno`: [`FileDesc::validate`] checks both before a builder
//!   accepts the file.
//!
//! Concurrency contract: everything is immutable after construction but the
//! `obsolete` flag, which is set with `Release` by the installer holding the
//! manifest lock and read with `Acquire` by whichever thread drops the last
//! `Arc`; the `Arc`'s own release/acquire on the count orders them too. An
//! L0 entry's reader is set at most once (`OnceLock`) and dropped only with
//! the entry, which is what lets iterators borrow it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_channel::{Receiver, Sender};

use crate::key::{self, InternalKey, SeqNo};

/// The number of a file: allocated from the manifest's next file number,
/// never reused, and the name of the file on disk.
pub type FileNumber = u64;

/// The description of an SST file as an edit records it: plain data,
/// encoded in the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDesc {
    /// The file's number.
    pub number: FileNumber,
    /// The file's size in bytes.
    pub size: u64,
    /// The smallest internal key in the file.
    pub smallest: InternalKey,
    /// The largest internal key in the file.
    pub largest: InternalKey,
    /// The smallest sequence number of any entry in the file.
    pub smallest_seqno: SeqNo,
    /// The largest sequence number of any entry in the file; L0 is ordered
    /// by it (newest first).
    pub largest_seqno: SeqNo,
    /// The value bytes the file's `BlobIndex` entries reference, per blob
    /// file, ascending by number (the file's `strata.blob_refs` property):
    /// what keeps each blob file's live bytes exact and says when no SST
    /// references it any more.
    pub blob_refs: Vec<(FileNumber, u64)>,
    /// The file may hold range tombstones. An iterator opens such a file
    /// when it is created, to gather the tombstones that hide other
    /// sources' keys; every other file of a sorted level is opened only
    /// when the iterator reaches it. True for a file described before the
    /// manifest recorded it (`ADDED_FILE`, tag 6).
    pub range_tombstones: bool,
}

impl FileDesc {
    /// Checks the description's own consistency: the key range and the
    /// seqno range are not inverted. Returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if key::compare(self.smallest.encoded(), self.largest.encoded()).is_gt() {
            return Err(format!(
                "file {}: smallest key {:?} above largest {:?}",
                self.number, self.smallest, self.largest
            ));
        }
        if self.smallest_seqno > self.largest_seqno {
            return Err(format!(
                "file {}: smallest seqno {} above largest {}",
                self.number, self.smallest_seqno, self.largest_seqno
            ));
        }
        if self.blob_refs.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(format!(
                "file {}: blob references not in ascending file order",
                self.number
            ));
        }
        Ok(())
    }

    /// Returns true when the file's user-key range contains `user_key`.
    pub fn contains_user_key(&self, user_key: &[u8]) -> bool {
        self.smallest.user_key() <= user_key && user_key <= self.largest.user_key()
    }

    /// Returns true when the file's user-key range meets `[start, end]`
    /// (both inclusive; `None` is unbounded).
    pub fn overlaps(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> bool {
        start.is_none_or(|s| s <= self.largest.user_key())
            && end.is_none_or(|e| self.smallest.user_key() <= e)
    }
}

/// A file no version, snapshot or iterator can reach any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObsoleteFile {
    /// An SST file.
    Table(FileNumber),
    /// A blob file.
    Blob(FileNumber),
}

/// The sending side of the obsolete-file queue; cheap to clone. The engine
/// keeps the [`Receiver`] and deletes the files that arrive.
#[derive(Debug, Clone)]
pub struct ObsoleteFiles {
    sender: Sender<ObsoleteFile>,
}

impl ObsoleteFiles {
    /// Returns a new queue: the sender for file metadata, and the receiver
    /// the engine's deleter drains.
    pub fn channel() -> (ObsoleteFiles, Receiver<ObsoleteFile>) {
        let (sender, receiver) = crossbeam_channel::unbounded();
        (ObsoleteFiles { sender }, receiver)
    }

    /// Queues `file`. A closed queue means the engine is shutting down: the
    /// file is then a leftover that recovery deletes (it is in no manifest
    /// version), so losing the message loses no data.
    pub(crate) fn send(&self, file: ObsoleteFile) {
        let _ = self.sender.send(file);
    }
}

/// An SST file as versions hold it at one level: the file (its
/// description, and the obsolete flag that makes its last drop queue it for
/// deletion), and for L0 the file's open reader.
///
/// A trivial move out of L0 gives the file a new `FileMeta` at its new
/// level over the same [`TableFile`] (`FileMeta::placed`): the file keeps
/// one owner of its deletion, and the reader kept for L0 stays with the
/// versions that hold the file in L0. Other moves keep the `FileMeta`.
#[derive(Debug)]
pub struct FileMeta {
    file: Arc<TableFile>,
    /// Placed in L0: the only placement that keeps a reader.
    in_l0: bool,
    /// The open reader of a file in L0, kept with the version's entry
    /// rather than looked up in the table cache: every iterator opens every
    /// L0 file, and the cache's shard lock and hash were a fifth of an
    /// iterator's creation. Set by the first read at L0 (`pin_reader`) and
    /// never at another level, so the files open beyond `max_open_files`
    /// are those of L0 in the live versions.
    l0_reader: OnceLock<crate::sst::SstReader>,
}

/// One SST file, shared by its placements in every version.
#[derive(Debug)]
struct TableFile {
    desc: FileDesc,
    /// Set once an installed edit has removed the file.
    obsolete: AtomicBool,
    /// Where the number goes at the last drop of an obsolete file.
    queue: ObsoleteFiles,
}

impl FileMeta {
    /// Wraps a description of a file outside L0.
    pub fn new(desc: FileDesc, queue: ObsoleteFiles) -> FileMeta {
        FileMeta::at_level(desc, queue, 1)
    }

    /// Wraps a description of a file added at `level`; the builder does
    /// this for each added file.
    pub(crate) fn at_level(desc: FileDesc, queue: ObsoleteFiles, level: u8) -> FileMeta {
        FileMeta {
            file: Arc::new(TableFile {
                desc,
                obsolete: AtomicBool::new(false),
                queue,
            }),
            in_l0: level == 0,
            l0_reader: OnceLock::new(),
        }
    }

    /// The entry for this file moved to `level`: this one, unless the move
    /// takes it into or out of L0, where a new placement of the same file
    /// (one owner of its deletion) starts without a reader.
    pub(crate) fn placed(self: &Arc<Self>, level: u8) -> Arc<FileMeta> {
        if self.in_l0 == (level == 0) {
            return Arc::clone(self);
        }
        Arc::new(FileMeta {
            file: Arc::clone(&self.file),
            in_l0: level == 0,
            l0_reader: OnceLock::new(),
        })
    }

    /// True when both are placements of one file (a trivial move's before
    /// and after): one owner of its deletion.
    pub fn same_file(&self, other: &FileMeta) -> bool {
        Arc::ptr_eq(&self.file, &other.file)
    }

    /// The reader kept with the file while it is in L0, if one is.
    pub(crate) fn pinned_reader(&self) -> Option<&crate::sst::SstReader> {
        self.l0_reader.get()
    }

    /// Keeps `reader` with this placement, which must be at L0; returns the
    /// one kept (another thread's, when it was first).
    pub(crate) fn pin_reader(&self, reader: crate::sst::SstReader) -> &crate::sst::SstReader {
        debug_assert!(self.in_l0, "only L0's entries keep their readers");
        self.l0_reader.get_or_init(|| reader)
    }

    /// Returns the description.
    pub fn desc(&self) -> &FileDesc {
        &self.file.desc
    }

    /// Returns the file number.
    pub fn number(&self) -> FileNumber {
        self.file.desc.number
    }

    /// Returns the file size in bytes.
    pub fn size(&self) -> u64 {
        self.file.desc.size
    }

    /// Returns the smallest internal key.
    pub fn smallest(&self) -> &InternalKey {
        &self.file.desc.smallest
    }

    /// Returns the largest internal key.
    pub fn largest(&self) -> &InternalKey {
        &self.file.desc.largest
    }

    /// Records that an installed edit removed the file: its last drop will
    /// queue it. Called by the installer only, after the new version (which
    /// no longer holds the file) is published.
    pub fn mark_obsolete(&self) {
        self.file.obsolete.store(true, Ordering::Release);
    }

    /// Returns true once an installed edit has removed the file.
    pub fn is_obsolete(&self) -> bool {
        self.file.obsolete.load(Ordering::Acquire)
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        // The deleter closes the file (`TableCache::evict`) before it
        // removes it; a reader kept for L0 went with its placement, which
        // held this file.
        if self.obsolete.load(Ordering::Acquire) {
            self.queue.send(ObsoleteFile::Table(self.desc.number));
        }
    }
}
