//! Writes the seed inputs of the fuzz targets (`crates/raftlog/fuzz/seeds/<target>/`)
//! from files the engine itself writes, so that each target starts from valid
//! input of the current format instead of random bytes that fail the first
//! checksum. Every seed is run through its target's oracle before it is kept.
//!
//! Run it again after a format change (the old seeds still work as inputs, but
//! stop reaching the decoders' deep paths):
//!
//! ```sh
//! cargo run -p strata-raftlog --example fuzz_seeds -- crates/raftlog/fuzz/seeds
//! ```
//!
//! It replaces the files it names and leaves any other file there (inputs that
//! once crashed a target, kept as regressions) alone.

#[path = "../fuzz/src/decoders.rs"]
mod decoders;
#[path = "../fuzz/src/recover_dir.rs"]
mod recover_dir;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_raftlog::format::{
    encode_file_header, FileId, Queue, FILE_HEADER_LEN, RECORD_HEADER_LEN, TAG_PURGED_BELOW,
};
use strata_raftlog::reader::scan_file;
use strata_raftlog::section::{Trailer, TRAILER_LEN};
use strata_raftlog::{Config, Engine, LogBatch};

/// Where the engine writes inside each `MemFs`.
const DIR: &str = "/db";

/// The smallest file size the engine accepts: sealed files stay as small as
/// they can be.
const FILE_BYTES: u64 = 64 << 10;

/// Batches with at least this much payload are compressed, so that the small
/// files hold both codecs.
const COMPRESS_FROM: u64 = 1 << 10;

fn main() {
    let out = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("crates/raftlog/fuzz/seeds"));
    let mut seeds = Seeds { out, written: 0 };

    let small = small_files();
    let rotated = rotated_files();

    seeds.put(
        "file_header",
        "append-queue",
        &small[0].1[..FILE_HEADER_LEN],
        decoders::file_header,
    );
    let rewrite = FileId {
        queue: Queue::Rewrite,
        seq: 1,
    };
    seeds.put(
        "file_header",
        "rewrite-queue",
        &encode_file_header(rewrite),
        decoders::file_header,
    );

    for (i, (id, bytes)) in small.iter().enumerate() {
        seeds.put(
            "scan_file",
            &format!("session-{}", i + 1),
            bytes,
            decoders::scan_file,
        );
        let scan = scan_file(bytes).expect("the engine's own file scans");
        for (r, rec) in scan.records.iter().enumerate() {
            let name = format!("session-{}-record-{}", i + 1, r + 1);
            let at = rec.offset as usize;
            let mut header = id.to_u64().to_le_bytes().to_vec();
            header.extend_from_slice(&bytes[at..at + RECORD_HEADER_LEN]);
            seeds.put("record_header", &name, &header, decoders::record_header);
            seeds.put(
                "batch_payload",
                &name,
                &rec.payload,
                decoders::batch_payload,
            );
        }
    }

    // Closing seals a file too: the small files carry a section with every
    // kind of change; the rotated file, one over many records and groups.
    let (trailer, section) = index_section(&small[0]);
    seeds.put("index_section", "trailer", trailer, decoders::index_section);
    seeds.put(
        "index_section",
        "section-of-closed-file",
        section,
        decoders::index_section,
    );
    let (_, section) = index_section(&rotated[0]);
    seeds.put(
        "index_section",
        "section-of-rotated-file",
        section,
        decoders::index_section,
    );

    // A purge logs the first file it keeps: a record and a section with it.
    let (payload, sealed) = purged_files();
    seeds.put(
        "batch_payload",
        "purged-below",
        &payload,
        decoders::batch_payload,
    );
    seeds.put("scan_file", "purged-below", &sealed.1, decoders::scan_file);
    let (_, section) = index_section(&sealed);
    seeds.put(
        "index_section",
        "section-with-purge-floor",
        section,
        decoders::index_section,
    );

    // recover_dir's layout: a control byte (bits 0-1: files - 1), a flags byte
    // (0: every file keeps its own header and checksums), then the files.
    seeds.put(
        "recover_dir",
        "two-sessions",
        &dir_input(&small),
        recover_dir::run,
    );
    // The same files with no header, so that the flags byte (bit i: prepend a
    // valid header to file i) decides: the fuzzer flips one bit to find it.
    let headless: Vec<(FileId, Vec<u8>)> = small
        .iter()
        .map(|(id, b)| (*id, b[FILE_HEADER_LEN..].to_vec()))
        .collect();
    let mut input = dir_input(&headless);
    input[1] = 0b11;
    seeds.put(
        "recover_dir",
        "two-sessions-headers-by-flag",
        &input,
        recover_dir::run,
    );

    eprintln!(
        "fuzz_seeds: wrote {} seeds into {}",
        seeds.written,
        seeds.out.display()
    );
}

/// Files of two sessions on one directory (the engine starts a new file when
/// it opens), each with a handful of records: entries uncompressed and
/// compressed, puts, a delete, a compaction, a group removed.
fn small_files() -> Vec<(FileId, Vec<u8>)> {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut batch = LogBatch::new();
    batch.add_entries(1, 1, &[b"first entry".as_slice(), b"second"]);
    batch.put(1, b"raft_state", b"term=1 commit=2");
    engine.write(&mut batch, true).expect("write");
    let mut batch = LogBatch::new();
    let big: Vec<Vec<u8>> = (0..3u8).map(|i| vec![b'a' + i; 700]).collect();
    batch.add_entries(1, 3, &big);
    batch.add_entries(2, 1, &[b"group two".as_slice()]);
    batch.put(2, b"raft_state", b"term=2 commit=1");
    engine.write(&mut batch, true).expect("write");
    let mut batch = LogBatch::new();
    batch.delete(2, b"raft_state");
    batch.compact_to(1, 3);
    batch.add_entries(3, 7, &[b"short-lived".as_slice()]);
    engine.write(&mut batch, true).expect("write");
    let mut batch = LogBatch::new();
    batch.remove_group(3);
    engine.write(&mut batch, true).expect("write");
    engine.close().expect("close");

    let engine = open(&fs);
    let mut batch = LogBatch::new();
    batch.add_entries(1, 6, &[b"after restart".as_slice()]);
    batch.put(1, b"raft_state", b"term=3 commit=6");
    engine.write(&mut batch, true).expect("write");
    engine.close().expect("close");
    files(&fs)
}

/// A file sealed by rotation and the file after it: small batches to 8 groups
/// until the first file is full.
fn rotated_files() -> Vec<(FileId, Vec<u8>)> {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut next = [1u64; 8];
    let mut round = 0u64;
    while engine.file_stats().append_files < 2 {
        let mut batch = LogBatch::new();
        for (g, first) in next.iter_mut().enumerate() {
            let entry = format!("group {g} round {round} ").repeat(4);
            batch.add_entries(g as u64 + 1, *first, &[entry.as_bytes()]);
            *first += 1;
        }
        batch.put(1 + round % 8, b"raft_state", &round.to_le_bytes());
        if round % 16 == 15 {
            batch.compact_to(1 + round % 8, next[(round % 8) as usize] - 4);
        }
        engine.write(&mut batch, false).expect("write");
        round += 1;
    }
    engine.close().expect("close");
    files(&fs)
}

/// The payload of the record a purge logs before it removes files
/// (`PURGED_BELOW`), and the file holding it, sealed by a later rotation.
fn purged_files() -> (Vec<u8>, (FileId, Vec<u8>)) {
    let fs = MemFs::new();
    let engine = open(&fs);
    let mut index = 1u64;
    let mut write_until = |engine: &Engine, files: u64| {
        while engine.file_stats().active_append_seq < files {
            let mut batch = LogBatch::new();
            batch.add_entries(1, index, &[vec![b'p'; 900]]);
            engine.write(&mut batch, false).expect("write");
            index += 1;
        }
        engine.compact_to(1, index - 1).expect("compact");
    };
    write_until(&engine, 3);
    let out = engine.purge().expect("purge");
    assert!(out.files_purged > 0, "{out:?}");
    let holder = engine.file_stats().active_append_seq;
    write_until(&engine, holder + 1);
    engine.close().expect("close");
    let sealed = files(&fs)
        .into_iter()
        .find(|(id, _)| id.seq == holder)
        .expect("the file holding the floor");
    let scan = scan_file(&sealed.1).expect("the engine's own file scans");
    let payload = scan
        .records
        .iter()
        .map(|r| r.payload.clone())
        .find(|p| p.first() == Some(&TAG_PURGED_BELOW))
        .expect("a PURGED_BELOW record");
    (payload, sealed)
}

fn open(fs: &MemFs) -> Engine {
    let config = Config {
        target_file_size_bytes: FILE_BYTES,
        compression_threshold_bytes: COMPRESS_FROM,
        preallocate: false,
        ..Config::default()
    };
    Engine::open_with_fs(DIR, config, Arc::new(fs.clone())).expect("open on MemFs")
}

/// Returns the trailer (the last bytes) and the index section of a sealed file.
fn index_section((id, bytes): &(FileId, Vec<u8>)) -> (&[u8], &[u8]) {
    let tail = &bytes[bytes.len() - TRAILER_LEN..];
    let trailer = Trailer::decode(tail, id.to_u64()).expect("a sealed file ends in a trailer");
    let at = trailer.section_offset as usize;
    (tail, &bytes[at..at + trailer.section_len as usize])
}

/// Returns the log files in `fs`, append queue first, each in sequence order.
fn files(fs: &MemFs) -> Vec<(FileId, Vec<u8>)> {
    let dir = Path::new(DIR);
    let mut ids: Vec<FileId> = fs
        .list(dir)
        .expect("list")
        .iter()
        .filter_map(|n| FileId::parse_file_name(n))
        .collect();
    ids.sort_by_key(|id| (id.queue != Queue::Append, id.seq));
    ids.into_iter()
        .map(|id| {
            let file = fs
                .open(&dir.join(id.file_name()), false)
                .expect("open file");
            let mut bytes = vec![0u8; file.len().expect("len") as usize];
            file.read_exact_at(0, &mut bytes).expect("read");
            (id, bytes)
        })
        .collect()
}

/// Encodes `files` (append queue only, numbered from 1) as a recover_dir input.
fn dir_input(files: &[(FileId, Vec<u8>)]) -> Vec<u8> {
    assert!(
        (1..=4).contains(&files.len()),
        "recover_dir takes 1 to 4 files"
    );
    assert!(files
        .iter()
        .enumerate()
        .all(|(i, (id, _))| id.queue == Queue::Append && id.seq == i as u64 + 1));
    let mut input = vec![(files.len() - 1) as u8, 0];
    for (i, (_, bytes)) in files.iter().enumerate() {
        if i > 0 {
            input.extend_from_slice(recover_dir::SEPARATOR);
        }
        input.extend_from_slice(bytes);
    }
    let parsed = recover_dir::DirInput::parse(&input);
    assert_eq!(
        parsed.files.len(),
        files.len(),
        "a file holds the separator"
    );
    input
}

/// The output directory and a count of what was written into it.
struct Seeds {
    out: PathBuf,
    written: usize,
}

impl Seeds {
    /// Checks `bytes` against `oracle` (a panic stops the program) and writes
    /// them as `<out>/<target>/<name>`.
    fn put(&mut self, target: &str, name: &str, bytes: &[u8], oracle: fn(&[u8])) {
        oracle(bytes);
        let dir = self.out.join(target);
        std::fs::create_dir_all(&dir).expect("create the seed directory");
        std::fs::write(dir.join(name), bytes).expect("write a seed");
        self.written += 1;
    }
}
