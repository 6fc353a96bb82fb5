//! Reading a raftlog directory: which files it holds, in what order recovery
//! applies them, and what each file's header and records say.
//!
//! Files are loaded one at a time, so a command needs memory for one file, not
//! for the directory. Nothing here writes.

use std::path::{Path, PathBuf};

use strata_fs::FileSystem;
use strata_raftlog::format::{
    FileId, HeaderCheck, Queue, RecordHeader, FILE_HEADER_LEN, LOCK_FILE_NAME, RECORD_HEADER_LEN,
    RECYCLE_PREFIX,
};
use strata_raftlog::inspect::{
    prepared_to_adopt, rewrite_files_not_replayed, set_aside_below_hole, sort_in_log_order,
    PurgeHole,
};
use strata_raftlog::reader::{
    judge_sealed_end, scan_file, sealed_data_end, FileScan, ScanEnd, ScannedRecord,
};
use strata_raftlog::section::TRAILER_LEN;

use crate::error::CtlError;

/// The names in a raftlog directory, sorted out.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The directory.
    pub dir: PathBuf,
    /// The log files in log order: the rewrite queue first (it holds copies of
    /// the oldest data), then the append queue, each by sequence number.
    pub files: Vec<FileId>,
    /// Purged files kept for reuse, by name.
    pub recycled: Vec<String>,
    /// Names that are neither log files, recycled files nor the lock file.
    pub other: Vec<String>,
    /// The files recovery replays, in log order: all of them but the rewrite
    /// files of an old or unfinished generation, which it removes unread
    /// (`strata_raftlog::inspect::rewrite_files_not_replayed`), and the
    /// append files below a hole that a purge may have left, which wait for
    /// the replay's verdict (`strata_raftlog::inspect::set_aside_below_hole`).
    pub replayed: Vec<FileId>,
    /// That hole, if there is one.
    pub hole: Option<PurgeHole>,
    /// A recycled file that recovery adopts as the append file after the
    /// last (a rotation's rename a crash lost), by name, and the id it takes:
    /// listed among `files` under that id.
    pub adopted: Option<(String, FileId)>,
}

impl Listing {
    /// Lists `dir`.
    pub fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Listing, CtlError> {
        let mut names = fs.list(dir).map_err(CtlError::io("list", dir))?;
        names.sort();
        let mut listing = Listing {
            dir: dir.to_path_buf(),
            files: Vec::new(),
            recycled: Vec::new(),
            other: Vec::new(),
            replayed: Vec::new(),
            hole: None,
            adopted: None,
        };
        for name in &names {
            if let Some(id) = FileId::parse_file_name(name) {
                listing.files.push(id);
            } else if name.starts_with(RECYCLE_PREFIX) {
                listing.recycled.push(name.clone());
            } else if name != LOCK_FILE_NAME {
                listing.other.push(name.clone());
            }
        }
        sort_in_log_order(&mut listing.files);
        if let Some((i, id)) = prepared_to_adopt(fs, dir, &listing.files, &listing.recycled) {
            let name = listing.recycled.remove(i);
            listing.files.push(id);
            listing.adopted = Some((name, id));
        }
        // An old or unfinished generation of the rewrite queue is not read.
        let skipped = rewrite_files_not_replayed(&names, &listing.files);
        let mut replayed = listing.files.clone();
        replayed.retain(|id| !skipped.contains(id));
        // A hole in the rewrite queue is lost data whatever replay finds
        // (`lost`); every file is then replayed, to show what survives.
        listing.hole = set_aside_below_hole(&mut replayed).unwrap_or(None);
        listing.replayed = replayed;
        Ok(listing)
    }

    /// Returns the files missing from the middle of a queue that no purge
    /// accounts for, once replay has found `purged_below` as its highest
    /// purge floor: what recovery refuses as lost.
    pub fn lost(&self, purged_below: u64) -> Vec<FileId> {
        let covered = self
            .hole
            .as_ref()
            .is_some_and(|h| h.covered_by(purged_below));
        self.missing()
            .into_iter()
            .filter(|id| !(covered && id.queue == Queue::Append))
            .collect()
    }

    /// Returns the path of a file of the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Returns the path of log file `id`: its own name, or the recycled name
    /// of the file recovery adopts as `id`.
    pub fn log_path(&self, id: FileId) -> PathBuf {
        match &self.adopted {
            Some((name, adopted)) if *adopted == id => self.dir.join(name),
            _ => self.dir.join(id.file_name()),
        }
    }

    /// True when `id` is the highest-numbered file of its queue.
    pub fn is_last(&self, id: FileId) -> bool {
        !self
            .files
            .iter()
            .any(|f| f.queue == id.queue && f.seq > id.seq)
    }

    /// Returns every file missing from the middle of a queue's sequence.
    /// (Files before the first are purged, not missing.)
    pub fn missing(&self) -> Vec<FileId> {
        let mut missing = Vec::new();
        for pair in self.files.windows(2) {
            if pair[0].queue == pair[1].queue {
                missing.extend((pair[0].seq + 1..pair[1].seq).map(|seq| FileId {
                    queue: pair[0].queue,
                    seq,
                }));
            }
        }
        missing
    }
}

/// Returns the queue's name as the tool prints it.
pub fn queue_name(queue: Queue) -> &'static str {
    match queue {
        Queue::Append => "append",
        Queue::Rewrite => "rewrite",
    }
}

/// What a log file turned out to hold.
#[derive(Debug)]
pub enum Content {
    /// A valid header naming this file, and the records after it.
    Scanned(FileScan),
    /// The last file of its queue with a blank header, or a header naming
    /// another file: what a crash while creating or recycling it leaves behind.
    /// Recovery removes it; it held no records.
    Unfinished(String),
    /// A header that is unreadable or names another file, in a file that is not
    /// the last of its queue: recovery fails on it in every mode.
    BadHeader(String),
}

/// One log file, read and scanned.
#[derive(Debug)]
pub struct LogFile {
    /// The file's size in bytes.
    pub size: u64,
    /// What it holds.
    pub content: Content,
    /// When the scan stopped at damage with valid records after it: each stretch
    /// of valid records found by resuming past the damage. Recovery never applies
    /// them; they show what cutting the file there loses.
    pub beyond: Vec<Beyond>,
}

/// Valid records found past damage, and how that stretch ended.
#[derive(Debug)]
pub struct Beyond {
    /// Offset of the first valid record header after the damage.
    pub resumed_at: u64,
    /// The records from there on, with their offsets in the file.
    pub records: Vec<ScannedRecord>,
    /// Why this stretch ended, with offsets in the file.
    pub end: ScanEnd,
}

impl LogFile {
    /// Reads and scans the log file `id` of `listing`, classifying its header as
    /// recovery does (`recovery/scan.rs`).
    pub fn load(fs: &dyn FileSystem, listing: &Listing, id: FileId) -> Result<LogFile, CtlError> {
        let path = listing.log_path(id);
        let bytes = read_file(fs, &path)?;
        let head = &bytes[..bytes.len().min(FILE_HEADER_LEN)];
        let blank = head.len() < FILE_HEADER_LEN || head.iter().all(|b| *b == 0);
        let is_last = listing.is_last(id);
        let content = match scan_file(&bytes) {
            Ok(scan) if scan.id == id => Content::Scanned(scan),
            Ok(scan) => {
                let why = format!("the header names {}", scan.id);
                if is_last {
                    Content::Unfinished(format!("{why} (a crash while recycling a file)"))
                } else {
                    Content::BadHeader(why)
                }
            }
            Err(_) if blank && is_last => Content::Unfinished(
                "the header is blank or cut short (a crash while creating the file)".to_string(),
            ),
            Err(e) => Content::BadHeader(format!("file header: {e}")),
        };
        let beyond = match &content {
            Content::Scanned(scan) => resume_past_damage(&bytes, &scan.end, id),
            _ => Vec::new(),
        };
        Ok(LogFile {
            size: bytes.len() as u64,
            content,
            beyond,
        })
    }
}

/// Resumes scanning after each damage, at the next offset holding a valid
/// record header of the file, while there is one.
fn resume_past_damage(bytes: &[u8], end: &ScanEnd, id: FileId) -> Vec<Beyond> {
    let mut beyond = Vec::new();
    let mut end = end.clone();
    let sealed_end = bytes
        .len()
        .checked_sub(TRAILER_LEN)
        .filter(|&at| at >= FILE_HEADER_LEN)
        .and_then(|at| sealed_data_end(&bytes[at..], id.to_u64()));
    while let ScanEnd::Damaged { offset, .. } = end {
        let Some(at) = next_valid_header(bytes, offset as usize + 1, id) else {
            break;
        };
        // Scan the rest as if it followed the file header, then shift offsets
        // back. The trailer names the sealed end in the file's own offsets:
        // blank it in the copy and judge the shifted end against it below.
        let mut rest = bytes[..FILE_HEADER_LEN].to_vec();
        rest.extend_from_slice(&bytes[at..]);
        if sealed_end.is_some() {
            let n = rest.len();
            rest[n - TRAILER_LEN..].fill(0);
        }
        let Ok(scan) = scan_file(&rest) else {
            break; // The header decoded once; it cannot fail now.
        };
        let shift = (at - FILE_HEADER_LEN) as u64;
        let records = scan
            .records
            .into_iter()
            .map(|mut r| {
                r.offset += shift;
                r
            })
            .collect();
        end = match scan.end {
            ScanEnd::Damaged {
                offset,
                reason,
                synced,
            } => ScanEnd::Damaged {
                offset: offset + shift,
                reason,
                synced,
            },
            other => other,
        };
        end = judge_sealed_end(scan.valid_end + shift, end, sealed_end);
        beyond.push(Beyond {
            resumed_at: at as u64,
            records,
            end: end.clone(),
        });
    }
    beyond
}

/// Returns the first offset from `from` on holding a valid record header of `id`.
fn next_valid_header(bytes: &[u8], from: usize, id: FileId) -> Option<usize> {
    let raw = id.to_u64();
    let id_bytes = raw.to_le_bytes();
    (from..bytes.len().saturating_sub(RECORD_HEADER_LEN - 1)).find(|&pos| {
        // Compare the file id before paying for a checksum.
        if bytes[pos + 4..pos + 12] != id_bytes {
            return false;
        }
        let head: &[u8; RECORD_HEADER_LEN] = bytes[pos..pos + RECORD_HEADER_LEN]
            .try_into()
            .expect("the range leaves room for a header");
        matches!(RecordHeader::check(head, raw), HeaderCheck::Valid(_))
    })
}

/// Reads a whole file.
pub fn read_file(fs: &dyn FileSystem, path: &Path) -> Result<Vec<u8>, CtlError> {
    let file = fs.open(path, false).map_err(CtlError::io("open", path))?;
    let len = file.len().map_err(CtlError::io("stat", path))?;
    let len = usize::try_from(len).map_err(|_| CtlError::Io {
        op: "read",
        path: path.to_path_buf(),
        source: std::io::Error::other("file does not fit in memory"),
    })?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(0, &mut bytes)
        .map_err(CtlError::io("read", path))?;
    Ok(bytes)
}

/// Describes how a scan ended, in a few words.
pub fn describe_end(end: &ScanEnd) -> String {
    match end {
        ScanEnd::Eof => "eof".to_string(),
        ScanEnd::Zeros => "zeros (the end marker or preallocated space)".to_string(),
        ScanEnd::Stale => "stale (a record of a recycled file's past)".to_string(),
        ScanEnd::Damaged {
            offset,
            reason,
            synced,
        } => {
            let follow = if *synced {
                ", in bytes that had been synced"
            } else {
                ""
            };
            format!("damaged at offset {offset}: {reason}{follow}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_codec::crc32c;
    use strata_raftlog::format::{encode_file_header, CODEC_NONE, TAG_REMOVE_GROUP};

    const ID: FileId = FileId {
        queue: Queue::Append,
        seq: 3,
    };

    /// A file of `n` records, each removing one group; returns it and each
    /// record's offset.
    fn file(n: u8) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = encode_file_header(ID).to_vec();
        let mut offsets = Vec::new();
        for g in 0..n {
            let payload = [TAG_REMOVE_GROUP, g];
            let header = RecordHeader {
                file_id: ID.to_u64(),
                stored_len: 2,
                raw_len: 2,
                payload_crc: crc32c(&payload),
                synced_end: 24,
                codec: CODEC_NONE,
            };
            offsets.push(bytes.len());
            bytes.extend_from_slice(&header.encode());
            bytes.extend_from_slice(&payload);
        }
        (bytes, offsets)
    }

    #[test]
    fn resumes_past_each_damage() {
        let (mut bytes, offsets) = file(5);
        // Damage the payloads of records 1 and 3.
        bytes[offsets[1] + RECORD_HEADER_LEN] ^= 1;
        bytes[offsets[3] + RECORD_HEADER_LEN] ^= 1;
        let scan = scan_file(&bytes).unwrap();
        assert_eq!(scan.records.len(), 1);
        let beyond = resume_past_damage(&bytes, &scan.end, ID);
        let stretches: Vec<(u64, usize)> = beyond
            .iter()
            .map(|b| (b.resumed_at, b.records.len()))
            .collect();
        // Each resumption starts at the next record after the damaged one.
        assert_eq!(stretches, [(offsets[2] as u64, 1), (offsets[4] as u64, 1)]);
        assert_eq!(beyond[0].records[0].offset, offsets[2] as u64);
        assert!(matches!(
            beyond[0].end,
            ScanEnd::Damaged { offset, .. } if offset == offsets[3] as u64
        ));
        assert_eq!(beyond[1].end, ScanEnd::Eof);
    }

    #[test]
    fn resuming_on_damaged_bytes_never_panics() {
        let (clean, _) = file(6);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            let mut bytes = clean.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = FILE_HEADER_LEN + (x as usize >> 8) % (bytes.len() - FILE_HEADER_LEN);
                bytes[at] ^= (x as u8) | 1;
            }
            let scan = scan_file(&bytes).unwrap();
            let mut last = scan.valid_end;
            for b in resume_past_damage(&bytes, &scan.end, ID) {
                assert!(b.resumed_at >= last, "resumed backwards");
                for r in &b.records {
                    assert_eq!(r.header.file_id, ID.to_u64());
                    last = r.offset + r.len as u64;
                }
                last = last.max(b.resumed_at);
            }
        }
    }
}
