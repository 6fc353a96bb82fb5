//! TEMPORARY STUB (replaced by the real manifest on merge).
#![allow(missing_docs, unused_variables)]
use crate::{ColumnFamilyId, Result, VersionEdit};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_fs::FileSystem;
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestRecord {
    Edit(VersionEdit),
    CreateColumnFamily { id: ColumnFamilyId, name: String },
    DropColumnFamily { id: ColumnFamilyId },
}
pub const CURRENT_FILE_NAME: &str = "CURRENT";
pub fn manifest_file_name(number: u64) -> String {
    format!("MANIFEST-{number:016x}")
}
pub fn parse_manifest_file_name(name: &str) -> Option<u64> {
    None
}
#[derive(Debug)]
pub struct ManifestWriter {
    p: PathBuf,
}
impl ManifestWriter {
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        number: u64,
        snapshot: &[ManifestRecord],
    ) -> Result<ManifestWriter> {
        panic!()
    }
    pub fn append(&mut self, records: &[ManifestRecord]) -> Result<()> {
        Ok(())
    }
    pub fn number(&self) -> u64 {
        0
    }
    pub fn path(&self) -> &Path {
        &self.p
    }
    pub fn bytes(&self) -> u64 {
        0
    }
}
#[derive(Debug, Clone)]
pub struct ManifestContents {
    pub number: u64,
    pub path: PathBuf,
    pub records: Vec<ManifestRecord>,
}
pub fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ManifestContents>> {
    Ok(None)
}
