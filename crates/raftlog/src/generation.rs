//! Which rewrite files recovery replays when a purge was compacting the
//! rewrite queue (writing a new generation of copies) at a crash.
//!
//! Recovery replays the rewrite queue in file order, each copy as an append
//! with Raft semantics. A new generation's copy of a group re-supplies the
//! group's entries from its first index, so it drops the old generation's
//! copy as it goes; if the crash left only part of the new generation (a
//! group's copy spans several records and files), the entries after that
//! part are dropped with nothing to replace them. So the purge marks the
//! generation with a file in the directory: `rewrite-generation-<seq>.pending`
//! (made durable before the first file of the generation, sequence `seq`, is
//! created), renamed to `rewrite-generation-<seq>` once every file of the
//! generation is synced and before anything else depends on it (the logged
//! purge floor, the old generation's removal), and removed once the old
//! generation is gone. At open:
//! - the newest finished generation `d`: rewrite files below `d` are the old
//!   generation, already copied: removed unread;
//! - a pending generation above `d` (or with none finished): its files and
//!   every later rewrite file are unfinished: removed unread. The append
//!   files still hold what they copied (nothing was purged on the strength
//!   of them), and after a failed compaction the next purge compacts again
//!   (`min_dirty`), so no file after a pending generation holds anything
//!   else. A pending marker below the newest finished one is a failed
//!   purge's, whose files the finished generation made old.
//!
//! Then every marker goes: the directory holds one generation.

use std::path::{Path, PathBuf};

use strata_fs::FileSystem;

use crate::format::{FileId, Queue};
use crate::{Error, Result};

const PREFIX: &str = "rewrite-generation-";
const PENDING: &str = ".pending";

/// The marker of a generation starting at rewrite file `seq`.
fn name(seq: u64, done: bool) -> String {
    let pending = if done { "" } else { PENDING };
    format!("{PREFIX}{seq:016x}{pending}")
}

/// `(seq, finished)` of a marker's file name.
fn parse(name: &str) -> Option<(u64, bool)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (hex, done) = match rest.strip_suffix(PENDING) {
        Some(hex) => (hex, false),
        None => (rest, true),
    };
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(|seq| (seq, done))
}

/// Marks a generation starting at rewrite file `seq` as begun, durably.
pub(crate) fn begin(fs: &dyn FileSystem, dir: &Path, seq: u64) -> Result<()> {
    let path = dir.join(name(seq, false));
    fs.create(&path).map_err(Error::io("create", &path))?;
    fs.sync_dir(dir).map_err(Error::io("sync dir", dir))
}

/// Marks the generation starting at `seq` as finished (every file synced),
/// durably; then removes the markers of earlier generations a failed purge
/// left pending, whose files are all below `seq` (old, not unfinished, now).
pub(crate) fn finish(fs: &dyn FileSystem, dir: &Path, seq: u64) -> Result<()> {
    let from = dir.join(name(seq, false));
    let to = dir.join(name(seq, true));
    fs.rename(&from, &to).map_err(Error::io("rename", &from))?;
    fs.sync_dir(dir).map_err(Error::io("sync dir", dir))?;
    let names = fs.list(dir).map_err(Error::io("list", dir))?;
    let mut stale = false;
    for n in names {
        if parse(&n).is_some_and(|(s, done)| !done && s < seq) {
            let path = dir.join(&n);
            fs.remove(&path).map_err(Error::io("remove", &path))?;
            stale = true;
        }
    }
    if stale {
        fs.sync_dir(dir).map_err(Error::io("sync dir", dir))?;
    }
    Ok(())
}

/// Removes the finished marker of `seq` once the old generation is gone.
pub(crate) fn clear(fs: &dyn FileSystem, dir: &Path, seq: u64) -> Result<()> {
    let path = dir.join(name(seq, true));
    fs.remove(&path).map_err(Error::io("remove", &path))?;
    fs.sync_dir(dir).map_err(Error::io("sync dir", dir))
}

/// The log files among `ids` that recovery does not replay, given the
/// directory's file `names` (the rule of the module doc): what it removes.
pub fn unreplayed(names: &[String], ids: &[FileId]) -> Vec<FileId> {
    let markers: Vec<(u64, bool)> = names.iter().filter_map(|n| parse(n)).collect();
    let finished = markers.iter().filter(|m| m.1).map(|m| m.0).max();
    let unfinished = markers
        .iter()
        .filter(|m| !m.1 && finished.is_none_or(|d| m.0 > d))
        .map(|m| m.0)
        .min();
    ids.iter()
        .filter(|id| {
            id.queue == Queue::Rewrite
                && (finished.is_some_and(|d| id.seq < d) || unfinished.is_some_and(|p| id.seq >= p))
        })
        .copied()
        .collect()
}

/// At open: removes the log files recovery does not replay
/// ([`unreplayed`]), then every marker, and drops the removed files from
/// `ids`. Returns the removed log files.
pub(crate) fn settle(
    fs: &dyn FileSystem,
    dir: &Path,
    names: &[String],
    ids: &mut Vec<FileId>,
) -> Result<Vec<PathBuf>> {
    let markers: Vec<&String> = names.iter().filter(|n| parse(n).is_some()).collect();
    if markers.is_empty() {
        return Ok(Vec::new());
    }
    let skipped = unreplayed(names, ids);
    let mut removed = Vec::new();
    for id in &skipped {
        let path = dir.join(id.file_name());
        fs.remove(&path).map_err(Error::io("remove", &path))?;
        removed.push(path);
    }
    ids.retain(|id| !skipped.contains(id));
    if !removed.is_empty() {
        fs.sync_dir(dir).map_err(Error::io("sync dir", dir))?;
    }
    for marker in markers {
        let path = dir.join(marker);
        fs.remove(&path).map_err(Error::io("remove", &path))?;
    }
    fs.sync_dir(dir).map_err(Error::io("sync dir", dir))?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_names_round_trip_and_others_are_not_markers() {
        assert_eq!(parse(&name(0x2a, false)), Some((0x2a, false)));
        assert_eq!(parse(&name(u64::MAX, true)), Some((u64::MAX, true)));
        for other in [
            "LOCK",
            "rewrite-generation-2a",
            "rewrite-generation-zzzzzzzzzzzzzzzz",
            "rewrite-generation-000000000000002a.tmp",
            "000000000000002a.rewrite",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }

    fn rewrite(seq: u64) -> FileId {
        FileId {
            queue: Queue::Rewrite,
            seq,
        }
    }

    #[test]
    fn one_generation_is_replayed() {
        let append = FileId {
            queue: Queue::Append,
            seq: 3,
        };
        let ids: Vec<FileId> = (1..=6).map(rewrite).chain([append]).collect();
        let skipped = |names: &[String]| unreplayed(names, &ids);
        // No marker: everything.
        assert_eq!(skipped(&[]), vec![]);
        // A generation begun at 4, unfinished: 4 and later go.
        assert_eq!(
            skipped(&[name(4, false)]),
            vec![rewrite(4), rewrite(5), rewrite(6)]
        );
        // Finished: the older files go.
        assert_eq!(
            skipped(&[name(4, true)]),
            vec![rewrite(1), rewrite(2), rewrite(3)]
        );
        // A failed purge's pending marker below a finished one is stale.
        assert_eq!(
            skipped(&[name(2, false), name(4, true)]),
            vec![rewrite(1), rewrite(2), rewrite(3)]
        );
        // A pending generation after a finished one whose old files remain.
        assert_eq!(
            skipped(&[name(2, true), name(5, false)]),
            vec![rewrite(1), rewrite(5), rewrite(6)]
        );
    }
}
