//! The payload of one manifest record: the changes of one append.
//!
//! ```text
//! payload = varint count | entry{count}
//! entry   = u8 tag | varint len | body[len]
//! tag 1 EDIT                   body = VersionEdit::encode (docs/format/manifest.md)
//! tag 2 CREATE_COLUMN_FAMILY   body = varint id | name (UTF-8, 1..=255 bytes)
//! tag 3 DROP_COLUMN_FAMILY     body = varint id
//! ```
//! Tags are frozen and never reused; 0 is never a tag. Each body is length
//! prefixed so that a decoder checks it ends exactly where its entry does.

use strata_codec::{put_varint, DecodeError, Reader};

use super::ManifestRecord;
use crate::column_family::ColumnFamilyId;
use crate::version::VersionEdit;

const TAG_EDIT: u8 = 1;
const TAG_CREATE_COLUMN_FAMILY: u8 = 2;
const TAG_DROP_COLUMN_FAMILY: u8 = 3;

/// The longest column-family name, in bytes of UTF-8.
pub const COLUMN_FAMILY_NAME_BYTES_MAX: usize = 255;

/// Encodes `records` as the payload of one manifest record.
pub fn encode_records(records: &[ManifestRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, records.len() as u64);
    let mut body = Vec::new();
    for record in records {
        body.clear();
        let tag = match record {
            ManifestRecord::Edit(edit) => {
                edit.encode_to(&mut body);
                TAG_EDIT
            }
            ManifestRecord::CreateColumnFamily { id, name } => {
                put_varint(&mut body, *id as u64);
                body.extend_from_slice(name.as_bytes());
                TAG_CREATE_COLUMN_FAMILY
            }
            ManifestRecord::DropColumnFamily { id } => {
                put_varint(&mut body, *id as u64);
                TAG_DROP_COLUMN_FAMILY
            }
        };
        put_entry(&mut out, tag, &body);
    }
    out
}

/// Appends one entry: `u8 tag | varint len | body`.
fn put_entry(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    put_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// Encodes `edits` as [`encode_records`] encodes them as
/// [`ManifestRecord::Edit`]s, without copying them into records, each
/// checked to decode back (what [`validate`] checks of an edit).
pub fn encode_checked_edits(edits: &[VersionEdit]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    put_varint(&mut out, edits.len() as u64);
    let mut body = Vec::new();
    for edit in edits {
        body.clear();
        edit.encode_to(&mut body);
        VersionEdit::decode(&body).map_err(|e| format!("the edit would not decode: {e}"))?;
        put_entry(&mut out, TAG_EDIT, &body);
    }
    Ok(out)
}

/// Checks what the decoder would refuse in a record to be written, so that a
/// bad argument is refused before it reaches disk.
pub(super) fn validate(record: &ManifestRecord) -> Result<(), String> {
    match record {
        ManifestRecord::CreateColumnFamily { name, .. } => check_name(name.as_bytes()),
        ManifestRecord::Edit(edit) => VersionEdit::decode(&edit.encode())
            .map(|_| ())
            .map_err(|e| format!("the edit would not decode: {e}")),
        ManifestRecord::DropColumnFamily { .. } => Ok(()),
    }
}

fn check_name(name: &[u8]) -> Result<(), String> {
    if name.is_empty() || name.len() > COLUMN_FAMILY_NAME_BYTES_MAX {
        return Err(format!(
            "a column-family name of {} bytes (1 to {COLUMN_FAMILY_NAME_BYTES_MAX} allowed)",
            name.len()
        ));
    }
    std::str::from_utf8(name).map_err(|_| "a column-family name that is not UTF-8".to_string())?;
    Ok(())
}

/// Decodes one manifest record's payload. Never panics; refuses an unknown
/// tag, a body that does not end where its length says, a column-family id
/// past `u32`, a bad name, fewer entries than the count, or bytes after them.
pub fn decode_records(payload: &[u8]) -> Result<Vec<ManifestRecord>, DecodeError> {
    let mut r = Reader::new(payload);
    let count = r.varint()?;
    // Every entry takes at least two bytes: a hostile count allocates nothing.
    let mut out = Vec::with_capacity((count as usize).min(r.remaining() / 2));
    for _ in 0..count {
        let at = r.position();
        let tag = r.u8()?;
        let body = r.length_prefixed()?;
        let body_at = r.position() - body.len();
        let record = match tag {
            TAG_EDIT => {
                ManifestRecord::Edit(VersionEdit::decode(body).map_err(|e| shift(e, body_at))?)
            }
            TAG_CREATE_COLUMN_FAMILY => {
                let mut b = Reader::new(body);
                let id = column_family(&mut b, body_at)?;
                let name = b.bytes(b.remaining())?;
                check_name(name)
                    .map_err(|why| DecodeError::invalid("column family name", body_at, why))?;
                let name = String::from_utf8(name.to_vec()).map_err(|_| {
                    DecodeError::invalid("column family name", body_at, "not UTF-8")
                })?;
                ManifestRecord::CreateColumnFamily { id, name }
            }
            TAG_DROP_COLUMN_FAMILY => {
                let mut b = Reader::new(body);
                let id = column_family(&mut b, body_at)?;
                if !b.is_empty() {
                    return Err(DecodeError::invalid(
                        "drop column family",
                        body_at,
                        "bytes after the id",
                    ));
                }
                ManifestRecord::DropColumnFamily { id }
            }
            _ => {
                return Err(DecodeError::invalid(
                    "manifest record tag",
                    at,
                    format!("unknown tag {tag}"),
                ))
            }
        };
        out.push(record);
    }
    if !r.is_empty() {
        return Err(DecodeError::invalid(
            "manifest record",
            r.position(),
            "bytes after the last entry",
        ));
    }
    Ok(out)
}

fn column_family(b: &mut Reader<'_>, body_at: usize) -> Result<ColumnFamilyId, DecodeError> {
    let id = b.varint().map_err(|e| shift(e, body_at))?;
    ColumnFamilyId::try_from(id)
        .map_err(|_| DecodeError::invalid("column family", body_at, format!("{id} is past u32")))
}

/// Makes an error's offset, relative to a body, relative to the payload.
fn shift(e: DecodeError, by: usize) -> DecodeError {
    match e {
        DecodeError::Truncated { offset, needed } => DecodeError::Truncated {
            offset: offset + by,
            needed,
        },
        DecodeError::BadVarint { offset } => DecodeError::BadVarint {
            offset: offset + by,
        },
        DecodeError::Invalid {
            what,
            offset,
            detail,
        } => DecodeError::Invalid {
            what,
            offset: offset + by,
            detail,
        },
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An install's edits, encoded without records (`encode_checked_edits`),
    /// are the bytes `encode_records` makes of them as records.
    #[test]
    fn edits_encode_as_their_records_do() {
        let mut edit = VersionEdit::new();
        edit.column_family = 3;
        edit.log_number = Some(12);
        edit.delete_file(1, 7);
        let edits = vec![edit, VersionEdit::new()];
        let records: Vec<ManifestRecord> =
            edits.iter().cloned().map(ManifestRecord::Edit).collect();
        assert_eq!(
            encode_checked_edits(&edits).unwrap(),
            encode_records(&records)
        );
        assert_eq!(encode_checked_edits(&[]).unwrap(), encode_records(&[]));
    }

    #[test]
    fn records_round_trip() {
        let mut edit = VersionEdit::new();
        edit.column_family = 3;
        edit.log_number = Some(12);
        edit.delete_file(1, 7);
        let records = vec![
            ManifestRecord::CreateColumnFamily {
                id: 3,
                name: "writes".into(),
            },
            ManifestRecord::Edit(edit),
            ManifestRecord::DropColumnFamily { id: 2 },
            ManifestRecord::Edit(VersionEdit::new()),
        ];
        let bytes = encode_records(&records);
        assert_eq!(decode_records(&bytes).unwrap(), records);
        assert_eq!(decode_records(&encode_records(&[])).unwrap(), vec![]);
        // Every strict prefix and every extension is refused.
        for n in 0..bytes.len() {
            assert!(decode_records(&bytes[..n]).is_err(), "prefix {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_records(&longer).is_err());
    }

    #[test]
    fn the_bytes_are_as_documented() {
        // docs/format/manifest.md, "Record payload".
        let records = vec![
            ManifestRecord::CreateColumnFamily {
                id: 1,
                name: "lock".into(),
            },
            ManifestRecord::DropColumnFamily { id: 1 },
        ];
        assert_eq!(
            encode_records(&records),
            [2, 2, 5, 1, b'l', b'o', b'c', b'k', 3, 1, 1]
        );
    }

    #[test]
    fn names_are_checked() {
        let create = |name: &[u8]| {
            let mut b = vec![1u8, TAG_CREATE_COLUMN_FAMILY, (1 + name.len()) as u8];
            if name.len() >= 127 {
                // Two-byte varint length.
                b.truncate(2);
                put_varint(&mut b, (1 + name.len()) as u64);
            }
            b.push(9);
            b.extend_from_slice(name);
            decode_records(&b)
        };
        assert!(create(b"").is_err());
        assert!(create(&[0xff, 0xfe]).is_err());
        assert!(create(&[b'x'; 256]).is_err());
        assert!(create(&[b'x'; 255]).is_ok());
        let long = ManifestRecord::CreateColumnFamily {
            id: 1,
            name: "x".repeat(256),
        };
        assert!(validate(&long).is_err());
        // An id past u32.
        let mut b = vec![1u8, TAG_DROP_COLUMN_FAMILY, 5];
        put_varint(&mut b, 1 << 32);
        assert!(decode_records(&b).is_err());
        // Unknown tags, 0 included.
        assert!(decode_records(&[1, 0, 0]).is_err());
        assert!(decode_records(&[1, 4, 0]).is_err());
    }
}
