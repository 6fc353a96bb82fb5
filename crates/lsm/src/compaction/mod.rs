//! TEMPORARY STUB (replaced by the real compaction on merge).
#![allow(missing_docs, unused_variables)]
use crate::{
    ColumnFamilyId, FileDesc, FileMeta, FileNumber, InternalIterator, Memtable, RangeTombstone,
    Result, SeqNo, SstReader, SstWriterOptions, Version, VersionEdit,
};
use std::path::Path;
use std::sync::Arc;
use strata_fs::FileSystem;
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionOptions {
    pub num_levels: usize,
    pub level0_compaction_trigger: usize,
    pub level0_slowdown_trigger: usize,
    pub level0_stop_trigger: usize,
    pub target_file_bytes: u64,
    pub soft_pending_compaction_bytes: u64,
    pub hard_pending_compaction_bytes: u64,
    pub rate_limit_bytes_per_sec: u64,
}
impl Default for CompactionOptions {
    fn default() -> Self {
        panic!()
    }
}
impl CompactionOptions {
    pub fn validate(&self) -> Result<()> {
        Ok(())
    }
}
#[derive(Debug, Clone)]
pub struct Compaction {
    pub column_family: ColumnFamilyId,
    pub input_level: u8,
    pub output_level: u8,
    pub inputs: Vec<Arc<FileMeta>>,
    pub overlapping: Vec<Arc<FileMeta>>,
    pub bottommost: bool,
    pub score: f64,
}
pub fn pick(
    version: &Version,
    opts: &CompactionOptions,
    busy: &dyn Fn(FileNumber) -> bool,
) -> Option<Compaction> {
    None
}
pub fn pick_manual(
    version: &Version,
    opts: &CompactionOptions,
    level: u8,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
    busy: &dyn Fn(FileNumber) -> bool,
) -> Option<Compaction> {
    None
}
pub fn pending_compaction_bytes(version: &Version, opts: &CompactionOptions) -> u64 {
    0
}
pub trait CompactionFilter: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &str;
}
#[derive(Debug)]
pub struct RateLimiter;
impl RateLimiter {
    pub fn new(b: u64) -> RateLimiter {
        RateLimiter
    }
}
pub struct OutputContext<'a> {
    pub fs: &'a dyn FileSystem,
    pub dir: &'a Path,
    pub writer_options: SstWriterOptions,
    pub target_file_bytes: u64,
    pub new_file_number: &'a dyn Fn() -> FileNumber,
    pub snapshots: &'a [SeqNo],
    pub bottommost: bool,
    pub filter: Option<&'a dyn CompactionFilter>,
    pub output_level: u8,
    pub rate_limiter: Option<&'a RateLimiter>,
}
pub fn sst_file_name(number: FileNumber) -> String {
    format!("{number:016x}.sst")
}
#[derive(Debug, Clone, Default)]
pub struct CompactionStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
}
pub fn flush_memtables(memtables: &[Arc<Memtable>], ctx: &OutputContext) -> Result<Vec<FileDesc>> {
    panic!()
}
pub fn run_compaction(
    c: &Compaction,
    open_table: &dyn Fn(&FileMeta) -> Result<SstReader>,
    ctx: &OutputContext,
) -> Result<(VersionEdit, CompactionStats)> {
    panic!()
}
pub fn write_sorted_run(
    input: &mut dyn InternalIterator,
    range_tombstones: Vec<RangeTombstone>,
    ctx: &OutputContext,
) -> Result<Vec<FileDesc>> {
    panic!()
}
