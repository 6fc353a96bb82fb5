//! Reading one file for recovery: its index section when it has a valid one,
//! else a scan of its records read in growing steps, into what the applier
//! needs (`Replay`). Runs on the scanning threads, ahead of the applier.

use std::path::Path;

use strata_codec::crc32c;
use strata_fs::FileSystem;

use crate::format::{decode_file_header, FileId, FILE_HEADER_LEN, RECORD_HEADER_LEN};
use crate::log_batch::Item;
use crate::reader::{decode_header_of, judge_sealed_end, scan_from, sealed_data_end, ScanEnd};
use crate::section::{decode_section, Section, Trailer, TRAILER_LEN};
use crate::{Error, Result};

/// One item of a scanned record, owning its bytes so that the scan can run on a
/// worker thread ahead of the applier without keeping the file's bytes.
pub(super) enum Op {
    Entries {
        group: u64,
        first_index: u64,
        count: u32,
        body_offset: u32,
    },
    Put {
        group: u64,
        key: Box<[u8]>,
        value: Box<[u8]>,
    },
    Delete {
        group: u64,
        key: Box<[u8]>,
    },
    CompactTo {
        group: u64,
        index: u64,
    },
    RemoveGroup {
        group: u64,
    },
    PurgedBelow {
        seq: u64,
    },
}

impl Op {
    pub(super) fn from_item(item: &Item<'_>) -> Op {
        match *item {
            Item::Entries {
                group,
                first_index,
                count,
                body_offset,
            } => Op::Entries {
                group,
                first_index,
                count,
                body_offset,
            },
            Item::Put { group, key, value } => Op::Put {
                group,
                key: key.into(),
                value: value.into(),
            },
            Item::Delete { group, key } => Op::Delete {
                group,
                key: key.into(),
            },
            Item::CompactTo { group, index } => Op::CompactTo { group, index },
            Item::RemoveGroup { group } => Op::RemoveGroup { group },
            Item::PurgedBelow { seq } => Op::PurgedBelow { seq },
        }
    }

    pub(super) fn as_item(&self) -> Item<'_> {
        match self {
            &Op::Entries {
                group,
                first_index,
                count,
                body_offset,
            } => Item::Entries {
                group,
                first_index,
                count,
                body_offset,
            },
            Op::Put { group, key, value } => Item::Put {
                group: *group,
                key,
                value,
            },
            Op::Delete { group, key } => Item::Delete { group: *group, key },
            &Op::CompactTo { group, index } => Item::CompactTo { group, index },
            &Op::RemoveGroup { group } => Item::RemoveGroup { group },
            &Op::PurgedBelow { seq } => Item::PurgedBelow { seq },
        }
    }
}

/// What the scan of one file found.
pub(super) struct FileSummary {
    pub(super) id: FileId,
    pub(super) content: Content,
    pub(super) valid_end: u64,
    pub(super) end: ScanEnd,
}

/// A file's changes, as recovery read them.
pub(super) enum Content {
    /// From scanning the records: (offset, length, end of its ops in `ops`)
    /// of every valid record.
    Records {
        records: Vec<(u32, u32, usize)>,
        ops: Vec<Op>,
    },
    /// From the file's index section.
    Section(Section),
}

/// A file's scan.
pub(super) struct Replay {
    pub(super) scan: Result<FileSummary>,
    pub(super) bytes: u64,
    /// The header is blank (zeros or cut short) or names another file: what a
    /// crash while creating or recycling the file leaves.
    pub(super) unfinished: bool,
}

/// The first read of a file during recovery; later reads double it. Reading
/// in steps stops at the end of the data, so the zeros of a preallocated file
/// are never read.
pub(super) const FIRST_READ_BYTES: u64 = 8 << 20;

pub(super) fn read_and_scan(
    fs: &dyn FileSystem,
    path: &Path,
    bytes: &mut Vec<u8>,
    use_sections: bool,
) -> Replay {
    if use_sections {
        if let Some(replay) = read_section(fs, path) {
            return replay;
        }
    }
    read_and_scan_in_steps(fs, path, bytes, FIRST_READ_BYTES)
}

/// Reads a sealed file's index section; `None` if the file has no valid one
/// (then the caller scans the file's records).
pub(super) fn read_section(fs: &dyn FileSystem, path: &Path) -> Option<Replay> {
    let file = fs.open(path, false).ok()?;
    let len = file.len().ok()?;
    if len < (FILE_HEADER_LEN + TRAILER_LEN) as u64 {
        return None;
    }
    let mut head = [0u8; FILE_HEADER_LEN];
    file.read_exact_at(0, &mut head).ok()?;
    let (id, _version) = decode_header_of(&head).ok()?;
    // A recycled file renamed into place by a creation that a crash cut short
    // still holds its old header and its old, valid trailer: it is an
    // unfinished file, which only the scan recognises.
    let named = path
        .file_name()
        .and_then(|n| FileId::parse_file_name(n.to_str()?))?;
    if id != named {
        return None;
    }
    let mut tail = [0u8; TRAILER_LEN];
    file.read_exact_at(len - TRAILER_LEN as u64, &mut tail)
        .ok()?;
    let t = Trailer::decode(&tail, id.to_u64())?;
    let section_end = t.section_offset.checked_add(t.section_len as u64)?;
    if section_end > len - TRAILER_LEN as u64 {
        return None;
    }
    let mut bytes = vec![0u8; t.section_len as usize];
    file.read_exact_at(t.section_offset, &mut bytes).ok()?;
    if crc32c(&bytes) != t.section_crc {
        return None;
    }
    let section = decode_section(&bytes).ok()?;
    // The section sits right after the end marker of the records it describes.
    if section.data_end + RECORD_HEADER_LEN as u64 != t.section_offset {
        return None;
    }
    Some(Replay {
        bytes: (FILE_HEADER_LEN + TRAILER_LEN) as u64 + t.section_len as u64,
        unfinished: false,
        scan: Ok(FileSummary {
            id,
            valid_end: section.data_end,
            end: ScanEnd::Zeros,
            content: Content::Section(section),
        }),
    })
}

pub(super) fn read_and_scan_in_steps(
    fs: &dyn FileSystem,
    path: &Path,
    bytes: &mut Vec<u8>,
    first_read: u64,
) -> Replay {
    let failed = |e| Replay {
        scan: Err(e),
        bytes: 0,
        unfinished: false,
    };
    let (file, len) = match fs
        .open(path, false)
        .and_then(|f| f.len().map(|len| (f, len)))
    {
        Ok(x) => x,
        Err(e) => return failed(Error::io("open", path)(e)),
    };
    // Reads bytes `[have, upto)` into the buffer.
    let read = |bytes: &mut Vec<u8>, have: u64, upto: u64| -> Result<()> {
        bytes.resize(upto as usize, 0);
        file.read_exact_at(have, &mut bytes[have as usize..])
            .map_err(Error::io("read", path))
    };
    let mut have = len.min(first_read.max(FILE_HEADER_LEN as u64));
    if let Err(e) = read(bytes, 0, have) {
        return failed(e);
    }
    let head = &bytes[..bytes.len().min(FILE_HEADER_LEN)];
    let blank = head.len() < FILE_HEADER_LEN || head.iter().all(|b| *b == 0);
    let other_id = decode_file_header(head).is_ok_and(|(id, _)| {
        Some(id)
            != path
                .file_name()
                .and_then(|n| FileId::parse_file_name(n.to_str()?))
    });
    let (id, _version) = match decode_header_of(bytes) {
        Ok(h) => h,
        Err(e) => {
            return Replay {
                scan: Err(Error::Corruption {
                    path: path.to_path_buf(),
                    offset: 0,
                    reason: format!("file header: {e}"),
                }),
                bytes: have,
                unfinished: blank || other_id,
            }
        }
    };
    // A sealed file names the end of its records in its trailer.
    let mut tail = [0u8; TRAILER_LEN];
    let sealed_end = (len >= (FILE_HEADER_LEN + TRAILER_LEN) as u64
        && file
            .read_exact_at(len - TRAILER_LEN as u64, &mut tail)
            .is_ok())
    .then(|| sealed_data_end(&tail, id.to_u64()))
    .flatten();
    let mut records = Vec::new();
    let mut ops = Vec::new();
    let mut pos = FILE_HEADER_LEN;
    let (valid_end, end) = loop {
        let (p, end) = scan_from(&bytes[..have as usize], id.to_u64(), pos, |rec, items| {
            ops.extend(items.iter().map(Op::from_item));
            records.push((rec.offset as u32, rec.len, ops.len()));
        });
        pos = p as usize;
        if have == len {
            break (p, end);
        }
        // Only a clean end with a whole header read is final; anything else
        // may be the edge of what was read. Damage needs the whole file (to
        // look for valid records after it).
        let upto = match end {
            ScanEnd::Zeros | ScanEnd::Stale if p + RECORD_HEADER_LEN as u64 <= have => {
                break (p, end)
            }
            ScanEnd::Damaged { .. } => len,
            _ => len.min((have * 2).max(p + first_read)),
        };
        if let Err(e) = read(bytes, have, upto) {
            return failed(e);
        }
        have = upto;
    };
    Replay {
        bytes: have,
        unfinished: blank || other_id,
        scan: Ok(FileSummary {
            id,
            content: Content::Records { records, ops },
            valid_end,
            end: judge_sealed_end(valid_end, end, sealed_end),
        }),
    }
}
