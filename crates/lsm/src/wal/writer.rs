//! Writing one WAL file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_fs::{FileSystem, WritebackPacer};
use strata_log::record::{Appender, END_MARKER};

use super::keeper::Writeback;
use super::{wal_file_name, WAL_COMPRESS_MIN_BYTES, WAL_FILE_KIND, WAL_FORMAT};
use crate::{Error, Result};

/// Appends write-batch payloads to one WAL file.
///
/// After a failed write or sync it refuses every later call: what the file
/// holds past its last sync is unknown, and the engine must stop writing
/// rather than acknowledge more.
#[derive(Debug)]
pub struct WalWriter {
    number: u64,
    path: PathBuf,
    appender: Appender,
    writeback: WritebackPacer,
    /// The file is a recycled one whose old bytes past the appends have
    /// not been trimmed yet (`trim_recycled_tail`).
    recycled_tail: bool,
}

impl WalWriter {
    /// Creates WAL file `number` in `dir` with its header and end marker;
    /// syncs the file and the directory. Refuses a file that already exists.
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, number: u64) -> Result<WalWriter> {
        let path = dir.join(wal_file_name(number));
        let file = fs.create(&path).map_err(Error::io("create", &path))?;
        let made = Appender::create(
            file,
            &WAL_FORMAT,
            WAL_FILE_KIND,
            number,
            Some(WAL_COMPRESS_MIN_BYTES),
        )
        .map_err(Error::io("write header", &path))
        .and_then(|appender| {
            fs.sync_dir(dir).map_err(Error::io("sync dir", dir))?;
            Ok(appender)
        });
        match made {
            Ok(appender) => Ok(WalWriter::new(number, path, appender, false)),
            Err(e) => {
                // Leave no half-made file to be taken for a log. Whether the
                // removal is durable does not matter: replay takes a last file
                // without a readable header for an unfinished creation.
                let _ = fs.remove(&path);
                Err(e)
            }
        }
    }

    /// Makes WAL file `number` in `dir` out of `pool`, an old WAL file no
    /// memtable needs: writes the new header and end marker over its start
    /// and syncs them, then renames it into place and syncs the directory.
    /// Its old records stay past the end marker; each names the old file's
    /// id, so replay reads the first of them as the clean end
    /// (`docs/format/record_file.md`). The name comes last, so a file under
    /// a WAL name always shows its own header, and a crash before the
    /// rename leaves only the pool file, which the next open removes.
    ///
    /// Writing over blocks (and cached pages) an old file already holds
    /// spares the file system the allocation and the page cache the fresh
    /// pages a new file needs (`docs/lsm.md`, "WAL files are recycled").
    /// On failure nothing is under the new name, and the caller removes
    /// the pool file (its start may be half rewritten).
    pub fn recycle(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        pool: &Path,
        number: u64,
    ) -> Result<WalWriter> {
        let path = dir.join(wal_file_name(number));
        let file = fs.open(pool, true).map_err(Error::io("open", pool))?;
        let appender = Appender::create(
            file,
            &WAL_FORMAT,
            WAL_FILE_KIND,
            number,
            Some(WAL_COMPRESS_MIN_BYTES),
        )
        .map_err(Error::io("write header", pool))?;
        fs.rename(pool, &path).map_err(Error::io("rename", pool))?;
        if let Err(e) = fs.sync_dir(dir) {
            let _ = fs.remove(&path);
            return Err(Error::io("sync dir", dir)(e));
        }
        Ok(WalWriter::new(number, path, appender, true))
    }

    fn new(number: u64, path: PathBuf, appender: Appender, recycled_tail: bool) -> WalWriter {
        WalWriter {
            number,
            path,
            writeback: WritebackPacer::new(crate::WRITEBACK_BYTES, appender.offset()),
            appender,
            recycled_tail,
        }
    }

    /// Whether the file is recycled and its old bytes past the appends are
    /// still there.
    pub(crate) fn has_recycled_tail(&self) -> bool {
        self.recycled_tail
    }

    /// Gives back a recycled file's old bytes more than `keep_ahead` past
    /// its appends (and end marker), once: called while nothing appends
    /// (under the WAL lock for the file in use). A hint: a failed truncate
    /// only keeps the space.
    pub(crate) fn trim_recycled_tail(&mut self, keep_ahead: u64) {
        if self.recycled_tail {
            self.cut_past(keep_ahead);
        }
    }

    /// Cuts the file at the end of its records (once no more appends
    /// come: at a clean close). A hint, like the trim.
    pub(crate) fn cut_at_end(&mut self) {
        self.cut_past(0);
    }

    /// Truncates the file to `keep_ahead` bytes past its end marker if it
    /// is longer; its old bytes, if any, are gone either way.
    fn cut_past(&mut self, keep_ahead: u64) {
        self.recycled_tail = false;
        let file = self.appender.file();
        let keep = self.bytes() + keep_ahead;
        if file.len().is_ok_and(|len| len > keep) {
            let _ = file.truncate(keep);
        }
    }

    /// Reserves the file's blocks up to `len` bytes (zeros past the
    /// records, which replay reads as the end), so that appends write into
    /// allocated blocks: on ext4 a growing file's appends allocate and
    /// journal in the write call, which then waits on journal commits. A
    /// hint: its failure is left to the appends to meet.
    pub(crate) fn preallocate(&self, len: u64) {
        let _ = self.appender.file().allocate(len);
    }

    /// The file's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record per payload, all in one write followed by the end
    /// marker; no sync. Payloads over 1 GiB, or more than the file can take
    /// (4 GiB in all), are refused before anything is written.
    pub fn append(&mut self, payloads: &[&[u8]]) -> Result<()> {
        if let Some(w) = self.append_deferring_writeback(payloads)? {
            let _ = w.file.start_writeback(w.offset, w.len);
        }
        Ok(())
    }

    /// As [`WalWriter::append`], but the writeback hint due (every
    /// `WRITEBACK_BYTES`, so that the file's sync is short) is returned for
    /// the caller to start elsewhere instead of started here: the hint
    /// blocks while the device queue is full.
    pub(crate) fn append_deferring_writeback(
        &mut self,
        payloads: &[&[u8]],
    ) -> Result<Option<Writeback>> {
        if payloads.is_empty() {
            return Ok(None);
        }
        self.appender.append(payloads).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidInput {
                Error::InvalidArgument(format!("{}: {e}", self.path.display()))
            } else {
                Error::io("write", &self.path)(e)
            }
        })?;
        Ok(self
            .writeback
            .due(self.appender.offset())
            .map(|(offset, len)| Writeback {
                file: self.appender.file().clone(),
                offset,
                len,
            }))
    }

    /// Syncs, appends an empty batch as a marker, and syncs again: the
    /// marker's `synced_end` vouches for every record before it, so damage
    /// in them found at the next open is corruption, never a torn tail.
    pub fn close_durably(&mut self) -> Result<()> {
        self.sync()?;
        self.append(&[crate::batch::WriteBatch::new().payload()])?;
        self.sync()
    }

    /// Makes every appended byte durable (`sync_data`) and advances
    /// `synced_end`, which every later record carries.
    pub fn sync(&mut self) -> Result<()> {
        self.appender.sync().map_err(Error::io("sync", &self.path))
    }

    /// Bytes in the file so far: header, records and end marker.
    pub fn bytes(&self) -> u64 {
        self.appender.offset() + END_MARKER.len() as u64
    }
}
