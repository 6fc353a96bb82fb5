//! Replaying the WAL files of a directory after a restart.

use std::path::Path;

use strata_fs::FileSystem;
use strata_log::record::{
    decode_file_header_of, scan_records, ScanEnd, END_MARKER, FILE_HEADER_LEN,
};
use strata_log::RecoveryMode;

use super::{parse_wal_file_name, WalCut, WalReplay, WAL_FORMAT};
use crate::batch::{WriteBatch, BATCH_HEADER_LEN};
use crate::{Error, Result};

/// The most a creation writes before its sync: header and end marker. A file
/// no longer than this whose header is unreadable never held a record.
const CREATED_LEN: u64 = (FILE_HEADER_LEN + END_MARKER.len()) as u64;

/// Replays, in ascending number order, every WAL file in `dir` numbered
/// `>= min_number`, calling `f(file_number, payload)` for each record.
///
/// What damage does depends on `mode` (`docs/format/wal.md`):
/// - `AbsoluteConsistency`: any damage is [`Error::Corruption`].
/// - `TolerateTailCorruption`: damage in the last file that no later record
///   places in synced data is a power cut's tail: replay stops there and
///   reports a [`WalCut`]; any other damage is `Corruption`.
/// - `TolerateAnyCorruption`: replay stops at the first damage anywhere
///   (nothing after it, in that file or later ones, is applied, so what is
///   replayed is a prefix of what was written) and reports the cut.
///
/// A last file too short for a record whose header is unreadable is a
/// creation a crash cut short: an empty tail in every mode. Errors from `f`
/// are returned as they are.
pub fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    min_number: u64,
    mode: RecoveryMode,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<WalReplay> {
    let mut numbers: Vec<u64> = fs
        .list(dir)
        .map_err(Error::io("list", dir))?
        .iter()
        .filter_map(|name| parse_wal_file_name(name))
        .filter(|n| *n >= min_number)
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    let mut out = WalReplay::default();
    for (i, &number) in numbers.iter().enumerate() {
        let is_last = i + 1 == numbers.len();
        let path = dir.join(super::wal_file_name(number));
        let bytes = read_all(fs, &path)?;
        let file = judge_file(&bytes, number, is_last, mode);
        for payload in &file.payloads {
            f(number, payload)?;
            out.records += 1;
        }
        out.files.push(number);
        match file.end {
            End::Clean => {}
            End::Fatal { offset, reason } => {
                return Err(Error::corruption(&path, offset, reason));
            }
            End::Cut { offset, reason }
                if !is_last
                    && mode != RecoveryMode::TolerateAnyCorruption
                    && later_file_synced(fs, dir, &numbers[i + 1..])? =>
            {
                // A later file was synced after its creation, which waits
                // for every earlier file's close: this one was whole.
                return Err(Error::corruption(
                    &path,
                    offset,
                    format!("{reason}, in a file a later synced file vouches for"),
                ));
            }
            End::Cut { offset, reason } => {
                out.cuts.push(WalCut {
                    path,
                    offset,
                    reason,
                });
                // Later files would not extend a prefix of the writes.
                if !is_last {
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// Whether a record of one of the WAL files `numbers` says its file was
/// synced after its creation.
fn later_file_synced(fs: &dyn FileSystem, dir: &Path, numbers: &[u64]) -> Result<bool> {
    for &number in numbers {
        let bytes = read_all(fs, &dir.join(super::wal_file_name(number)))?;
        if decode_file_header_of(&WAL_FORMAT, &bytes).is_err() {
            continue;
        }
        let mut synced = false;
        scan_records(&bytes, number, FILE_HEADER_LEN, |rec| {
            synced |= rec.header.synced_end as usize > FILE_HEADER_LEN;
            Ok(())
        });
        if synced {
            return Ok(true);
        }
    }
    Ok(false)
}

fn read_all(fs: &dyn FileSystem, path: &Path) -> Result<Vec<u8>> {
    let file = fs.open(path, false).map_err(Error::io("open", path))?;
    let len = file.len().map_err(Error::io("stat", path))?;
    let len = usize::try_from(len).map_err(|_| {
        Error::corruption(path, 0, format!("a WAL file of {len} bytes cannot be read"))
    })?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(0, &mut bytes)
        .map_err(Error::io("read", path))?;
    Ok(bytes)
}

/// One file's valid records and what its end means.
pub(super) struct FileReplay {
    pub payloads: Vec<Vec<u8>>,
    pub end: End,
}

/// How a file's data ended, judged under the recovery mode.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum End {
    /// At the end marker (or a clean end the format allows).
    Clean,
    /// Damage replay steps over: stop here (and, unless last, stop replay).
    Cut { offset: u64, reason: String },
    /// Damage that fails replay.
    Fatal { offset: u64, reason: String },
}

/// Decodes the bytes of WAL file `number` and judges its end. Pure, so the
/// fuzz target and the proptests call it on any bytes.
pub(super) fn judge_file(
    bytes: &[u8],
    number: u64,
    is_last: bool,
    mode: RecoveryMode,
) -> FileReplay {
    let damaged = |offset: u64, reason: String, synced: bool| {
        let fatal = match mode {
            RecoveryMode::AbsoluteConsistency => true,
            RecoveryMode::TolerateTailCorruption => synced,
            RecoveryMode::TolerateAnyCorruption => false,
        };
        if fatal {
            End::Fatal { offset, reason }
        } else {
            End::Cut { offset, reason }
        }
    };
    let none = |end| FileReplay {
        payloads: Vec::new(),
        end,
    };
    let header = match decode_file_header_of(&WAL_FORMAT, bytes) {
        Ok(h) => h,
        Err(e) if is_last && bytes.len() as u64 <= CREATED_LEN => {
            return none(End::Cut {
                offset: 0,
                reason: format!("file creation never finished: {e}"),
            })
        }
        Err(e) => return none(damaged(0, format!("file header: {e}"), true)),
    };
    if header.file_id != number {
        // Not this file's bytes: a misnamed file, or (were files recycled) a
        // renamed one whose creation a crash cut short.
        let reason = format!("file header names WAL file {}", header.file_id);
        return none(damaged(0, reason, !is_last));
    }
    let mut payloads = Vec::new();
    // Whether the last valid record is the close marker: an empty batch
    // written after a sync of everything before it.
    let mut closed = false;
    let (valid_end, end) = scan_records(bytes, number, FILE_HEADER_LEN, |rec| {
        // Only a payload of a bare batch header can be the marker: decode
        // nothing else twice (the caller decodes every batch).
        closed = u64::from(rec.header.synced_end) >= rec.offset
            && rec.payload.len() == BATCH_HEADER_LEN
            && WriteBatch::decode(rec.payload).is_ok_and(|b| b.items.is_empty());
        payloads.push(rec.payload.to_vec());
        Ok(())
    });
    // Only the last file, and a file a power cut caught before its close
    // (`keeper/`), can hold unsynced bytes.
    let unsynced_tail = is_last || !closed;
    let end = match end {
        ScanEnd::Zeros | ScanEnd::Stale => End::Clean,
        // Every append writes the end marker with its records, and files are
        // never truncated: a file that ends right after a record lost its
        // marker, which only a power cut's tail may do.
        ScanEnd::Eof if unsynced_tail => End::Clean,
        ScanEnd::Eof => damaged(
            valid_end,
            "file ends without its end marker".to_string(),
            true,
        ),
        ScanEnd::Damaged {
            offset,
            reason,
            synced,
        } => damaged(offset, reason, synced || !unsynced_tail),
    };
    let end = match end {
        // A file before the last without its close marker: a power cut
        // came before the WAL thread closed it, so its tail may have lost
        // whole appends without a trace, and no later file holds a synced
        // write (a sync waits for every earlier close). Stop here: what
        // replays is a prefix, and nothing acknowledged as durable is lost.
        End::Clean if !is_last && !closed => End::Cut {
            offset: valid_end,
            reason: "not closed durably before the next file was written".to_string(),
        },
        end => end,
    };
    FileReplay { payloads, end }
}
