//! `strata-ctl raftlog dump <dir> [--entries] [--group G]`: prints every file of
//! a raftlog directory in log order, every valid record of each, and the items of
//! each record; with `--entries`, every entry's length and first bytes. Valid
//! records found past damage are shown too, marked as dropped by recovery.
//!
//! The output is one line per file, record, item and entry, indented by level,
//! as `key=value` pairs so that it greps and diffs well.

use std::io::Write;
use std::path::Path;

use strata_fs::FileSystem;
use strata_raftlog::format::{CODEC_LZ4, CODEC_NONE};
use strata_raftlog::reader::ScannedRecord;
use strata_raftlog::{decode_items, entry_at, Item};

use crate::error::CtlError;
use crate::log_dir::{describe_end, queue_name, Content, Listing, LogFile};
use crate::Verdict;

/// Bytes of an entry shown by `--entries`.
const ENTRY_PREVIEW_BYTES: usize = 32;
/// Bytes of a key shown before it is cut.
const KEY_PREVIEW_BYTES: usize = 64;

/// What to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Print every entry.
    pub entries: bool,
    /// Print only this group's items.
    pub group: Option<u64>,
}

/// Dumps `dir`. Reports, never judges: the verdict is always clean.
pub fn run(
    fs: &dyn FileSystem,
    dir: &Path,
    options: &Options,
    out: &mut impl Write,
) -> Result<Verdict, CtlError> {
    let listing = Listing::read(fs, dir)?;
    for &id in &listing.files {
        let file = LogFile::load(fs, &listing, id)?;
        write!(
            out,
            "file {} queue={} seq={} size={}",
            id,
            queue_name(id.queue),
            id.seq,
            file.size
        )?;
        match &file.content {
            Content::Scanned(scan) => {
                writeln!(
                    out,
                    " version={} records={} data_end={} end={}",
                    scan.version,
                    scan.records.len(),
                    scan.valid_end,
                    describe_end(&scan.end)
                )?;
                for rec in &scan.records {
                    dump_record(rec, options, out)?;
                }
                for stretch in &file.beyond {
                    writeln!(
                        out,
                        "  resumed at offset={} past the damage (recovery drops what follows) \
                         records={} end={}",
                        stretch.resumed_at,
                        stretch.records.len(),
                        describe_end(&stretch.end)
                    )?;
                    for rec in &stretch.records {
                        dump_record(rec, options, out)?;
                    }
                }
            }
            Content::Unfinished(why) => writeln!(out, " unfinished: {why}")?,
            Content::BadHeader(why) => writeln!(out, " bad_header: {why}")?,
        }
    }
    for id in listing.missing() {
        writeln!(out, "missing {id}")?;
    }
    for name in &listing.recycled {
        writeln!(out, "recycled {name}")?;
    }
    for name in &listing.other {
        writeln!(out, "other {name}")?;
    }
    Ok(Verdict::Clean)
}

fn dump_record(
    rec: &ScannedRecord,
    options: &Options,
    out: &mut impl Write,
) -> Result<(), CtlError> {
    let payload = rec.payload.as_slice();
    let items = match decode_items(payload) {
        Ok(items) => items,
        Err(e) => {
            // The scan keeps only records whose items decode; say so if not.
            writeln!(out, "  record offset={} undecodable: {e}", rec.offset)?;
            return Ok(());
        }
    };
    let shown: Vec<&Item<'_>> = items
        .iter()
        .filter(|item| item.is_engine_wide() || options.group.is_none_or(|g| item.group() == g))
        .collect();
    if shown.is_empty() && options.group.is_some() {
        return Ok(());
    }
    let codec = match rec.header.codec {
        CODEC_NONE => "none",
        CODEC_LZ4 => "lz4",
        _ => "unknown",
    };
    writeln!(
        out,
        "  record offset={} len={} codec={} raw={} stored={} items={}",
        rec.offset,
        rec.len,
        codec,
        rec.header.raw_len,
        rec.header.stored_len,
        items.len()
    )?;
    for item in shown {
        dump_item(payload, item, options, out)?;
    }
    Ok(())
}

fn dump_item(
    payload: &[u8],
    item: &Item<'_>,
    options: &Options,
    out: &mut impl Write,
) -> Result<(), CtlError> {
    match *item {
        Item::Entries {
            group,
            first_index,
            count,
            body_offset,
        } => {
            let last = first_index + count as u64 - 1;
            writeln!(
                out,
                "    entries group={group} index={first_index}..={last} count={count}"
            )?;
            if options.entries {
                for position in 0..count {
                    let index = first_index + position as u64;
                    match entry_at(payload, body_offset, count, position) {
                        Ok(data) => writeln!(
                            out,
                            "      entry index={index} len={} hex={}",
                            data.len(),
                            hex_preview(data, ENTRY_PREVIEW_BYTES)
                        )?,
                        Err(e) => writeln!(out, "      entry index={index} undecodable: {e}")?,
                    }
                }
            }
        }
        Item::Put { group, key, value } => writeln!(
            out,
            "    put group={group} key={} value_len={}",
            quoted(key),
            value.len()
        )?,
        Item::Delete { group, key } => {
            writeln!(out, "    delete group={group} key={}", quoted(key))?
        }
        Item::CompactTo { group, index } => {
            writeln!(out, "    compact_to group={group} index={index}")?
        }
        Item::RemoveGroup { group } => writeln!(out, "    remove_group group={group}")?,
        Item::PurgedBelow { seq } => writeln!(out, "    purged_below seq={seq}")?,
    }
    Ok(())
}

/// Returns up to `max` bytes as lowercase hex, with `...` when cut.
fn hex_preview(data: &[u8], max: usize) -> String {
    let mut s: String = data[..data.len().min(max)]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if data.len() > max {
        s.push_str("...");
    }
    s
}

/// Returns a key in double quotes, non-printable bytes escaped, cut when long.
fn quoted(key: &[u8]) -> String {
    let shown = &key[..key.len().min(KEY_PREVIEW_BYTES)];
    let cut = if key.len() > KEY_PREVIEW_BYTES {
        "..."
    } else {
        ""
    };
    format!("\"{}\"{cut}", shown.escape_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_cut_long_values() {
        assert_eq!(hex_preview(b"\x00\xab", 32), "00ab");
        assert_eq!(hex_preview(&[0xff; 40], 2), "ffff...");
        assert_eq!(quoted(b"raft_state"), "\"raft_state\"");
        assert_eq!(quoted(b"a\x01\""), "\"a\\x01\\\"\"");
        assert_eq!(quoted(&[b'k'; 70]), format!("\"{}\"...", "k".repeat(64)));
    }
}
