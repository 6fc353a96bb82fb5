//! TEMPORARY STUB (replaced by the real WAL on merge).
#![allow(missing_docs, unused_variables, clippy::missing_errors_doc)]
use crate::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_fs::FileSystem;
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryMode {
    AbsoluteConsistency,
    #[default]
    TolerateTailCorruption,
    TolerateAnyCorruption,
}
pub fn wal_file_name(number: u64) -> String {
    format!("{number:016x}.wal")
}
pub fn parse_wal_file_name(name: &str) -> Option<u64> {
    None
}
#[derive(Debug)]
pub struct WalWriter {
    p: PathBuf,
}
impl WalWriter {
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, number: u64) -> Result<WalWriter> {
        panic!()
    }
    pub fn number(&self) -> u64 {
        0
    }
    pub fn path(&self) -> &Path {
        &self.p
    }
    pub fn append(&mut self, payloads: &[&[u8]]) -> Result<()> {
        Ok(())
    }
    pub fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    pub fn bytes(&self) -> u64 {
        0
    }
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalCut {
    pub path: PathBuf,
    pub offset: u64,
    pub reason: String,
}
#[derive(Debug, Clone, Default)]
pub struct WalReplay {
    pub files: Vec<u64>,
    pub records: u64,
    pub cuts: Vec<WalCut>,
}
pub fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    min_number: u64,
    mode: RecoveryMode,
    f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<WalReplay> {
    panic!()
}
