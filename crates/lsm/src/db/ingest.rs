//! Ingestion of external SST files, and `replace_range` (a range delete and
//! an ingestion as one change, what applying a Raft snapshot needs),
//! without stalling writes to other key ranges.
//!
//! The steps, in order (`docs/lsm.md`, "Ingestion", says why):
//! 1. Check every file in full (`ingest_files.rs`), then that they do not
//!    overlap each other and, for `replace_range`, lie inside the range.
//!    Nothing has changed yet; a bad file is a typed error.
//! 2. Copy (or hard link) the files into the database directory under new
//!    numbers, with `replace_range`'s range-deletion file beside them; sync
//!    them and the directory. Files stay stored at seqno 0: the version
//!    gives them their seqno, so nothing here waits for one.
//! 3. Flush the family's memtables if they hold keys of the range: outside
//!    any latch, so no writer waits for it.
//! 4. Latch the range (`latch.rs`): writers of the range wait from now on,
//!    every other writer goes on.
//! 5. Take the fence: seqnos (one; two for `replace_range`: the delete,
//!    then the files) allocated and published at once by the write
//!    leader (`DbInner::fence`). The leader checks every later batch
//!    against the latches, so every write of the range has a seqno below
//!    the fence or waits. Wait until the fence is visible (every earlier
//!    write is in the memtables); if the memtables hold keys of the range
//!    (writes that came between steps 3 and 4), flush them, latched.
//! 6. Under the family's installer lock: pick the level, check it and the
//!    memtables against the version the install builds on, and append the
//!    edit with the files at the fence's seqnos to the manifest (the
//!    commit point; what recovery installs).
//! 7. Still under that lock: allocate the seqnos readers will see (after
//!    every seqno handed out), swap in the version with the files at them,
//!    and publish them in the allocator at once, without waiting for the
//!    earlier writes in flight: a reader below the seqnos skips the files'
//!    entries. Only this step holds seqnos unpublished: no I/O, no wait,
//!    microseconds (`IngestReport::seqno_hold`). Then release the latch.
//!
//! The manifest and the published version give the files different
//! seqnos (the fence's and step 7's). Both order the range alike: no
//! write of the range has a seqno between them, and the files' keys are
//! the range's. Recovery installs the fence's; snapshots never outlive a
//! process.
//!
//! Invariants:
//! - A failure before step 6's manifest append leaves the database as it
//!   was (the rewritten files are removed, or are leftovers that the next
//!   open deletes); the seqnos allocated are always published, used or not,
//!   so the visible seqno never stops at them. A failure after it (no
//!   seqno left to allocate) stops writes: the manifest is ahead of the
//!   published state until a reopen.
//! - At install, no memtable holds an entry of the range older than the
//!   ingestion's seqno, and no level above the chosen one holds a file in
//!   the range: checked under the installer's lock, against the version
//!   the install builds on.
//!
//! Locks: the range latch (a leaf, held across the steps but never while
//! waiting for another lock's holder to need it); the write queue for the
//! fence, with no lock held; the installer's lock and the manifest lock
//! through `Installer::install_sequenced` and the persist hook. Step 7
//! waits for nothing under the installer's lock.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::cf::{CfState, ColumnFamily};
use super::ingest_files::{
    check_external, copy_in, ingested_desc, range_delete_desc, write_range_delete, ExternalFile,
};
use super::manifest_log::ManifestEdits;
use super::read::check_key;
use super::{Db, DbInner};
use crate::compaction::sst_file_name;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, MAX_SEQNO};
use crate::read_state::{Install, InstallError, ReadState, Sequenced};
use crate::sst::SstReader;
use crate::version::{FileDesc, FileNumber, Version, VersionEdit};

/// How many times an ingestion flushes writes that reached its range
/// after its first flush before it gives up with `Error::Busy`.
const FLUSH_ROUNDS_MAX: u32 = 8;

/// How long a wait for the visible seqno yields before it sleeps.
const SPIN_BEFORE_SLEEP: Duration = Duration::from_millis(2);

/// How many times an install is tried again after the version changed
/// under the chosen level.
const INSTALL_ROUNDS_MAX: u32 = 64;

/// Options of [`Db::ingest`] and [`Db::replace_range`].
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Move the external files into the database instead of copying them:
    /// each is hard linked under its new name (a copy where the file
    /// system cannot link, e.g. another device) and its old name removed
    /// once the ingestion is committed. Default false (copy; the caller's
    /// files are left alone).
    pub move_files: bool,
}

/// What an ingestion did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestReport {
    /// The seqno every ingested entry carries.
    pub seqno: SeqNo,
    /// The seqno of `replace_range`'s range deletion (one below `seqno`).
    pub delete_seqno: Option<SeqNo>,
    /// The level the ingested files went to.
    pub level: u8,
    /// The level of `replace_range`'s range-deletion file.
    pub delete_level: Option<u8>,
    /// The numbers of the files installed (the range-deletion file last).
    pub files: Vec<FileNumber>,
    /// How many of the files were hard linked rather than copied.
    pub linked: usize,
    /// The entries ingested.
    pub entries: u64,
    /// How many flushes the ingestion asked for (memtables holding keys of
    /// the range).
    pub flushes: u32,
    /// How long the ingestion held the visible seqno back: from the
    /// allocation of the seqnos readers see to their publication, which
    /// holds the build and the swap of the version with the files and no
    /// wait or I/O (the manifest edit is durable before). Writers never
    /// wait for an ingestion outside its range, but a write is
    /// acknowledged only once visible, so this is what one may wait at
    /// most. Also summed in `Statistics::ingest_seqno_hold_micros`.
    pub seqno_hold: Duration,
    /// `seqno_hold` plus the wait, after publishing, until the ingestion's
    /// seqnos are visible (writes that took earlier seqnos and were still
    /// in flight finishing): the ingestion returns only then, as a write
    /// does, so that its caller's next read sees the files. Nothing waits
    /// for the ingestion during it.
    pub seqno_reserved: Duration,
}

/// The range an ingestion covers, in user keys: `[lo, hi]` for the
/// version's inclusive overlap checks, `[lo, end)` for the latch and the
/// memtables.
struct Span {
    lo: Vec<u8>,
    hi: Vec<u8>,
    end: Vec<u8>,
}

impl Db {
    /// Ingests the external SST files `files` into `cf` as one atomic
    /// change: a reader sees all of them or none, at one new seqno ordered
    /// after every write acknowledged before the call. The files must
    /// follow the convention of `docs/lsm.md` ("Ingestion"): entries at
    /// seqno 0, one version per user key, `Put` or `Delete` only, no range
    /// deletions, and no two files overlapping. Every file is checked in
    /// full before anything changes: a bad one is `InvalidArgument` or
    /// `Corruption` naming it, with the database unchanged. Writers of
    /// other key ranges never wait for an ingestion; writers of its range
    /// wait while it installs.
    pub fn ingest(
        &self,
        cf: &ColumnFamily,
        files: &[PathBuf],
        options: &IngestOptions,
    ) -> Result<IngestReport> {
        if files.is_empty() {
            return Err(Error::InvalidArgument("ingest: no files given".into()));
        }
        self.ingest_files(cf, None, files, options)
    }

    /// Deletes every key of `cf` in `[start, end)` and ingests `files`
    /// (all inside the range; none is allowed) as one atomic change: a
    /// reader sees the old contents of the range or the new ones, never a
    /// mix. What applying a Raft snapshot to a region needs. Checks and
    /// errors as [`Db::ingest`].
    pub fn replace_range(
        &self,
        cf: &ColumnFamily,
        start: &[u8],
        end: &[u8],
        files: &[PathBuf],
        options: &IngestOptions,
    ) -> Result<IngestReport> {
        check_key(start)?;
        check_key(end)?;
        if start >= end {
            return Err(Error::InvalidArgument(format!(
                "replace_range: start {start:?} is not below end {end:?}"
            )));
        }
        self.ingest_files(cf, Some((start, end)), files, options)
    }

    fn ingest_files(
        &self,
        cf: &ColumnFamily,
        range: Option<(&[u8], &[u8])>,
        paths: &[PathBuf],
        options: &IngestOptions,
    ) -> Result<IngestReport> {
        let inner = self.inner();
        inner.check_writable()?;
        let state = cf.live()?.clone();
        // Step 1: every check, before anything changes.
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            files.push(check_external(&*inner.fs, path)?);
        }
        files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        for pair in files.windows(2) {
            if pair[0].largest >= pair[1].smallest {
                return Err(Error::InvalidArgument(format!(
                    "external files {} and {} overlap",
                    pair[0].path.display(),
                    pair[1].path.display()
                )));
            }
        }
        let span = match range {
            Some((start, end)) => {
                for f in &files {
                    if f.smallest.as_slice() < start || f.largest.as_slice() >= end {
                        return Err(Error::InvalidArgument(format!(
                            "external file {}: keys {:?}..={:?} reach outside [{start:?}, {end:?})",
                            f.path.display(),
                            f.smallest,
                            f.largest
                        )));
                    }
                }
                Span {
                    lo: start.to_vec(),
                    hi: end.to_vec(),
                    end: end.to_vec(),
                }
            }
            None => {
                let lo = files[0].smallest.clone();
                let hi = files[files.len() - 1].largest.clone();
                let mut end = hi.clone();
                end.push(0);
                Span { lo, hi, end }
            }
        };
        // Step 2: the files in the directory, under new numbers.
        let mut placed = Placed::default();
        let copied = inner.place_files(&state, &files, range, options, &mut placed);
        let outcome =
            copied.and_then(|()| self.install_placed(cf, &state, &files, range, &span, &placed));
        match outcome {
            Ok(mut report) => {
                report.linked = placed.linked;
                if options.move_files {
                    for f in &files {
                        // Committed: a source that cannot be removed is
                        // the caller's to clean up, not an error.
                        let _ = inner.fs.remove(&f.path);
                    }
                }
                Ok(report)
            }
            Err(e) => {
                // After a failed manifest append the edit may still be
                // durable: the files then stay (the next open keeps them
                // if the manifest names them, and deletes them if not).
                if !placed.persisting.load(std::sync::atomic::Ordering::Relaxed) {
                    for number in placed.numbers() {
                        let _ = inner.fs.remove(&inner.dir.join(sst_file_name(number)));
                    }
                }
                Err(e)
            }
        }
    }

    /// Steps 3 to 7.
    fn install_placed(
        &self,
        cf: &ColumnFamily,
        state: &CfState,
        files: &[ExternalFile],
        range: Option<(&[u8], &[u8])>,
        span: &Span,
        placed: &Placed,
    ) -> Result<IngestReport> {
        let inner = self.inner();
        // Step 3: flush what the memtables hold of the range, unlatched.
        let mut flushes = 0;
        if memtables_overlap(&state.installer.load(), span, MAX_SEQNO) {
            self.flush(cf, true)?;
            flushes += 1;
        }
        // Step 4: the latch, released when `_latch` drops (every return).
        let _latch = inner.latches.latch(state.id, &span.lo, &span.end);
        let seqnos = if range.is_some() { 2 } else { 1 };
        // Step 5: the fence. Every write of the range now has a seqno below
        // it, and is in a memtable once it is visible, or waits.
        let fence = inner.fence(seqnos)?;
        inner.wait_visible(fence + seqnos - 1);
        while memtables_overlap(&state.installer.load(), span, fence) {
            // Writes that reached the range between step 3 and the latch;
            // none can come after the fence, so this ends.
            if flushes > FLUSH_ROUNDS_MAX {
                return Err(Error::Busy(format!(
                    "ingest: writes kept reaching [{:?}, {:?}) through {flushes} flushes",
                    span.lo, span.end
                )));
            }
            self.flush(cf, true)?;
            flushes += 1;
        }
        // Steps 6 and 7.
        let descs = |first: SeqNo| {
            let last = first + seqnos - 1;
            let data: Vec<FileDesc> = files
                .iter()
                .zip(&placed.data)
                .map(|(f, &(number, size))| ingested_desc(f, number, size, last))
                .collect();
            let delete = match (range, placed.delete) {
                (Some((start, end)), Some((number, size))) => {
                    Some(range_delete_desc(number, size, start, end, first))
                }
                _ => None,
            };
            (data, delete)
        };
        let mut report = inner.install_ingested(state, span, &descs, fence, seqnos, placed)?;
        inner.counters.add_ingestion(report.seqno_hold);
        // New files may make a level due (L0 above all): without this,
        // nothing would look until the next flush, and writers stopped by
        // L0's file count would wait for one that never comes.
        inner.bg.schedule_compaction(state.id);
        report.flushes = flushes;
        report.entries = files.iter().map(|f| f.entries).sum();
        Ok(report)
    }
}

/// The files placed in the database directory: numbers and sizes.
#[derive(Debug, Default)]
struct Placed {
    data: Vec<(FileNumber, u64)>,
    delete: Option<(FileNumber, u64)>,
    /// Numbers created, placed or not (to remove on failure).
    created: Vec<FileNumber>,
    linked: usize,
    /// Set once the manifest append has started.
    persisting: std::sync::atomic::AtomicBool,
}

impl Placed {
    fn numbers(&self) -> impl Iterator<Item = FileNumber> + '_ {
        self.created.iter().copied()
    }
}

impl DbInner {
    /// Waits until every seqno up to `seqno` is published: the writes
    /// (and ingestions) that took them are in place. Their leaders publish
    /// without waiting for anything an ingestion, a flush or a compaction
    /// holds (a writer waits for visibility only after its leader
    /// published), so this ends.
    pub(super) fn wait_visible(&self, seqno: SeqNo) {
        if self.seq.visible() >= seqno {
            return;
        }
        // Yield for a while first: an ingestion waits here with its own
        // seqnos reserved, and each microsecond of sleep past the earlier
        // writes' publication holds the visible seqno back.
        let start = Instant::now();
        while self.seq.visible() < seqno {
            if start.elapsed() < SPIN_BEFORE_SLEEP {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Step 2: copies or links `files` into the directory under new
    /// numbers (checking each copy's size and footer), writes
    /// `replace_range`'s range-deletion file, and syncs the directory.
    fn place_files(
        &self,
        state: &CfState,
        files: &[ExternalFile],
        range: Option<(&[u8], &[u8])>,
        options: &IngestOptions,
        placed: &mut Placed,
    ) -> Result<()> {
        for f in files {
            let number = self.new_file_number();
            placed.created.push(number);
            let dest = self.dir.join(sst_file_name(number));
            if copy_in(&*self.fs, &f.path, &dest, options.move_files)? {
                placed.linked += 1;
            }
            let copy = SstReader::open(&*self.fs, &dest, number, None)?;
            let size = self
                .fs
                .open(&dest, false)
                .and_then(|h| h.len())
                .map_err(Error::io("stat", &dest))?;
            if size != f.size || copy.properties().num_entries != f.entries {
                return Err(Error::InvalidArgument(format!(
                    "external file {}: changed while it was copied",
                    f.path.display()
                )));
            }
            placed.data.push((number, size));
        }
        if let Some((start, end)) = range {
            let number = self.new_file_number();
            placed.created.push(number);
            let dest = self.dir.join(sst_file_name(number));
            let size =
                write_range_delete(&*self.fs, &dest, state.options.table.clone(), start, end)?;
            placed.delete = Some((number, size));
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(Error::io("sync directory", &*self.dir))
    }

    /// Steps 6 and 7: picks the levels against the current version and
    /// installs. Under the installer's lock, the persist hook checks the
    /// pick against the version the install builds on (another round if it
    /// changed) and appends the edit with the files at the fence's seqnos;
    /// then the seqnos readers will see are allocated, and the files are
    /// published at them in the same swap as the visible seqno.
    fn install_ingested(
        &self,
        state: &CfState,
        span: &Span,
        descs: &dyn Fn(SeqNo) -> (Vec<FileDesc>, Option<FileDesc>),
        fence: SeqNo,
        seqnos: u64,
        placed: &Placed,
    ) -> Result<IngestReport> {
        let persisting = &placed.persisting;
        for _ in 0..INSTALL_ROUNDS_MAX {
            let replace = placed.delete.is_some();
            let picked = pick_levels(&state.installer.load().version, span, replace);
            let (level, delete_level) = picked;
            let edit_at = |first: SeqNo| {
                let (data, delete) = descs(first);
                let mut edit = VersionEdit {
                    column_family: state.id,
                    ..VersionEdit::default()
                };
                for f in data {
                    edit.add_file(level, f);
                }
                if let (Some(d), Some(l)) = (delete, delete_level) {
                    edit.add_file(l, d);
                }
                self.stamp(&mut edit);
                edit
            };
            let durable = edit_at(fence);
            let mut stale = false;
            let mut held: Option<(SeqNo, Instant)> = None;
            let installed = state.installer.install_sequenced(
                Install {
                    edits: std::slice::from_ref(&durable),
                    flushed: None,
                    visible: None,
                },
                &mut ManifestEdits {
                    check: Some(Box::new(|| {
                        // Under the installer's lock: the state loaded now
                        // is the base of this install, and no flush can
                        // move a memtable into L0 before the swap.
                        let base = state.installer.load();
                        if pick_levels(&base.version, span, replace) != picked
                            || memtables_overlap(&base, span, fence)
                        {
                            stale = true;
                            return Err(Error::Busy("the version changed".into()));
                        }
                        persisting.store(true, std::sync::atomic::Ordering::Relaxed);
                        Ok(())
                    })),
                    ..ManifestEdits::new(self, state)
                },
                &mut || {
                    // The edit is durable. Now the seqnos readers will see,
                    // after every write acknowledged so far, published
                    // right after the swap without waiting for the writes
                    // in flight that took earlier ones: the files are in
                    // the version before the seqno is visible, and a reader
                    // below it skips their entries as it skips any newer
                    // than its seqno. So the visible seqno is held back by
                    // the build and the swap only, never by a wait.
                    let first = self.seq.allocate(seqnos)?;
                    held = Some((first, Instant::now()));
                    debug_assert!(
                        !memtables_overlap(&state.installer.load(), span, first),
                        "a write reached a latched range between the fence and the ingestion"
                    );
                    Ok(Sequenced {
                        edits: vec![edit_at(first)],
                        visible: first + seqnos - 1,
                    })
                },
            );
            // Whatever happened: seqnos allocated must not hold the
            // visible seqno back.
            let published = held.map(|(first, allocated)| {
                let r = self.seq.publish(first + seqnos - 1);
                (first, r, allocated.elapsed())
            });
            match installed {
                Ok(_) => {
                    let Some((first, published, hold)) = published else {
                        return Err(Error::ReadOnly(
                            "an ingestion installed without its seqnos".into(),
                        ));
                    };
                    published?;
                    // Return once visible, as a write does: the caller's
                    // next read sees the files. Nothing is held meanwhile.
                    let reserved = Instant::now();
                    self.wait_visible(first + seqnos - 1);
                    let reserved = hold + reserved.elapsed();
                    let (data, delete) = descs(first);
                    return Ok(IngestReport {
                        seqno: first + seqnos - 1,
                        delete_seqno: replace.then_some(first),
                        level,
                        delete_level,
                        files: data
                            .iter()
                            .chain(delete.as_ref())
                            .map(|f| f.number)
                            .collect(),
                        linked: 0,
                        entries: 0,
                        flushes: 0,
                        seqno_hold: hold,
                        seqno_reserved: reserved,
                    });
                }
                Err(InstallError::Persist(_)) if stale => continue,
                // A concurrent compaction's output landed in the level
                // between the pick and the build: pick again.
                Err(InstallError::Edit(_)) => continue,
                Err(InstallError::Persist(e)) => return Err(e),
                Err(InstallError::Sequence(e) | InstallError::Durability(e)) => {
                    // The manifest holds the files, the published state
                    // does not: stop, and let a reopen install them.
                    self.stop_writes(&e);
                    return Err(e);
                }
            }
        }
        Err(Error::Busy(
            "ingest: the version kept changing under the chosen level".into(),
        ))
    }
}

/// The levels of the ingested files and of `replace_range`'s deletion.
/// The files go to the deepest level such that it and every level above
/// it hold nothing in the range (their seqno is above every file's below
/// them, so reads and compactions meet them first); L0 when L0 overlaps.
/// A range deletion goes to that free level and the files one above it,
/// since two files over one range cannot share a level past L0; both go
/// to L0 when no level below L0 is free, the files' higher seqno ordering
/// them first there.
fn pick_levels(version: &Version, span: &Span, replace: bool) -> (u8, Option<u8>) {
    let mut free = None;
    for level in 0..version.num_levels() {
        if !version
            .files_in_range(level, Some(&span.lo), Some(&span.hi))
            .is_empty()
        {
            break;
        }
        free = Some(level as u8);
    }
    match (replace, free) {
        (false, free) => (free.unwrap_or(0), None),
        (true, Some(d)) if d >= 1 => (d - 1, Some(d)),
        (true, _) => (0, Some(0)),
    }
}

/// Whether a memtable of `rs` holds an entry or a range deletion of the
/// span with a seqno below `below`.
fn memtables_overlap(rs: &ReadState, span: &Span, below: SeqNo) -> bool {
    std::iter::once(&rs.active)
        .chain(rs.immutables.iter())
        .any(|mem| {
            let tombstone = mem
                .range_tombstones(below - 1)
                .iter()
                .any(|t| t.start.as_slice() < span.end.as_slice() && span.lo < t.end);
            if tombstone {
                return true;
            }
            let mut it = mem.iter_with_bounds(Some(&span.lo), Some(&span.end));
            if it.seek_to_first().is_err() {
                return true;
            }
            while it.valid() {
                match key::parse(it.key()) {
                    Ok((_, seqno, _)) if seqno >= below => {}
                    _ => return true,
                }
                if it.next().is_err() {
                    return true;
                }
            }
            false
        })
}
