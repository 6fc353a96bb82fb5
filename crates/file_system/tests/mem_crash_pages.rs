//! `MemFs`'s page crashes (`KeepRandomPages`, `crash_keeping`) keep any subset
//! of the unsynced state, within what a disk and a file system could show:
//! - synced bytes and dir-synced names survive every seed;
//! - every page after the crash holds either its durable or its live bytes, and
//!   the file has one of the lengths it had since its last sync;
//! - over many seeds, files keep none, all and some of their unsynced pages,
//!   and directories any subset of their unsynced changes;
//! - a rename is atomic, and a name's changes survive as a prefix of its history;
//! - a seed replays the same crash, whatever other files exist;
//! - `crash_keeping` keeps exactly the pages and changes the test picks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use strata_fs::{CrashMode, File, FileSystem, MemFs, Unsynced};

const PAGE: u64 = MemFs::PAGE_BYTES;
const SEEDS: u64 = 400;

fn read_all(fs: &MemFs, path: &Path) -> Vec<u8> {
    let file = fs.open(path, false).unwrap();
    let mut buf = vec![0; file.len().unwrap() as usize];
    file.read_exact_at(0, &mut buf).unwrap();
    buf
}

/// Returns every file of the flat directory `dir` with its bytes.
fn snapshot(fs: &MemFs, dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let names = fs.list(dir).unwrap();
    names
        .into_iter()
        .map(|name| {
            let bytes = read_all(fs, &dir.join(&name));
            (name, bytes)
        })
        .collect()
}

/// Creates `dir/name` holding `data`, all of it synced.
fn synced_file(fs: &MemFs, dir: &Path, name: &str, data: &[u8]) -> Arc<dyn File> {
    fs.create_dir_all(dir).unwrap();
    let file = fs.create(&dir.join(name)).unwrap();
    file.write_at(0, data).unwrap();
    file.sync_data().unwrap();
    fs.sync_dir(dir).unwrap();
    file
}

/// Returns `len` bytes that differ from page to page and from `salt` to `salt`.
fn pattern(len: u64, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i / PAGE) as u8 ^ (i as u8).wrapping_mul(31) ^ salt)
        .collect()
}

/// Returns the bytes of `image` in `start..end`, zeros past its end.
fn padded(image: &[u8], start: u64, end: u64) -> Vec<u8> {
    (start..end)
        .map(|i| image.get(i as usize).copied().unwrap_or(0))
        .collect()
}

/// Checks that `image` is `lens`-long for one of `lens` and that each of its
/// pages holds the bytes of `durable` or of `live`; returns, per page, whether
/// it holds the live bytes where those differ from the durable ones.
fn check_pages(image: &[u8], durable: &[u8], live: &[u8], lens: &[u64]) -> Vec<Option<bool>> {
    let len = image.len() as u64;
    assert!(lens.contains(&len), "length {len} not in {lens:?}");
    (0..len.div_ceil(PAGE))
        .map(|page| {
            let (start, end) = (page * PAGE, ((page + 1) * PAGE).min(len));
            let got = &image[start as usize..end as usize];
            let (old, new) = (padded(durable, start, end), padded(live, start, end));
            assert!(
                got == old || got == new,
                "page {page} holds neither its durable nor its live bytes"
            );
            (old != new).then_some(got == new)
        })
        .collect()
}

#[test]
fn every_page_is_durable_or_live_and_synced_pages_survive() {
    let dir = Path::new("/db");
    let base = MemFs::new();
    let durable = pattern(5 * PAGE, 1);
    let file = synced_file(&base, dir, "f", &durable);
    synced_file(&base, dir, "g", &pattern(3 * PAGE, 2));
    // Unsynced: part of page 1, all of page 3, then two appends.
    file.write_at(PAGE + 100, &[0xEE; 200]).unwrap();
    file.write_at(3 * PAGE, &pattern(PAGE, 3)).unwrap();
    file.write_at(5 * PAGE, &pattern(PAGE, 4)).unwrap();
    file.write_at(6 * PAGE, &pattern(PAGE + PAGE / 2, 5))
        .unwrap();
    let live = read_all(&base, &dir.join("f"));
    let lens = [5 * PAGE, 6 * PAGE, 7 * PAGE + PAGE / 2];
    assert_eq!(
        base.unsynced_pages(&dir.join("f")).unwrap(),
        [1, 3, 5, 6, 7]
    );
    assert!(base.unsynced_pages(&dir.join("g")).unwrap().is_empty());

    let (mut none, mut all, mut mixed) = (false, false, false);
    let mut patterns = BTreeSet::new();
    let mut seen_lens = BTreeSet::new();
    for seed in 0..SEEDS {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPages { seed });
        assert_eq!(fs.list(dir).unwrap(), ["f", "g"], "seed {seed}");
        assert_eq!(read_all(&fs, &dir.join("g")), pattern(3 * PAGE, 2));
        let image = read_all(&fs, &dir.join("f"));
        let kept = check_pages(&image, &durable, &live, &lens);
        for page in [0, 2, 4] {
            let range = (page * PAGE) as usize..((page + 1) * PAGE) as usize;
            assert_eq!(image[range.clone()], durable[range], "seed {seed}");
        }
        let kept: Vec<bool> = kept.into_iter().flatten().collect();
        seen_lens.insert(image.len() as u64);
        none |= image == durable;
        all |= image == live;
        mixed |= kept.contains(&true) && kept.contains(&false);
        patterns.insert(kept);
    }
    assert!(
        none && all && mixed,
        "none {none}, all {all}, mixed {mixed}"
    );
    assert_eq!(seen_lens.len(), lens.len(), "lengths seen: {seen_lens:?}");
    assert!(patterns.len() > 20, "only {} page patterns", patterns.len());
}

#[test]
fn a_shrunk_file_keeps_old_pages_or_zeros() {
    let dir = Path::new("/db");
    let base = MemFs::new();
    let durable = pattern(3 * PAGE, 6);
    let file = synced_file(&base, dir, "f", &durable);
    file.truncate(10).unwrap();
    file.write_at(2 * PAGE, b"tail").unwrap();
    let live = read_all(&base, &dir.join("f"));
    let lens = [3 * PAGE, 10, 2 * PAGE + 4];
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPages { seed });
        let image = read_all(&fs, &dir.join("f"));
        check_pages(&image, &durable, &live, &lens);
        seen.insert(image);
    }
    assert!(seen.contains(&durable) && seen.contains(&live));
    assert!(seen.len() > 8, "only {} images", seen.len());
}

#[test]
fn a_create_followed_by_sync_dir_survives_every_seed() {
    let dir = Path::new("/db");
    let base = MemFs::new();
    synced_file(&base, dir, "new", b"payload");
    // Unsynced work elsewhere must not disturb it.
    base.create(&dir.join("other")).unwrap();
    base.rename(&dir.join("other"), &dir.join("other2"))
        .unwrap();
    for seed in 0..SEEDS {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPages { seed });
        assert_eq!(read_all(&fs, &dir.join("new")), b"payload", "seed {seed}");
    }
}

#[test]
fn directory_changes_survive_in_any_combination() {
    let dir = Path::new("/db");
    let base = MemFs::new();
    for name in ["a", "b", "c"] {
        synced_file(&base, dir, name, name.as_bytes());
    }
    let n1 = base.create(&dir.join("n1")).unwrap();
    n1.write_at(0, b"n1").unwrap();
    n1.sync_data().unwrap();
    base.remove(&dir.join("a")).unwrap();
    base.rename(&dir.join("b"), &dir.join("b2")).unwrap();
    base.create(&dir.join("t")).unwrap();
    base.remove(&dir.join("t")).unwrap();

    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPages { seed });
        let files = snapshot(&fs, dir);
        assert_eq!(files["c"], b"c", "seed {seed}");
        assert!(files.get("a").is_none_or(|a| a == b"a"));
        assert!(files.get("n1").is_none_or(|n| n == b"n1"));
        assert!(files.get("t").is_none_or(|t| t.is_empty()));
        // The rename happened whole or not at all.
        let b = (files.get("b"), files.get("b2"));
        assert!(
            matches!(b, (Some(x), None) | (None, Some(x)) if x == b"b"),
            "seed {seed}: {files:?}"
        );
        seen.insert(files.into_keys().collect::<Vec<_>>());
    }
    // a kept or removed, b or b2, n1 or not, t or not.
    assert_eq!(seen.len(), 16, "{seen:?}");
}

#[test]
fn a_rename_is_atomic_within_and_across_directories() {
    let (a, b) = (Path::new("/a"), Path::new("/b"));
    let base = MemFs::new();
    synced_file(&base, a, "x", b"x");
    synced_file(&base, a, "p", b"p");
    synced_file(&base, a, "q", b"q");
    base.create_dir_all(b).unwrap();
    base.rename(&a.join("x"), &b.join("y")).unwrap();
    // Over an existing name: `q` is replaced, never lost with `p` still there.
    base.rename(&a.join("p"), &a.join("q")).unwrap();

    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPages { seed });
        let (in_a, in_b) = (snapshot(&fs, a), snapshot(&fs, b));
        let x = (in_a.get("x"), in_b.get("y"));
        let x_moved = match x {
            (Some(x), None) if x == b"x" => false,
            (None, Some(y)) if y == b"x" => true,
            _ => panic!("seed {seed}: {in_a:?} {in_b:?}"),
        };
        let p_moved = match (in_a.get("p"), in_a.get("q")) {
            (Some(p), Some(q)) if p == b"p" && q == b"q" => false,
            (None, Some(q)) if q == b"p" => true,
            _ => panic!("seed {seed}: {in_a:?}"),
        };
        seen.insert((x_moved, p_moved));
    }
    assert_eq!(seen.len(), 4);

    // Once the target directory is synced, only the unlink of the source is
    // still at stake: the file may end up with both names, never with none.
    base.sync_dir(b).unwrap();
    let mut both = false;
    for seed in 0..SEEDS {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPages { seed });
        assert_eq!(read_all(&fs, &b.join("y")), b"x");
        both |= fs.exists(&a.join("x"));
    }
    assert!(both);
}

#[test]
fn a_name_keeps_a_prefix_of_its_history() {
    let dir = Path::new("/db");
    let base = MemFs::new();
    synced_file(&base, dir, "CURRENT", b"v1");
    base.rename(&dir.join("CURRENT"), &dir.join("CURRENT.old"))
        .unwrap();
    let current = base.create(&dir.join("CURRENT")).unwrap();
    current.write_at(0, b"v2").unwrap();
    current.sync_data().unwrap();

    let v = |s: &[u8]| s.to_vec();
    let allowed = [
        BTreeMap::from([("CURRENT".to_owned(), v(b"v1"))]),
        BTreeMap::from([("CURRENT.old".to_owned(), v(b"v1"))]),
        BTreeMap::from([
            ("CURRENT".to_owned(), v(b"v2")),
            ("CURRENT.old".to_owned(), v(b"v1")),
        ]),
    ];
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPages { seed });
        let files = snapshot(&fs, dir);
        // Never `CURRENT` = v2 alone: that would lose v1 with its rename.
        assert!(allowed.contains(&files), "seed {seed}: {files:?}");
        seen.insert(files);
    }
    assert_eq!(seen.len(), allowed.len());
}

#[test]
fn a_seed_replays_the_same_crash_whatever_other_files_exist() {
    let dir = Path::new("/db");
    let build = |extra: bool| {
        let fs = MemFs::new();
        let file = synced_file(&fs, dir, "f", &pattern(2 * PAGE, 7));
        for page in 0..6 {
            file.write_at(page * PAGE + 1, &[page as u8 + 1; 3])
                .unwrap();
        }
        fs.create(&dir.join("unsynced")).unwrap();
        if extra {
            let other = synced_file(&fs, dir, "other", b"");
            other.write_at(0, &pattern(4 * PAGE, 8)).unwrap();
            fs.create(&dir.join("more")).unwrap();
        }
        fs
    };
    let (base, crowded) = (build(false), build(true));
    for seed in 0..50 {
        let (a, b, c) = (base.deep_clone(), base.deep_clone(), crowded.deep_clone());
        for fs in [&a, &b, &c] {
            fs.crash(CrashMode::KeepRandomPages { seed });
        }
        assert_eq!(snapshot(&a, dir), snapshot(&b, dir), "seed {seed}");
        assert_eq!(
            read_all(&a, &dir.join("f")),
            read_all(&c, &dir.join("f")),
            "seed {seed}"
        );
    }
}

/// Three records appended after a synced header; the pages of the second
/// record straddle page boundaries.
fn three_records() -> (MemFs, PathBuf, Vec<u8>, Vec<u8>) {
    let dir = Path::new("/db");
    let fs = MemFs::new();
    let path = dir.join("log");
    let header = pattern(PAGE, 9);
    let file = synced_file(&fs, dir, "log", &header);
    let mut offset = PAGE;
    for (len, salt) in [(5000, 10), (9000, 11), (3000, 12)] {
        file.write_at(offset, &pattern(len, salt)).unwrap();
        offset += len;
    }
    let live = read_all(&fs, &path);
    (fs, path, header, live)
}

#[test]
fn crash_keeping_keeps_exactly_the_chosen_pages() {
    let (base, path, header, live) = three_records();
    // Records: 1 in 4096..9096, 2 in 9096..18096, 3 in 18096..21096.
    assert_eq!(base.unsynced_pages(&path).unwrap(), [1, 2, 3, 4, 5]);

    // Page 3 (12288..16384) lies inside record 2; record 3's pages (4, 5) reach
    // the disk.
    let fs = base.deep_clone();
    let mut asked = Vec::new();
    fs.crash_keeping(|unsynced| {
        let keep = !matches!(unsynced, Unsynced::Page { page: 3, .. });
        asked.push(format!("{unsynced:?}"));
        keep
    });
    let mut expected = live.clone();
    expected[3 * PAGE as usize..4 * PAGE as usize].fill(0);
    assert_eq!(read_all(&fs, &path), expected);
    let file = r#"file: "/db/log""#;
    let mut wanted = vec![format!("Len {{ {file} }}")];
    wanted.extend((1..=5).map(|page| format!("Page {{ {file}, page: {page} }}")));
    assert_eq!(asked, wanted);

    // Without its length the file ends where it was synced.
    let fs = base.deep_clone();
    fs.crash_keeping(|unsynced| !matches!(unsynced, Unsynced::Len { .. }));
    assert_eq!(read_all(&fs, &path), header);

    // The length without the pages: zeros where the records were.
    let fs = base.deep_clone();
    fs.crash_keeping(|unsynced| matches!(unsynced, Unsynced::Len { .. }));
    let mut zeros = header.clone();
    zeros.resize(live.len(), 0);
    assert_eq!(read_all(&fs, &path), zeros);
}

#[test]
fn a_lost_overwrite_keeps_the_old_bytes() {
    let dir = Path::new("/db");
    let base = MemFs::new();
    let durable = pattern(2 * PAGE, 13);
    let file = synced_file(&base, dir, "f", &durable);
    file.write_at(10, b"new").unwrap();
    file.write_at(PAGE + 10, b"new").unwrap();
    base.crash_keeping(|unsynced| matches!(unsynced, Unsynced::Page { page: 1, .. }));
    let mut expected = durable;
    expected[PAGE as usize + 10..PAGE as usize + 13].copy_from_slice(b"new");
    assert_eq!(read_all(&base, &dir.join("f")), expected);
}

#[test]
fn crash_keeping_nothing_or_everything_matches_the_simple_crashes() {
    let dir = Path::new("/db");
    let (base, ..) = three_records();
    base.create(&dir.join("unsynced")).unwrap();
    base.rename(&dir.join("log"), &dir.join("log2")).unwrap();
    let live = snapshot(&base, dir);

    let (dropped, nothing, everything) = (base.deep_clone(), base.deep_clone(), base.deep_clone());
    dropped.crash(CrashMode::DropUnsynced);
    nothing.crash_keeping(|_| false);
    everything.crash_keeping(|_| true);
    assert_eq!(snapshot(&nothing, dir), snapshot(&dropped, dir));
    assert_eq!(snapshot(&everything, dir), live);
    // Nothing is left unsynced after a crash.
    assert!(everything
        .unsynced_pages(&dir.join("log2"))
        .unwrap()
        .is_empty());
}

#[test]
fn crash_keeping_chooses_directory_changes() {
    let dir = Path::new("/db");
    let base = MemFs::new();
    synced_file(&base, dir, "a", b"a");
    base.create(&dir.join("n")).unwrap();
    base.rename(&dir.join("a"), &dir.join("b")).unwrap();
    base.create(&dir.join("x")).unwrap();
    base.rename(&dir.join("x"), &dir.join("y")).unwrap();
    base.remove(&dir.join("n")).unwrap();

    let mut asked = Vec::new();
    base.crash_keeping(|unsynced| {
        asked.push(format!("{unsynced:?}"));
        matches!(unsynced, Unsynced::Create { path } if path == Path::new("/db/n"))
    });
    // `x` was lost, so its rename could not be kept and was not asked about;
    // `n`'s removal was asked about (and lost).
    assert_eq!(
        asked,
        [
            r#"Create { path: "/db/n" }"#,
            r#"Rename { from: "/db/a", to: "/db/b" }"#,
            r#"Create { path: "/db/x" }"#,
            r#"Remove { path: "/db/n" }"#,
        ]
    );
    let mut names = base.list(dir).unwrap();
    names.sort();
    assert_eq!(names, ["a", "n"]);
}

#[test]
fn the_op_log_modes_still_revert_directories() {
    let dir = Path::new("/db");
    let base = MemFs::new();
    let file = synced_file(&base, dir, "a", b"a");
    file.write_at(1, b"bc").unwrap();
    base.create(&dir.join("n")).unwrap();
    base.rename(&dir.join("a"), &dir.join("b")).unwrap();
    for seed in 0..50 {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPrefix { seed });
        assert_eq!(fs.list(dir).unwrap(), ["a"], "seed {seed}");
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write(u64, Vec<u8>),
    Truncate(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..5 * PAGE, 0..2 * PAGE as usize).prop_map(|(offset, len)| {
            Op::Write(offset, vec![(offset % 251) as u8 + 1; len])
        }),
        1 => (0..5 * PAGE).prop_map(Op::Truncate),
    ]
}

proptest! {
    /// Whatever the unsynced operations and the seed, each page holds its
    /// durable or its live bytes, and the length is one the file had.
    #[test]
    fn keep_random_pages_leaves_durable_or_live_pages(
        synced_len in 0..3 * PAGE,
        ops in prop::collection::vec(op(), 0..8),
        seed in any::<u64>(),
    ) {
        let dir = Path::new("/db");
        let fs = MemFs::new();
        let durable = pattern(synced_len, 14);
        let file = synced_file(&fs, dir, "f", &durable);
        let mut lens = vec![synced_len];
        for op in &ops {
            match op {
                Op::Write(offset, data) => file.write_at(*offset, data).unwrap(),
                Op::Truncate(len) => file.truncate(*len).unwrap(),
            }
            lens.push(file.len().unwrap());
        }
        let live = read_all(&fs, &dir.join("f"));
        let unsynced = fs.unsynced_pages(&dir.join("f")).unwrap();
        let end = (live.len().max(durable.len()) as u64).div_ceil(PAGE);
        for page in 0..end {
            let (start, stop) = (page * PAGE, (page + 1) * PAGE);
            let differs = padded(&live, start, stop) != padded(&durable, start, stop);
            prop_assert_eq!(unsynced.contains(&page), differs, "page {}", page);
        }
        fs.crash(CrashMode::KeepRandomPages { seed });
        check_pages(&read_all(&fs, &dir.join("f")), &durable, &live, &lens);
    }
}
