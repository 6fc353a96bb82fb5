//! The background jobs: a flush writes a family's immutable memtables into
//! L0; a compaction merges files into the next level. Both install their
//! edit through the family's installer, whose persist hook appends it to
//! the manifest; then obsolete WAL files are deleted.

use std::cell::RefCell;
use std::sync::Arc;

use super::background::{CompactionInfo, FlushInfo};
use super::blob::BlobValues;
use super::cf::CfState;
use super::manifest_log::ManifestEdits;
use super::DbInner;
use crate::blob::BlobRef;
use crate::column_family::ColumnFamilyId;
use crate::compaction::{self, BlobGc, Compaction, OutputContext};
use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::read_state::{Install, InstallError};
use crate::version::{FileDesc, VersionEdit};
use crate::wal::{parse_wal_file_name, wal_file_name};

/// A flush writes one L0 file, however large (L0 files are not cut).
const FLUSH_FILE_BYTES: u64 = u64::MAX;

impl DbInner {
    /// The output settings of a job: a flush writes one L0 file and runs
    /// no compaction filter (filters, such as TiKV's MVCC GC, expect to run
    /// where data settles); a compaction cuts files at the family's target
    /// size and runs the family's filter.
    fn output_context<'a>(
        &'a self,
        cf: &'a CfState,
        new_file_number: &'a dyn Fn() -> u64,
        snapshots: &'a [u64],
        compaction: Option<&Compaction>,
    ) -> OutputContext<'a> {
        OutputContext {
            fs: &*self.fs,
            dir: &self.dir,
            writer_options: cf.options.table.clone(),
            target_file_bytes: match compaction {
                Some(_) => cf.options.compaction.target_file_bytes,
                None => FLUSH_FILE_BYTES,
            },
            grandparents: &[],
            new_file_number,
            snapshots,
            bottommost: compaction.is_some_and(|c| c.bottommost),
            filter: self
                .hooks
                .compaction_filters
                .get(&cf.name)
                .filter(|_| compaction.is_some())
                .map(|f| &**f as &dyn compaction::CompactionFilter),
            output_level: compaction.map_or(0, |c| c.output_level),
            rate_limiter: Some(&self.rate_limiter),
            collectors: self.hooks.properties_collectors.get(&cf.name).map(|f| &**f),
            blob: cf.blob_output(),
            blob_gc: None,
        }
    }

    /// Flushes every immutable memtable of family `id` into L0.
    pub(super) fn run_flush(&self, id: ColumnFamilyId) {
        let Some(cf) = self.cf_by_id(id) else { return };
        if cf.is_dropped() {
            return;
        }
        if let Err(e) = self.flush_immutables(&cf) {
            if !cf.is_dropped() {
                self.stop_writes(&e);
            }
        }
    }

    pub(super) fn flush_immutables(&self, cf: &Arc<CfState>) -> Result<()> {
        let rs = cf.installer.load_full();
        let mems: Vec<Arc<Memtable>> = rs.immutables.iter().cloned().collect();
        let Some(newest) = mems.first().map(|m| m.id()) else {
            return Ok(());
        };
        // The remaining memtables log into this file or later ones.
        let log_number = rs.active.log_number();
        drop(rs);
        // The install makes the WAL files below `log_number` obsolete:
        // their close (by the WAL thread, started at the switch) ends
        // first, so that none is deleted under it, and a failed close
        // stops the flush before it writes anything.
        self.wal_keeper.wait_closed(log_number)?;
        // Garbage collection keeps only the newest version above the
        // newest snapshot, which is right only if no later snapshot can
        // take a seqno below an input's. An ingestion's seqno, allocated
        // outside the write queue, holds the visible seqno back while later
        // writes reach the memtables: wait until they are visible (the
        // ingestion publishes right after its install), then list the
        // snapshots.
        // Writers insert outside the WAL lock: the ones that took seqnos
        // before the switch (up to `sealed`) may still be inserting.
        let newest_seqno = mems
            .iter()
            .map(|m| m.largest_seqno().unwrap_or(0).max(m.sealed()))
            .max();
        self.wait_visible(newest_seqno.unwrap_or(0));
        let snapshots = self.snapshots.seqnos();
        let next = || self.new_file_number();
        let ctx = self.output_context(cf, &next, &snapshots, None);
        let (files, blob_files) = compaction::flush_memtables(&mems, &ctx)?;
        let mut edit = VersionEdit {
            column_family: cf.id,
            log_number: Some(log_number),
            ..VersionEdit::default()
        };
        for f in &files {
            edit.add_file(0, f.clone());
        }
        for b in &blob_files {
            edit.add_blob_file(*b);
        }
        self.stamp(&mut edit);
        self.warm_tables(&files);
        let installed = cf.installer.install(
            Install {
                edits: std::slice::from_ref(&edit),
                flushed: Some(newest),
                visible: None,
            },
            &mut ManifestEdits::new(self, cf),
        );
        if let Err(e) = installed {
            // After a failed manifest append the edit may still be durable
            // (its record synced, the marker after it not): the outputs
            // then stay, and the next open deletes them if no edit names
            // them. Only a refused edit certainly persisted nothing.
            if matches!(e, InstallError::Edit(_)) {
                self.remove_outputs(&edit, &[]);
            }
            return Err(install_error(e));
        }
        if !blob_files.is_empty() {
            let version = cf.installer.load().version.clone();
            let (value, _) = compaction::blob_value_and_live_bytes(&version);
            cf.gc_credit
                .earn(blob_files.iter().map(|b| b.value_bytes).sum(), value);
        }
        let blob_bytes: u64 = blob_files.iter().map(|b| b.size).sum();
        self.counters
            .add_flush(files.iter().map(|f| f.size).sum::<u64>() + blob_bytes);
        let info = FlushInfo {
            column_family: cf.name.clone(),
            files,
        };
        for l in &self.hooks.listeners {
            l.on_flush_completed(&info);
        }
        self.delete_obsolete_wals();
        Ok(())
    }

    /// Runs `c` and installs it. The merge runs `nice` lower than the
    /// calling thread (see `compaction_merge`), the install at the caller's
    /// priority. A background error stops writes; an edit that no longer
    /// applies (a race with another compaction's outputs) is dropped with
    /// its outputs and retried later.
    pub(super) fn run_compaction(&self, cf: &Arc<CfState>, c: &Compaction, manual: bool, nice: u8) {
        if cf.is_dropped() {
            return;
        }
        if let Err(e) = self.compact(cf, c, manual, nice) {
            if !cf.is_dropped() && !matches!(e, Error::InvalidArgument(_)) {
                self.stop_writes(&e);
            }
        }
    }

    fn compact(&self, cf: &Arc<CfState>, c: &Compaction, manual: bool, nice: u8) -> Result<()> {
        // As for a flush: an ingested file is in the version before its
        // seqno is visible; no later snapshot may fall below an input's.
        let newest = c
            .inputs
            .iter()
            .chain(&c.overlapping)
            .map(|f| f.desc().largest_seqno)
            .max();
        self.wait_visible(newest.unwrap_or(0));
        let snapshots = self.snapshots.seqnos();
        // The merge gives up the CPU to reads and writes; the install, whose
        // locks flushes wait for, does not: a thread niced through its
        // critical section is preempted in it by any thread that wakes, and
        // holds the locks until it gets a core back.
        let merged = strata_fs::run_at_lower_priority("strata-lsm-merge", nice, || {
            self.compaction_merge(cf, c, &snapshots)
        })?;
        let Some(Merged { edit, stats, dear }) = merged else {
            return Ok(());
        };
        let installed = cf.installer.install(
            Install {
                edits: std::slice::from_ref(&edit),
                flushed: None,
                visible: None,
            },
            &mut ManifestEdits::new(self, cf),
        );
        let outputs: Vec<FileDesc> = edit.added.iter().map(|(_, f)| f.clone()).collect();
        let kept: Vec<u64> = edit.deleted.iter().map(|(_, n)| *n).collect();
        match installed {
            Ok(_) => {}
            Err(InstallError::Edit(e)) => {
                self.remove_outputs(&edit, &kept);
                return Err(Error::InvalidArgument(format!(
                    "compaction edit no longer applies: {e}"
                )));
            }
            Err(e) => {
                // A failed manifest append may have left the edit durable:
                // keep the outputs (see `flush_immutables`).
                return Err(install_error(e));
            }
        }
        if dear {
            cf.gc_credit
                .spend(edit.added_blob_files.iter().map(|b| b.value_bytes).sum());
        }
        self.counters
            .add_compaction(c.output_level, stats.bytes_read, stats.bytes_written);
        let info = CompactionInfo {
            column_family: cf.name.clone(),
            input_level: c.input_level,
            output_level: c.output_level,
            inputs: kept,
            outputs,
            manual,
        };
        for l in &self.hooks.listeners {
            l.on_compaction_completed(&info);
        }
        Ok(())
    }

    /// A compaction's merge, up to its outputs written and warmed: every
    /// part of the job that reads or writes data. `None`: a blob collection
    /// with nothing left to move.
    fn compaction_merge(
        &self,
        cf: &CfState,
        c: &Compaction,
        snapshots: &[u64],
    ) -> Result<Option<Merged>> {
        let next = || self.new_file_number();
        // Blob GC: the version the inputs are in holds the blob files they
        // reference, and reads through it cannot see a file deleted.
        let version = cf.installer.load().version.clone();
        let policy = cf.gc_policy(self.writers_idle());
        let files = compaction::blob_gc_candidates(&version, c, &policy);
        // A collection below `garbage_ratio` spends the family's credit;
        // the cheaper ones run whenever due.
        let dear = c.reason == compaction::CompactionReason::BlobGc
            && policy.threshold(c, compaction::blob_space_amp(&version)) < policy.garbage_ratio;
        if c.reason == compaction::CompactionReason::BlobGc && files.is_empty() {
            // An in-place rewrite that would move nothing (the version
            // changed since the pick) would be picked again and again.
            return Ok(None);
        }
        // Compaction reads do not fill the block cache (they would evict what
        // readers use).
        let values = RefCell::new(BlobValues::new(self.fs.clone(), &self.dir, None));
        let read = |key: &[u8], r: &BlobRef| {
            let mut out = Vec::new();
            values.borrow_mut().fetch(&version, key, r, &mut out)?;
            Ok(out)
        };
        let gc = BlobGc { files, read: &read };
        let mut ctx = self.output_context(cf, &next, snapshots, Some(c));
        if !gc.files.is_empty() {
            ctx.blob_gc = Some(&gc);
        }
        let (mut edit, stats) = compaction::run_compaction(c, &|f| self.open_table(f), &ctx)?;
        self.stamp(&mut edit);
        self.warm_tables(edit.added.iter().map(|(_, f)| f));
        Ok(Some(Merged { edit, stats, dear }))
    }

    /// Removes the files `edit` adds, for an install that did not happen;
    /// `keep` are numbers that were inputs too (a trivial move's file).
    fn remove_outputs(&self, edit: &VersionEdit, keep: &[u64]) {
        let removed: Vec<u64> = edit
            .added
            .iter()
            .filter(|(_, f)| !keep.contains(&f.number))
            .map(|(_, f)| f.number)
            .collect();
        // Opened before the install (`warm_tables`): closed with the file.
        for &number in &removed {
            self.table_access.tables.evict(number);
        }
        let tables = removed.iter().map(|&n| compaction::sst_file_name(n));
        let blobs = edit
            .added_blob_files
            .iter()
            .map(|b| compaction::blob_file_name(b.number));
        for name in tables.chain(blobs) {
            let _ = self.fs.remove(&self.dir.join(name));
        }
    }

    /// Deletes the WAL files no memtable needs: those older than the oldest
    /// unflushed memtable of every family.
    pub(super) fn delete_obsolete_wals(&self) {
        let current = self.wal.lock().number();
        // A retired file the WAL thread is still closing stays too.
        let mut keep_from = current.min(self.wal_keeper.first_unclosed().unwrap_or(current));
        for cf in self.cfs.load().by_id.values() {
            let rs = cf.installer.load();
            for m in std::iter::once(&rs.active).chain(rs.immutables.iter()) {
                if !m.is_empty() {
                    keep_from = keep_from.min(m.log_number());
                }
            }
        }
        // An install publishes before its manifest sync: the flushes whose
        // memtables left the states read above must be durable before the
        // WAL that holds their writes goes.
        if self.make_manifest_durable_now().is_err() {
            return;
        }
        let Ok(names) = self.fs.list(&self.dir) else {
            return;
        };
        let mut obsolete: Vec<u64> = names
            .iter()
            .filter_map(|name| parse_wal_file_name(name))
            .filter(|n| *n < keep_from)
            .collect();
        obsolete.sort_unstable();
        // The newest goes to the WAL thread's pool, to become a later
        // file (its blocks, and likely its pages, are still warm).
        if let Some(newest) = obsolete.pop() {
            let path = self.dir.join(wal_file_name(newest));
            if !self.wal_keeper.recycle(path.clone()) {
                let _ = self.fs.remove(&path);
            }
        }
        for n in obsolete {
            let _ = self.fs.remove(&self.dir.join(wal_file_name(n)));
        }
    }

    /// Gives back the space recycled WAL files hold past their appends:
    /// once writers pause (or memtables switch seldom), the pool and the
    /// old bytes of the files made ahead and in use only hold space
    /// (`wal/keeper/`). Both calls are no-ops when there is nothing to give
    /// back.
    pub(super) fn trim_wal_files(&self) {
        // No file is allocated ahead of its appends further than either.
        let keep_ahead = crate::wal::ALLOCATE_AHEAD.min(self.wal_keeper.prealloc());
        self.wal.lock().trim_recycled_tail(keep_ahead);
        self.wal_keeper.trim();
    }
}

fn install_error(e: InstallError) -> Error {
    match e {
        InstallError::Persist(e) | InstallError::Sequence(e) | InstallError::Durability(e) => e,
        InstallError::Edit(e) => Error::InvalidArgument(format!("version edit refused: {e}")),
    }
}

/// What a compaction's merge leaves to install.
struct Merged {
    edit: VersionEdit,
    stats: compaction::CompactionStats,
    /// A blob collection that spends the family's credit.
    dear: bool,
}
