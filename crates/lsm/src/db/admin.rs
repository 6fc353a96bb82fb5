//! Column families (create, drop, list), flush and manual compaction.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::cf::{check_name, CfState, ColumnFamily, GcCredit, DEFAULT_COLUMN_FAMILY_NAME};
use super::{Db, DbInner};
use crate::column_family::DEFAULT_COLUMN_FAMILY;
use crate::compaction;
use crate::error::{Error, Result};
use crate::manifest::ManifestRecord;
use crate::memtable::{Memtable, MemtableList};
use crate::read_state::{Installer, ReadState};
use crate::version::{Version, VersionEdit};

impl Db {
    /// The default column family.
    pub fn default_column_family(&self) -> ColumnFamily {
        self.column_family(DEFAULT_COLUMN_FAMILY_NAME)
            .expect("the default column family cannot be dropped")
    }

    /// The live column family named `name`.
    pub fn column_family(&self, name: &str) -> Option<ColumnFamily> {
        let cfs = self.inner().cfs.load();
        let id = cfs.by_name.get(name)?;
        cfs.get(*id).map(|state| ColumnFamily {
            state: state.clone(),
        })
    }

    /// The names of the live column families, sorted.
    pub fn column_families(&self) -> Vec<String> {
        self.inner().cfs.load().by_name.keys().cloned().collect()
    }

    /// Creates the column family `name` with the options `Options` gives
    /// that name (or the default family's). `InvalidArgument` if the name
    /// is empty, too long or taken.
    pub fn create_column_family(&self, name: &str) -> Result<ColumnFamily> {
        let inner = self.inner();
        inner.check_writable()?;
        check_name(name)?;
        let options = inner.options.column_family(name).clone();
        // Read before the manifest locks (`wal` comes first in the lock
        // order): a WAL switched since holds no write of the new family,
        // so replaying from an older number only reads more.
        let log_number = inner.wal.lock().number();
        // `append_manifest` writes at once: no staged edits may be out.
        let _one_write = inner.manifest_sync.lock();
        let mut m = inner.manifest.lock();
        let cfs = inner.cfs.load();
        if cfs.by_name.contains_key(name) {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} exists"
            )));
        }
        // Never an id this process used before: a dropped family's writes
        // may still be in the WAL, and replay would give them to a new
        // family under the same id. (Recovery starts every family on a
        // fresh WAL, so ids of earlier processes are safe to reuse.)
        // (`next_family_id` starts above every family recovered and only
        // grows; at `u32::MAX` it may name a live family, refused here.)
        let id = m.next_family_id;
        let Some(next_id) = id.checked_add(1) else {
            return Err(Error::InvalidArgument(
                "every column family id is taken".into(),
            ));
        };
        let version = Version::new(
            id,
            options.compaction.num_levels,
            inner.obsolete_queue.clone(),
        )?;
        let mut edit = VersionEdit {
            column_family: id,
            log_number: Some(log_number),
            ..VersionEdit::default()
        };
        inner.stamp(&mut edit);
        let mut b = crate::version::VersionBuilder::new(&Arc::new(version));
        b.apply(&edit)
            .map_err(|e| Error::InvalidArgument(format!("new column family: {e}")))?;
        let version = b.build().version;
        inner.append_manifest(
            &mut m,
            &[
                ManifestRecord::CreateColumnFamily {
                    id,
                    name: name.to_string(),
                },
                ManifestRecord::Edit(edit),
            ],
        )?;
        m.families.insert(id, (name.to_string(), version.clone()));
        m.next_family_id = next_id;
        let min_blob_size = super::cf::min_blob_size_cell(&options);
        let state = Arc::new(CfState {
            id,
            name: name.to_string(),
            options,
            installer: Installer::with_times(
                ReadState {
                    version,
                    active: Arc::new(Memtable::with_log_number(
                        inner.next_memtable.fetch_add(1, Ordering::Relaxed),
                        log_number,
                    )),
                    immutables: MemtableList::new(),
                    visible: inner.seq.visible(),
                },
                inner.counters.install_times.clone(),
            ),
            dropped: Default::default(),
            compaction_debt: Default::default(),
            min_blob_size,
            gc_credit: GcCredit::new(0, 0),
        });
        inner.cfs.store(Arc::new(cfs.with(state.clone())));
        Ok(ColumnFamily { state })
    }

    /// Drops `cf`: its handles fail from now on, and its files are deleted
    /// once no handle, iterator or snapshot read reaches them. The default
    /// family cannot be dropped.
    pub fn drop_column_family(&self, cf: &ColumnFamily) -> Result<()> {
        let inner = self.inner();
        inner.check_writable()?;
        let state = cf.live()?;
        if state.id == DEFAULT_COLUMN_FAMILY {
            return Err(Error::InvalidArgument(
                "the default column family cannot be dropped".into(),
            ));
        }
        let _one_write = inner.manifest_sync.lock();
        let mut m = inner.manifest.lock();
        inner.append_manifest(&mut m, &[ManifestRecord::DropColumnFamily { id: state.id }])?;
        m.families.remove(&state.id);
        state.dropped.store(true, Ordering::Release);
        let cfs = inner.cfs.load();
        inner.cfs.store(Arc::new(cfs.without(state.id)));
        drop(m);
        let rs = state.installer.load();
        for (_, file) in rs.version.iter() {
            file.mark_obsolete();
        }
        for blob in rs.version.blob_files() {
            blob.mark_obsolete();
        }
        Ok(())
    }

    /// Switches `cf`'s memtable (if it holds anything) and flushes it; with
    /// `wait`, returns once every memtable switched so far is in L0.
    pub fn flush(&self, cf: &ColumnFamily, wait: bool) -> Result<()> {
        let inner = self.inner();
        let state = cf.live()?.clone();
        inner.switch_memtables_for_flush(vec![state.id])?;
        inner.bg.schedule_flush([state.id]);
        if wait {
            inner.wait_flushed(&state)?;
        }
        Ok(())
    }

    /// Compacts the keys of `cf` in `[start, end]` (`None`: unbounded) down
    /// through every level, after a flush; returns when done. Versions that
    /// no snapshot sees and deleted keys are dropped on the way.
    pub fn compact_range(
        &self,
        cf: &ColumnFamily,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        if let (Some(s), Some(e)) = (start, end) {
            if s > e {
                return Err(Error::InvalidArgument(
                    "compact_range: start is above end".into(),
                ));
            }
        }
        self.flush(cf, true)?;
        let inner = self.inner();
        let state = cf.live()?.clone();
        if !inner.bg.begin_manual(state.id) {
            return Err(Error::Closed);
        }
        let r = inner.compact_manually(&state, start, end);
        inner.bg.end_manual(state.id);
        inner.delete_obsolete_files();
        r
    }
}

impl DbInner {
    fn wait_flushed(&self, cf: &Arc<CfState>) -> Result<()> {
        loop {
            self.check_writable()?;
            if cf.is_dropped() {
                return Err(Error::InvalidArgument(format!(
                    "column family {:?} was dropped",
                    cf.name
                )));
            }
            // Published is not done: a flush makes its edit durable after
            // publishing, then counts itself.
            if cf.installer.load().immutables.is_empty() && !self.bg.flush_pending(cf.id) {
                return self.make_manifest_durable_now();
            }
            self.bg.wait_for_change(Duration::from_millis(50));
        }
    }

    fn compact_manually(
        &self,
        cf: &Arc<CfState>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        let levels = cf.options.compaction.num_levels;
        for level in 0..levels {
            self.check_writable()?;
            let version = cf.installer.load().version.clone();
            let picked = compaction::pick_manual(
                &version,
                &cf.options.compaction,
                level as u8,
                start,
                end,
                &|n| self.bg.is_busy(n),
            );
            let Some(c) = picked else { continue };
            if !self.bg.claim(&c) {
                continue;
            }
            self.run_compaction(cf, &c, true, 0);
            self.bg.release(&c);
        }
        self.check_writable()
    }
}
