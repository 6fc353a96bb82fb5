//! Writing a manifest and switching `CURRENT` to it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_fs::FileSystem;
use strata_log::record::{Appender, PreparedRecord, END_MARKER};

use super::payload::{encode_checked_edits, encode_records, validate};
use super::{
    manifest_file_name, ManifestRecord, CURRENT_FILE_NAME, CURRENT_TMP_FILE_NAME,
    MANIFEST_FILE_KIND, MANIFEST_FORMAT,
};
use crate::version::VersionEdit;
use crate::{Error, Result};

/// Manifest records at least this large are LZ4-compressed when that saves
/// an eighth (a snapshot of many files is).
const COMPRESS_MIN_BYTES: usize = 4 << 10;

/// Appends records to the manifest in use.
///
/// After a failed write or sync it refuses every later call: the engine must
/// stop installing versions rather than acknowledge one it may have lost.
#[derive(Debug)]
pub struct ManifestWriter {
    number: u64,
    path: PathBuf,
    appender: Appender,
}

impl ManifestWriter {
    /// Writes a new manifest file `number` whose first record holds
    /// `snapshot` (records that rebuild the whole current state), syncs it
    /// and the directory, then points `CURRENT` at it: writes `CURRENT.tmp`,
    /// syncs it, renames it over `CURRENT`, syncs the directory. Does not
    /// remove the old manifest (the caller does, after this returns).
    ///
    /// A crash at any point leaves `CURRENT` naming either the old manifest or
    /// the new one, both whole.
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        number: u64,
        snapshot: &[ManifestRecord],
    ) -> Result<ManifestWriter> {
        let payload = checked_payload(snapshot)?;
        let path = dir.join(manifest_file_name(number));
        let file = fs.create(&path).map_err(Error::io("create", &path))?;
        let written = (|| {
            let mut appender = Appender::create(
                file,
                &MANIFEST_FORMAT,
                MANIFEST_FILE_KIND,
                number,
                Some(COMPRESS_MIN_BYTES),
            )
            .map_err(Error::io("write header", &path))?;
            append_synced(&mut appender, &path, &payload)?;
            fs.sync_dir(dir).map_err(Error::io("sync dir", dir))?;
            Ok(appender)
        })();
        let appender = match written {
            Ok(a) => a,
            Err(e) => {
                // CURRENT does not name it: a file nothing will read.
                let _ = fs.remove(&path);
                return Err(e);
            }
        };
        set_current(&*fs, dir, number)?;
        Ok(ManifestWriter {
            number,
            path,
            appender,
        })
    }

    /// Appends `records` as one record (atomic: all or none after a crash)
    /// and syncs before returning. Records the decoder would refuse (a bad
    /// column-family name) are refused before anything is written.
    pub fn append(&mut self, records: &[ManifestRecord]) -> Result<()> {
        let payload = checked_payload(records)?;
        append_synced(&mut self.appender, &self.path, &payload)
    }

    /// `edits` as the one record [`Self::stage_prepared`] stages: encoded,
    /// checked as the decoder would check them, compressed when that pays
    /// and checksummed. An install prepares its record before it takes its
    /// lock, which then holds none of that work.
    pub fn prepare_edits(edits: &[VersionEdit]) -> Result<PreparedRecord> {
        let payload = encode_checked_edits(edits).map_err(Error::InvalidArgument)?;
        PreparedRecord::new(&payload, Some(COMPRESS_MIN_BYTES))
            .map_err(|e| Error::InvalidArgument(format!("a manifest record: {e}")))
    }

    /// Stages `record` (its place in the file fixed, not written) and
    /// returns where the records end: whoever makes them durable writes them
    /// first ([`Self::take_unwritten`]), so the caller, an install under its
    /// lock (`read_state.rs`), makes no system call. A sync of
    /// [`Self::file`] begun after they were written makes them durable
    /// ([`Self::note_synced`] then records it).
    pub fn stage_prepared(&mut self, record: &PreparedRecord) -> Result<u64> {
        self.appender
            .stage_prepared(record)
            .map_err(|e| write_error(&self.path, e))?;
        Ok(self.appender.offset())
    }

    /// The staged records and the offset to write them at, handed to a
    /// caller that writes them outside the writer's lock; they count as
    /// written. Only one caller at a time may hold such bytes unwritten,
    /// and nothing else may be written meanwhile (the engine's
    /// `manifest_sync` lock): a later write would land past a hole. A
    /// failed write must [`Self::poison`] the writer.
    pub fn take_unwritten(&mut self) -> Option<(u64, Vec<u8>)> {
        self.appender.take_staged()
    }

    /// Where the records appended so far end.
    pub fn appended_end(&self) -> u64 {
        self.appender.offset()
    }

    /// Every record before this offset is durable.
    pub fn synced_end(&self) -> u64 {
        self.appender.synced_end()
    }

    /// The manifest file, for a sync made without the writer.
    pub fn file(&self) -> &Arc<dyn strata_fs::File> {
        self.appender.file()
    }

    /// Records that a sync of [`Self::file`], begun when the records ended
    /// at `end`, succeeded.
    pub fn note_synced(&mut self, end: u64) {
        self.appender.note_synced(end);
    }

    /// Refuses every later call: a sync made without the writer failed.
    pub fn poison(&mut self) {
        self.appender.poison();
    }

    /// Whether a write or sync failed: every later call is refused, and the
    /// engine must stop installing versions.
    pub fn failed(&self) -> bool {
        self.appender.failed()
    }

    /// Appends an empty record (`count = 0`) and does not sync it: its
    /// `synced_end` vouches that everything appended before it is durable,
    /// so that damage there reads as corruption rather than as a torn tail.
    /// Unsynced because what it vouches for is already durable: a power cut
    /// that loses or tears it leaves the synced records whole and last, and
    /// the next `append`'s sync makes it durable anyway.
    pub fn vouch(&mut self) -> Result<()> {
        let payload = encode_records(&[]);
        self.appender
            .append(&[&payload])
            .map_err(Error::io("write", &self.path))
    }

    /// Stages the marker [`Self::vouch`] writes, for a caller that writes
    /// it outside the writer's lock ([`Self::take_unwritten`]).
    pub fn stage_vouch(&mut self) -> Result<()> {
        let payload = encode_records(&[]);
        self.appender
            .stage(&[&payload])
            .map_err(Error::io("write", &self.path))
    }

    /// The manifest's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The manifest's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the file so far: header, records and end marker.
    pub fn bytes(&self) -> u64 {
        self.appender.offset() + END_MARKER.len() as u64
    }
}

fn checked_payload(records: &[ManifestRecord]) -> Result<Vec<u8>> {
    for record in records {
        validate(record).map_err(Error::InvalidArgument)?;
    }
    Ok(encode_records(records))
}

fn append_synced(appender: &mut Appender, path: &Path, payload: &[u8]) -> Result<()> {
    append_record(appender, path, payload)?;
    appender.sync().map_err(Error::io("sync", path))
}

fn append_record(appender: &mut Appender, path: &Path, payload: &[u8]) -> Result<()> {
    appender
        .append(&[payload])
        .map_err(|e| write_error(path, e))
}

/// An appender's refusal of a record is the caller's argument; any other
/// error is the file's.
fn write_error(path: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::InvalidInput {
        Error::InvalidArgument(format!("{}: {e}", path.display()))
    } else {
        Error::io("write", path)(e)
    }
}

/// Points `CURRENT` at manifest `number`: a synced `CURRENT.tmp` renamed over
/// it, then a directory sync, so that `CURRENT` is at every moment the old
/// content or the new, whole.
fn set_current(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
    let tmp = dir.join(CURRENT_TMP_FILE_NAME);
    let current = dir.join(CURRENT_FILE_NAME);
    // A crash may have left one behind; nothing reads it.
    if fs.exists(&tmp) {
        fs.remove(&tmp).map_err(Error::io("remove", &tmp))?;
    }
    let content = format!("{}\n", manifest_file_name(number));
    let written = fs
        .create(&tmp)
        .and_then(|f| {
            f.write_at(0, content.as_bytes())?;
            f.sync_all()
        })
        .map_err(Error::io("write", &tmp));
    if let Err(e) = written {
        let _ = fs.remove(&tmp);
        return Err(e);
    }
    fs.rename(&tmp, &current)
        .map_err(Error::io("rename", &tmp))?;
    fs.sync_dir(dir).map_err(Error::io("sync dir", dir))
}
