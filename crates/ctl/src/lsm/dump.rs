//! `dump`, `dump-sst` and `stats` of an lsm directory.

use std::io::Write;
use std::path::Path;

use strata_fs::FileSystem;
use strata_lsm::manifest::{read_current, ManifestRecord};
use strata_lsm::sst::SstReader;
use strata_lsm::{wal, InternalIterator, RecoveryMode, WriteBatch};

use super::{bytes, manifest_state, show_key, sst_path};
use crate::error::CtlError;
use crate::Verdict;

fn lsm_error(out: &mut dyn Write, e: &strata_lsm::Error) -> Result<Verdict, CtlError> {
    writeln!(out, "DAMAGE: {e}")?;
    Ok(Verdict::Damaged)
}

/// Prints the manifest's records, the families' files, and the WAL's records.
pub fn dump(
    fs: &dyn FileSystem,
    dir: &Path,
    entries: bool,
    out: &mut dyn Write,
) -> Result<Verdict, CtlError> {
    let contents = match read_current(fs, dir) {
        Ok(Some(c)) => c,
        Ok(None) => {
            writeln!(out, "no CURRENT in {}: not an lsm directory", dir.display())?;
            return Ok(Verdict::Damaged);
        }
        Err(e) => return lsm_error(out, &e),
    };
    writeln!(
        out,
        "manifest {} ({} records)",
        contents.path.display(),
        contents.records.len()
    )?;
    for (i, r) in contents.records.iter().enumerate() {
        match r {
            ManifestRecord::CreateColumnFamily { id, name } => {
                writeln!(out, "  #{i} create family {id} {name:?}")?
            }
            ManifestRecord::DropColumnFamily { id } => writeln!(out, "  #{i} drop family {id}")?,
            ManifestRecord::Edit(e) => {
                write!(out, "  #{i} edit family {}", e.column_family)?;
                if let Some(n) = e.log_number {
                    write!(out, " log={n}")?;
                }
                if let Some(n) = e.next_file_number {
                    write!(out, " next_file={n}")?;
                }
                if let Some(n) = e.last_seqno {
                    write!(out, " last_seqno={n}")?;
                }
                writeln!(out)?;
                for (level, n) in &e.deleted {
                    writeln!(out, "      - L{level} {n:016x}.sst")?;
                }
                for (level, f) in &e.added {
                    writeln!(
                        out,
                        "      + L{level} {:016x}.sst {} seqnos {}..={}",
                        f.number,
                        bytes(f.size),
                        f.smallest_seqno,
                        f.largest_seqno,
                    )?;
                    if f.range_tombstones {
                        writeln!(out, "          may hold range tombstones")?;
                    }
                    for (blob, n) in &f.blob_refs {
                        writeln!(out, "          references {blob:016x}.blob: {}", bytes(*n))?;
                    }
                }
                for n in &e.deleted_blob_files {
                    writeln!(out, "      - {n:016x}.blob")?;
                }
                for b in &e.added_blob_files {
                    writeln!(
                        out,
                        "      + {:016x}.blob {}, {} records, {} of values",
                        b.number,
                        bytes(b.size),
                        b.record_count,
                        bytes(b.value_bytes)
                    )?;
                }
            }
        }
    }
    let mut verdict = Verdict::Clean;
    let replay = wal::replay(
        fs,
        dir,
        0,
        RecoveryMode::TolerateAnyCorruption,
        |number, payload| {
            match WriteBatch::decode(payload) {
                Ok(b) => {
                    let _ = writeln!(
                        out,
                        "wal {number:016x}: batch seqno {} items {}",
                        b.first_seqno,
                        b.items.len()
                    );
                    if entries {
                        for item in &b.items {
                            let _ = writeln!(
                                out,
                                "    {:?} family {} {} ({} B value)",
                                item.kind,
                                item.cf,
                                show_key(item.key),
                                item.value.len()
                            );
                        }
                    }
                }
                Err(e) => {
                    let _ = writeln!(out, "wal {number:016x}: DAMAGE: undecodable batch: {e}");
                }
            }
            Ok(())
        },
    );
    match replay {
        Ok(r) => {
            for cut in &r.cuts {
                writeln!(
                    out,
                    "DAMAGE: {} at {}: {}",
                    cut.path.display(),
                    cut.offset,
                    cut.reason
                )?;
                verdict = Verdict::Damaged;
            }
        }
        Err(e) => verdict = lsm_error(out, &e)?,
    }
    Ok(verdict)
}

/// Prints one SST: footer, properties, blocks, range tombstones and, with
/// `entries`, every entry.
pub fn dump_sst(
    fs: &dyn FileSystem,
    path: &Path,
    entries: bool,
    out: &mut dyn Write,
) -> Result<Verdict, CtlError> {
    let reader = match SstReader::open(fs, path, 0, None) {
        Ok(r) => r,
        Err(e) => return lsm_error(out, &e),
    };
    let f = reader.footer();
    writeln!(out, "sst {}", path.display())?;
    writeln!(
        out,
        "  footer: index {:?} at {} ({} B), meta-index at {} ({} B)",
        f.index_kind, f.index.offset, f.index.size, f.meta_index.offset, f.meta_index.size
    )?;
    writeln!(out, "  properties: {:#?}", reader.properties())?;
    for t in reader.range_tombstones() {
        writeln!(
            out,
            "  range tombstone [{}, {}) @{}",
            show_key(&t.start),
            show_key(&t.end),
            t.seqno
        )?;
    }
    let blocks = match reader.data_blocks() {
        Ok(b) => b,
        Err(e) => return lsm_error(out, &e),
    };
    writeln!(out, "  {} data blocks", blocks.len())?;
    let mut verdict = Verdict::Clean;
    for (sep, handle) in &blocks {
        match reader.data_block_entries(*handle) {
            Ok(n) => writeln!(
                out,
                "    block at {} ({} B): {n} entries, separator {}",
                handle.offset,
                handle.size,
                show_key(sep)
            )?,
            Err(e) => verdict = lsm_error(out, &e)?,
        }
    }
    if entries {
        let mut it = reader.iter();
        let mut r = it.seek_to_first();
        while r.is_ok() && it.valid() {
            writeln!(
                out,
                "    {} @{} {:?} ({} B)",
                show_key(it.user_key()),
                it.seqno(),
                it.kind(),
                it.value().len()
            )?;
            r = it.next();
        }
        if let Err(e) = r {
            verdict = lsm_error(out, &e)?;
        }
    }
    Ok(verdict)
}

/// Prints counts: families, files and bytes per level, entries, WAL bytes.
pub fn stats(fs: &dyn FileSystem, dir: &Path, out: &mut dyn Write) -> Result<Verdict, CtlError> {
    let state = match manifest_state(fs, dir) {
        Ok(Some(s)) => s,
        Ok(None) => {
            writeln!(out, "no CURRENT in {}: not an lsm directory", dir.display())?;
            return Ok(Verdict::Damaged);
        }
        Err(e) => return lsm_error(out, &e),
    };
    writeln!(
        out,
        "manifest {} ({} records), next file {}, last seqno {}",
        state.path.display(),
        state.records,
        state.next_file_number,
        state.last_seqno
    )?;
    let mut verdict = Verdict::Clean;
    for fam in &state.families {
        let v = &fam.version;
        writeln!(
            out,
            "family {} {:?}: log {}, {} files",
            fam.id,
            fam.name,
            v.log_number(),
            v.total_files()
        )?;
        for level in 0..v.num_levels() {
            if v.level_len(level) == 0 {
                continue;
            }
            let mut entries = 0u64;
            let mut deletions = 0u64;
            for (l, file) in v.iter() {
                if usize::from(l) != level {
                    continue;
                }
                match SstReader::open(fs, &sst_path(dir, file.number()), file.number(), None) {
                    Ok(r) => {
                        entries += r.properties().num_entries;
                        deletions += r.properties().num_deletions;
                    }
                    Err(e) => verdict = lsm_error(out, &e)?,
                }
            }
            writeln!(
                out,
                "  L{level}: {} files, {}, {entries} entries, {deletions} deletions",
                v.level_len(level),
                bytes(v.level_bytes(level))
            )?;
        }
        if let Some(line) = super::blob::blob_stats_line(v) {
            writeln!(out, "{line}")?;
        }
    }
    let names = fs.list(dir).map_err(CtlError::io("list", dir))?;
    let (mut wal_files, mut wal_bytes) = (0u64, 0u64);
    for name in names
        .iter()
        .filter(|n| wal::parse_wal_file_name(n).is_some())
    {
        let path = dir.join(name);
        let len = fs
            .open(&path, false)
            .and_then(|f| f.len())
            .map_err(CtlError::io("stat", &path))?;
        wal_files += 1;
        wal_bytes += len;
    }
    writeln!(out, "wal: {wal_files} files, {}", bytes(wal_bytes))?;
    Ok(verdict)
}
