//! `check`: every checksum of every file the manifest names (SSTs and blob
//! files), every blob reference followed to its value, and the WAL.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use strata_fs::FileSystem;
use strata_lsm::sst::SstReader;
use strata_lsm::{key, wal, InternalIterator, RecoveryMode, ValueKind, WriteBatch};

use super::blob::{blob_path, check_blob_files, RefCheck};
use super::{manifest_state, sst_path};
use crate::error::CtlError;
use crate::Verdict;

/// Verifies the manifest, that every SST it names is there and reads whole
/// (every block's checksum, keys in order, the entry count its properties
/// claim), that every blob reference points into a blob file of the same
/// version at a record of its key, that every blob file reads whole, and
/// every WAL record; lists leftover files. Damaged if anything fails.
pub fn check(fs: &dyn FileSystem, dir: &Path, out: &mut dyn Write) -> Result<Verdict, CtlError> {
    let mut damaged = 0u64;
    let state = match manifest_state(fs, dir) {
        Ok(Some(s)) => s,
        Ok(None) => {
            writeln!(out, "DAMAGE: no CURRENT in {}", dir.display())?;
            return Ok(Verdict::Damaged);
        }
        Err(e) => {
            writeln!(out, "DAMAGE: {e}")?;
            return Ok(Verdict::Damaged);
        }
    };
    let mut live = HashSet::new();
    let (mut files, mut entries, mut blob_files, mut refs) = (0u64, 0u64, 0u64, 0u64);
    for fam in &state.families {
        let mut ref_check = RefCheck::new(fs, dir, &fam.version);
        for (level, file) in fam.version.iter() {
            files += 1;
            let path = sst_path(dir, file.number());
            live.insert(file_name(&path));
            match scan_sst(fs, &path, file.number(), &mut |k, v| ref_check.check(k, v)) {
                Ok(n) => entries += n,
                Err(e) => {
                    damaged += 1;
                    writeln!(out, "DAMAGE: family {:?} L{level}: {e}", fam.name)?;
                }
            }
        }
        refs += ref_check.followed;
        for b in fam.version.blob_files() {
            blob_files += 1;
            live.insert(file_name(&blob_path(dir, b.number())));
        }
        damaged += check_blob_files(fs, dir, &fam.name, &fam.version, out)?;
    }
    let mut records = 0u64;
    let replay = wal::replay(
        fs,
        dir,
        0,
        RecoveryMode::AbsoluteConsistency,
        |number, payload| {
            records += 1;
            WriteBatch::decode(payload).map(|_| ()).map_err(|e| {
                strata_lsm::Error::corruption(
                    dir.join(wal::wal_file_name(number)),
                    0,
                    format!("batch: {e}"),
                )
            })
        },
    );
    if let Err(e) = replay {
        damaged += 1;
        writeln!(out, "DAMAGE: wal: {e}")?;
    }
    let names = fs.list(dir).map_err(CtlError::io("list", dir))?;
    for name in names
        .iter()
        .filter(|n| (n.ends_with(".sst") || n.ends_with(".blob")) && !live.contains(*n))
    {
        writeln!(out, "leftover (no version names it): {name}")?;
    }
    writeln!(
        out,
        "{}: {} families, {files} SST files, {entries} entries, {blob_files} blob files, \
         {refs} blob references, {records} WAL records, {damaged} damaged",
        if damaged == 0 { "clean" } else { "DAMAGED" },
        state.families.len()
    )?;
    Ok(if damaged == 0 {
        Verdict::Clean
    } else {
        Verdict::Damaged
    })
}

/// Called with each `BlobIndex` entry's user key and reference.
type OnBlobRef<'a> = dyn FnMut(&[u8], &[u8]) -> strata_lsm::Result<()> + 'a;

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// Reads every entry of an SST in order, handing each `BlobIndex` entry's
/// user key and reference to `on_blob_ref`; returns the count.
fn scan_sst(
    fs: &dyn FileSystem,
    path: &Path,
    number: u64,
    on_blob_ref: &mut OnBlobRef<'_>,
) -> strata_lsm::Result<u64> {
    let reader = SstReader::open(fs, path, number, None)?;
    let mut it = reader.iter();
    it.seek_to_first()?;
    let mut n = 0u64;
    let mut last: Vec<u8> = Vec::new();
    while it.valid() {
        if n > 0 && key::compare(&last, it.key()).is_ge() {
            return Err(strata_lsm::Error::corruption(path, 0, "keys out of order"));
        }
        last.clear();
        last.extend_from_slice(it.key());
        if let Ok((user_key, _, ValueKind::BlobIndex)) = key::parse(it.key()) {
            on_blob_ref(user_key, it.value())?;
        }
        n += 1;
        it.next()?;
    }
    let claimed = reader.properties().num_entries;
    if claimed != n {
        return Err(strata_lsm::Error::corruption(
            path,
            0,
            format!("{n} entries read, the properties claim {claimed}"),
        ));
    }
    Ok(n)
}
