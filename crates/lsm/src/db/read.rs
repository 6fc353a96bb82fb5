//! Point reads. A reader loads the family's read state and the seqno it
//! reads at together (`DbInner::read_view`): its snapshot's, or the visible
//! seqno taken while that state was current, so that the state holds every
//! write at or below it and no version the read needs was dropped. No lock
//! is taken. A separated value is read from the blob file of the same read
//! state's version (`blob.rs`).

use std::sync::Arc;

use super::blob::BlobSource;
use super::cf::ColumnFamily;
use super::options::ReadOptions;
use super::{Db, DbInner};
use crate::batch::KEY_BYTES_MAX;
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};
use crate::read_state::ReadState;
use crate::version::FileMeta;

impl Db {
    /// The value of `key` in `cf`, at the snapshot of `options` or the
    /// latest write. `None` when absent or deleted.
    pub fn get(
        &self,
        options: &ReadOptions,
        cf: &ColumnFamily,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        self.point_read(options, cf, key, true)
    }

    /// Whether `key` is present in `cf` (at the snapshot of `options` or the
    /// latest write), without reading its value from a blob file.
    pub fn key_exists(&self, options: &ReadOptions, cf: &ColumnFamily, key: &[u8]) -> Result<bool> {
        self.point_read(options, cf, key, false)
            .map(|v| v.is_some())
    }

    fn point_read(
        &self,
        options: &ReadOptions,
        cf: &ColumnFamily,
        key: &[u8],
        fetch_blob: bool,
    ) -> Result<Option<Vec<u8>>> {
        let inner = self.inner();
        inner.check_open()?;
        let state = cf.live()?;
        check_key(key)?;
        let (rs, seqno) = inner.read_view(&state.installer, options);
        inner.lookup(&rs, key, seqno, fetch_blob)
    }

    /// The values of `keys` in `cf`, in order, all at one sequence number.
    pub fn multi_get(
        &self,
        options: &ReadOptions,
        cf: &ColumnFamily,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let inner = self.inner();
        inner.check_open()?;
        let state = cf.live()?;
        for key in keys {
            check_key(key)?;
        }
        // Held across many lookups (and blob reads): an `Arc`, not a guard.
        let (rs, seqno) = inner.read_view(&state.installer, options);
        let rs = arc_swap::Guard::into_inner(rs);
        keys.iter()
            .map(|key| inner.get_at(&rs, key, seqno))
            .collect()
    }
}

pub(super) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > KEY_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "key of {} bytes: at most {KEY_BYTES_MAX}",
            key.len()
        )));
    }
    Ok(())
}

impl DbInner {
    /// The state a read goes through and the seqno it reads at: its
    /// snapshot's, or the visible one while that state was current
    /// (`Installer::load_with_visible`).
    pub(super) fn read_view(
        &self,
        installer: &crate::read_state::Installer,
        options: &ReadOptions,
    ) -> (arc_swap::Guard<Arc<ReadState>>, SeqNo) {
        match &options.snapshot {
            Some(s) => (installer.load(), s.seqno()),
            None => installer.load_with_visible(|| self.seq.visible()),
        }
    }

    pub(super) fn open_table(&self, file: &FileMeta) -> Result<crate::sst::SstReader> {
        self.table_access.open(file)
    }

    /// Opens a job's new SST files into the table cache before the job
    /// installs them, as RocksDB does when it verifies a new table, so that
    /// the first reads of a new version do not pay for the open (a
    /// descriptor, the footer, index and filter blocks) on the read path. A
    /// file that fails to open here is left to the read that needs it, which
    /// reports the error. At most a quarter of the cache: the thousands of
    /// outputs of a large compaction would evict every file readers use.
    pub(super) fn warm_tables<'a>(
        &self,
        added: impl IntoIterator<Item = &'a crate::version::FileDesc>,
    ) {
        let files = &self.table_access;
        let budget = files.tables.capacity() / 4;
        for desc in added.into_iter().take(budget) {
            let _ = files.open_desc(desc);
        }
    }

    /// Where point reads find blob files (filling the block cache).
    fn blob_source(&self) -> BlobSource<'_> {
        BlobSource {
            fs: &*self.fs,
            dir: &self.dir,
            cache: self.cache.as_deref(),
        }
    }

    /// Asks the sources newest first: memtables, L0 newest first, then one
    /// file per level. A source's newest version at or below `seqno` wins
    /// unless a range tombstone of the same source is newer; a tombstone
    /// alone ends the search (older sources hold only older versions).
    fn get_at(&self, rs: &ReadState, key: &[u8], seqno: SeqNo) -> Result<Option<Vec<u8>>> {
        self.lookup(rs, key, seqno, true)
    }

    /// As `get_at`; a separated value is fetched only with `fetch_blob`
    /// (without it, its reference stands for it: presence is all it tells).
    fn lookup(
        &self,
        rs: &ReadState,
        key: &[u8],
        seqno: SeqNo,
        fetch_blob: bool,
    ) -> Result<Option<Vec<u8>>> {
        let found = |kind: ValueKind, value: Vec<u8>| match kind {
            ValueKind::Put => Ok(Some(value)),
            ValueKind::BlobIndex if !fetch_blob => Ok(Some(value)),
            ValueKind::BlobIndex => {
                let source = self.blob_source();
                let r = source.decode_ref(key, &value)?;
                source.value(&rs.version, key, &r).map(Some)
            }
            ValueKind::Delete | ValueKind::RangeDelete => Ok(None),
        };
        for mem in std::iter::once(&rs.active).chain(rs.immutables.iter()) {
            if let Some((kind, value)) = mem.get(key, seqno) {
                self.counters.add_memtable_hit();
                return found(kind, value);
            }
        }
        for (level, file) in rs.version.files_for_key(key) {
            let opened;
            let table = if level == 0 {
                self.table_access.open_l0(file)?
            } else {
                opened = self.open_table(file)?;
                &opened
            };
            let tombstone = table
                .range_tombstones()
                .iter()
                .filter(|t| t.seqno <= seqno && t.start.as_slice() <= key && key < t.end.as_slice())
                .map(|t| t.seqno)
                .max();
            match table.get_entry(key, seqno)? {
                Some((kind, s, value)) if tombstone.is_none_or(|t| t < s) => {
                    return found(kind, value);
                }
                _ if tombstone.is_some() => return Ok(None),
                _ => {}
            }
        }
        Ok(None)
    }
}

/// The handles that opening an SST file or a blob file takes, shared by
/// iterators behind one reference count: every count the readers share is a
/// cache line that each iterator's creation and drop takes from the other
/// cores; an iterator took seven (four for its files, three for its blob
/// reader) and now takes this one. The table cache lives only
/// here.
#[derive(Debug)]
pub(super) struct TableAccess {
    pub(super) tables: Arc<super::table_cache::TableCache>,
    pub(super) fs: Arc<dyn strata_fs::FileSystem>,
    pub(super) dir: Arc<std::path::Path>,
    pub(super) cache: Option<Arc<crate::cache::BlockCache>>,
}

impl TableAccess {
    /// The reader of an SST file of a version, from the open files or
    /// opened now.
    pub(super) fn open(&self, file: &FileMeta) -> Result<crate::sst::SstReader> {
        if let Some(reader) = file.pinned_reader() {
            return Ok(reader.clone());
        }
        self.open_desc(file.desc())
    }

    /// [`Self::open`] for a file of L0, whose reader then stays with the
    /// version's entry (`FileMeta::pin_reader`): every iterator and most
    /// point reads open every L0 file.
    pub(super) fn open_l0<'f>(&self, file: &'f FileMeta) -> Result<&'f crate::sst::SstReader> {
        if let Some(reader) = file.pinned_reader() {
            return Ok(reader);
        }
        let reader = self.open_desc(file.desc())?;
        Ok(file.pin_reader(reader))
    }

    /// [`Self::open`] for a file known by its description (a job's output,
    /// before any version holds it).
    pub(super) fn open_desc(
        &self,
        desc: &crate::version::FileDesc,
    ) -> Result<crate::sst::SstReader> {
        self.tables.get(desc.number, || {
            let path = self.dir.join(crate::compaction::sst_file_name(desc.number));
            // An ingested file's entries are stored at seqno 0 and read at the
            // seqno its version records (`docs/lsm.md`, "Ingestion"); every
            // other file reads as stored.
            crate::sst::SstReader::open_assigned(
                &*self.fs,
                &path,
                desc.number,
                self.cache.clone(),
                desc.largest_seqno,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use strata_fs::{FileSystem, MemFs};

    use crate::read_state::read_pause;
    use crate::{Db, Hooks, Options, ReadOptions, WriteOptions};

    /// At the pause between a read's seqno and its state: a newer write of
    /// `k` becomes visible and a flush drops the older version it hides.
    fn overwrite_and_flush_at_the_pause(db: &Db) {
        let db = db.clone();
        read_pause::once(move || {
            let cf = db.default_column_family();
            db.put(&WriteOptions::default(), &cf, b"k", b"new").unwrap();
            db.flush(&cf, true).unwrap();
        });
    }

    /// A read without a snapshot that took its seqno before a flush dropped
    /// the version it would see, and its state after, found nothing where
    /// the key had a value all along.
    #[test]
    fn a_read_racing_an_overwrite_and_a_flush_still_finds_the_key() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let db = Db::open_with(fs, "/db", Options::default(), Hooks::default()).unwrap();
        let cf = db.default_column_family();
        db.put(&WriteOptions::default(), &cf, b"k", b"old").unwrap();

        overwrite_and_flush_at_the_pause(&db);
        let got = db.get(&ReadOptions::default(), &cf, b"k").unwrap();
        assert_eq!(got.as_deref(), Some(&b"new"[..]), "point read");

        db.put(&WriteOptions::default(), &cf, b"k", b"old").unwrap();
        overwrite_and_flush_at_the_pause(&db);
        let mut it = db.iter(&ReadOptions::default(), &cf).unwrap();
        it.seek_to_first().unwrap();
        assert!(it.valid(), "iterator: the key vanished");
        assert_eq!((it.key(), it.value()), (&b"k"[..], &b"new"[..]));
    }
}
