//! The recovery oracle: arbitrary bytes become a directory of up to four log
//! files in a `MemFs`, which the engine opens once in each recovery mode.
//!
//! Opening must return `Ok` or `Err`, never panic, and what it opens must hold
//! together:
//! - every entry the index holds reads back, through `get_entry` and
//!   `fetch_entries` alike;
//! - the modes agree: what AbsoluteConsistency opens, TolerateTailCorruption
//!   opens too, to the same state, and what TolerateTailCorruption opens,
//!   TolerateAnyCorruption opens to the same state;
//! - recovery settles the directory: after one successful open (in any mode) and
//!   a close, the directory reopens under AbsoluteConsistency to the same state,
//!   since the damage was cut away.
//!
//! Input layout (every input is valid; missing bytes read as zero):
//! ```text
//! byte 0: bits 0-1 files - 1 | bits 2-3 how many of them (the last ones) are
//!         rewrite-queue files | bit 4 two recovery threads | bit 5 sequences
//!         start at 5, not 1 | bit 6 preallocate new files
//! byte 1: bit i: file i starts with a valid header of its own id
//!         bit 4+i: forge file i's record checksums (see `forge_checksums`)
//! rest:   the files' bytes, separated by SEPARATOR
//! ```
//! Forging checksums lets the fuzzer past the CRCs into the batch decoder, the
//! index and the reads, which random bytes would otherwise never reach.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use strata_codec::crc32c;
use strata_fs::{FileSystem, MemFs};
use strata_raftlog::format::{
    encode_file_header, FileId, Queue, CODEC_NONE, FILE_HEADER_LEN, RECORD_HEADER_LEN,
};
use strata_raftlog::{Config, Engine, RecoveryMode};

/// Separates the files' bytes in the input.
pub const SEPARATOR: &[u8] = b"#FILE#";

/// Where the files go.
pub const DIR: &str = "/db";

/// The recovery modes, from the strictest.
pub const MODES: [RecoveryMode; 3] = [
    RecoveryMode::AbsoluteConsistency,
    RecoveryMode::TolerateTailCorruption,
    RecoveryMode::TolerateAnyCorruption,
];

/// One group as the engine shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupState {
    /// Index of `entries[0]`; 0 when the group has no entries.
    pub first: u64,
    /// Every live entry, in index order.
    pub entries: Vec<Vec<u8>>,
    /// Every key with its value, in key order.
    pub keys: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Every non-empty group as the engine shows it.
pub type State = BTreeMap<u64, GroupState>;

/// A directory decoded from fuzz input.
#[derive(Debug, Clone)]
pub struct DirInput {
    /// Each file's name and bytes.
    pub files: Vec<(FileId, Vec<u8>)>,
    /// Recovery threads to open with.
    pub threads: usize,
    /// Whether new files are preallocated.
    pub preallocate: bool,
}

impl DirInput {
    /// Decodes the input layout described in the module docs.
    pub fn parse(data: &[u8]) -> DirInput {
        let control = data.first().copied().unwrap_or(0);
        let flags = data.get(1).copied().unwrap_or(0);
        let body = data.get(2..).unwrap_or(&[]);
        let count = (control & 3) as usize + 1;
        let rewrites = (((control >> 2) & 3) as usize).min(count);
        let first_seq = if control & 0x20 != 0 { 5 } else { 1 };
        let chunks = split(body, count);
        let files = chunks
            .into_iter()
            .enumerate()
            .map(|(i, chunk)| {
                let appends = count - rewrites;
                let id = if i < appends {
                    FileId {
                        queue: Queue::Append,
                        seq: first_seq + i as u64,
                    }
                } else {
                    FileId {
                        queue: Queue::Rewrite,
                        seq: first_seq + (i - appends) as u64,
                    }
                };
                let mut bytes = Vec::with_capacity(FILE_HEADER_LEN + chunk.len());
                if flags & (1 << i) != 0 {
                    bytes.extend_from_slice(&encode_file_header(id));
                }
                bytes.extend_from_slice(chunk);
                if flags & (0x10 << i) != 0 {
                    forge_checksums(&mut bytes, id.to_u64());
                }
                (id, bytes)
            })
            .collect();
        DirInput {
            files,
            threads: if control & 0x10 != 0 { 2 } else { 1 },
            preallocate: control & 0x40 != 0,
        }
    }

    /// Writes the files into a new `MemFs`, synced.
    pub fn build(&self) -> MemFs {
        let fs = MemFs::new();
        let dir = Path::new(DIR);
        fs.create_dir_all(dir).expect("mkdir in MemFs");
        for (id, bytes) in &self.files {
            let file = fs
                .create(&dir.join(id.file_name()))
                .expect("create in MemFs");
            file.write_at(0, bytes).expect("write in MemFs");
            file.sync_all().expect("sync in MemFs");
        }
        fs.sync_dir(dir).expect("sync dir in MemFs");
        fs
    }

    /// The configuration to open with in `mode`.
    /// The config of the scanning opens: recovery reads every record, so
    /// the modes' promises about damage can be checked exactly.
    pub fn config(&self, mode: RecoveryMode) -> Config {
        Config {
            recovery_reads_index_sections: false,
            ..self.config_with_sections(mode)
        }
    }

    /// The default config: sealed files with a valid index section are not
    /// scanned, so damage in their records shows only when they are read.
    pub fn config_with_sections(&self, mode: RecoveryMode) -> Config {
        Config {
            target_file_size_bytes: 64 << 10,
            recovery_mode: mode,
            recovery_threads: self.threads,
            preallocate: self.preallocate,
            ..Config::default()
        }
    }
}

/// Splits `body` into at most `count` chunks at SEPARATOR; the last chunk keeps
/// any further separators.
fn split(body: &[u8], count: usize) -> Vec<&[u8]> {
    let mut chunks = Vec::with_capacity(count);
    let mut rest = body;
    while chunks.len() + 1 < count {
        match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(at) => {
                chunks.push(&rest[..at]);
                rest = &rest[at + SEPARATOR.len()..];
            }
            None => break,
        }
    }
    chunks.push(rest);
    chunks
}

/// Rewrites the record headers found from offset 24 on so that they pass the
/// checks a fuzzer cannot solve: each gets this file's id, a stored length that
/// fits in the file, a raw length LZ4 could reach, and correct checksums. The
/// codec, the reserved bytes and the payloads stay as the fuzzer made them.
pub fn forge_checksums(bytes: &mut [u8], file_id: u64) {
    let mut pos = FILE_HEADER_LEN;
    while pos + RECORD_HEADER_LEN <= bytes.len() {
        let (head, rest) = bytes[pos..].split_at_mut(RECORD_HEADER_LEN);
        if head.iter().all(|b| *b == 0) {
            break; // Leave the clean end in place.
        }
        let word = |h: &[u8], i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4"));
        let stored = (word(head, 12) as usize).min(rest.len());
        let raw = if head[24] == CODEC_NONE {
            stored
        } else {
            // LZ4 expands at most ~255 times; a larger claim only costs memory.
            (word(head, 16) as usize).min(stored * 255 + 64)
        };
        head[4..12].copy_from_slice(&file_id.to_le_bytes());
        head[12..16].copy_from_slice(&(stored as u32).to_le_bytes());
        head[16..20].copy_from_slice(&(raw as u32).to_le_bytes());
        head[20..24].copy_from_slice(&crc32c(&rest[..stored]).to_le_bytes());
        let crc = crc32c(&head[4..]);
        head[..4].copy_from_slice(&crc.to_le_bytes());
        pos += RECORD_HEADER_LEN + stored;
    }
}

/// Returns every non-empty group of `engine`, reading every entry it indexes;
/// panics if an indexed entry does not read back.
pub fn engine_state(engine: &Engine) -> State {
    let mut state = State::new();
    for g in engine.groups() {
        let keys = engine.scan_keys(g);
        let (first, entries) = match (engine.first_index(g), engine.last_index(g)) {
            (Some(first), Some(last)) => {
                assert!(first <= last, "group {g}: first {first} > last {last}");
                let entries: Vec<Vec<u8>> = (first..=last)
                    .map(|i| match engine.get_entry(g, i) {
                        Ok(Some(e)) => e,
                        other => panic!("group {g}: indexed entry {i} reads as {other:?}"),
                    })
                    .collect();
                let fetched = engine
                    .fetch_entries(g, first, last + 1, usize::MAX)
                    .unwrap_or_else(|e| panic!("group {g}: fetch {first}..={last}: {e}"));
                assert_eq!(fetched, entries, "group {g}: fetch and get disagree");
                (first, entries)
            }
            (None, None) => (0, Vec::new()),
            other => panic!("group {g}: first and last index disagree: {other:?}"),
        };
        if entries.is_empty() && keys.is_empty() {
            continue;
        }
        state.insert(
            g,
            GroupState {
                first,
                entries,
                keys,
            },
        );
    }
    state
}

/// Opens the directory of `fs` under `config`.
pub fn open(fs: &MemFs, config: Config) -> strata_raftlog::Result<Engine> {
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Engine::open_with_fs(DIR, config, dyn_fs)
}

/// Opens `dir` in `mode` on a copy of `template`. On success, reads the state,
/// closes, and checks the directory reopens under AbsoluteConsistency to the
/// same state. Returns the state, or `None` when the open failed.
pub fn open_in_mode(dir: &DirInput, template: &MemFs, mode: RecoveryMode) -> Option<State> {
    let fs = template.deep_clone();
    let engine = open(&fs, dir.config(mode)).ok()?;
    let state = engine_state(&engine);
    engine.close().expect("close on MemFs");
    let again = open(&fs, dir.config(RecoveryMode::AbsoluteConsistency))
        .unwrap_or_else(|e| panic!("{mode:?} recovered, but its directory does not reopen: {e}"));
    assert_eq!(
        engine_state(&again),
        state,
        "{mode:?}: the reopened directory shows another state"
    );
    Some(state)
}

/// The whole oracle: builds the directory and opens it in every mode.
pub fn run(data: &[u8]) {
    let dir = DirInput::parse(data);
    check_modes(&dir, &dir.build());
}

/// Opens the directory of `template` in every mode (each on its own copy) and
/// checks that the modes agree; returns each mode's state, `None` where the
/// open failed.
pub fn check_modes(dir: &DirInput, template: &MemFs) -> [Option<State>; 3] {
    let states = MODES.map(|mode| open_in_mode(dir, template, mode));
    let [absolute, tail, any] = &states;
    if let Some(absolute) = absolute {
        assert_eq!(
            tail.as_ref(),
            Some(absolute),
            "AbsoluteConsistency opened, TolerateTailCorruption disagrees"
        );
    }
    if let Some(tail) = tail {
        assert_eq!(
            any.as_ref(),
            Some(tail),
            "TolerateTailCorruption opened, TolerateAnyCorruption disagrees"
        );
    }
    check_sections(dir, template, absolute.as_ref());
    states
}

/// Opens the directory of `template` in every mode with index sections read
/// (each on its own copy): never a panic; every indexed entry reads back or
/// fails with `Corruption` (damage in a sealed record is found when read);
/// and where the scanning open found no damage at all (`clean`, the state
/// AbsoluteConsistency opened), every mode opens to exactly that state.
pub fn check_sections(dir: &DirInput, template: &MemFs, clean: Option<&State>) {
    for mode in MODES {
        let fs = template.deep_clone();
        let Ok(engine) = open(&fs, dir.config_with_sections(mode)) else {
            assert!(
                clean.is_none(),
                "{mode:?} with sections refuses a clean directory"
            );
            continue;
        };
        if let Some(clean) = clean {
            assert_eq!(&engine_state(&engine), clean, "{mode:?} with sections");
            continue;
        }
        for g in engine.groups() {
            if let (Some(first), Some(last)) = (engine.first_index(g), engine.last_index(g)) {
                for i in first..=last {
                    match engine.get_entry(g, i) {
                        Ok(Some(_)) | Err(strata_raftlog::Error::Corruption { .. }) => {}
                        other => panic!("{mode:?} with sections: group {g} entry {i}: {other:?}"),
                    }
                }
            }
        }
    }
}
