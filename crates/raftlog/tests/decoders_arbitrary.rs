//! Feeds arbitrary and damaged bytes to every raftlog decoder and to recovery,
//! and proves that none of them panics and that what they accept holds together:
//! - `decode_file_header`, `RecordHeader::check`, `decode_items` + `entry_at` and
//!   `reader::scan_file` on arbitrary bytes and on valid encodings with a flip,
//!   cut or insertion (the oracles of `fuzz/src/decoders.rs`);
//! - recovery of a `MemFs` directory of small arbitrary or damaged files, in all
//!   three modes: the modes agree, every indexed entry reads back, and the
//!   directory a successful open leaves reopens under AbsoluteConsistency to the
//!   same state (the oracle of `fuzz/src/recover_dir.rs`);
//! - recovery of directories the engine wrote, after a flip, cut or insertion in
//!   one file: no mode ever returns an entry or value that was not written at that
//!   index or key, and when the damaged file is the last one, every mode that
//!   opens shows exactly the state after some prefix of the batches.
//!
//! The fuzz oracles are included by path, so an input found by `cargo fuzz`
//! replays here; freeze such an input at the end as a named regression test.

#[path = "../fuzz/src/decoders.rs"]
mod decoders;
#[path = "../fuzz/src/recover_dir.rs"]
mod recover_dir;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::Index;
use strata_codec::{crc32c, lz4_compress, put_varint};
use strata_fs::{FileSystem, MemFs};
use strata_raftlog::format::{
    decode_file_header, encode_file_header, FileId, HeaderCheck, Queue, RecordHeader, CODEC_LZ4,
    CODEC_NONE, FILE_HEADER_LEN, RECORD_HEADER_LEN,
};
use strata_raftlog::reader::{scan_file, ScanEnd};
use strata_raftlog::{decode_items, entry_at, Config, Engine, Error, Item, LogBatch};

use recover_dir::{DirInput, GroupState, State};

// ---------------------------------------------------------------------------
// Encoding by the spec, independently of `LogBatch`.

/// One item of a batch payload, owning its bytes.
#[derive(Debug, Clone)]
enum TestItem {
    Entries {
        group: u64,
        first: u64,
        entries: Vec<Vec<u8>>,
    },
    Put {
        group: u64,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        group: u64,
        key: Vec<u8>,
    },
    CompactTo {
        group: u64,
        index: u64,
    },
    RemoveGroup {
        group: u64,
    },
}

impl TestItem {
    /// Appends the item as `docs/format/raftlog.md` lays it out.
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            TestItem::Entries {
                group,
                first,
                entries,
            } => {
                out.push(1);
                put_varint(out, *group);
                put_varint(out, *first);
                put_varint(out, entries.len() as u64);
                for e in entries {
                    out.extend_from_slice(&(e.len() as u32).to_le_bytes());
                }
                for e in entries {
                    out.extend_from_slice(e);
                }
            }
            TestItem::Put { group, key, value } => {
                out.push(2);
                put_varint(out, *group);
                put_varint(out, key.len() as u64);
                out.extend_from_slice(key);
                put_varint(out, value.len() as u64);
                out.extend_from_slice(value);
            }
            TestItem::Delete { group, key } => {
                out.push(3);
                put_varint(out, *group);
                put_varint(out, key.len() as u64);
                out.extend_from_slice(key);
            }
            TestItem::CompactTo { group, index } => {
                out.push(4);
                put_varint(out, *group);
                put_varint(out, *index);
            }
            TestItem::RemoveGroup { group } => {
                out.push(5);
                put_varint(out, *group);
            }
        }
    }

    /// Checks that `decoded`, read from `payload`, is this item.
    fn assert_decoded_as(&self, payload: &[u8], decoded: &Item<'_>) {
        match (self, decoded.clone()) {
            (
                TestItem::Entries {
                    group,
                    first,
                    entries,
                },
                Item::Entries {
                    group: g,
                    first_index,
                    count,
                    body_offset,
                },
            ) => {
                assert_eq!(
                    (*group, *first, entries.len() as u32),
                    (g, first_index, count)
                );
                for (p, e) in entries.iter().enumerate() {
                    assert_eq!(entry_at(payload, body_offset, count, p as u32).unwrap(), e);
                }
            }
            (
                TestItem::Put { group, key, value },
                Item::Put {
                    group: g,
                    key: k,
                    value: v,
                },
            ) => {
                assert_eq!((*group, key.as_slice(), value.as_slice()), (g, k, v));
            }
            (TestItem::Delete { group, key }, Item::Delete { group: g, key: k }) => {
                assert_eq!((*group, key.as_slice()), (g, k));
            }
            (TestItem::CompactTo { group, index }, Item::CompactTo { group: g, index: i }) => {
                assert_eq!((*group, *index), (g, i));
            }
            (TestItem::RemoveGroup { group }, Item::RemoveGroup { group: g }) => {
                assert_eq!(*group, g);
            }
            (want, got) => panic!("encoded {want:?}, decoded {got:?}"),
        }
    }
}

fn encode_payload(items: &[TestItem]) -> Vec<u8> {
    let mut out = Vec::new();
    for item in items {
        item.encode(&mut out);
    }
    out
}

/// Encodes one record of file `file_id`, compressed when `lz4` and it shrinks.
fn encode_record(file_id: u64, payload: &[u8], lz4: bool) -> Vec<u8> {
    let compressed = lz4_compress(payload);
    let (stored, codec) = if lz4 && compressed.len() < payload.len() {
        (compressed, CODEC_LZ4)
    } else {
        (payload.to_vec(), CODEC_NONE)
    };
    let header = RecordHeader {
        file_id,
        stored_len: stored.len() as u32,
        raw_len: payload.len() as u32,
        payload_crc: crc32c(&stored),
        synced_end: 24,
        codec,
    };
    let mut out = header.encode().to_vec();
    out.extend_from_slice(&stored);
    out
}

/// Encodes a whole file: header, then one record per payload.
fn encode_file(id: FileId, payloads: &[Vec<u8>], lz4: bool) -> Vec<u8> {
    let mut out = encode_file_header(id).to_vec();
    for p in payloads {
        out.extend_from_slice(&encode_record(id.to_u64(), p, lz4));
    }
    out
}

// ---------------------------------------------------------------------------
// Damage.

/// One way to damage bytes; positions are taken modulo the length.
#[derive(Debug, Clone)]
enum Mutation {
    /// XORs one byte with a non-zero mask.
    Flip { at: Index, mask: u8 },
    /// Cuts the bytes to a shorter length.
    Truncate { at: Index },
    /// Inserts bytes at a position.
    Insert { at: Index, bytes: Vec<u8> },
}

impl Mutation {
    fn apply(&self, bytes: &mut Vec<u8>) {
        match self {
            Mutation::Flip { at, mask } if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                bytes[i] ^= *mask;
            }
            Mutation::Flip { .. } => {}
            Mutation::Truncate { at } => {
                let len = at.index(bytes.len().max(1));
                bytes.truncate(len);
            }
            Mutation::Insert { at, bytes: extra } => {
                let i = at.index(bytes.len() + 1);
                bytes.splice(i..i, extra.iter().copied());
            }
        }
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 1..=255u8).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        any::<Index>().prop_map(|at| Mutation::Truncate { at }),
        (
            any::<Index>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 1..40),
                (1..64usize).prop_map(|n| vec![0u8; n]),
            ]
        )
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
    ]
}

// ---------------------------------------------------------------------------
// Strategies.

fn small_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

/// Items over few groups and small indexes, so that overwrites, gaps,
/// compactions and removals of the same groups meet.
fn test_item() -> impl Strategy<Value = TestItem> {
    let group = 1..=3u64;
    prop_oneof![
        4 => (group.clone(), 1..20u64, prop::collection::vec(small_bytes(24), 1..5))
            .prop_map(|(group, first, entries)| TestItem::Entries { group, first, entries }),
        2 => (group.clone(), small_bytes(4), small_bytes(12))
            .prop_map(|(group, key, value)| TestItem::Put { group, key, value }),
        1 => (group.clone(), small_bytes(4)).prop_map(|(group, key)| TestItem::Delete { group, key }),
        1 => (group.clone(), 0..24u64).prop_map(|(group, index)| TestItem::CompactTo { group, index }),
        1 => group.prop_map(|group| TestItem::RemoveGroup { group }),
    ]
}

fn payload_items() -> impl Strategy<Value = Vec<TestItem>> {
    prop::collection::vec(test_item(), 1..4)
}

fn file_id() -> impl Strategy<Value = FileId> {
    (
        prop_oneof![Just(Queue::Append), Just(Queue::Rewrite)],
        1..1000u64,
    )
        .prop_map(|(queue, seq)| FileId { queue, seq })
}

// ---------------------------------------------------------------------------
// The decoders.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn file_header_arbitrary_bytes(bytes in small_bytes(40)) {
        decoders::file_header(&bytes);
    }

    #[test]
    fn index_section_arbitrary_bytes(bytes in small_bytes(200)) {
        decoders::index_section(&bytes);
    }

    #[test]
    fn file_header_rejects_any_damaged_byte(id in file_id(), at in 0..FILE_HEADER_LEN, mask in 1..=255u8) {
        let mut h = encode_file_header(id);
        prop_assert_eq!(decode_file_header(&h).unwrap().0, id);
        h[at] ^= mask;
        prop_assert!(decode_file_header(&h).is_err(), "accepted a flip at {}", at);
        decoders::file_header(&h);
    }

    #[test]
    fn record_header_arbitrary_bytes(bytes in small_bytes(8 + RECORD_HEADER_LEN + 4)) {
        decoders::record_header(&bytes);
    }

    #[test]
    fn record_header_rejects_any_damaged_byte(
        file_id in any::<u64>(),
        len in 0..=(1u32 << 30),
        lz4 in any::<bool>(),
        raw in 0..=(1u32 << 30),
        crc in any::<u32>(),
        at in 0..RECORD_HEADER_LEN,
        mask in 1..=255u8,
    ) {
        let h = RecordHeader {
            file_id,
            stored_len: len,
            // LZ4 expands at most 255 times; the header check enforces it.
            raw_len: if lz4 { raw.min(len.saturating_mul(255).saturating_add(64)) } else { len },
            payload_crc: crc,
            synced_end: crc.rotate_left(7),
            codec: if lz4 { CODEC_LZ4 } else { CODEC_NONE },
        };
        let mut bytes = h.encode();
        prop_assert_eq!(RecordHeader::check(&bytes, file_id), HeaderCheck::Valid(h));
        bytes[at] ^= mask;
        let check = RecordHeader::check(&bytes, file_id);
        prop_assert!(matches!(check, HeaderCheck::Invalid(_)), "flip at {} gave {:?}", at, check);
    }

    #[test]
    fn batch_payload_arbitrary_bytes(bytes in small_bytes(256)) {
        decoders::batch_payload(&bytes);
    }

    #[test]
    fn batch_payload_round_trips_and_survives_damage(items in payload_items(), m in mutation()) {
        let mut payload = encode_payload(&items);
        let decoded = decode_items(&payload).unwrap();
        prop_assert_eq!(decoded.len(), items.len());
        for (want, got) in items.iter().zip(&decoded) {
            want.assert_decoded_as(&payload, got);
        }
        decoders::batch_payload(&payload);
        m.apply(&mut payload);
        decoders::batch_payload(&payload);
    }

    #[test]
    fn scan_file_arbitrary_bytes(valid_header in any::<bool>(), forge in any::<bool>(), body in small_bytes(300)) {
        let id = FileId { queue: Queue::Append, seq: 1 };
        let mut bytes = if valid_header { encode_file_header(id).to_vec() } else { Vec::new() };
        bytes.extend_from_slice(&body);
        if forge {
            recover_dir::forge_checksums(&mut bytes, id.to_u64());
        }
        decoders::scan_file(&bytes);
    }

    #[test]
    fn scan_file_reads_valid_files_and_survives_damage(
        id in file_id(),
        records in prop::collection::vec(payload_items(), 0..5),
        lz4 in any::<bool>(),
        zeros in 0..64usize,
        m in mutation(),
    ) {
        let payloads: Vec<Vec<u8>> = records.iter().map(|r| encode_payload(r)).collect();
        let mut bytes = encode_file(id, &payloads, lz4);
        let data_end = bytes.len() as u64;
        bytes.resize(bytes.len() + zeros, 0);
        let scan = scan_file(&bytes).unwrap();
        prop_assert_eq!(scan.id, id);
        prop_assert_eq!(scan.records.iter().map(|r| r.payload.clone()).collect::<Vec<_>>(), payloads);
        prop_assert_eq!(scan.valid_end, data_end);
        prop_assert_eq!(scan.end, if zeros == 0 { ScanEnd::Eof } else { ScanEnd::Zeros });
        decoders::scan_file(&bytes);
        m.apply(&mut bytes);
        decoders::scan_file(&bytes);
    }
}

// ---------------------------------------------------------------------------
// Recovery of arbitrary directories.

/// A directory of 1-4 files made of valid records of random items, in both
/// queues, with one file maybe damaged.
#[derive(Debug, Clone)]
struct DirSpec {
    appends: usize,
    rewrites: usize,
    first_seq: u64,
    files: Vec<(Vec<Vec<TestItem>>, bool)>,
    damage: Option<(Index, Mutation)>,
    threads: usize,
    preallocate: bool,
}

fn dir_spec() -> impl Strategy<Value = DirSpec> {
    (
        1..=3usize,
        0..=1usize,
        prop_oneof![Just(1u64), Just(5)],
        prop::collection::vec(
            (prop::collection::vec(payload_items(), 0..4), any::<bool>()),
            4,
        ),
        proptest::option::weighted(0.6, (any::<Index>(), mutation())),
        1..=2usize,
        any::<bool>(),
    )
        .prop_map(
            |(appends, rewrites, first_seq, files, damage, threads, preallocate)| DirSpec {
                appends,
                rewrites,
                first_seq,
                files,
                damage,
                threads,
                preallocate,
            },
        )
}

impl DirSpec {
    fn build(&self) -> DirInput {
        let ids = (0..self.appends)
            .map(|i| FileId {
                queue: Queue::Append,
                seq: self.first_seq + i as u64,
            })
            .chain((0..self.rewrites).map(|i| FileId {
                queue: Queue::Rewrite,
                seq: self.first_seq + i as u64,
            }));
        let mut files: Vec<(FileId, Vec<u8>)> = ids
            .zip(&self.files)
            .map(|(id, (records, lz4))| {
                let payloads: Vec<Vec<u8>> = records.iter().map(|r| encode_payload(r)).collect();
                (id, encode_file(id, &payloads, *lz4))
            })
            .collect();
        if let Some((which, m)) = &self.damage {
            let n = files.len();
            m.apply(&mut files[which.index(n)].1);
        }
        DirInput {
            files,
            threads: self.threads,
            preallocate: self.preallocate,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn recovery_of_arbitrary_input_never_panics(forge in any::<bool>(), mut bytes in small_bytes(600)) {
        // Half the inputs ask for headers and forged checksums on every file, to
        // get past the checksums into the records.
        if forge && bytes.len() >= 2 {
            bytes[1] = 0xff;
        }
        recover_dir::run(&bytes);
    }

    #[test]
    fn recovery_of_valid_or_damaged_files_holds_together(spec in dir_spec()) {
        let dir = spec.build();
        let states = recover_dir::check_modes(&dir, &dir.build());
        if spec.damage.is_none() {
            prop_assert!(states[0].is_some(), "a clean directory failed to open");
        }
    }
}

// ---------------------------------------------------------------------------
// Recovery of what the engine wrote, damaged.

/// One change inside a batch, resolved against the model when it is applied
/// so that entries always continue the group's log.
#[derive(Debug, Clone)]
enum Op {
    /// Entries from `back` before the group's next index (overwriting the last
    /// `back` entries), or from `back + 1` in an empty group.
    Append {
        group: u64,
        back: u64,
        count: usize,
    },
    Put {
        group: u64,
        key: u8,
    },
    Delete {
        group: u64,
        key: u8,
    },
    /// Compacts to `ahead` past the group's first index.
    Compact {
        group: u64,
        ahead: u64,
    },
    Remove {
        group: u64,
    },
}

#[derive(Debug, Clone)]
enum Step {
    Batch(Vec<Op>),
    /// Closes the engine and opens it again, starting a new file.
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    let group = 1..=3u64;
    let op = prop_oneof![
        5 => (group.clone(), 0..4u64, 1..5usize)
            .prop_map(|(group, back, count)| Op::Append { group, back, count }),
        2 => (group.clone(), 0..3u8).prop_map(|(group, key)| Op::Put { group, key }),
        1 => (group.clone(), 0..3u8).prop_map(|(group, key)| Op::Delete { group, key }),
        1 => (group.clone(), 0..6u64).prop_map(|(group, ahead)| Op::Compact { group, ahead }),
        1 => group.prop_map(|group| Op::Remove { group }),
    ];
    prop_oneof![
        6 => prop::collection::vec(op, 1..4).prop_map(Step::Batch),
        1 => Just(Step::Reopen),
    ]
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ModelGroup {
    entries: BTreeMap<u64, Vec<u8>>,
    keys: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The groups as the engine should show them, by Raft semantics.
type Model = BTreeMap<u64, ModelGroup>;

fn to_state(model: &Model) -> State {
    model
        .iter()
        .filter(|(_, g)| !g.entries.is_empty() || !g.keys.is_empty())
        .map(|(&id, g)| {
            (
                id,
                GroupState {
                    first: g.entries.keys().next().copied().unwrap_or(0),
                    entries: g.entries.values().cloned().collect(),
                    keys: g.keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                },
            )
        })
        .collect()
}

/// Everything ever written: the states after each batch, and each value ever
/// given to an entry index or a key.
#[derive(Debug, Default)]
struct History {
    states: Vec<State>,
    entries: HashMap<(u64, u64), HashSet<Vec<u8>>>,
    keys: HashMap<(u64, Vec<u8>), HashSet<Vec<u8>>>,
}

/// Builds the batch for `ops` against `model`, applying them to a copy of it;
/// returns the batch, the model after it, and the values it writes.
fn resolve(ops: &[Op], model: &Model, serial: usize) -> (LogBatch, Model, History) {
    let mut next = model.clone();
    let mut batch = LogBatch::new();
    let mut written = History::default();
    for op in ops {
        match *op {
            Op::Append { group, back, count } => {
                let g = next.entry(group).or_default();
                let first = match g.entries.keys().next_back() {
                    Some(&last) => (last + 1).saturating_sub(back).max(1),
                    None => back + 1,
                };
                let entries: Vec<Vec<u8>> = (0..count as u64)
                    .map(|k| format!("g{group}-i{}-w{serial}", first + k).into_bytes())
                    .collect();
                batch.add_entries(group, first, &entries);
                g.entries.split_off(&first);
                for (k, e) in entries.into_iter().enumerate() {
                    let index = first + k as u64;
                    written
                        .entries
                        .entry((group, index))
                        .or_default()
                        .insert(e.clone());
                    g.entries.insert(index, e);
                }
            }
            Op::Put { group, key } => {
                let key = vec![b'k', key];
                let value = format!("v-w{serial}").into_bytes();
                batch.put(group, &key, &value);
                written
                    .keys
                    .entry((group, key.clone()))
                    .or_default()
                    .insert(value.clone());
                next.entry(group).or_default().keys.insert(key, value);
            }
            Op::Delete { group, key } => {
                let key = vec![b'k', key];
                batch.delete(group, &key);
                if let Some(g) = next.get_mut(&group) {
                    g.keys.remove(&key);
                }
            }
            Op::Compact { group, ahead } => {
                let first = next
                    .get(&group)
                    .and_then(|g| g.entries.keys().next().copied())
                    .unwrap_or(1);
                let index = first + ahead;
                batch.compact_to(group, index);
                if let Some(g) = next.get_mut(&group) {
                    g.entries = g.entries.split_off(&index);
                }
            }
            Op::Remove { group } => {
                batch.remove_group(group);
                next.remove(&group);
            }
        }
        next.retain(|_, g| !g.entries.is_empty() || !g.keys.is_empty());
    }
    (batch, next, written)
}

fn engine_config() -> Config {
    Config {
        target_file_size_bytes: 64 << 10,
        compression_threshold_bytes: 64,
        preallocate: false,
        ..Config::default()
    }
}

/// Runs `steps` against an engine on a new `MemFs` in `recover_dir::DIR`;
/// returns the file system and the history.
fn write_history(steps: &[Step]) -> (MemFs, History) {
    let fs = MemFs::new();
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let open = || Engine::open_with_fs(recover_dir::DIR, engine_config(), dyn_fs.clone()).unwrap();
    let mut engine = open();
    let mut model = Model::new();
    let mut history = History::default();
    history.states.push(State::new());
    for (serial, step) in steps.iter().enumerate() {
        match step {
            Step::Batch(ops) => {
                let (mut batch, next, written) = resolve(ops, &model, serial);
                match engine.write(&mut batch, false) {
                    Ok(_) => {
                        model = next;
                        history.states.push(to_state(&model));
                        for (k, v) in written.entries {
                            history.entries.entry(k).or_default().extend(v);
                        }
                        for (k, v) in written.keys {
                            history.keys.entry(k).or_default().extend(v);
                        }
                    }
                    // A compaction or removal earlier in the batch can make the
                    // engine see a gap the model does not; it rejects the batch whole.
                    Err(Error::InvalidArgument(_)) => {}
                    Err(e) => panic!("write failed: {e}"),
                }
            }
            Step::Reopen => {
                engine.close().unwrap();
                engine = open();
                assert_engine_shows(&engine, &model);
            }
        }
    }
    assert_engine_shows(&engine, &model);
    engine.close().unwrap();
    (fs, history)
}

/// The undamaged engine shows exactly the model.
fn assert_engine_shows(engine: &Engine, model: &Model) {
    assert_eq!(recover_dir::engine_state(engine), to_state(model));
}

/// Names of the log files of the directory, sorted.
fn log_files(fs: &MemFs) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list(Path::new(recover_dir::DIR))
        .unwrap()
        .into_iter()
        .filter(|n| FileId::parse_file_name(n).is_some())
        .collect();
    names.sort();
    names
}

fn rewrite_file(fs: &MemFs, name: &str, m: &Mutation) {
    let path = Path::new(recover_dir::DIR).join(name);
    let file = fs.open(&path, true).unwrap();
    let mut bytes = vec![0u8; file.len().unwrap() as usize];
    file.read_exact_at(0, &mut bytes).unwrap();
    m.apply(&mut bytes);
    file.truncate(0).unwrap();
    file.write_at(0, &bytes).unwrap();
    file.sync_all().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn damaged_engine_directories_never_show_unwritten_data(
        steps in prop::collection::vec(step(), 1..24),
        which in any::<Index>(),
        m in mutation(),
    ) {
        let (fs, history) = write_history(&steps);
        let files = log_files(&fs);
        let victim = which.index(files.len());
        rewrite_file(&fs, &files[victim], &m);
        let dir = DirInput { files: Vec::new(), threads: 1, preallocate: false };
        let states = recover_dir::check_modes(&dir, &fs);
        for (mode, state) in recover_dir::MODES.iter().zip(&states) {
            let Some(state) = state else { continue };
            for (&g, gs) in state {
                for (k, e) in gs.entries.iter().enumerate() {
                    let index = gs.first + k as u64;
                    prop_assert!(
                        history.entries.get(&(g, index)).is_some_and(|s| s.contains(e)),
                        "{:?}: group {} entry {} = {:?} was never written there",
                        mode, g, index, String::from_utf8_lossy(e)
                    );
                }
                for (key, v) in &gs.keys {
                    prop_assert!(
                        history.keys.get(&(g, key.clone())).is_some_and(|s| s.contains(v)),
                        "{:?}: group {} key {:?} = {:?} was never written", mode, g, key, v
                    );
                }
            }
            if victim == files.len() - 1 {
                prop_assert!(
                    history.states.contains(state),
                    "{:?}: damage to the last file left a state no prefix of the batches had: {:?}",
                    mode, state
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Worked examples.

/// The fuzz input layout of `recover_dir`: a control byte, a flags byte, then
/// the files split at the separator; flagged files get a header and forged
/// checksums, so this input is a clean directory every mode opens alike.
#[test]
fn fuzz_input_layout_builds_the_directory_it_describes() {
    let mut payload = Vec::new();
    TestItem::Entries {
        group: 7,
        first: 3,
        entries: vec![b"abc".to_vec()],
    }
    .encode(&mut payload);
    // A record header with only the stored length set; forging fills in the rest.
    let mut record = vec![0u8; RECORD_HEADER_LEN];
    record[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    record[4] = 0xff; // Not all zeros, or it would read as the clean end.
    record.extend_from_slice(&payload);
    // Two files, the second in the rewrite queue; both with headers and forged.
    let mut input = vec![1 | (1 << 2), 0b0011_0011];
    input.extend_from_slice(&record);
    input.extend_from_slice(recover_dir::SEPARATOR);
    input.extend_from_slice(&record);
    let dir = DirInput::parse(&input);
    let ids: Vec<FileId> = dir.files.iter().map(|f| f.0).collect();
    assert_eq!(
        ids,
        [
            FileId {
                queue: Queue::Append,
                seq: 1
            },
            FileId {
                queue: Queue::Rewrite,
                seq: 1
            }
        ]
    );
    for (id, bytes) in &dir.files {
        let scan = scan_file(bytes).unwrap();
        assert_eq!(
            (scan.id, scan.records.len(), scan.end.clone()),
            (*id, 1, ScanEnd::Eof)
        );
    }
    let states = recover_dir::check_modes(&dir, &dir.build());
    for state in states {
        assert_eq!(state.unwrap()[&7].entries, [b"abc".to_vec()]);
    }
    recover_dir::run(&input);
}

/// Every recovery mode replays the rewrite queue (copies of the oldest data)
/// before the append queue, so newer appends override the copies.
#[test]
fn recovery_replays_the_rewrite_queue_first() {
    let a = FileId {
        queue: Queue::Append,
        seq: 1,
    };
    let r = FileId {
        queue: Queue::Rewrite,
        seq: 1,
    };
    let entries = |first: u64, names: &[&str]| {
        let mut p = Vec::new();
        TestItem::Entries {
            group: 1,
            first,
            entries: names.iter().map(|n| n.as_bytes().to_vec()).collect(),
        }
        .encode(&mut p);
        p
    };
    let dir = DirInput {
        files: vec![
            (a, encode_file(a, &[entries(2, &["new-2"])], false)),
            (
                r,
                encode_file(r, &[entries(1, &["old-1", "old-2", "old-3"])], true),
            ),
        ],
        threads: 2,
        preallocate: true,
    };
    for state in recover_dir::check_modes(&dir, &dir.build()) {
        let group = &state.expect("a clean directory opens")[&1];
        assert_eq!(
            (group.first, group.entries.clone()),
            (1, vec![b"old-1".to_vec(), b"new-2".to_vec()])
        );
    }
}

/// Found by the `index_section` fuzzer: a record length near `u64::MAX`
/// overflowed the running offset.
#[test]
fn index_section_with_a_huge_record_length_is_refused() {
    let bytes = [
        0x0a, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00,
    ];
    decoders::index_section(&bytes);
    assert!(strata_raftlog::section::decode_section(&bytes).is_err());
}
