//! Runs the `strata-ctl` binary on raftlog directories written by the real
//! engine on the real disk, and proves that:
//! - `dump` shows every file, record, item and (with `--entries`) entry, and
//!   `--group` narrows it to one group;
//! - `check` passes a clean directory (exit 0) without changing a byte of it, and
//!   fails (exit 1) naming file and offset for a flipped byte, a torn tail, a bad
//!   header and a missing file, agreeing with what the engine's recovery says;
//! - `stats` counts queues, compressed records, groups, live entries and keys as
//!   the engine's own index does, and `check` reads back the entries it holds,
//!   even where purge left a hole in a group's log that a later file fills;
//! - usage and I/O errors exit 2.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use strata_raftlog::reader::scan_file;
use strata_raftlog::{Config, Engine, Error, LogBatch};

const FILE_1: &str = "0000000000000001.raftlog";
const FILE_2: &str = "0000000000000002.raftlog";

fn ctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata-ctl"))
        .args(args)
        .output()
        .expect("run strata-ctl")
}

/// Runs `strata-ctl raftlog <sub> <dir> <extra..>`; returns exit code and stdout.
fn raftlog(sub: &str, dir: &Path, extra: &[&str]) -> (i32, String) {
    let dir = dir.to_str().expect("utf-8 temp path");
    let mut args = vec!["raftlog", sub, dir];
    args.extend_from_slice(extra);
    let out = ctl(&args);
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().expect("exit code");
    assert!(
        code == 2 || stderr.is_empty(),
        "stderr without an error exit: {stderr}"
    );
    (code, stdout)
}

/// Opens the engine, retrying while the directory reads as locked. The lock is a
/// `flock` on an open file description: a child that another test is spawning
/// right now holds a copy of the descriptor from fork until exec, so a lock just
/// released by this thread can look taken for that instant.
fn open(dir: &Path, config: Config) -> strata_raftlog::Result<Engine> {
    for _ in 0..100 {
        match Engine::open(dir, config.clone()) {
            Err(Error::Locked(_)) => std::thread::sleep(std::time::Duration::from_millis(10)),
            other => return other,
        }
    }
    Engine::open(dir, config)
}

/// Asserts that `stats` printed the index counts the engine itself gives.
fn assert_index_line(stats: &str, engine: &Engine) {
    let index = engine.index_stats();
    let line = format!(
        "index: groups={} live_entries={} keys={}",
        index.groups, index.entries, index.keys
    );
    assert!(stats.contains(&line), "missing {line:?} in:\n{stats}");
}

/// Recovery scanning every record, as `check` does, even of sealed files.
fn scanning() -> Config {
    Config {
        recovery_reads_index_sections: false,
        ..config(false)
    }
}

fn config(preallocate: bool) -> Config {
    Config {
        target_file_size_bytes: 64 << 10,
        compression_threshold_bytes: 256,
        preallocate,
        ..Config::default()
    }
}

/// What `build_dir` wrote.
struct Written {
    /// Records (batches) written, over both sessions.
    records: u64,
}

/// Writes two sessions (so two append files) whose live state is:
/// group 1: entries 2..=5, key `raft_state`; group 2: entries 10..=11 (written
/// as one compressed batch), key `applied`; group 3: removed.
fn build_dir(dir: &Path, preallocate: bool) -> Written {
    let mut records = 0;
    let engine = open(dir, config(preallocate)).unwrap();
    let mut write = |engine: &Engine, b: &mut LogBatch| {
        engine.write(b, true).unwrap();
        records += 1;
    };
    let mut b = LogBatch::new();
    b.add_entries(1, 1, &[b"entry-1".as_slice(), b"entry-2", b"entry-3"]);
    b.put(1, b"raft_state", b"term=3");
    write(&engine, &mut b);
    b.add_entries(2, 10, &[vec![b'a'; 1000], vec![b'b'; 1000]]);
    write(&engine, &mut b);
    b.add_entries(3, 1, &[b"doomed"]);
    b.put(3, b"k", b"v");
    write(&engine, &mut b);
    b.remove_group(3);
    b.delete(2, b"never-set");
    write(&engine, &mut b);
    engine.close().unwrap();

    let engine = open(dir, config(preallocate)).unwrap();
    b.add_entries(1, 4, &[b"entry-4".as_slice(), b"entry-5"]);
    b.compact_to(1, 2);
    write(&engine, &mut b);
    b.put(2, b"applied", b"11");
    write(&engine, &mut b);
    assert_eq!(engine.index_stats().entries, 6);
    engine.close().unwrap();
    Written { records }
}

/// Every file of `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn flip_byte(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn dump_shows_files_records_items_and_entries() {
    let tmp = tempfile::tempdir().unwrap();
    build_dir(tmp.path(), false);
    let (code, out) = raftlog("dump", tmp.path(), &["--entries"]);
    assert_eq!(code, 0, "{out}");
    for expected in [
        "file 0000000000000001.raftlog queue=append seq=1 size=",
        "file 0000000000000002.raftlog queue=append seq=2 size=",
        " version=2 records=4 ",
        "end=zeros (the end marker",
        "  record offset=24 len=",
        "codec=lz4",
        "codec=none",
        "    entries group=1 index=1..=3 count=3",
        "    put group=1 key=\"raft_state\" value_len=6",
        "    entries group=2 index=10..=11 count=2",
        "    remove_group group=3",
        "    delete group=2 key=\"never-set\"",
        "    compact_to group=1 index=2",
        &format!("      entry index=2 len=7 hex={}\n", hex(b"entry-2")),
        // Long entries are cut at 32 bytes.
        &format!(
            "      entry index=10 len=1000 hex={}...\n",
            hex(&[b'a'; 32])
        ),
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    let (code, only_2) = raftlog("dump", tmp.path(), &["--group", "2"]);
    assert_eq!(code, 0);
    assert!(only_2.contains("entries group=2 index=10..=11"), "{only_2}");
    assert!(!only_2.contains("group=1"), "{only_2}");
    assert!(!only_2.contains("group=3"), "{only_2}");
    assert!(
        !only_2.contains("entry index="),
        "entries shown without --entries"
    );
}

#[test]
fn check_passes_a_clean_directory_and_changes_nothing() {
    for preallocate in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let written = build_dir(tmp.path(), preallocate);
        let before = snapshot(tmp.path());
        let (code, out) = raftlog("check", tmp.path(), &[]);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains(&format!(
                "summary: files=2 records={} entries=6 damage=0",
                written.records
            )),
            "{out}"
        );
        assert!(out.contains("end: zeros"), "{out}");
        assert_eq!(snapshot(tmp.path()), before, "check changed the directory");
    }
}

#[test]
fn stats_counts_what_the_engine_indexes() {
    let tmp = tempfile::tempdir().unwrap();
    let written = build_dir(tmp.path(), false);
    let (code, out) = raftlog("stats", tmp.path(), &[]);
    assert_eq!(code, 0, "{out}");
    let engine = open(tmp.path(), config(false)).unwrap();
    let index = engine.index_stats();
    assert_eq!((index.groups, index.entries, index.keys), (2, 6, 2));
    for expected in [
        "queue append: files=2 ".to_string(),
        format!(" records={} compressed_records=1 ", written.records),
        "queue rewrite: files=0 ".to_string(),
        format!(
            "index: groups={} live_entries={} keys={}",
            index.groups, index.entries, index.keys
        ),
        "damage: 0\n".to_string(),
    ] {
        assert!(out.contains(&expected), "missing {expected:?} in:\n{out}");
    }
}

#[test]
fn check_names_file_and_offset_of_a_flipped_byte() {
    let tmp = tempfile::tempdir().unwrap();
    build_dir(tmp.path(), false);
    // A byte of the first record's payload, in a file with valid records after it.
    flip_byte(&tmp.path().join(FILE_1), 24 + 32 + 3);
    let (code, out) = raftlog("check", tmp.path(), &[]);
    assert_eq!(code, 1, "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("damage: "))
        .unwrap_or_else(|| panic!("no damage line in:\n{out}"));
    assert!(
        line.contains(&format!("{FILE_1} at offset 24: payload checksum mismatch")),
        "{line}"
    );
    assert!(line.contains("had been synced"), "{line}");
    assert!(out.contains(" damage=1"), "{out}");
    // The three records after the damaged one are found and shown, as lost.
    assert!(
        out.contains(&format!(
            "{FILE_1}: 0 records (+3 valid records past the damage, which recovery drops)"
        )),
        "{out}"
    );
    let (code, dump) = raftlog("dump", tmp.path(), &[]);
    assert_eq!(code, 0);
    // The damaged first record spans 24..113 (a 32-byte header, 57 of payload).
    assert!(
        dump.contains("  resumed at offset=113 past the damage (recovery drops what follows) records=3 end=zeros"),
        "{dump}"
    );
    assert!(dump.contains("remove_group group=3"), "{dump}");
    // The engine's recovery agrees on file and offset.
    match open(tmp.path(), scanning()) {
        Err(Error::Corruption { path, offset, .. }) => {
            assert_eq!(
                (path.file_name().unwrap().to_str(), offset),
                (Some(FILE_1), 24)
            );
        }
        other => panic!("engine opened a damaged directory: {other:?}"),
    }
}

#[test]
fn check_flags_a_torn_tail_the_engine_would_cut() {
    let tmp = tempfile::tempdir().unwrap();
    build_dir(tmp.path(), false);
    // Cut into the last record: past the end marker and 5 bytes more.
    let path = tmp.path().join(FILE_2);
    // (The data ends at the end marker; the file's index section follows.)
    let data_end = scan_file(&std::fs::read(&path).unwrap()).unwrap().valid_end;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(data_end - 5)
        .unwrap();
    let (code, out) = raftlog("check", tmp.path(), &[]);
    assert_eq!(code, 1, "{out}");
    let line = out.lines().find(|l| l.starts_with("damage: ")).unwrap();
    assert!(
        line.contains(FILE_2) && line.contains("a torn tail"),
        "{line}"
    );
    let engine = open(tmp.path(), scanning()).unwrap();
    let damage = &engine.recovery_report().damage;
    assert_eq!(damage.len(), 1);
    assert!(
        line.contains(&format!("at offset {}:", damage[0].offset)),
        "{line} vs {damage:?}"
    );
}

#[test]
fn check_reports_a_bad_header_and_a_missing_file() {
    let tmp = tempfile::tempdir().unwrap();
    build_dir(tmp.path(), false);
    // A third session, so file 2 sits between two others.
    open(tmp.path(), config(false)).unwrap().close().unwrap();
    flip_byte(&tmp.path().join(FILE_1), 2);
    std::fs::remove_file(tmp.path().join(FILE_2)).unwrap();
    let (code, out) = raftlog("check", tmp.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("{FILE_2}: missing")),
        "missing file not named:\n{out}"
    );
    assert!(
        out.contains(&format!("{FILE_1} at offset 0: file header")),
        "bad header not reported:\n{out}"
    );
    assert!(out.contains(" damage=2"), "{out}");
}

#[test]
fn check_only_notes_a_file_left_unfinished_by_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    build_dir(tmp.path(), false);
    // A crash right after creating file 3: its header never reached the disk.
    std::fs::write(tmp.path().join("0000000000000003.raftlog"), [0u8; 10]).unwrap();
    let (code, out) = raftlog("check", tmp.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("0000000000000003.raftlog: unfinished"),
        "{out}"
    );
    let engine = open(tmp.path(), config(false)).unwrap();
    assert_eq!(engine.recovery_report().unfinished_files.len(), 1);
    assert!(engine.recovery_report().damage.is_empty());
}

#[test]
fn usage_and_io_errors_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let absent = tmp.path().join("absent");
    for sub in ["dump", "check", "stats"] {
        let out = ctl(&["raftlog", sub, absent.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{sub}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("strata-ctl: list "), "{sub}: {stderr}");
    }
    for args in [
        &["raftlog", "check"][..],
        &["raftlog", "fsck", "/tmp"],
        &["raftlog", "dump", "/tmp", "--group", "x"],
        &[],
    ] {
        assert_eq!(ctl(args).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn stats_and_check_agree_with_the_engine_after_a_purge() {
    let tmp = tempfile::tempdir().unwrap();
    let config = Config {
        purge_threshold_bytes: 1 << 20,
        compression_threshold_bytes: 0, // So group 2's bytes count in full.
        ..config(false)
    };
    let engine = open(tmp.path(), config.clone()).unwrap();
    let mut b = LogBatch::new();
    b.add_entries(1, 1, &[b"old-1".as_slice(), b"old-2", b"old-3"]);
    b.put(1, b"k", b"old");
    engine.write(&mut b, true).unwrap();
    // Group 2 fills the append queue past the purge threshold, then lets go of
    // it, so purge copies group 1 into the rewrite queue and frees the files.
    for i in 1..=400u64 {
        b.add_entries(2, i, &[vec![i as u8; 4000]]);
        engine.write(&mut b, false).unwrap();
    }
    engine.compact_to(2, 400).unwrap();
    let purged = engine.purge().unwrap();
    assert!(
        purged.entries_rewritten > 0 && purged.files_purged > 0,
        "{purged:?}"
    );
    // Newer writes over the rewritten data: replay order decides what is live.
    b.add_entries(1, 2, &[b"new-2".as_slice()]);
    b.put(1, b"k", b"new");
    b.put(1, b"k2", b"v");
    engine.write(&mut b, true).unwrap();
    engine.close().unwrap();

    let (code, stats) = raftlog("stats", tmp.path(), &[]);
    assert_eq!(code, 0, "{stats}");
    let (code, check) = raftlog("check", tmp.path(), &[]);
    assert_eq!(code, 0, "{check}");
    let engine = open(tmp.path(), config).unwrap();
    assert_eq!(
        engine.get_entry(1, 2).unwrap().as_deref(),
        Some(&b"new-2"[..])
    );
    let index = engine.index_stats();
    assert_eq!((index.groups, index.entries, index.keys), (2, 3, 2));
    assert!(stats.contains("queue rewrite: files=1 "), "{stats}");
    assert!(!stats.contains("recycled_files=0 "), "{stats}");
    assert_index_line(&stats, &engine);
    assert!(check.contains(" entries=3 damage=0"), "{check}");
}

/// Purge can delete a record whose entries a later record replaced while an
/// earlier record of the same group lives on in the rewrite queue: replay then
/// meets a hole that a later file fills. The engine keeps the entries before the
/// hole; `check` and `stats` must count them too.
#[test]
fn check_and_stats_agree_with_engine_after_purge_left_a_hole() {
    let tmp = tempfile::tempdir().unwrap();
    let config = Config {
        // One file per session.
        target_file_size_bytes: 8 << 20,
        purge_threshold_bytes: 1 << 20,
        compression_threshold_bytes: 0, // So the filler counts in full.
        ..config(false)
    };
    let entries = |range: std::ops::RangeInclusive<u64>| -> Vec<Vec<u8>> {
        range.map(|i| format!("entry-{i}").into_bytes()).collect()
    };
    let mut b = LogBatch::new();

    // File 1: group 1's entries 1..=10, and 1.2 MiB of group 3 that purge
    // will want gone.
    let engine = open(tmp.path(), config.clone()).unwrap();
    b.add_entries(1, 1, &entries(1..=10));
    b.put(1, b"raft_state", b"term=1");
    engine.write(&mut b, true).unwrap();
    for i in 1..=12u64 {
        b.add_entries(3, i, &[vec![i as u8; 100 << 10]]);
        engine.write(&mut b, false).unwrap();
    }
    engine.close().unwrap();

    // File 2: group 1 runs ahead to 18 (entries a new leader will replace),
    // and group 2 writes the data that keeps file 2 from being purged.
    let engine = open(tmp.path(), config.clone()).unwrap();
    b.add_entries(1, 11, &entries(11..=18));
    b.add_entries(2, 1, &[b"pin".as_slice()]);
    b.put(2, b"applied", b"1");
    engine.write(&mut b, true).unwrap();
    engine.close().unwrap();

    // File 3: the new leader replaces group 1's log from entry 10 on, so only
    // 1..=9 of file 1's record stay live; group 3 is compacted away. Purge
    // copies 1..=9 into the rewrite queue and deletes file 1, the only home
    // of the old entry 10, leaving file 2's 11..=18 after a hole that file 3
    // fills on replay.
    let engine = open(tmp.path(), config.clone()).unwrap();
    b.add_entries(1, 10, &[b"entry-10-new".as_slice()]);
    engine.write(&mut b, true).unwrap();
    engine.compact_to(3, 13).unwrap();
    let purged = engine.purge().unwrap();
    assert_eq!(
        (purged.files_purged, purged.entries_rewritten),
        (1, 9),
        "{purged:?}"
    );
    engine.close().unwrap();
    assert!(!tmp.path().join(FILE_1).exists());
    assert!(tmp.path().join("0000000000000001.rewrite").exists());

    let (code, stats) = raftlog("stats", tmp.path(), &[]);
    assert_eq!(code, 0, "{stats}");
    let (code, check) = raftlog("check", tmp.path(), &[]);
    assert_eq!(code, 0, "{check}");

    let engine = open(tmp.path(), config).unwrap();
    assert_eq!(
        (engine.first_index(1), engine.last_index(1)),
        (Some(1), Some(10))
    );
    assert_eq!(
        engine.get_entry(1, 1).unwrap().as_deref(),
        Some(&b"entry-1"[..])
    );
    assert_eq!(
        engine.get_entry(1, 10).unwrap().as_deref(),
        Some(&b"entry-10-new"[..])
    );
    let index = engine.index_stats();
    assert_eq!((index.groups, index.entries, index.keys), (2, 11, 2));
    assert_index_line(&stats, &engine);
    assert!(
        check.contains(&format!(" entries={} damage=0", index.entries)),
        "{check}"
    );
}

/// Purge removes dead append files with no directory sync; a power cut may
/// keep a later removal and lose an earlier one. The file that came back sits
/// below a hole that the purge's logged floor covers: recovery skips and
/// removes it, and `check` and `stats` must not call the hole lost data or
/// count the dead file's records.
#[test]
fn check_and_stats_accept_a_hole_a_logged_purge_covers() {
    let tmp = tempfile::tempdir().unwrap();
    let config = Config {
        compression_threshold_bytes: 0,
        // Removed, not renamed for reuse: the copy below stands for the file.
        recycle_files_max: Some(0),
        ..config(false)
    };
    let engine = open(tmp.path(), config.clone()).unwrap();
    let mut b = LogBatch::new();
    b.put(1, b"k", b"dead");
    engine.write(&mut b, true).unwrap();
    for i in 1..=60u64 {
        b.add_entries(2, i, &[vec![i as u8; 4000]]);
        engine.write(&mut b, false).unwrap();
    }
    b.delete(1, b"k");
    engine.write(&mut b, true).unwrap();
    engine.compact_to(2, 60).unwrap();
    let kept = std::fs::read(tmp.path().join(FILE_1)).unwrap();
    let purged = engine.purge().unwrap();
    assert!(purged.files_purged >= 2, "{purged:?}");
    engine.close().unwrap();
    // The first removal lost, a later one kept.
    std::fs::write(tmp.path().join(FILE_1), kept).unwrap();
    assert!(!tmp.path().join(FILE_2).exists());

    let (code, check) = raftlog("check", tmp.path(), &[]);
    assert_eq!(code, 0, "{check}");
    assert!(
        check.contains("a purge removed them and logged it"),
        "{check}"
    );
    let (code, stats) = raftlog("stats", tmp.path(), &[]);
    assert_eq!(code, 0, "{stats}");
    let engine = open(tmp.path(), config).unwrap();
    assert_eq!(engine.get(1, b"k"), None, "the dead file's put came back");
    assert_eq!(
        engine.recovery_report().purged_files_removed,
        vec![tmp.path().join(FILE_1)]
    );
    assert_index_line(&stats, &engine);
    assert!(stats.contains("damage: 0"), "{stats}");
}

/// A rotation renames a file made ahead into place without a directory sync;
/// a crash can lose the rename, and recovery adopts the file by its header.
/// `check` and `stats` used to skip it as a recycled file: they must read it
/// as the append file it is, as recovery does.
#[test]
fn check_and_stats_read_a_file_made_ahead_whose_rename_was_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let config = Config {
        compression_threshold_bytes: 0,
        ..config(false)
    };
    let engine = open(tmp.path(), config.clone()).unwrap();
    let mut b = LogBatch::new();
    let mut i = 0;
    while engine.file_stats().active_append_seq < 2 || i < 20 {
        i += 1;
        b.add_entries(1, i, &[vec![i as u8; 3000]]);
        b.put(1, b"last", &i.to_le_bytes());
        engine.write(&mut b, true).unwrap();
    }
    engine.close().unwrap();
    let active = tmp.path().join(FILE_2);
    assert!(active.exists());
    std::fs::rename(
        &active,
        tmp.path().join("recycle-prepared-0000000000000002"),
    )
    .unwrap();

    let (code, check) = raftlog("check", tmp.path(), &[]);
    assert_eq!(code, 0, "{check}");
    assert!(
        check.contains("a rotation's rename that a crash lost"),
        "{check}"
    );
    let (code, stats) = raftlog("stats", tmp.path(), &[]);
    assert_eq!(code, 0, "{stats}");
    let engine = open(tmp.path(), config).unwrap();
    assert_eq!(engine.recovery_report().adopted_file, Some(active));
    assert_eq!(engine.last_index(1), Some(i));
    let index = engine.index_stats();
    assert_index_line(&stats, &engine);
    assert!(
        check.contains(&format!(" entries={} damage=0", index.entries)),
        "{check}"
    );
}
