//! The manifest as the engine writes it: every install's edits appended
//! (and synced) through the persist hook, and a rewrite as one snapshot
//! record once the file grows past `max_manifest_bytes`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cf::CfState;
use super::DbInner;
use crate::column_family::ColumnFamilyId;
use crate::error::{Error, Result};
use crate::manifest::{ManifestRecord, ManifestWriter};
use crate::version::{Version, VersionEdit};

/// The manifest file and what a rewrite needs: the last persisted version
/// of each live family (not the published one: an installer persists before
/// it publishes, so only this map is never behind the file).
#[derive(Debug)]
pub(crate) struct ManifestLog {
    pub writer: ManifestWriter,
    pub families: BTreeMap<ColumnFamilyId, (String, Arc<Version>)>,
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

    /// The persist hook of every install of family `cf`. A dropped family
    /// persists nothing (`InvalidArgument`, not an engine error); any other
    /// failure stops writes.
    pub(super) fn persist_edits(
        &self,
        cf: &CfState,
        edits: &[VersionEdit],
        version: &Version,
    ) -> Result<()> {
        let mut m = self.manifest.lock();
        if cf.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "column family {:?} was dropped",
                cf.name
            )));
        }
        let version = Arc::new(version.clone());
        let result = if m.writer.bytes() >= self.options.max_manifest_bytes {
            let mut families = m.families.clone();
            families.insert(cf.id, (cf.name.clone(), version.clone()));
            self.rewrite_manifest(&mut m, &families)
        } else {
            let records: Vec<ManifestRecord> =
                edits.iter().cloned().map(ManifestRecord::Edit).collect();
            append_vouched(&mut m.writer, &records)
        };
        match result {
            Ok(()) => {
                cf.compaction_debt.store(
                    crate::compaction::pending_compaction_bytes(&version, &cf.options.compaction),
                    std::sync::atomic::Ordering::Relaxed,
                );
                m.families.insert(cf.id, (cf.name.clone(), version));
                Ok(())
            }
            Err(e) => {
                self.stop_writes(&e);
                Err(e)
            }
        }
    }

    /// Appends family records (create, drop) with the manifest lock held.
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
        let old = std::mem::replace(&mut m.writer, writer);
        // CURRENT names the new file: the old one is garbage, and a failure
        // to remove it leaves a leftover the next open removes.
        let _ = self.fs.remove(old.path());
        self.counters.add_manifest_rewrite();
        Ok(())
    }
}
