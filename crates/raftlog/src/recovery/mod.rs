//! Recovery: rebuilds the index by scanning every file, in parallel across
//! files, and applying them in log order (the rewrite queue first, then the
//! append queue), as `docs/raftlog.md` explains.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_fs::{File, FileSystem};

use crate::format::{encode_file_header, FileId, Queue, FILE_HEADER_LEN, RECYCLE_PREFIX};
use crate::index::{FileRef, Index, RecordLoc};
use crate::log_batch::Item;
use crate::metrics::Metrics;
use crate::pipe::{ActiveFile, Pipe};
use crate::reader::ScanEnd;
use crate::section::{LogOp, Section};
use crate::{Config, Error, RecoveryMode, Result};

mod scan;

use self::scan::{read_and_scan, Content, Op, Replay};

/// One piece of damage that recovery tolerated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The damaged file.
    pub path: PathBuf,
    /// Where the damage starts; the file was cut there.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
}

/// What recovery found.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// Files scanned.
    pub files: u64,
    /// Bytes of files read.
    pub bytes_read: u64,
    /// Valid records applied.
    pub records: u64,
    /// Damage tolerated under the configured recovery mode (torn tails included).
    pub damage: Vec<Damage>,
    /// Files read through their index section rather than scanned.
    pub files_from_sections: u64,
    /// Files found with an unfinished header (a crash while creating them) and removed.
    pub unfinished_files: Vec<PathBuf>,
    /// A file made ahead for the append queue that a rotation had renamed
    /// into place, found under its old name (the crash lost the rename) and
    /// renamed again: its new path.
    pub adopted_file: Option<PathBuf>,
    /// Rewrite files of a generation a purge had finished copying (the old
    /// one) or had not (the new one) when the machine stopped, removed
    /// unread (`generation.rs`).
    pub rewrite_files_removed: Vec<PathBuf>,
    /// Append files a purge had removed when the machine stopped, found again
    /// because the file system did not keep their removal (below a file
    /// whose removal it kept), and removed.
    pub purged_files_removed: Vec<PathBuf>,
    /// Wall time of recovery.
    pub duration: Duration,
}

pub(crate) struct Recovered {
    pub files: BTreeMap<FileId, Arc<dyn File>>,
    pub active: ActiveFile,
    pub recycled: Vec<String>,
    pub next_rewrite_seq: u64,
    pub min_dirty: u64,
    pub append_sizes: BTreeMap<u64, u64>,
    pub report: RecoveryReport,
}

pub(crate) fn recover(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    config: &Config,
    index: &Index,
    metrics: &Metrics,
) -> Result<Recovered> {
    let start = Instant::now();
    let mut report = RecoveryReport::default();
    let names = fs.list(dir).map_err(Error::io("list", dir))?;
    let mut recycled = Vec::new();
    let mut ids: Vec<FileId> = Vec::new();
    for name in &names {
        if let Some(id) = FileId::parse_file_name(name) {
            ids.push(id);
        } else if name.starts_with(RECYCLE_PREFIX) {
            recycled.push(name.clone());
        }
    }
    // A rewrite-queue compaction's old or unfinished generation goes unread.
    report.rewrite_files_removed = crate::generation::settle(fs.as_ref(), dir, &names, &mut ids)?;
    crate::inspect::sort_in_log_order(&mut ids);
    // Files below a hole a purge may have left wait for replay's verdict.
    let maybe_purged =
        crate::inspect::set_aside_below_hole(&mut ids).map_err(|missing| Error::MissingFile {
            path: dir.join(missing.file_name()),
        })?;
    report.adopted_file =
        crate::prepare::adopt_prepared(fs.as_ref(), dir, &mut ids, &mut recycled)?;

    // Sections skip the records' checksums: a mode that promises to verify
    // everything scans every record.
    let use_sections = config.recovery_reads_index_sections
        && config.recovery_mode != RecoveryMode::AbsoluteConsistency;
    // Scan in parallel; apply strictly in order as scans complete.
    let threads = config.recovery_threads.min(ids.len()).max(1);
    let next = AtomicUsize::new(0);
    // Scans finished but not yet applied, and the number applied: workers stay at
    // most `ahead` files in front of the applier so memory stays bounded.
    let done: Mutex<(HashMap<usize, Replay>, usize)> = Mutex::new((HashMap::new(), 0));
    let ahead = threads * 2;
    let ready = parking_lot::Condvar::new();
    let room = parking_lot::Condvar::new();
    let mut files: BTreeMap<FileId, Arc<dyn File>> = BTreeMap::new();
    let mut ends: HashMap<FileId, (u64, ScanEnd)> = HashMap::new();
    let mut min_dirty = u64::MAX;
    let mut purged_below = 0;
    let mut outcome: Result<()> = Ok(());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                // One buffer per worker, reused: a fresh 128 MiB buffer per file
                // costs more in page faults than the scan itself.
                let mut buf = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= ids.len() {
                        break;
                    }
                    {
                        let mut d = done.lock();
                        while i >= d.1 + ahead {
                            room.wait(&mut d);
                        }
                    }
                    let path = dir.join(ids[i].file_name());
                    let replay = read_and_scan(fs.as_ref(), &path, &mut buf, use_sections);
                    done.lock().0.insert(i, replay);
                    ready.notify_all();
                }
            });
        }
        for (i, &id) in ids.iter().enumerate() {
            let replay = {
                let mut d = done.lock();
                let r = loop {
                    if let Some(r) = d.0.remove(&i) {
                        break r;
                    }
                    ready.wait(&mut d);
                };
                d.1 = i + 1;
                room.notify_all();
                r
            };
            if outcome.is_err() {
                continue; // Drain the workers.
            }
            let is_last = ids.get(i + 1).is_none_or(|n| n.queue != id.queue);
            match apply_file(dir, config, index, id, is_last, replay, &mut report) {
                Ok(Some((end, scan_end, shadows, floor))) => {
                    if shadows && id.queue == Queue::Append {
                        min_dirty = min_dirty.min(id.seq);
                    }
                    purged_below = purged_below.max(floor);
                    ends.insert(id, (end, scan_end));
                }
                Ok(None) => {}
                Err(e) => outcome = Err(e),
            }
        }
    });
    outcome?;
    // A hole left after the whole replay means the log restarted there.
    if index.finish_replay() {
        // The dropped runs may be copies in the rewrite queue.
        min_dirty = 0;
    }

    // Open handles; cut damaged tails so no later scan mistakes them for damage
    // in the middle of the log; drop files whose creation never finished.
    let mut last_seq: HashMap<Queue, u64> = HashMap::new();
    let mut append_sizes = BTreeMap::new();
    let mut dir_changed = false;
    if let Some(hole) = maybe_purged {
        // The files below the hole are dead only if a purge said so, durably,
        // before it removed the missing ones.
        if !hole.covered_by(purged_below) {
            return Err(Error::MissingFile {
                path: dir.join(hole.missing.file_name()),
            });
        }
        for id in hole.set_aside {
            let path = dir.join(id.file_name());
            fs.remove(&path).map_err(Error::io("remove", &path))?;
            report.purged_files_removed.push(path);
            dir_changed = true;
        }
    }
    for &id in &ids {
        let path = dir.join(id.file_name());
        let Some((end, scan_end)) = ends.remove(&id) else {
            fs.remove(&path).map_err(Error::io("remove", &path))?;
            report.unfinished_files.push(path);
            dir_changed = true;
            continue;
        };
        if end == 0 {
            // TolerateAnyCorruption and an unreadable file header: keep the bytes
            // for inspection under another name, and put an empty file in the
            // sequence's place so that the next open finds no hole.
            let kept = dir.join(format!("{}.damaged", id.file_name()));
            fs.rename(&path, &kept)
                .map_err(Error::io("rename", &path))?;
            let file = fs.create(&path).map_err(Error::io("create", &path))?;
            let mut head = encode_file_header(id).to_vec();
            head.extend_from_slice(&crate::format::END_MARKER);
            file.write_at(0, &head).map_err(Error::io("write", &path))?;
            file.sync_all().map_err(Error::io("sync", &path))?;
            dir_changed = true;
            if id.queue == Queue::Append {
                append_sizes.insert(id.seq, FILE_HEADER_LEN as u64);
            }
            last_seq.insert(id.queue, id.seq);
            files.insert(id, file);
            continue;
        }
        let damaged = matches!(scan_end, ScanEnd::Damaged { .. });
        // The last file of a queue may hold bytes that were written but never
        // synced (the process died, the machine did not): they are recovered,
        // so make them durable before a new file follows. Otherwise a later
        // power cut could damage them in a file that is no longer the last,
        // where damage counts as corruption.
        let is_last = ids.iter().rev().find(|i| i.queue == id.queue) == Some(&id);
        let writable = damaged || is_last;
        let file = fs.open(&path, writable).map_err(Error::io("open", &path))?;
        if damaged {
            file.truncate(end).map_err(Error::io("truncate", &path))?;
        }
        if writable {
            file.sync_all().map_err(Error::io("sync", &path))?;
        }
        if id.queue == Queue::Append {
            append_sizes.insert(id.seq, end);
        }
        last_seq.insert(id.queue, id.seq);
        files.insert(id, file);
    }
    if dir_changed {
        fs.sync_dir(dir).map_err(Error::io("sync dir", dir))?;
    }

    // Never append to a file from before the restart: start a new one.
    let recycled = Mutex::new(recycled);
    let active_id = FileId {
        queue: Queue::Append,
        seq: last_seq.get(&Queue::Append).copied().unwrap_or(0) + 1,
    };
    let active = Pipe::new_file(fs, dir, config, &recycled, metrics, active_id)?;
    files.insert(active_id, active.file.clone());
    report.files = ids.len() as u64;
    report.duration = start.elapsed();
    Ok(Recovered {
        files,
        active,
        recycled: recycled.into_inner(),
        next_rewrite_seq: last_seq.get(&Queue::Rewrite).copied().unwrap_or(0) + 1,
        min_dirty,
        append_sizes,
        report,
    })
}

/// Applies one file's records to the index and decides what its end means under
/// the recovery mode. Returns `None` for a file whose creation never finished.
fn apply_file(
    dir: &Path,
    config: &Config,
    index: &Index,
    id: FileId,
    is_last: bool,
    replay: Replay,
    report: &mut RecoveryReport,
) -> Result<Option<(u64, ScanEnd, bool, u64)>> {
    let path = dir.join(id.file_name());
    report.bytes_read += replay.bytes;
    if replay.unfinished && is_last {
        return Ok(None);
    }
    let scan = match replay.scan {
        Ok(scan) if scan.id == id => scan,
        Err(Error::Corruption { offset, reason, .. })
            if config.recovery_mode == RecoveryMode::TolerateAnyCorruption =>
        {
            // Nothing in the file can be trusted: index none of it, keep it for
            // inspection until purge removes it.
            report.damage.push(Damage {
                path,
                offset,
                reason,
            });
            return Ok(Some((0, ScanEnd::Eof, false, 0)));
        }
        Ok(scan) => {
            return Err(Error::Corruption {
                path,
                offset: 0,
                reason: format!("header names {} but the file is named {}", scan.id, id),
            })
        }
        Err(e) => return Err(e),
    };
    let file = FileRef::new(id);
    let purged_below = match &scan.content {
        Content::Records { ops, .. } => ops
            .iter()
            .filter_map(|op| match *op {
                Op::PurgedBelow { seq } => Some(seq),
                _ => None,
            })
            .max()
            .unwrap_or(0),
        Content::Section(section) => section.purged_below,
    };
    let shadows = match &scan.content {
        Content::Records { records, ops } => {
            let mut shadows = false;
            let mut start = 0;
            for &(offset, len, end) in records {
                let loc = RecordLoc { file, offset, len };
                let items = ops[start..end].iter().map(|op| (op.as_item(), loc));
                shadows |= index.apply_all(items, true).shadows_rewrite;
                start = end;
            }
            report.records += records.len() as u64;
            shadows
        }
        Content::Section(section) => {
            report.records += section.records.len() as u64;
            report.files_from_sections += 1;
            apply_section(index, file, section)
        }
    };
    if let ScanEnd::Damaged {
        offset,
        reason,
        synced,
    } = &scan.end
    {
        // Only the last file of a queue can hold unsynced bytes: a file is
        // synced whole before the next one of its queue is made, and recovery
        // syncs the last ones before it makes a new file.
        let tolerated = match config.recovery_mode {
            RecoveryMode::AbsoluteConsistency => false,
            RecoveryMode::TolerateTailCorruption => is_last && !synced,
            RecoveryMode::TolerateAnyCorruption => true,
        };
        let reason = if *synced {
            format!("{reason} (the damaged bytes had been synced, so this is not a torn write)")
        } else if !is_last {
            format!("{reason} (in a file that was synced whole before the next one was made)")
        } else {
            reason.clone()
        };
        if !tolerated {
            return Err(Error::Corruption {
                path,
                offset: *offset,
                reason,
            });
        }
        report.damage.push(crate::recovery::Damage {
            path,
            offset: *offset,
            reason,
        });
    }
    Ok(Some((scan.valid_end, scan.end, shadows, purged_below)))
}

/// Applies a file's index section; returns whether it hid rewrite-queue data.
fn apply_section(index: &Index, file: FileRef, section: &Section) -> bool {
    // Changes other than entries only need the file of their record.
    let any = RecordLoc {
        file,
        offset: 0,
        len: 0,
    };
    let items = section.groups.iter().flat_map(|(group, changes)| {
        let group = *group;
        let removed = changes
            .removed
            .then_some((Item::RemoveGroup { group }, any));
        let log = changes.log.iter().map(move |op| match *op {
            LogOp::Entries {
                record,
                first_index,
                count,
                body_offset,
            } => {
                // `decode_section` checked that the record exists.
                let (offset, len) = section.records[record as usize];
                (
                    Item::Entries {
                        group,
                        first_index,
                        count,
                        body_offset,
                    },
                    RecordLoc { file, offset, len },
                )
            }
            LogOp::CompactTo { index } => (Item::CompactTo { group, index }, any),
        });
        let kvs = changes.kvs.iter().map(move |(key, value)| match value {
            Some(value) => (Item::Put { group, key, value }, any),
            None => (Item::Delete { group, key }, any),
        });
        removed.into_iter().chain(log).chain(kvs)
    });
    index.apply_all(items, true).shadows_rewrite
}

#[cfg(test)]
mod tests {
    use super::scan::*;
    use super::*;
    use crate::{Engine, LogBatch};
    use strata_fs::MemFs;

    /// What a scan found, in a comparable form.
    fn summary(r: &Replay) -> String {
        match &r.scan {
            Ok(FileSummary {
                id,
                content: Content::Records { records, ops },
                valid_end,
                end,
            }) => format!("{id:?} {records:?} {valid_end} {end:?} {}", ops.len()),
            Ok(_) => "section".to_string(),
            Err(e) => format!("error {e}"),
        }
    }

    /// Reading a file in small steps finds exactly what reading it whole finds,
    /// for clean files, preallocated ones, torn tails and damage in the middle.
    #[test]
    fn stepwise_reads_scan_like_whole_reads() {
        let fs = MemFs::new();
        let config = Config {
            target_file_size_bytes: 64 << 10,
            compression_threshold_bytes: 256,
            ..Config::default()
        };
        let engine = Engine::open_with_fs("/db", config, Arc::new(fs.clone())).unwrap();
        for i in 1..=120u64 {
            let mut b = LogBatch::new();
            let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let data: Vec<u8> = (0..(i as usize * 37) % 1500)
                .map(|j| {
                    // Half noise, half pattern: some batches compress, some not.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if j % 2 == 0 {
                        x as u8
                    } else {
                        7
                    }
                })
                .collect();
            b.add_entries(i % 3, i / 3 + 1, &[data]);
            b.put(i % 3, b"k", &i.to_le_bytes());
            engine.write(&mut b, i % 5 == 0).unwrap();
        }
        drop(engine);
        let dir = Path::new("/db");
        let mut names: Vec<String> = fs
            .list(dir)
            .unwrap()
            .into_iter()
            .filter(|n| FileId::parse_file_name(n).is_some())
            .collect();
        names.sort();
        assert!(names.len() >= 2, "{names:?}");
        let mut cases = 0;
        for name in &names {
            let path = dir.join(name);
            let len = fs.open(&path, false).unwrap().len().unwrap();
            let damaged: Vec<Option<u64>> = vec![None, Some(40), Some(len / 3), Some(len / 2)];
            for flip in damaged {
                let fs = fs.deep_clone();
                if let Some(at) = flip {
                    fs.corrupt(&path, at, 0x20).unwrap();
                }
                let whole = read_and_scan_in_steps(&fs, &path, &mut Vec::new(), u64::MAX);
                for step in [1, 7, 100, 4096, 30_000] {
                    let stepped = read_and_scan_in_steps(&fs, &path, &mut Vec::new(), step);
                    assert_eq!(
                        summary(&stepped),
                        summary(&whole),
                        "{name} flip {flip:?} step {step}"
                    );
                    cases += 1;
                }
            }
        }
        assert!(cases >= 40);
    }

    /// Every group's runs (with their locations) and keys (with their files),
    /// sorted: the whole index, comparable.
    fn index_dump(engine: &Engine) -> Vec<String> {
        let mut groups = Vec::new();
        engine
            .index
            .for_each(|id, g| groups.push(format!("{id} {:?} {:?}", g.runs, g.kvs)));
        groups.sort();
        groups
    }

    /// Recovery through index sections builds exactly the index that scanning
    /// every record builds, whatever mix of appends, overwrites, compactions,
    /// puts, deletes, removals, rotations and purges wrote the files.
    #[test]
    fn sections_recover_what_scans_recover() {
        use rand::{rngs::StdRng, Rng, SeedableRng};
        let (mut sectioned_files, mut rewritten, mut purged) = (0, 0, 0);
        for seed in 0..12u64 {
            let fs = MemFs::new();
            let config = Config {
                target_file_size_bytes: 64 << 10,
                compression_threshold_bytes: 512,
                purge_threshold_bytes: 1 << 20,
                ..Config::default()
            };
            let mut rng = StdRng::seed_from_u64(seed);
            {
                let engine =
                    Engine::open_with_fs("/db", config.clone(), Arc::new(fs.clone())).unwrap();
                let mut last = [0u64; 12];
                for step in 0..4000u32 {
                    let mut b = LogBatch::new();
                    for _ in 0..rng.gen_range(1..5) {
                        let g = rng.gen_range(0..12usize);
                        match rng.gen_range(0..100) {
                            0..=59 => {
                                // Mostly appends; sometimes Raft replaces a suffix.
                                let first = if last[g] > 3 && rng.gen_bool(0.1) {
                                    last[g] - rng.gen_range(0..3)
                                } else {
                                    last[g] + 1
                                };
                                let n = rng.gen_range(1..4);
                                let entries: Vec<Vec<u8>> = (0..n)
                                    .map(|_| {
                                        let len = rng.gen_range(1..900);
                                        (0..len).map(|_| rng.gen::<u8>() & 0x3f).collect()
                                    })
                                    .collect();
                                b.add_entries(g as u64, first, &entries);
                                last[g] = first + n as u64 - 1;
                            }
                            60..=79 => {
                                let key = [b'k', rng.gen_range(0..3u8)];
                                b.put(g as u64, &key, &step.to_le_bytes());
                            }
                            80..=86 => b.delete(g as u64, &[b'k', rng.gen_range(0..3u8)]),
                            // Groups 10 and 11 lag: purge must copy them out.
                            87..=97 if g < 10 => {
                                b.compact_to(g as u64, last[g].saturating_sub(rng.gen_range(0..8)))
                            }
                            98.. => {
                                b.remove_group(g as u64);
                                last[g] = 0;
                            }
                            _ => {}
                        }
                    }
                    // A batch may not leave a gap: reject those the engine refuses.
                    if engine.write(&mut b, rng.gen_bool(0.3)).is_err() {
                        last = [0; 12];
                        for (g, l) in last.iter_mut().enumerate() {
                            *l = engine.last_index(g as u64).unwrap_or(0);
                        }
                    }
                    if step % 97 == 0 {
                        engine.purge().unwrap();
                    }
                }
                engine.sync().unwrap();
                let m = engine.metrics();
                rewritten += m.bytes_rewritten;
                purged += m.files_purged;
            }
            let open = |mode| {
                let config = Config {
                    recovery_mode: mode,
                    ..config.clone()
                };
                Engine::open_with_fs("/db", config, Arc::new(fs.deep_clone())).unwrap()
            };
            let scanned = open(RecoveryMode::AbsoluteConsistency);
            let sectioned = open(RecoveryMode::TolerateTailCorruption);
            assert_eq!(scanned.recovery_report().files_from_sections, 0);
            let from_sections = sectioned.recovery_report().files_from_sections;
            assert!(from_sections >= 2, "seed {seed}: {from_sections} sections");
            sectioned_files += from_sections;
            assert_eq!(index_dump(&sectioned), index_dump(&scanned), "seed {seed}");
            assert_eq!(
                sectioned.min_dirty.load(Ordering::SeqCst),
                scanned.min_dirty.load(Ordering::SeqCst),
                "seed {seed}"
            );
        }
        eprintln!("{sectioned_files} files read by section, {rewritten} bytes rewritten, {purged} files purged");
        assert!(sectioned_files >= 50, "{sectioned_files}");
        assert!(rewritten > 0 && purged > 0, "{rewritten} {purged}");
    }
}
