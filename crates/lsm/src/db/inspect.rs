//! Reading a database's manifest into versions without opening it: the one
//! replay of manifest records, shared by `open` and by `strata-ctl lsm`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_fs::FileSystem;

use super::options::Options;
use crate::column_family::{ColumnFamilyId, DEFAULT_COLUMN_FAMILY};
use crate::error::{Error, Result};
use crate::manifest::{self, ManifestRecord};
use crate::version::{ObsoleteFiles, Version, VersionBuilder};

/// A live column family as the manifest describes it.
#[derive(Debug, Clone)]
pub struct FamilyVersion {
    /// Its id.
    pub id: ColumnFamilyId,
    /// Its name.
    pub name: String,
    /// Its files by level, and its log number.
    pub version: Arc<Version>,
}

/// What the manifest CURRENT names holds.
#[derive(Debug, Clone)]
pub struct ManifestState {
    /// The manifest file read.
    pub path: PathBuf,
    /// The live families, by id.
    pub families: Vec<FamilyVersion>,
    /// Above every file number the manifest has handed out.
    pub next_file_number: u64,
    /// The largest sequence number the manifest records.
    pub last_seqno: u64,
    /// Records read.
    pub records: usize,
}

/// Replays the manifest CURRENT names into one version per live family;
/// `Ok(None)` without a CURRENT file. The levels of each family come from
/// `options` (by name). Any inconsistency (a family created twice, an edit of
/// a family that is not live, an edit its version refuses) is `Corruption`
/// naming the manifest.
pub fn replay_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    options: &Options,
    queue: &ObsoleteFiles,
) -> Result<Option<ManifestState>> {
    let Some(contents) = manifest::read_current(fs, dir)? else {
        return Ok(None);
    };
    let bad = |why: String| Error::corruption(&contents.path, 0, why);
    let mut families: BTreeMap<ColumnFamilyId, FamilyVersion> = BTreeMap::new();
    let mut next_file_number = 1;
    let mut last_seqno = 0;
    let records = contents.records.len();
    for record in contents.records {
        match record {
            ManifestRecord::CreateColumnFamily { id, name } => {
                if families.contains_key(&id) || families.values().any(|f| f.name == name) {
                    return Err(bad(format!("column family {id} ({name:?}) created twice")));
                }
                let levels = options.column_family(&name).compaction.num_levels;
                let version = Arc::new(Version::new(id, levels, queue.clone())?);
                families.insert(id, FamilyVersion { id, name, version });
            }
            ManifestRecord::DropColumnFamily { id } => {
                if id == DEFAULT_COLUMN_FAMILY || families.remove(&id).is_none() {
                    return Err(bad(format!(
                        "drop of column family {id}, which is not live"
                    )));
                }
            }
            ManifestRecord::Edit(edit) => {
                let Some(f) = families.get_mut(&edit.column_family) else {
                    return Err(bad(format!(
                        "edit of column family {}, which is not live",
                        edit.column_family
                    )));
                };
                next_file_number = next_file_number.max(edit.next_file_number.unwrap_or(0));
                last_seqno = last_seqno.max(edit.last_seqno.unwrap_or(0));
                let mut b = VersionBuilder::new(&f.version);
                b.apply(&edit)
                    .map_err(|e| bad(format!("edit of column family {:?}: {e}", f.name)))?;
                f.version = b.build().version;
            }
        }
    }
    Ok(Some(ManifestState {
        path: contents.path,
        families: families.into_values().collect(),
        next_file_number,
        last_seqno,
        records,
    }))
}
