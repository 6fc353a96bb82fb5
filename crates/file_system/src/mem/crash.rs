//! What a simulated power cut keeps of the state that was not synced.
//!
//! Two families of crash. The op-log modes (`DropUnsynced`,
//! `KeepRandomPrefix`) revert every directory to its last `sync_dir` and keep,
//! per file, a prefix of its unsynced operations. The page modes
//! (`KeepRandomPages`, `MemFs::crash_keeping`) keep any subset: first of the
//! unsynced directory changes, then, per surviving file, of its unsynced pages.
//!
//! A directory change is kept only when every earlier unsynced change to the
//! same names was kept, so each name's history is a prefix of what happened to
//! it. Otherwise a create that reused a removed name could replace a file whose
//! removal was lost, a namespace no journaling file system shows. Changes to
//! different names are kept or lost independently, and a rename is one change:
//! its source and target move together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::dir::{Change, DirOp, Names};
use super::inode::Inode;
use super::path::{join, to_path, Key};
use super::rng::SplitMix64;
use super::State;

/// What a simulated power loss keeps of the writes that were not synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Keeps only synced bytes and dir-synced names: everything unsynced is
    /// lost.
    DropUnsynced,
    /// Keeps, for each file, a prefix of its unsynced operations in order, of a
    /// length chosen by a generator seeded with `seed`; the last write kept may
    /// be torn (only a prefix of its bytes reaches the disk). Directories keep
    /// only dir-synced names.
    KeepRandomPrefix {
        /// Seeds the choice, so a failing crash replays exactly.
        seed: u64,
    },
    /// Keeps a random subset of the unsynced directory changes (each with
    /// probability 1/2, see the module doc for which subsets are possible),
    /// then, for each file still named, a random subset of its unsynced 4 KiB
    /// pages, as a disk that writes dirty pages back in any order would.
    ///
    /// Per file, the generator picks a length among every length the file had
    /// since its last sync (the durable one with probability 1/4, the live one
    /// with 1/4, any of them otherwise), then keeps none of the file's
    /// unsynced pages (probability 1/4), all of them (1/4), or each with
    /// probability 1/2. A kept page holds its live bytes, a lost one its
    /// durable bytes; either reads as zeros past the end of its image.
    ///
    /// The length and pages of a file depend only on `seed`, its inode and its
    /// own operations, never on other files; whether a directory change is
    /// kept depends on `seed`, its place among the changes made since the
    /// file system was created, and on the changes it must follow.
    KeepRandomPages {
        /// Seeds the choice, so a failing crash replays exactly.
        seed: u64,
    },
}

/// One unsynced change that [`MemFs::crash_keeping`](super::MemFs::crash_keeping)
/// asks about. Paths are absolute and normalized (`/db/CURRENT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsynced<'a> {
    /// The creation of a file (by `create`, or by `lock` on a missing file).
    Create {
        /// Where the file was created.
        path: &'a Path,
    },
    /// A rename, kept or lost whole. If one of its two directories was synced
    /// since, only the other half is still unsynced and at stake.
    Rename {
        /// The name the file had.
        from: &'a Path,
        /// The name it was given.
        to: &'a Path,
    },
    /// The removal of a name.
    Remove {
        /// The name removed.
        path: &'a Path,
    },
    /// Whether the file ends at its live length (kept) or at its durable
    /// length (lost). Asked only when the two differ.
    Len {
        /// The file's name after the crash.
        file: &'a Path,
    },
    /// Whether one page (bytes `page * MemFs::PAGE_BYTES` onwards) of the file
    /// holds its live bytes (kept) or its durable bytes (lost).
    Page {
        /// The file's name after the crash.
        file: &'a Path,
        /// The page's index, as `MemFs::unsynced_pages` lists it.
        page: u64,
    },
}

/// Who decides, in the page modes.
pub(super) enum Choice<'a> {
    Random { seed: u64 },
    Explicit(&'a mut dyn FnMut(Unsynced<'_>) -> bool),
}

/// Distinguishes the streams of one seed, so that a directory change and a
/// file with the same number draw different values.
pub(super) const FILE_STREAM: u64 = 0xA24B_AED4_963E_E407;
const DIR_STREAM: u64 = 0x9FB2_1C65_1E98_DF25;

/// Returns a generator for item `id` of a stream, independent of every other
/// item of the seed.
pub(super) fn stream(seed: u64, salt: u64, id: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ id.wrapping_mul(salt))
}

impl Choice<'_> {
    fn keep_change(&mut self, seq: u64, change: &Change) -> bool {
        match self {
            Choice::Random { seed } => stream(*seed, DIR_STREAM, seq).next_u64() & 1 == 1,
            Choice::Explicit(keep) => match change {
                Change::Create { path } => keep(Unsynced::Create {
                    path: &to_path(path),
                }),
                Change::Rename { from, to } => keep(Unsynced::Rename {
                    from: &to_path(from),
                    to: &to_path(to),
                }),
                Change::Remove { path } => keep(Unsynced::Remove {
                    path: &to_path(path),
                }),
            },
        }
    }

    fn crash_file(&mut self, ino: u64, file: &Path, inode: &mut Inode) {
        let lens = inode.len_history();
        let (durable, live) = (lens[0], lens[lens.len() - 1]);
        match self {
            Choice::Random { seed } => {
                let mut rng = stream(*seed, FILE_STREAM, ino);
                let len = match rng.up_to(3) {
                    0 => durable,
                    1 => live,
                    _ => lens[rng.up_to(lens.len() as u64 - 1) as usize],
                };
                let pages = rng.up_to(3);
                inode.crash_pages(len, |_| match pages {
                    0 => false,
                    1 => true,
                    _ => rng.next_u64() & 1 == 1,
                });
            }
            Choice::Explicit(keep) => {
                let len = if durable != live && keep(Unsynced::Len { file }) {
                    live
                } else {
                    durable
                };
                inode.crash_pages(len, |page| keep(Unsynced::Page { file, page }));
            }
        }
    }
}

impl State {
    /// Crashes in a page mode: keeps what `choice` picks of the unsynced
    /// directory changes, drops the inodes no name reaches any more, then
    /// keeps what it picks of each remaining file's unsynced pages.
    pub(super) fn crash_choosing(&mut self, mut choice: Choice<'_>) {
        let mut ops: Vec<(Key, DirOp)> = Vec::new();
        for (key, dir) in self.dirs.iter_mut() {
            ops.extend(dir.take_pending().into_iter().map(|op| (key.clone(), op)));
        }
        // Stable, so the halves of a rename within one directory stay in the
        // order they were applied (unlink, then link).
        ops.sort_by_key(|(_, op)| op.seq);
        let mut names: BTreeMap<Key, Names> = self
            .dirs
            .iter()
            .map(|(key, dir)| (key.clone(), dir.durable.clone()))
            .collect();
        // For each name an unsynced change touched: whether its latest change
        // was kept.
        let mut kept_last: BTreeMap<(Key, String), bool> = BTreeMap::new();
        for change in ops.chunk_by(|(_, a), (_, b)| a.seq == b.seq) {
            let touched = || {
                change
                    .iter()
                    .map(|(dir, op)| (dir.clone(), op.name.clone()))
            };
            let eligible = touched().all(|name| kept_last.get(&name) != Some(&false));
            let (_, first) = &change[0];
            let keep = eligible && choice.keep_change(first.seq, &first.change);
            kept_last.extend(touched().map(|name| (name, keep)));
            if keep {
                for (dir, op) in change {
                    // Every directory is in `names`: directories are never
                    // removed, so the ones holding pending ops still exist.
                    if let Some(dir_names) = names.get_mut(dir) {
                        op.apply(dir_names);
                    }
                }
            }
        }

        // The first name of each inode, in path order, is the one `choice`
        // hears about.
        let mut file_names: BTreeMap<u64, PathBuf> = BTreeMap::new();
        for (dir, dir_names) in &names {
            for (name, &ino) in dir_names {
                file_names
                    .entry(ino)
                    .or_insert_with(|| to_path(&join(dir, name)));
            }
        }
        for (key, dir_names) in names {
            if let Some(dir) = self.dirs.get_mut(&key) {
                dir.reset(dir_names);
            }
        }
        self.inodes.retain(|ino, _| file_names.contains_key(ino));
        for (&ino, inode) in self.inodes.iter_mut() {
            choice.crash_file(ino, &file_names[&ino], inode);
        }
    }

    /// Crashes in an op-log mode: every directory reverts to its last
    /// `sync_dir` and each file keeps what `mode` keeps of its operations.
    pub(super) fn crash_op_log(&mut self, mode: CrashMode) {
        for dir in self.dirs.values_mut() {
            let durable = dir.durable.clone();
            dir.reset(durable);
        }
        let named: BTreeSet<u64> = self
            .dirs
            .values()
            .flat_map(|dir| dir.durable.values().copied())
            .collect();
        self.inodes.retain(|ino, _| named.contains(ino));
        for (&ino, inode) in self.inodes.iter_mut() {
            inode.crash(mode, ino);
        }
    }
}
