//! The open SST files: at most `Options::max_open_files` of them, the rest
//! reopened when read again.
//!
//! An open file (`SstReader`) holds a descriptor and its index and filter
//! blocks. Kept for every file a read ever touched, a database of 100,000
//! files needed a descriptor limit above 100,000 and failed with `EMFILE`
//! under the usual 1,024 to 65,536. The cache evicts the files read least
//! recently; an iterator or read still using an evicted file keeps its own
//! handle until it is done. Concurrent opens of one file wait for the first
//! (`quick_cache`'s placeholder), so a file is never opened twice at once.

use std::sync::Arc;

use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::UnitWeighter;
use rustc_hash::FxBuildHasher;

use crate::error::Result;
use crate::sst::SstReader;
use crate::version::FileNumber;

/// Open SST readers by file number.
#[derive(Debug)]
pub(crate) struct TableCache {
    /// Hashed with Fx, not SipHash: the keys are the engine's own file
    /// numbers, never chosen by a user, and the hash is on every read.
    open: Cache<FileNumber, SstReader, UnitWeighter, FxBuildHasher>,
}

impl TableCache {
    /// A cache of at most about `max_open_files` readers.
    pub fn new(max_open_files: usize) -> Arc<TableCache> {
        Arc::new(TableCache {
            open: Cache::with(
                max_open_files,
                max_open_files as u64,
                UnitWeighter,
                FxBuildHasher,
                DefaultLifecycle::default(),
            ),
        })
    }

    /// The reader of file `number`, opened with `open` if it is not open.
    pub fn get(
        &self,
        number: FileNumber,
        open: impl FnOnce() -> Result<SstReader>,
    ) -> Result<SstReader> {
        self.open.get_or_insert_with(&number, open)
    }

    /// Closes file `number` (once its current users are done): it is about
    /// to be deleted.
    pub fn evict(&self, number: FileNumber) {
        self.open.remove(&number);
    }

    /// How many files the cache keeps open at most (about).
    pub fn capacity(&self) -> usize {
        usize::try_from(self.open.capacity()).unwrap_or(usize::MAX)
    }

    /// How many files are open through the cache.
    pub fn len(&self) -> usize {
        self.open.len()
    }
}
