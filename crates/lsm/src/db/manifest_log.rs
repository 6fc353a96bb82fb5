//! The manifest as the engine writes it: every install's edits staged
//! through the persist hook ([`ManifestEdits`]), written and synced after
//! the install published them, outside its lock
//! ([`DbInner::make_manifest_durable`], one write and one sync for every
//! install staged before it); and a rewrite as one
//! snapshot record once the file grows past `max_manifest_bytes`, or twice
//! the snapshot the last rewrite wrote if that is larger (a manifest whose
//! snapshot alone passes the limit is otherwise rewritten at every install).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cf::CfState;
use super::DbInner;
use crate::column_family::ColumnFamilyId;
use crate::error::{Error, Result};
use crate::manifest::{ManifestRecord, ManifestWriter};
use crate::read_state::PersistEdits;
use crate::version::{Version, VersionEdit};
use strata_log::record::PreparedRecord;

/// The manifest file and what a rewrite needs: the last persisted version
/// of each live family (not the published one: an installer persists before
/// it publishes, so only this map is never behind the file).
#[derive(Debug)]
pub(crate) struct ManifestLog {
    pub writer: ManifestWriter,
    pub families: BTreeMap<ColumnFamilyId, (String, Arc<Version>)>,
    /// Bytes of the file when the last rewrite made it (0 before one).
    pub snapshot_bytes: u64,
    /// The lowest column family id this process has not used: a new
    /// family takes it (or a higher one), never the id of one dropped.
    pub next_family_id: ColumnFamilyId,
}

impl ManifestLog {
    /// A log over `writer`, whose file holds `families`.
    pub fn new(
        writer: ManifestWriter,
        families: BTreeMap<ColumnFamilyId, (String, Arc<Version>)>,
    ) -> ManifestLog {
        let next_family_id = families
            .keys()
            .next_back()
            .map_or(crate::column_family::DEFAULT_COLUMN_FAMILY + 1, |id| {
                id.saturating_add(1)
            });
        ManifestLog {
            writer,
            families,
            snapshot_bytes: 0,
            next_family_id,
        }
    }

    /// Whether the file has grown enough to be rewritten.
    fn rewrite_due(&self, max_bytes: u64) -> bool {
        self.writer.bytes() >= max_bytes.max(self.snapshot_bytes.saturating_mul(2))
    }
}

/// Where an appended edit ends in which manifest: durable once a sync of
/// that file, begun after it was appended, succeeded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ManifestMark {
    number: u64,
    end: u64,
}

/// The persist hook of a family's flushes, compactions and ingestions: the
/// edits appended under the installer lock, synced by `make_durable`.
pub(super) struct ManifestEdits<'a> {
    pub db: &'a DbInner,
    pub cf: &'a CfState,
    /// What the last `persist` appended, until it is durable; `None` after
    /// a rewrite, which is durable when it returns.
    pub pending: Option<ManifestMark>,
    /// Run under the installer lock before anything is appended: an error
    /// aborts the install (an ingestion checks its pick is still good).
    pub check: Option<Box<dyn FnMut() -> Result<()> + 'a>>,
    /// The edits' record, prepared before the installer lock.
    pub prepared: Option<PreparedRecord>,
}

impl<'a> ManifestEdits<'a> {
    pub fn new(db: &'a DbInner, cf: &'a CfState) -> Self {
        ManifestEdits {
            db,
            cf,
            pending: None,
            check: None,
            prepared: None,
        }
    }
}

impl PersistEdits for ManifestEdits<'_> {
    fn prepare(&mut self, edits: &[VersionEdit]) -> Result<()> {
        match ManifestWriter::prepare_edits(edits) {
            Ok(p) => {
                self.prepared = Some(p);
                Ok(())
            }
            Err(e) => {
                // The engine's own edits that would not read back: a bug,
                // which stops writes as a failed append does.
                self.db.stop_writes(&e);
                Err(e)
            }
        }
    }

    fn persist(&mut self, edits: &[VersionEdit], version: &Arc<Version>) -> Result<()> {
        if let Some(check) = &mut self.check {
            check()?;
        }
        let prepared = match self.prepared.take() {
            Some(p) => p,
            None => ManifestWriter::prepare_edits(edits)?,
        };
        self.pending = self.db.append_edits(self.cf, &prepared, version)?;
        Ok(())
    }

    fn make_durable(&mut self) -> Result<()> {
        match self.pending.take() {
            Some(mark) => self.db.make_manifest_durable(mark),
            None => Ok(()),
        }
    }
}

/// The records that rebuild `families` from nothing.
pub(crate) fn snapshot_records(
    families: &BTreeMap<ColumnFamilyId, (String, Arc<Version>)>,
    next_file_number: u64,
    last_seqno: u64,
) -> Vec<ManifestRecord> {
    let mut records = Vec::new();
    for (&id, (name, version)) in families {
        records.push(ManifestRecord::CreateColumnFamily {
            id,
            name: name.clone(),
        });
        let mut edit = VersionEdit {
            column_family: id,
            log_number: Some(version.log_number()),
            next_file_number: Some(next_file_number),
            last_seqno: Some(last_seqno),
            ..VersionEdit::default()
        };
        for (level, file) in version.iter() {
            edit.add_file(level, file.desc().clone());
        }
        for blob in version.blob_files() {
            edit.add_blob_file(*blob.desc());
        }
        records.push(ManifestRecord::Edit(edit));
    }
    records
}

/// Appends `records` (synced), then an empty marker record whose
/// `synced_end` vouches that the records before it were durable: damage in
/// them is then reported as corruption, not taken for the torn tail of a
/// crash. The marker is not synced (one sync per install, not two): the
/// records are durable before it is written, so a power cut that loses it
/// loses nothing, and the next append's sync makes it durable. The engine
/// acts on an edit (deletes files) only after this returns, so a torn edit
/// never had effects.
pub(crate) fn append_vouched(
    writer: &mut ManifestWriter,
    records: &[ManifestRecord],
) -> Result<()> {
    writer.append(records)?;
    writer.vouch()
}

impl DbInner {
    /// Stamps an edit with the engine-wide counters recovery needs.
    pub(super) fn stamp(&self, edit: &mut VersionEdit) {
        edit.next_file_number = Some(self.next_file.load(std::sync::atomic::Ordering::Relaxed));
        edit.last_seqno = Some(self.seq.allocated());
    }

    /// Stages the record of an install's edits of family `cf`, prepared
    /// before the lock (the persist hook's first half, under the installer
    /// lock: no encoding and no system call there, which its thread may
    /// be preempted in or wait on), or rewrites the
    /// manifest (synced) when it is due. Returns what is left to make
    /// durable. A dropped family persists nothing (`InvalidArgument`, not
    /// an engine error); any other failure stops writes.
    fn append_edits(
        &self,
        cf: &CfState,
        prepared: &PreparedRecord,
        version: &Arc<Version>,
    ) -> Result<Option<ManifestMark>> {
        // Before the manifest lock, which other families' installs and the
        // manifest's syncs take too.
        let debt = crate::compaction::pending_compaction_bytes(version, &cf.options.compaction);
        let mut m = self.manifest.lock();
        if cf.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "column family {:?} was dropped",
                cf.name
            )));
        }
        let version = version.clone();
        let result = if m.rewrite_due(self.options.max_manifest_bytes) {
            let mut families = m.families.clone();
            families.insert(cf.id, (cf.name.clone(), version.clone()));
            self.rewrite_manifest(&mut m, &families).map(|()| None)
        } else {
            m.writer.stage_prepared(prepared).map(|end| {
                Some(ManifestMark {
                    number: m.writer.number(),
                    end,
                })
            })
        };
        match result {
            Ok(mark) => {
                cf.compaction_debt
                    .store(debt, std::sync::atomic::Ordering::Relaxed);
                // The version it replaces is let go after the lock (no copy
                // of the family's name either, but for its first).
                let replaced = match m.families.get_mut(&cf.id) {
                    Some((_, persisted)) => Some(std::mem::replace(persisted, version)),
                    None => {
                        m.families.insert(cf.id, (cf.name.clone(), version));
                        None
                    }
                };
                drop(m);
                drop(replaced);
                Ok(mark)
            }
            Err(e) => {
                self.stop_writes(&e);
                Err(e)
            }
        }
    }

    /// Makes the manifest durable up to `mark`: at once if a sync or a
    /// rewrite since covered it; otherwise one write of every record staged
    /// so far and one sync of the file, both outside the manifest lock
    /// (installs go on staging meanwhile), covering every record staged
    /// before it began, so that the installs waiting behind it find theirs
    /// covered. A failed write or sync poisons the writer and stops writes.
    ///
    /// Lock order: `manifest_sync` (held for the writes and the sync, one at
    /// a time: nothing else writes the file meanwhile), then `manifest`
    /// (briefly, before and after); never the reverse.
    pub(super) fn make_manifest_durable(&self, mark: ManifestMark) -> Result<()> {
        let _one_sync = self.manifest_sync.lock();
        let (file, path, end, unwritten) = {
            let mut m = self.manifest.lock();
            if m.writer.number() != mark.number || m.writer.synced_end() >= mark.end {
                // A rewrite since holds the edits in its synced snapshot.
                return Ok(());
            }
            if m.writer.failed() {
                return Err(Error::ReadOnly(
                    "an earlier manifest write or sync failed".into(),
                ));
            }
            (
                m.writer.file().clone(),
                m.writer.path().to_path_buf(),
                m.writer.appended_end(),
                m.writer.take_unwritten(),
            )
        };
        let written = match &unwritten {
            Some((at, bytes)) => file.write_at(*at, bytes).map_err(Error::io("write", &path)),
            None => Ok(()),
        };
        let synced = written.and_then(|()| file.sync_data().map_err(Error::io("sync", &path)));
        let mut m = self.manifest.lock();
        let same = m.writer.number() == mark.number;
        let mut result = match synced {
            Ok(()) if same => {
                m.writer.note_synced(end);
                // The marker vouching that the records before it are
                // durable (`append_vouched`): written now, unsynced, so
                // that bit rot in them reads as corruption even if no
                // install follows; with it any records staged meanwhile.
                m.writer.stage_vouch().map(|()| m.writer.take_unwritten())
            }
            Ok(()) => Ok(None),
            Err(e) => {
                // What the file holds is unknown: no later append or sync
                // of it may claim otherwise.
                if same {
                    m.writer.poison();
                }
                Err(e)
            }
        };
        drop(m);
        if let Ok(Some((at, bytes))) = &result {
            if let Err(e) = file.write_at(*at, bytes) {
                let e = Error::io("write", &path)(e);
                let mut m = self.manifest.lock();
                if m.writer.number() == mark.number {
                    m.writer.poison();
                }
                result = Err(e);
            }
        }
        let result = result.map(|_| ());
        if let Err(e) = &result {
            self.stop_writes(e);
        }
        result
    }

    /// Makes every edit appended so far durable: for what acts on the
    /// published states' durability (WAL deletion), since an install
    /// publishes before its sync.
    pub(super) fn make_manifest_durable_now(&self) -> Result<()> {
        let mark = {
            let m = self.manifest.lock();
            ManifestMark {
                number: m.writer.number(),
                end: m.writer.appended_end(),
            }
        };
        self.make_manifest_durable(mark)
    }

    /// Appends family records (create, drop) with the manifest lock held,
    /// and `manifest_sync` before it: the records are written at once, so
    /// no staged records may be out being written meanwhile.
    pub(super) fn append_manifest(
        &self,
        m: &mut ManifestLog,
        records: &[ManifestRecord],
    ) -> Result<()> {
        let r = append_vouched(&mut m.writer, records);
        if let Err(e) = &r {
            self.stop_writes(e);
        }
        r
    }

    /// Writes a new manifest holding `families` and points CURRENT at it,
    /// then removes the old one.
    pub(super) fn rewrite_manifest(
        &self,
        m: &mut ManifestLog,
        families: &BTreeMap<ColumnFamilyId, (String, Arc<Version>)>,
    ) -> Result<()> {
        let number = self.new_file_number();
        let records = snapshot_records(
            families,
            self.next_file.load(std::sync::atomic::Ordering::Relaxed),
            self.seq.allocated(),
        );
        let mut writer = ManifestWriter::create(self.fs.clone(), &self.dir, number, &records)?;
        writer.vouch()?;
        m.snapshot_bytes = writer.bytes();
        let old = std::mem::replace(&mut m.writer, writer);
        // CURRENT names the new file: the old one is garbage, and a failure
        // to remove it leaves a leftover the next open removes.
        let _ = self.fs.remove(old.path());
        self.counters.add_manifest_rewrite();
        Ok(())
    }
}
