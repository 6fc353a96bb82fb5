//! Reading back the manifest `CURRENT` names.

use std::io::ErrorKind;
use std::path::Path;

use strata_fs::FileSystem;
use strata_log::record::{decode_file_header_of, scan_records, ScanEnd, FILE_HEADER_LEN};

use super::payload::decode_records;
use super::{
    parse_manifest_file_name, ManifestContents, ManifestCut, CURRENT_FILE_NAME, MANIFEST_FORMAT,
};
use crate::{Error, Result};

/// `CURRENT` holds one name and a newline; anything longer is not ours.
const CURRENT_BYTES_MAX: u64 = 64;

/// Reads the manifest `CURRENT` names, every record in order. `Ok(None)` when
/// there is no `CURRENT` file.
///
/// No append is acted on before a sync covers it, so only damage that no
/// later record places in synced data (records after the last sync, which a
/// crash cut short, with any subset of their pages kept) is left out, with
/// every record after it, and reported in `cut`. Any other damage, a
/// `CURRENT` that is not exactly `MANIFEST-<16 hex>\n`, a missing manifest
/// or a payload that does not decode is [`Error::Corruption`] naming the file
/// and offset.
pub fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ManifestContents>> {
    let current = dir.join(CURRENT_FILE_NAME);
    let Some(bytes) = read_all(fs, &current, Some(CURRENT_BYTES_MAX))? else {
        return Ok(None);
    };
    let name = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .filter(|s| parse_manifest_file_name(s).is_some())
        .ok_or_else(|| {
            Error::corruption(
                &current,
                0,
                format!(
                    "not a manifest name and a newline: {:?}",
                    String::from_utf8_lossy(&bytes)
                ),
            )
        })?;
    let number = parse_manifest_file_name(name).expect("checked above");
    let path = dir.join(name);
    let bytes = read_all(fs, &path, None)?.ok_or_else(|| {
        Error::corruption(&current, 0, format!("names {name}, which does not exist"))
    })?;
    let (records, cut) = decode_manifest(&bytes, number)
        .map_err(|(offset, reason)| Error::corruption(&path, offset, reason))?;
    Ok(Some(ManifestContents {
        number,
        path,
        records,
        cut,
    }))
}

/// Decodes the bytes of manifest `number`. Pure, for tests and fuzzing.
pub(super) fn decode_manifest(
    bytes: &[u8],
    number: u64,
) -> std::result::Result<(Vec<super::ManifestRecord>, Option<ManifestCut>), (u64, String)> {
    let header = decode_file_header_of(&MANIFEST_FORMAT, bytes)
        .map_err(|e| (0, format!("file header: {e}")))?;
    if header.file_id != number {
        return Err((0, format!("file header names manifest {}", header.file_id)));
    }
    let mut records = Vec::new();
    let mut scanned = 0;
    let mut bad_payload = None;
    let (valid_end, end) = scan_records(bytes, number, FILE_HEADER_LEN, |rec| {
        scanned += 1;
        match decode_records(rec.payload) {
            Ok(r) => {
                records.extend(r);
                Ok(())
            }
            Err(e) => {
                // Its checksum held: not a torn write but bytes this build
                // cannot read, which must not be skipped.
                bad_payload = Some((rec.offset, format!("record payload: {e}")));
                Err("undecodable payload".into())
            }
        }
    });
    if let Some(bad) = bad_payload {
        return Err(bad);
    }
    if scanned == 0 {
        // The snapshot record was synced before CURRENT named the file:
        // without it there is no state to rebuild.
        let reason = match end {
            ScanEnd::Damaged { reason, .. } => reason,
            _ => "no snapshot record".to_string(),
        };
        return Err((valid_end, reason));
    }
    let cut = match end {
        ScanEnd::Eof | ScanEnd::Zeros | ScanEnd::Stale => None,
        ScanEnd::Damaged {
            offset,
            reason,
            synced,
        } => {
            if synced {
                return Err((offset, reason));
            }
            Some(ManifestCut { offset, reason })
        }
    };
    Ok((records, cut))
}

/// Reads a whole file; `None` if it does not exist. With `max`, a longer
/// file is refused as corrupt before it is read.
fn read_all(fs: &dyn FileSystem, path: &Path, max: Option<u64>) -> Result<Option<Vec<u8>>> {
    let file = match fs.open(path, false) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", path)(e)),
    };
    let len = file.len().map_err(Error::io("stat", path))?;
    if max.is_some_and(|m| len > m) || usize::try_from(len).is_err() {
        return Err(Error::corruption(
            path,
            0,
            format!("{len} bytes is too long"),
        ));
    }
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_at(0, &mut bytes)
        .map_err(Error::io("read", path))?;
    Ok(Some(bytes))
}
