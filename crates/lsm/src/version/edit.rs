//! `VersionEdit`: one change to a column family's file set, as the manifest
//! records it: files added and deleted, and the watermarks (log number, next
//! file number, last seqno) that move with them.
//!
//! Payload grammar (varints LEB128; tags in `format.rs`, frozen; spec in
//! `docs/format/manifest.md`):
//! ```text
//! payload = field*
//! field   = u8 tag | body
//! 1 COLUMN_FAMILY     varint cf                       (at most once)
//! 2 LOG_NUMBER        varint                          (at most once)
//! 3 NEXT_FILE_NUMBER  varint                          (at most once)
//! 4 LAST_SEQNO        varint (<= MAX_SEQNO)           (at most once)
//! 5 DELETED_FILE      varint level | varint number
//! 6 ADDED_FILE        varint level | varint number | varint size
//!                     | varint len | smallest | varint len | largest
//!                     | varint smallest_seqno | varint largest_seqno
//! 7 ADDED_BLOB_FILE   varint number | varint size | varint record_count
//!                     | varint value_bytes
//! 8 DELETED_BLOB_FILE varint number
//! 9 FILE_BLOB_REFS    varint number | varint count
//!                     | (varint blob_number | varint bytes)*   (one per added
//!                     file with references, naming it; numbers ascending)
//! 10 ADDED_FILE_FLAGS ADDED_FILE's fields | varint flags   (bit 0: the file
//!                     may hold range tombstones; others 0)
//! ```
//! The encoder writes every added file as ADDED_FILE_FLAGS; ADDED_FILE,
//! from manifests written before the flags, decodes as a file that may hold
//! range tombstones.
//! The encoder writes the fields in this order (scalars, then deletions,
//! then additions, then blob deletions and additions); the decoder accepts
//! any order, since meaning does not depend on it: a builder applies
//! deletions before additions.
//!
//! Invariants:
//! - The decoder never panics and never allocates more than its input
//!   implies; an unknown tag, a repeated scalar, a level above 255, a bad
//!   key, an inverted range or a seqno past `MAX_SEQNO` is a typed
//!   [`DecodeError`] naming the offset.
//! - `decode(encode(e)) == e` for every edit the decoder accepts.

use strata_codec::{put_varint, DecodeError, Reader};

use super::format::*;
use super::{BlobFileDesc, FileDesc, FileNumber};
use crate::column_family::{ColumnFamilyId, DEFAULT_COLUMN_FAMILY};
use crate::key::{InternalKey, SeqNo, MAX_SEQNO};

/// One file's blob references: `(blob file number, value bytes)`.
type BlobRefs = Vec<(FileNumber, u64)>;

/// One change to a column family's file set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionEdit {
    /// The column family changed.
    pub column_family: ColumnFamilyId,
    /// The new log number, if the edit moves it.
    pub log_number: Option<u64>,
    /// The new next file number, if the edit moves it.
    pub next_file_number: Option<FileNumber>,
    /// The new last sequence number, if the edit moves it.
    pub last_seqno: Option<SeqNo>,
    /// Files removed: `(level, number)`.
    pub deleted: Vec<(u8, FileNumber)>,
    /// Files added: `(level, description)`.
    pub added: Vec<(u8, FileDesc)>,
    /// Blob files removed.
    pub deleted_blob_files: Vec<FileNumber>,
    /// Blob files added.
    pub added_blob_files: Vec<BlobFileDesc>,
}

impl VersionEdit {
    /// Returns an empty edit of the default column family.
    pub fn new() -> VersionEdit {
        VersionEdit::default()
    }

    /// Records that `level` gains the file `desc`.
    pub fn add_file(&mut self, level: u8, desc: FileDesc) -> &mut Self {
        self.added.push((level, desc));
        self
    }

    /// Records that `level` loses file `number`.
    pub fn delete_file(&mut self, level: u8, number: FileNumber) -> &mut Self {
        self.deleted.push((level, number));
        self
    }

    /// Records that the version gains blob file `desc`.
    pub fn add_blob_file(&mut self, desc: BlobFileDesc) -> &mut Self {
        self.added_blob_files.push(desc);
        self
    }

    /// Records that the version loses blob file `number`.
    pub fn delete_blob_file(&mut self, number: FileNumber) -> &mut Self {
        self.deleted_blob_files.push(number);
        self
    }

    /// Returns the encoded payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        self.encode_to(&mut buf);
        buf
    }

    /// Appends the encoded payload to `buf`.
    pub fn encode_to(&self, buf: &mut Vec<u8>) {
        if self.column_family != DEFAULT_COLUMN_FAMILY {
            buf.push(TAG_COLUMN_FAMILY);
            put_varint(buf, u64::from(self.column_family));
        }
        let scalars = [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQNO, self.last_seqno),
        ];
        for (tag, value) in scalars {
            if let Some(v) = value {
                buf.push(tag);
                put_varint(buf, v);
            }
        }
        for &(level, number) in &self.deleted {
            // { u8 tag | varint level | varint number }
            buf.push(TAG_DELETED_FILE);
            put_varint(buf, u64::from(level));
            put_varint(buf, number);
        }
        for (level, d) in &self.added {
            // { u8 tag | varint level | varint number | varint size | key | key
            //   | varint | varint | varint flags }
            buf.push(TAG_ADDED_FILE_FLAGS);
            put_varint(buf, u64::from(*level));
            put_varint(buf, d.number);
            put_varint(buf, d.size);
            for key in [&d.smallest, &d.largest] {
                put_varint(buf, key.encoded().len() as u64);
                buf.extend_from_slice(key.encoded());
            }
            put_varint(buf, d.smallest_seqno);
            put_varint(buf, d.largest_seqno);
            let flags = if d.range_tombstones {
                FILE_FLAG_RANGE_TOMBSTONES
            } else {
                0
            };
            put_varint(buf, flags);
        }
        for (_, d) in self.added.iter().filter(|(_, d)| !d.blob_refs.is_empty()) {
            buf.push(TAG_FILE_BLOB_REFS);
            put_varint(buf, d.number);
            put_varint(buf, d.blob_refs.len() as u64);
            for &(blob, bytes) in &d.blob_refs {
                put_varint(buf, blob);
                put_varint(buf, bytes);
            }
        }
        for &number in &self.deleted_blob_files {
            buf.push(TAG_DELETED_BLOB_FILE);
            put_varint(buf, number);
        }
        for b in &self.added_blob_files {
            buf.push(TAG_ADDED_BLOB_FILE);
            for v in [b.number, b.size, b.record_count, b.value_bytes] {
                put_varint(buf, v);
            }
        }
    }

    /// Decodes a payload; see the module doc for what is refused.
    pub fn decode(payload: &[u8]) -> Result<VersionEdit, DecodeError> {
        let mut r = Reader::new(payload);
        let mut edit = VersionEdit::new();
        let mut seen_cf = false;
        // (offset, file number, references) of each FILE_BLOB_REFS field.
        let mut refs: Vec<(usize, FileNumber, BlobRefs)> = Vec::new();
        while !r.is_empty() {
            let at = r.position();
            let tag = r.u8()?;
            match tag {
                TAG_COLUMN_FAMILY => {
                    once(&mut seen_cf, "column family", at)?;
                    let cf = r.varint()?;
                    edit.column_family = ColumnFamilyId::try_from(cf)
                        .map_err(|_| DecodeError::invalid("column family", at, cf.to_string()))?;
                }
                TAG_LOG_NUMBER => set_once(&mut edit.log_number, r.varint()?, "log number", at)?,
                TAG_NEXT_FILE_NUMBER => set_once(
                    &mut edit.next_file_number,
                    r.varint()?,
                    "next file number",
                    at,
                )?,
                TAG_LAST_SEQNO => {
                    let s = seqno(&mut r)?;
                    set_once(&mut edit.last_seqno, s, "last seqno", at)?;
                }
                TAG_DELETED_FILE => {
                    let level = level(&mut r)?;
                    edit.deleted.push((level, r.varint()?));
                }
                TAG_ADDED_FILE | TAG_ADDED_FILE_FLAGS => {
                    let level = level(&mut r)?;
                    let mut desc = FileDesc {
                        number: r.varint()?,
                        size: r.varint()?,
                        smallest: file_key(&mut r)?,
                        largest: file_key(&mut r)?,
                        smallest_seqno: seqno(&mut r)?,
                        largest_seqno: seqno(&mut r)?,
                        blob_refs: Vec::new(),
                        range_tombstones: true,
                    };
                    if tag == TAG_ADDED_FILE_FLAGS {
                        let flags = r.varint()?;
                        if flags & !FILE_FLAG_RANGE_TOMBSTONES != 0 {
                            return Err(DecodeError::invalid(
                                "added file flags",
                                at,
                                format!("unknown bits in {flags:#x}"),
                            ));
                        }
                        desc.range_tombstones = flags & FILE_FLAG_RANGE_TOMBSTONES != 0;
                    }
                    desc.validate()
                        .map_err(|e| DecodeError::invalid("added file", at, e))?;
                    edit.added.push((level, desc));
                }
                TAG_DELETED_BLOB_FILE => edit.deleted_blob_files.push(r.varint()?),
                TAG_FILE_BLOB_REFS => {
                    let number = r.varint()?;
                    let count = r.varint()?;
                    // Each pair takes at least two bytes: bound the count by
                    // the input before allocating.
                    if count > r.remaining() as u64 / 2 {
                        return Err(DecodeError::invalid(
                            "file blob refs",
                            at,
                            format!("{count} pairs in {} bytes", r.remaining()),
                        ));
                    }
                    let mut pairs = Vec::with_capacity(count as usize);
                    for _ in 0..count {
                        pairs.push((r.varint()?, r.varint()?));
                    }
                    refs.push((at, number, pairs));
                }
                TAG_ADDED_BLOB_FILE => {
                    let desc = BlobFileDesc {
                        number: r.varint()?,
                        size: r.varint()?,
                        record_count: r.varint()?,
                        value_bytes: r.varint()?,
                    };
                    desc.validate()
                        .map_err(|e| DecodeError::invalid("added blob file", at, e))?;
                    edit.added_blob_files.push(desc);
                }
                other => {
                    return Err(DecodeError::invalid(
                        "version edit tag",
                        at,
                        format!("unknown tag {other}"),
                    ))
                }
            }
        }
        for (at, number, pairs) in refs {
            let Some((_, desc)) = edit.added.iter_mut().find(|(_, d)| d.number == number) else {
                return Err(DecodeError::invalid(
                    "file blob refs",
                    at,
                    format!("file {number} is not added by the edit"),
                ));
            };
            if !desc.blob_refs.is_empty() || pairs.is_empty() {
                return Err(DecodeError::invalid(
                    "file blob refs",
                    at,
                    format!("file {number}: references repeated or empty"),
                ));
            }
            desc.blob_refs = pairs;
            desc.validate()
                .map_err(|e| DecodeError::invalid("file blob refs", at, e))?;
        }
        Ok(edit)
    }
}

fn once(seen: &mut bool, what: &'static str, at: usize) -> Result<(), DecodeError> {
    if std::mem::replace(seen, true) {
        return Err(DecodeError::invalid(what, at, "field repeated"));
    }
    Ok(())
}

fn set_once(
    slot: &mut Option<u64>,
    v: u64,
    what: &'static str,
    at: usize,
) -> Result<(), DecodeError> {
    if slot.replace(v).is_some() {
        return Err(DecodeError::invalid(what, at, "field repeated"));
    }
    Ok(())
}

fn level(r: &mut Reader<'_>) -> Result<u8, DecodeError> {
    let at = r.position();
    let l = r.varint()?;
    u8::try_from(l).map_err(|_| DecodeError::invalid("level", at, l.to_string()))
}

fn seqno(r: &mut Reader<'_>) -> Result<SeqNo, DecodeError> {
    let at = r.position();
    let s = r.varint()?;
    if s > MAX_SEQNO {
        return Err(DecodeError::invalid(
            "seqno",
            at,
            format!("{s} > {MAX_SEQNO}"),
        ));
    }
    Ok(s)
}

fn file_key(r: &mut Reader<'_>) -> Result<InternalKey, DecodeError> {
    let at = r.position();
    let bytes = r.length_prefixed()?;
    if bytes.len() > FILE_KEY_BYTES_MAX {
        return Err(DecodeError::invalid(
            "file key",
            at,
            format!("{} bytes > {FILE_KEY_BYTES_MAX}", bytes.len()),
        ));
    }
    InternalKey::decode(bytes).map_err(|e| DecodeError::invalid("file key", at, e.to_string()))
}
