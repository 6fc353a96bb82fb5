//! Single-bit flips at rest and on read, over a directory of two sealed append
//! files and the last one.
//!
//! Proves, for a dense sample of offsets (every byte of every file header and
//! record header, every 401st payload byte plus each payload's first, middle
//! and last, the end-marker bytes after the data and a sample of the zeros beyond) and
//! every recovery mode: `open`
//! never panics; `AbsoluteConsistency` refuses any flip in a file or record
//! header or payload with `Error::Corruption` naming the file and the damaged
//! record; `TolerateTailCorruption` tolerates (and reports) only a flip in the
//! last record of the last file, and refuses every other; `TolerateAnyCorruption`
//! opens, reports the damage and cuts the damaged file there; whatever opens
//! holds exactly what replaying the surviving records gives, byte for byte.
//! Flips in the zeros after the data may be reported but never lose data.
//! At runtime, a flip seen by a read of a record makes every read of its
//! entries fail with `Error::Corruption`, never return wrong bytes.

mod fault_support;

use std::collections::HashMap;
use std::sync::Arc;

use fault_support::{
    append_files, config, open, path, read_file, scan, workload, write_all, BatchSpec, Change,
    Model, DIR, MODES,
};
use strata_fs::{CrashMode, FaultFs, FileSystem, MemFs};
use strata_raftlog::format::{FILE_HEADER_LEN, RECORD_HEADER_LEN};
use strata_raftlog::{Config, Engine, Error, RecoveryMode};

/// Where a file's records are.
struct FileInfo {
    name: String,
    /// `(offset, end)` of each record.
    records: Vec<(u64, u64)>,
    /// Global number of the file's first record (= its batch).
    first_batch: usize,
    valid_end: u64,
    len: u64,
}

/// What a flipped offset holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spot {
    FileHeader,
    /// Header or payload of the file's record `j`.
    Record(usize),
    /// Past the data: preallocated zeros.
    Zeros,
}

fn files_of(fs: &MemFs) -> Vec<FileInfo> {
    let mut first_batch = 0;
    append_files(fs)
        .into_iter()
        .map(|name| {
            let bytes = read_file(fs, &name);
            let s = scan(&bytes);
            let info = FileInfo {
                records: s
                    .records
                    .iter()
                    .map(|r| (r.offset, r.offset + r.len as u64))
                    .collect(),
                first_batch,
                valid_end: s.valid_end,
                len: bytes.len() as u64,
                name,
            };
            first_batch += info.records.len();
            info
        })
        .collect()
}

/// The offsets of a file to flip, with what each holds.
fn sample(f: &FileInfo) -> Vec<(u64, Spot)> {
    let mut out: Vec<(u64, Spot)> = (0..FILE_HEADER_LEN as u64)
        .map(|o| (o, Spot::FileHeader))
        .collect();
    for (j, &(start, end)) in f.records.iter().enumerate() {
        let spot = Spot::Record(j);
        out.extend((start..start + RECORD_HEADER_LEN as u64).map(|o| (o, spot)));
        let payload = start + RECORD_HEADER_LEN as u64;
        out.extend(
            (payload..end)
                .step_by(401)
                .chain([(payload + end) / 2, end - 1])
                .map(|o| (o, spot)),
        );
    }
    let zeros_end = (f.valid_end + RECORD_HEADER_LEN as u64).min(f.len);
    out.extend((f.valid_end..zeros_end).map(|o| (o, Spot::Zeros)));
    out.extend((zeros_end..f.len).step_by(4093).map(|o| (o, Spot::Zeros)));
    out.sort_unstable_by_key(|(o, _)| *o);
    out.dedup_by_key(|(o, _)| *o);
    out
}

#[derive(Debug, Default)]
struct Counts {
    flips: usize,
    opens: usize,
    refused: usize,
    tolerated: usize,
    zeros_reported: usize,
    zeros_ignored: usize,
}

/// The config of these tests with recovery scanning every record, even of
/// sealed files with an index section (see the last test for those).
fn scanning(mode: RecoveryMode) -> Config {
    Config {
        recovery_reads_index_sections: false,
        ..config(mode)
    }
}

/// Writes the tests' workload (90 batches, one record each) and crashes: two
/// sealed files (with index sections) and the last one.
fn two_sealed_and_the_last() -> (MemFs, Vec<BatchSpec>, Vec<FileInfo>) {
    let base = MemFs::new();
    let mode = RecoveryMode::TolerateTailCorruption;
    // Each rotation makes its file and syncs its name, so that the crash
    // keeps all three under their names (a file made ahead may be found only
    // by its header: `a_file_made_ahead_whose_rename_a_crash_lost_is_adopted`).
    let config = Config {
        prepare_next_file: false,
        ..config(mode)
    };
    let engine = Engine::open_with_fs(DIR, config, Arc::new(base.clone())).unwrap();
    let batches = workload(31, 90, 4, &[12, 90, 600, 2000]);
    write_all(&engine, &batches, 4);
    drop(engine);
    base.crash(CrashMode::DropUnsynced);
    let files = files_of(&base);
    assert_eq!(files.len(), 3, "two sealed files and the last one");
    (base, batches, files)
}

#[test]
fn flips_at_rest_are_refused_or_reported_never_returned() {
    let (base, batches, files) = two_sealed_and_the_last();
    let total: usize = files.iter().map(|f| f.records.len()).sum();
    assert_eq!(total, batches.len(), "one record per batch");
    let prefix: Vec<Model> = (0..=batches.len())
        .map(|k| Model::replay(&batches[..k]))
        .collect();
    let mut cut_models: HashMap<(usize, usize), Model> = HashMap::new();
    let mut counts = Counts::default();

    for (fi, f) in files.iter().enumerate() {
        let is_last_file = fi + 1 == files.len();
        let file_path = path(&f.name);
        for (offset, spot) in sample(f) {
            counts.flips += 1;
            let bit = (offset * 5 + 3) % 8;
            for mode in MODES {
                let case = format!("{} offset {offset} bit {bit} ({spot:?}), {mode:?}", f.name);
                let fs = base.deep_clone();
                fs.corrupt(&file_path, offset, 1 << bit).unwrap();
                let result = open(Arc::new(fs), scanning(mode), &case);
                let refuse_at =
                    |result: Result<Engine, Error>, at: u64, counts: &mut Counts| match result {
                        Err(Error::Corruption {
                            path: p, offset: o, ..
                        }) => {
                            assert_eq!((&p, o), (&file_path, at), "{case}");
                            counts.refused += 1;
                        }
                        Err(e) => panic!("{case}: wrong error {e}"),
                        Ok(_) => panic!("{case}: a flipped byte was accepted"),
                    };
                match spot {
                    Spot::FileHeader if mode == RecoveryMode::TolerateAnyCorruption => {
                        // The file is set aside whole and reported; the rest opens.
                        let engine = result.unwrap_or_else(|e| panic!("{case}: open failed: {e}"));
                        counts.opens += 1;
                        counts.tolerated += 1;
                        let end = f.first_batch + f.records.len();
                        cut_models
                            .entry((fi, usize::MAX))
                            .or_insert_with(|| {
                                Model::replay(
                                    batches[..f.first_batch].iter().chain(&batches[end..]),
                                )
                            })
                            .check(&engine)
                            .unwrap_or_else(|e| panic!("{case}: {e}"));
                        let damage = &engine.recovery_report().damage;
                        assert_eq!(damage.len(), 1, "{case}: {damage:?}");
                        assert_eq!((&damage[0].path, damage[0].offset), (&file_path, 0));
                    }
                    Spot::FileHeader => refuse_at(result, 0, &mut counts),
                    Spot::Record(j) => {
                        let (start, _) = f.records[j];
                        let g = f.first_batch + j;
                        let expect = match mode {
                            RecoveryMode::AbsoluteConsistency => None,
                            RecoveryMode::TolerateTailCorruption => {
                                (is_last_file && j + 1 == f.records.len()).then(|| &prefix[g])
                            }
                            RecoveryMode::TolerateAnyCorruption => {
                                Some(&*cut_models.entry((fi, j)).or_insert_with(|| {
                                    let end = f.first_batch + f.records.len();
                                    Model::replay(batches[..g].iter().chain(&batches[end..]))
                                }))
                            }
                        };
                        let Some(want) = expect else {
                            refuse_at(result, start, &mut counts);
                            continue;
                        };
                        let engine = result.unwrap_or_else(|e| panic!("{case}: open failed: {e}"));
                        counts.opens += 1;
                        counts.tolerated += 1;
                        want.check(&engine)
                            .unwrap_or_else(|e| panic!("{case}: {e}"));
                        let damage = &engine.recovery_report().damage;
                        assert_eq!(damage.len(), 1, "{case}: {damage:?}");
                        assert_eq!((&damage[0].path, damage[0].offset), (&file_path, start));
                    }
                    Spot::Zeros => match result {
                        // Bit rot in unused space may be reported as damage at
                        // the end of the data, but never loses a record.
                        Err(Error::Corruption {
                            path: p, offset: o, ..
                        }) if mode != RecoveryMode::TolerateAnyCorruption => {
                            assert_eq!((&p, o), (&file_path, f.valid_end), "{case}");
                            counts.zeros_reported += 1;
                        }
                        Err(e) => panic!("{case}: {e}"),
                        Ok(engine) => {
                            counts.opens += 1;
                            prefix[batches.len()]
                                .check(&engine)
                                .unwrap_or_else(|e| panic!("{case}: {e}"));
                            let damage = &engine.recovery_report().damage;
                            if damage.is_empty() {
                                counts.zeros_ignored += 1;
                            } else {
                                assert_ne!(mode, RecoveryMode::AbsoluteConsistency, "{case}");
                                assert_eq!(damage.len(), 1, "{case}");
                                assert_eq!(
                                    (&damage[0].path, damage[0].offset),
                                    (&file_path, f.valid_end),
                                    "{case}"
                                );
                                counts.zeros_reported += 1;
                            }
                        }
                    },
                }
            }
        }
    }
    println!("{counts:?}");
    assert!(counts.flips > 1000, "{counts:?}");
}

/// `TolerateAnyCorruption` is documented as "damage anywhere cuts the damaged
/// file at that point; `open` succeeds and the recovery report lists every cut".
#[test]
fn tolerate_any_opens_despite_a_flipped_file_header() {
    let base = MemFs::new();
    let engine = Engine::open_with_fs(
        DIR,
        config(RecoveryMode::TolerateAnyCorruption),
        Arc::new(base.clone()),
    )
    .unwrap();
    let batches = workload(31, 90, 4, &[12, 90, 600, 2000]);
    write_all(&engine, &batches, 4);
    drop(engine);
    let files = files_of(&base);
    let f = &files[1];
    base.corrupt(&path(&f.name), 3, 0x10).unwrap();
    let engine = open(
        Arc::new(base),
        config(RecoveryMode::TolerateAnyCorruption),
        "flipped header",
    )
    .expect("TolerateAnyCorruption opens");
    let damage = &engine.recovery_report().damage;
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(damage[0].path, path(&f.name));
    let end = f.first_batch + f.records.len();
    Model::replay(batches[..f.first_batch].iter().chain(&batches[end..]))
        .check(&engine)
        .unwrap();
}

/// Replaces each entry by the number of the batch that wrote it, so that
/// replaying gives, for each live entry, the batch (= record) holding it.
fn provenance(batches: &[BatchSpec]) -> Model {
    let tagged: Vec<BatchSpec> = batches
        .iter()
        .enumerate()
        .map(|(n, b)| {
            BatchSpec(
                b.0.iter()
                    .map(|c| match c {
                        Change::Entries { group, first, data } => Change::Entries {
                            group: *group,
                            first: *first,
                            data: vec![(n as u64).to_le_bytes().to_vec(); data.len()],
                        },
                        other => other.clone(),
                    })
                    .collect(),
            )
        })
        .collect();
    Model::replay(&tagged)
}

#[test]
fn flips_on_read_make_reads_fail_never_lie() {
    let mem = MemFs::new();
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let fs: Arc<dyn FileSystem> = Arc::new(ffs.clone());
    let cfg = config(RecoveryMode::TolerateTailCorruption);
    let batches = workload(41, 80, 4, &[12, 90, 600, 2000]);
    let (first_half, second_half) = batches.split_at(50);
    // Half the records are read through handles recovery opened, half through
    // the handle of the file the engine created.
    let engine = Engine::open_with_fs(DIR, cfg.clone(), fs.clone()).unwrap();
    write_all(&engine, first_half, 4);
    drop(engine);
    let engine = Engine::open_with_fs(DIR, cfg, fs).unwrap();
    write_all(&engine, second_half, 4);

    let want = Model::replay(&batches);
    let origin = provenance(&batches);
    // For each batch, its live entries.
    let mut live: HashMap<usize, Vec<(u64, u64)>> = HashMap::new();
    for (&group, g) in &origin.groups {
        for (&index, tag) in &g.entries {
            let n = u64::from_le_bytes(tag[..].try_into().unwrap()) as usize;
            live.entry(n).or_default().push((group, index));
        }
    }
    let entry = |g: u64, i: u64| want.groups[&g].entries[&i].clone();
    let files = files_of(&mem);
    let (mut flips, mut reads) = (0usize, 0usize);
    for f in &files {
        let file_path = path(&f.name);
        for (j, &(start, end)) in f.records.iter().enumerate() {
            let n = f.first_batch + j;
            let Some(entries) = live.get(&n) else {
                continue; // Every entry of this batch was replaced or compacted.
            };
            let payload = start + RECORD_HEADER_LEN as u64;
            let offsets = (start..payload)
                .chain((payload..end).step_by(211))
                .chain([end - 1]);
            for offset in offsets {
                flips += 1;
                ffs.flip_bit_on_read(&file_path, offset, (offset % 8) as u8);
                for &(g, i) in entries.iter().take(3) {
                    let case = format!("{} offset {offset}: group {g} entry {i}", f.name);
                    match engine.get_entry(g, i) {
                        Err(Error::Corruption {
                            path: p, offset: o, ..
                        }) => {
                            assert_eq!((&p, o), (&file_path, start), "{case}");
                        }
                        other => panic!("{case}: get_entry gave {other:?}"),
                    }
                    match engine.fetch_entries(g, i, i + 1, usize::MAX) {
                        Err(Error::Corruption {
                            path: p, offset: o, ..
                        }) => {
                            assert_eq!((&p, o), (&file_path, start), "{case}");
                        }
                        other => panic!("{case}: fetch_entries gave {other:?}"),
                    }
                    reads += 2;
                }
                // A record the flip does not touch still reads.
                if let Some(&(g, i)) = n.checked_sub(1).and_then(|p| live.get(&p)?.first()) {
                    assert_eq!(engine.get_entry(g, i).unwrap(), Some(entry(g, i)));
                }
                ffs.clear_faults();
                let (g, i) = entries[0];
                assert_eq!(engine.get_entry(g, i).unwrap(), Some(entry(g, i)));
            }
        }
    }
    println!("{flips} flips on read, {reads} failed reads checked");
    assert!(files.len() >= 3 && flips > 1000);
    want.check(&engine).unwrap();
}

/// With index sections (the default), recovery does not read the records of
/// sealed files, so a flip in one is not seen at open; every read of an entry
/// of that record then fails with `Error::Corruption`, and every other entry
/// and key reads back intact. A flip in a section or its trailer makes
/// recovery scan that file instead, losing nothing.
#[test]
fn flips_in_sealed_files_fail_reads_not_opens() {
    let (base, batches, files) = two_sealed_and_the_last();
    let mode = RecoveryMode::TolerateTailCorruption;
    let full = Model::replay(&batches);
    // The batch (= record) that wrote each live entry last.
    let mut owner: HashMap<(u64, u64), usize> = HashMap::new();
    for (k, b) in batches.iter().enumerate() {
        for c in &b.0 {
            if let Change::Entries { group, first, data } = c {
                for i in 0..data.len() as u64 {
                    owner.insert((*group, first + i), k);
                }
            }
        }
    }
    let (mut record_flips, mut failed_reads, mut section_flips) = (0, 0, 0);
    for f in &files[..2] {
        let file_path = path(&f.name);
        for (offset, spot) in sample(f) {
            let Spot::Record(j) = spot else { continue };
            let case = format!("{} offset {offset} (record {j})", f.name);
            let fs = base.deep_clone();
            fs.corrupt(&file_path, offset, 1 << (offset % 8)).unwrap();
            let engine = open(Arc::new(fs), config(mode), &case)
                .unwrap_or_else(|e| panic!("{case}: open failed: {e}"));
            let report = engine.recovery_report();
            assert_eq!(report.files_from_sections, 2, "{case}");
            assert!(report.damage.is_empty(), "{case}: {:?}", report.damage);
            record_flips += 1;
            let damaged = f.first_batch + j;
            for (&group, g) in &full.groups {
                for (&index, want) in &g.entries {
                    match engine.get_entry(group, index) {
                        Err(Error::Corruption { path: p, .. }) => {
                            assert_eq!(owner[&(group, index)], damaged, "{case}");
                            assert_eq!(p, file_path, "{case}");
                            failed_reads += 1;
                        }
                        Ok(got) => {
                            assert_ne!(owner[&(group, index)], damaged, "{case}: read the flip");
                            assert_eq!(got.as_deref(), Some(&want[..]), "{case}");
                        }
                        Err(e) => panic!("{case}: {e}"),
                    }
                }
                for (key, value) in &g.kvs {
                    assert_eq!(engine.get(group, key).as_ref(), Some(value), "{case}");
                }
            }
        }
        // The section and trailer: everything from the end marker to the end.
        let len = f.len;
        for offset in (f.valid_end + RECORD_HEADER_LEN as u64..len)
            .step_by(7)
            .chain(len - 40..len)
        {
            let case = format!("{} offset {offset} (section or trailer)", f.name);
            let fs = base.deep_clone();
            fs.corrupt(&file_path, offset, 1 << (offset % 8)).unwrap();
            let engine = open(Arc::new(fs), config(mode), &case)
                .unwrap_or_else(|e| panic!("{case}: open failed: {e}"));
            full.check(&engine)
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            let report = engine.recovery_report();
            assert!(report.damage.is_empty(), "{case}: {:?}", report.damage);
            // A flip in the zeros between section and trailer changes nothing.
            assert!(report.files_from_sections >= 1, "{case}");
            section_flips += (report.files_from_sections == 1) as usize;
        }
    }
    println!(
        "{record_flips} record flips, {failed_reads} failed reads, {section_flips} section flips"
    );
    assert!(record_flips > 100 && failed_reads > 100 && section_flips > 100);
}
