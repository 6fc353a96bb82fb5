//! The files of the two queues: creating (or recycling) them, appending to the
//! active one, sealing, reading records back, and removing purged files.
//!
//! Invariants:
//! - Each queue's files have consecutive sequence numbers; only the highest
//!   (the active file) is ever written, and only at `ActiveFile::offset`.
//! - A file is synced before the next file of its queue receives a byte, so that
//!   what survives a crash is a prefix of what was written.
//! - A new file's header is synced and its directory entry synced before any
//!   record is written into it.
//!
//! Concurrency: the append queue's active file is guarded by `append` (held by
//! the group-commit leader); the rewrite queue's by `rewrite` (held by purge).
//! `files` maps every live file to a shared read handle. The order in which
//! these locks nest is listed once, in `engine/mod.rs`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_codec::crc32c;
use strata_fs::{File, FileSystem, WritebackPacer};
use strata_log::record::verify_payload;

use crate::cache_drop::{DropAhead, DropBehind};
use crate::format::{
    encode_file_header, FileId, HeaderCheck, Queue, RecordHeader, FILE_HEADER_LEN,
    RECORD_HEADER_LEN, RECYCLE_PREFIX,
};
use crate::index::RecordLoc;
use crate::metrics::Metrics;
use crate::section::{SectionBuilder, Trailer, TRAILER_LEN};
use crate::{Config, Error, Result};

/// Appends below this size (on average) leave a recycled file's cache in
/// place. The page cache builds folios about as large as the writes that
/// filled them, and an append into a clean cached folio dirties, and writes
/// back, all of it: after large appends the old folios are large, so the
/// cache is dropped, just ahead of the appends (`cache_drop.rs`; device
/// write amp on workload B-4 0.67 to 0.53, on A-64 0.69 to 0.54). After
/// small ones the folios are small and keeping the cache is cheaper than
/// faulting fresh pages in (A-1, ~10 KiB appends: 1.03x to 1.44x
/// raft-engine's writes/s, write amp 0.77 to 0.79). At 32 KiB keeping
/// it already cost write amp 0.61 to 0.73.
pub(crate) const SMALL_APPEND_BYTES: u64 = 16 << 10;

/// The page size the page cache works in.
pub(crate) const PAGE_BYTES: u64 = 4096;

/// Zeros to fill a page with.
pub(crate) static ZEROS: [u8; PAGE_BYTES as usize] = [0; PAGE_BYTES as usize];

/// What a new file starts with: its header, an end marker and, in a
/// preallocated file, zeros to the end of the first page. Written whole, the
/// page needs no read from the disk (a recycled file's cache was dropped),
/// and stays cached for the first append, which writes the rest of it.
pub(crate) fn file_head(id: FileId, config: &Config) -> Vec<u8> {
    let mut head = encode_file_header(id).to_vec();
    head.extend_from_slice(&crate::format::END_MARKER);
    if config.preallocate && config.target_file_size_bytes >= PAGE_BYTES {
        head.resize(PAGE_BYTES as usize, 0);
    }
    head
}

/// The file a queue is writing.
#[derive(Debug)]
pub(crate) struct ActiveFile {
    pub id: FileId,
    pub file: Arc<dyn File>,
    /// Where the next record goes.
    pub offset: u64,
    /// Every byte before this offset is durable: the end of the data at the
    /// last sync. Written into each record's header (`synced_end`).
    pub synced_end: u64,
    /// The index section being collected for when the file is sealed. Its
    /// own lock, not the active file's: a group's records are added by the
    /// group's index update, after the append lock is released (a rotation
    /// waits for that update before it seals the file).
    pub section: Arc<Mutex<SectionBuilder>>,
    /// Where writeback of unsynced appends was last started.
    pub writeback: WritebackPacer,
    /// A recycled file's old cache still to drop, ahead of the appends.
    pub drop_ahead: Option<DropAhead>,
    /// How far its synced pages have been dropped, behind the appends.
    pub drop_behind: DropBehind,
}

/// Unsynced appends ask the OS to write back every this many bytes, so that
/// the sync that seals the file finds little left to write: without it a
/// file filled at hundreds of MB/s without syncs held all of it dirty, and
/// the rotation's sealing sync wrote it out on the leader's path while every
/// writer waited.
///
/// Why 256 KiB: a hint's pages go out as one request and complete together,
/// in the block softirq of the CPU that takes the disk's interrupts (58 us
/// at its median for a 512 KiB hint's 128 pages); a writer running there
/// waits it out. Traced (one writer, 4 KiB batches, no sync): the 4,326
/// writes over 60 us in 10 s held 4,074 of the disk's interrupts. At 256 KiB
/// that writer's p99.9 was 25-48 us against 61-76 at 512 KiB, with the same
/// writes/s; smaller hints cost the cells with larger or concurrent appends
/// more calls and wakeups than they save, larger ones make each completion
/// long (`docs/raftlog.md`, "Write path").
pub(crate) const WRITEBACK_BYTES: u64 = 256 << 10;

impl ActiveFile {
    /// A file holding only its header and an end marker, both synced.
    pub fn empty(id: FileId, file: Arc<dyn File>) -> ActiveFile {
        ActiveFile {
            id,
            file,
            offset: FILE_HEADER_LEN as u64,
            synced_end: FILE_HEADER_LEN as u64,
            section: Arc::default(),
            writeback: WritebackPacer::new(WRITEBACK_BYTES, FILE_HEADER_LEN as u64),
            drop_ahead: None,
            drop_behind: DropBehind::default(),
        }
    }

    /// Writes the file's index section after the end marker and the trailer at
    /// the end of the file; the caller's sealing sync makes them durable. Best
    /// effort: a file without them is scanned by recovery, so a failure here
    /// (ENOSPC, say) must not stop the rotation.
    pub fn write_index_section(&self) -> std::io::Result<()> {
        self.write_index_section_paced(&SectionPace::NONE)
    }

    /// [`Self::write_index_section`] at `pace`, the trailer last.
    pub fn write_index_section_paced(&self, pace: &SectionPace) -> std::io::Result<()> {
        // Here, where every section is written, so that a test pausing it
        // catches whichever thread writes one.
        fail::fail_point!("raftlog::write_index_section");
        let mut bytes = self.section.lock().encode_with(self.offset, |n| {
            if n > 0 && n % pace.groups == 0 {
                std::thread::sleep(pace.pause);
            }
        });
        let section_len = u32::try_from(bytes.len())
            .map_err(|_| std::io::Error::other("index section over 4 GiB"))?;
        let section_offset = self.offset + RECORD_HEADER_LEN as u64;
        let section_end = section_offset + section_len as u64;
        let trailer = Trailer {
            file_id: self.id.to_u64(),
            section_offset,
            section_len,
            section_crc: crc32c(&bytes),
        }
        .encode();
        // The trailer ends the file, preallocated or not.
        let trailer_at = (self.file.len()?)
            .saturating_sub(TRAILER_LEN as u64)
            .max(section_end);
        let write = |at: u64, bytes: &[u8]| -> std::io::Result<()> {
            let mut offset = at;
            for piece in bytes.chunks(pace.piece_bytes) {
                self.file.write_at(offset, piece)?;
                offset += piece.len() as u64;
                if pace.piece_bytes < bytes.len() {
                    // A hint: an error stays with the file, and its sync reports it.
                    let _ = self
                        .file
                        .start_writeback(offset - piece.len() as u64, piece.len() as u64);
                    std::thread::sleep(pace.pause);
                }
            }
            Ok(())
        };
        if trailer_at == section_end {
            bytes.extend_from_slice(&trailer);
            write(section_offset, &bytes)
        } else {
            write(section_offset, &bytes)?;
            write(trailer_at, &trailer)
        }
    }
}

/// How gently an index section is encoded and written: a pause after every
/// `groups` groups encoded and after every `piece_bytes` written (each
/// piece's writeback started before it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SectionPace {
    pub groups: usize,
    pub piece_bytes: usize,
    pub pause: std::time::Duration,
}

impl SectionPace {
    /// At once: no pause.
    pub const NONE: SectionPace = SectionPace {
        groups: usize::MAX,
        piece_bytes: usize::MAX,
        pause: std::time::Duration::ZERO,
    };
}

#[derive(Debug)]
pub(crate) struct Pipe {
    pub fs: Arc<dyn FileSystem>,
    pub dir: PathBuf,
    pub config: Config,
    pub files: RwLock<BTreeMap<FileId, Arc<dyn File>>>,
    pub append: Mutex<ActiveFile>,
    pub rewrite: Mutex<Option<ActiveFile>>,
    /// Names of purged files waiting for reuse (shared with the preparer).
    pub recycled: Arc<Mutex<Vec<String>>>,
    /// Sequence number the next rewrite file takes.
    pub next_rewrite_seq: Mutex<u64>,
}

impl Pipe {
    pub fn path(&self, id: FileId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    /// Makes a new empty file for `id`: a recycled one renamed if there is one,
    /// else a fresh preallocated one. Its header and name are durable on return.
    pub fn new_file(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        config: &Config,
        recycled: &Mutex<Vec<String>>,
        metrics: &Metrics,
        id: FileId,
    ) -> Result<ActiveFile> {
        let path = dir.join(id.file_name());
        fail::fail_point!("raftlog::rotate::create", |_| Err(Error::Io {
            op: "create",
            path: path.clone(),
            source: std::io::Error::other("fail point"),
        }));
        let reused = recycled.lock().pop();
        let mut drop_ahead = None;
        let file = match reused {
            Some(name) => {
                let from = dir.join(&name);
                // The name must be durable before the new header is: the
                // purge that kept this file for reuse did not sync the
                // directory, and a crash that lost both renames would
                // otherwise leave the old name on the new header.
                match fs.rename(&from, &path) {
                    Ok(()) => {
                        if let Err(e) = fs.sync_dir(dir) {
                            let _ = fs.remove(&path);
                            return Err(Error::io("sync dir", dir)(e));
                        }
                        Metrics::add(&metrics.fsyncs, 1);
                        Metrics::add(&metrics.files_recycled, 1);
                        match fs.open(&path, true) {
                            Ok(f) => {
                                if metrics.appends_are_large() {
                                    // Its writer drops it as it goes.
                                    let len = f.len().unwrap_or(0);
                                    drop_ahead = Some(DropAhead::new(0, len));
                                }
                                f
                            }
                            Err(e) => {
                                let _ = fs.remove(&path);
                                return Err(Error::io("open", &path)(e));
                            }
                        }
                    }
                    Err(e) => {
                        // Keep the name for a later try; make a fresh file now.
                        recycled.lock().push(name);
                        return Err(Error::io("rename", &from)(e));
                    }
                }
            }
            None => {
                let file = fs.create(&path).map_err(Error::io("create", &path))?;
                if config.preallocate {
                    if let Err(e) = file.allocate(config.target_file_size_bytes) {
                        // Leave no half-made file behind to be mistaken for a log file.
                        let _ = fs.remove(&path);
                        return Err(Error::io("allocate", &path)(e));
                    }
                }
                file
            }
        };
        let head = file_head(id, config);
        let finish = || -> Result<()> {
            file.write_at(0, &head)
                .map_err(Error::io("write header", &path))?;
            file.sync_all().map_err(Error::io("sync", &path))?;
            fs.sync_dir(dir).map_err(Error::io("sync dir", dir))
        };
        if let Err(e) = finish() {
            // Leave no half-made file behind: the next rotation must be able to
            // create it again, and recovery must not find it. Whether the
            // removal is durable does not matter: a blank or stale header in a
            // queue's last file is taken for an unfinished creation.
            let _ = fs.remove(&path);
            return Err(e);
        }
        Metrics::add(&metrics.fsyncs, 2);
        let mut active = ActiveFile::empty(id, file);
        active.drop_ahead = drop_ahead;
        Ok(active)
    }

    /// Writes `active`'s index section and syncs the file if `sync` or if
    /// the section could not be written (a failing file must not pass for
    /// sealed); returns whether it synced.
    pub fn seal(&self, active: &ActiveFile, sync: bool, metrics: &Metrics) -> Result<bool> {
        fail::fail_point!("raftlog::rotate::seal", |_| Err(Error::Io {
            op: "sync",
            path: self.path(active.id),
            source: std::io::Error::other("fail point"),
        }));
        let written = active.write_index_section().is_ok();
        if written {
            Metrics::add(&metrics.index_sections_written, 1);
        }
        let sync = sync || !written;
        if sync {
            active
                .file
                .sync_data()
                .map_err(Error::io("sync", self.path(active.id)))?;
            Metrics::add(&metrics.fsyncs, 1);
        }
        Ok(sync)
    }

    /// Makes `new` the queue's active file in place of the sealed `active`,
    /// which it returns.
    pub fn install_next(
        &self,
        active: &mut ActiveFile,
        new: ActiveFile,
        metrics: &Metrics,
    ) -> ActiveFile {
        // The next file meets about as many groups as this one: a map grown
        // by doubling stalled the leader 2-6 ms at each rehash at 100,000
        // groups (twice a file, traced on M-100K).
        let groups = active.section.lock().group_count();
        new.section.lock().reserve_groups(groups);
        self.files.write().insert(new.id, new.file.clone());
        Metrics::add(&metrics.files_rotated, 1);
        std::mem::replace(active, new)
    }

    /// Reads exactly the record at `loc` (no byte before or after it), checks
    /// its header and its whole payload against the payload checksum, and
    /// returns the payload without copying it when it is stored uncompressed.
    pub fn read_payload(&self, loc: RecordLoc) -> Result<Payload> {
        let id = loc.file.id();
        let file = self
            .files
            .read()
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::Io {
                op: "read",
                path: self.path(id),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "file was purged"),
            })?;
        let mut buf = vec![0u8; loc.len as usize];
        file.read_exact_at(loc.offset as u64, &mut buf)
            .map_err(Error::io("read", self.path(id)))?;
        decode_record(buf, id.to_u64()).map_err(|reason| Error::Corruption {
            path: self.path(id),
            offset: loc.offset as u64,
            reason,
        })
    }

    /// Removes a purged file, keeping it for reuse if `reusable` and the pool
    /// has room.
    pub fn retire(&self, id: FileId, reusable: bool) -> Result<()> {
        let path = self.path(id);
        {
            // `recycled` comes after `files` in the lock order: release it
            // before `files` is taken below.
            let mut recycled = self.recycled.lock();
            fail::fail_point!("raftlog::purge::retire");
            if reusable
                && id.queue == Queue::Append
                && recycled.len() < self.config.recycle_files_cap()
            {
                let name = format!("{RECYCLE_PREFIX}{}", id.file_name());
                self.fs
                    .rename(&path, &self.dir.join(&name))
                    .map_err(Error::io("rename", &path))?;
                recycled.push(name);
            } else {
                self.fs.remove(&path).map_err(Error::io("remove", &path))?;
            }
        }
        self.files.write().remove(&id);
        Ok(())
    }
}

/// A record's checked payload. An uncompressed payload stays where it was
/// read, behind the record header, so a reader that takes one entry out of it
/// copies only that entry.
#[derive(Debug)]
pub(crate) struct Payload {
    buf: Vec<u8>,
    start: usize,
}

impl std::ops::Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

/// Checks a whole record (header and stored payload) of file `file_id` and returns
/// its payload, decompressed.
pub(crate) fn decode_record(buf: Vec<u8>, file_id: u64) -> std::result::Result<Payload, String> {
    let head: &[u8; RECORD_HEADER_LEN] = buf
        .get(..RECORD_HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or("record shorter than its header")?;
    let h = match RecordHeader::check(head, file_id) {
        HeaderCheck::Valid(h) => h,
        HeaderCheck::Stale => return Err("record belongs to another file".into()),
        HeaderCheck::Zeros => return Err("record is zeros".into()),
        HeaderCheck::Invalid(why) => return Err(why.into()),
    };
    let stored = &buf[RECORD_HEADER_LEN..];
    if stored.len() != h.stored_len as usize {
        return Err(format!(
            "record length {} disagrees with header {}",
            stored.len(),
            h.stored_len
        ));
    }
    if let Cow::Owned(raw) = verify_payload(&h, stored)? {
        return Ok(Payload { buf: raw, start: 0 });
    }
    // Uncompressed: the payload is the buffer past the header.
    Ok(Payload {
        buf,
        start: RECORD_HEADER_LEN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Queue;
    use crate::log_batch::Item;
    use crate::section::{decode_section, Trailer, TRAILER_LEN};
    use strata_fs::MemFs;

    /// An active file of `groups` groups, one state put each, over records
    /// of 100 bytes.
    fn file_with_groups(fs: &MemFs, name: &str, groups: u64) -> ActiveFile {
        let file = fs.create(Path::new(name)).unwrap();
        let id = FileId {
            queue: Queue::Append,
            seq: 1,
        };
        let mut active = ActiveFile::empty(id, file);
        for g in 1..=groups {
            let value = g.to_le_bytes();
            active.section.lock().add_record(
                100,
                &[Item::Put {
                    group: g,
                    key: b"state",
                    value: &value,
                }],
            );
            active.offset += 100;
        }
        active
    }

    /// The preparer encodes and writes a section in pieces with pauses
    /// between (`SectionPace`): the file ends up byte for byte as with the
    /// section written at once, the trailer last.
    #[test]
    fn a_paced_section_is_the_bytes_of_one_written_at_once() {
        let fs = MemFs::new();
        let at_once = file_with_groups(&fs, "/a", 50);
        let paced = file_with_groups(&fs, "/b", 50);
        at_once.write_index_section().unwrap();
        let pace = SectionPace {
            groups: 7,
            piece_bytes: 100,
            pause: std::time::Duration::from_micros(10),
        };
        paced.write_index_section_paced(&pace).unwrap();
        let read = |f: &ActiveFile| {
            let len = f.file.len().unwrap() as usize;
            let mut buf = vec![0; len];
            f.file.read_at(0, &mut buf).unwrap();
            buf
        };
        let (a, b) = (read(&at_once), read(&paced));
        assert_eq!(a, b);
        // More than one piece, and a section that decodes.
        let trailer = Trailer::decode(&b[b.len() - TRAILER_LEN..], at_once.id.to_u64()).unwrap();
        assert!(trailer.section_len as usize > 3 * pace.piece_bytes);
        let start = trailer.section_offset as usize;
        let section = decode_section(&b[start..start + trailer.section_len as usize]).unwrap();
        assert_eq!(section.groups.len(), 50);
    }
}
