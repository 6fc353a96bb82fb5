//! `strata-ctl raftlog check <dir>`: verifies a raftlog directory without
//! opening the engine (which would start a new file and cut damaged tails).
//!
//! 1. Each queue's files must have consecutive sequence numbers; each missing
//!    one is named, unless a purge logged that it removed it (append files
//!    below a hole are then dead, and are not replayed, as in recovery).
//! 2. Every file is scanned: its header and every record's checksums; each
//!    damaged header or record is reported with its file, offset and reason, and
//!    with what each recovery mode would make of it. Past damage, the scan
//!    resumes at the next valid record of the file, to count what recovery would
//!    drop and to find further damage.
//! 3. The valid records are replayed in log order into the engine's own index
//!    (`strata_raftlog::inspect`), and every entry it holds is read back from
//!    its file and decoded.
//!
//! A file made ahead whose rename into place a crash lost is checked, and
//! replayed, as the append file recovery adopts it as.
//!
//! A torn tail (damage at the end of a queue's last file) counts as damage: the
//! engine opens it by default, but bytes were lost. A file left unfinished by a
//! crash while creating it is only noted, since it never held a record.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use strata_fs::FileSystem;
use strata_raftlog::entry_at;
use strata_raftlog::format::FileId;
use strata_raftlog::inspect::{IndexReplay, ReplayError, ReplayedIndex};
use strata_raftlog::reader::ScanEnd;

use crate::error::CtlError;
use crate::log_dir::{describe_end, Content, Listing, LogFile};
use crate::Verdict;

/// One thing wrong with the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Damage {
    path: PathBuf,
    offset: Option<u64>,
    reason: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(offset) => write!(
                f,
                "{} at offset {offset}: {}",
                self.path.display(),
                self.reason
            ),
            None => write!(f, "{}: {}", self.path.display(), self.reason),
        }
    }
}

/// Checks `dir`; returns [`Verdict::Damaged`] when anything is wrong.
pub fn run(fs: &dyn FileSystem, dir: &Path, out: &mut impl Write) -> Result<Verdict, CtlError> {
    let listing = Listing::read(fs, dir)?;
    writeln!(
        out,
        "checking {} ({} log files)",
        dir.display(),
        listing.files.len()
    )?;
    if let Some((name, id)) = &listing.adopted {
        writeln!(
            out,
            "{id}: found as {name} (a rotation's rename that a crash lost): recovery renames \
             it into place"
        )?;
    }
    let mut damage = Vec::new();
    let mut replay = IndexReplay::new();
    let mut records = 0u64;
    for &id in &listing.files {
        let file = LogFile::load(fs, &listing, id)?;
        let path = listing.log_path(id);
        // Checked like any file, but not replayed: as in recovery.
        let replayed = listing.replayed.contains(&id);
        if !replayed {
            writeln!(
                out,
                "{id}: below a hole in the append queue, not replayed (dead if a purge made \
                 the hole)"
            )?;
        }
        match &file.content {
            Content::Scanned(scan) => {
                for rec in scan.records.iter().filter(|_| replayed) {
                    if let Err(e) = replay.apply(id, rec) {
                        let reason = match e {
                            ReplayError::Undecodable { source, .. } => {
                                format!("a scanned record does not decode: {source}")
                            }
                            other => format!("the record cannot be replayed: {other}"),
                        };
                        damage.push(Damage {
                            path: path.clone(),
                            offset: Some(rec.offset),
                            reason,
                        });
                    }
                }
                records += scan.records.len() as u64;
                let dropped: usize = file.beyond.iter().map(|b| b.records.len()).sum();
                let dropped = if dropped > 0 {
                    format!(" (+{dropped} valid records past the damage, which recovery drops)")
                } else {
                    String::new()
                };
                writeln!(
                    out,
                    "{}: {} records{dropped}, end: {}",
                    id,
                    scan.records.len(),
                    describe_end(&scan.end)
                )?;
                for stretch in &file.beyond {
                    if let ScanEnd::Damaged { offset, reason, .. } = &stretch.end {
                        damage.push(Damage {
                            path: path.clone(),
                            offset: Some(*offset),
                            reason: format!("{reason} (found past earlier damage)"),
                        });
                    }
                }
                if let ScanEnd::Damaged {
                    offset,
                    reason,
                    synced,
                } = &scan.end
                {
                    let torn = listing.is_last(id) && !synced;
                    let verdict = if torn {
                        "a torn tail: recovery cuts it there unless recovery_mode is \
                         absolute_consistency"
                    } else if *synced {
                        "the damaged bytes had been synced (a later record or the file's \
                         trailer says so), so not a torn write: only tolerate_any_corruption \
                         opens this, dropping the rest of the file"
                    } else {
                        "not the last file of its queue: only tolerate_any_corruption opens \
                         this, dropping the rest of the file"
                    };
                    damage.push(Damage {
                        path,
                        offset: Some(*offset),
                        reason: format!("{reason} ({verdict})"),
                    });
                }
            }
            Content::Unfinished(why) => {
                writeln!(out, "{id}: unfinished, recovery removes it: {why}")?;
            }
            Content::BadHeader(why) => {
                writeln!(out, "{id}: bad header: {why}")?;
                damage.push(Damage {
                    path,
                    offset: Some(0),
                    reason: format!("{why} (recovery fails in every mode)"),
                });
            }
        }
    }

    if let Some(hole) = &listing.hole {
        if hole.covered_by(replay.purged_below()) {
            writeln!(
                out,
                "append files below {:016x}: a purge removed them and logged it; recovery \
                 removes the {} left",
                hole.first_kept,
                hole.set_aside.len()
            )?;
        }
    }
    for id in listing.lost(replay.purged_below()) {
        damage.push(Damage {
            path: listing.path(&id.file_name()),
            offset: None,
            reason: "missing: files before and after it in its queue exist, and no purge \
                     logged its removal"
                .to_string(),
        });
    }
    let entries = verify_entries(fs, &listing, &replay.finish(), &mut damage)?;
    for d in &damage {
        writeln!(out, "damage: {d}")?;
    }
    writeln!(
        out,
        "summary: files={} records={} entries={} damage={}",
        listing.files.len(),
        records,
        entries,
        damage.len()
    )?;
    Ok(if damage.is_empty() {
        Verdict::Clean
    } else {
        Verdict::Damaged
    })
}

/// Reads every live entry of `index` back from its file and decodes it; returns
/// how many were read, adding a damage for each that fails.
fn verify_entries(
    fs: &dyn FileSystem,
    listing: &Listing,
    index: &ReplayedIndex,
    damage: &mut Vec<Damage>,
) -> Result<u64, CtlError> {
    let mut verified = 0u64;
    // Runs come by file: each file is loaded once.
    for runs in index.live_runs().chunk_by(|a, b| a.file == b.file) {
        let id = runs[0].file;
        let path = listing.log_path(id);
        let file = LogFile::load(fs, listing, id)?;
        let Content::Scanned(scan) = file.content else {
            damage.push(changed_under_us(&path, id, None));
            continue;
        };
        let payloads: HashMap<u64, &[u8]> = scan
            .records
            .iter()
            .map(|r| (r.offset, r.payload.as_slice()))
            .collect();
        for run in runs {
            let Some(payload) = payloads.get(&run.record_offset) else {
                damage.push(changed_under_us(&path, id, Some(run.record_offset)));
                continue;
            };
            for k in 0..run.count {
                let position = run.first_position + k;
                if let Err(e) = entry_at(payload, run.body_offset, run.item_count, position) {
                    damage.push(Damage {
                        path: path.clone(),
                        offset: Some(run.record_offset),
                        reason: format!(
                            "group {} entry {} does not decode: {e}",
                            run.group,
                            run.first_index + k as u64
                        ),
                    });
                } else {
                    verified += 1;
                }
            }
        }
    }
    Ok(verified)
}

fn changed_under_us(path: &Path, id: FileId, offset: Option<u64>) -> Damage {
    Damage {
        path: path.to_path_buf(),
        offset,
        reason: format!("{id} changed while it was checked: an indexed record is gone"),
    }
}
