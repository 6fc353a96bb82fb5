//! `MemFs` models durability exactly: a crash keeps synced bytes and
//! dir-synced names and nothing else, or (with `KeepRandomPrefix`) the synced
//! image plus an in-order prefix of the unsynced operations, the last write
//! possibly torn. Handles and locks from before a crash are dead after it.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use strata_fs::{CrashMode, File, FileSystem, MemFs};

fn read_all(fs: &MemFs, path: &Path) -> Vec<u8> {
    let file = fs.open(path, false).unwrap();
    let mut buf = vec![0; file.len().unwrap() as usize];
    file.read_exact_at(0, &mut buf).unwrap();
    buf
}

/// Creates `dir/name` and makes its name durable.
fn durable_file(fs: &MemFs, dir: &Path, name: &str) -> Arc<dyn File> {
    fs.create_dir_all(dir).unwrap();
    let file = fs.create(&dir.join(name)).unwrap();
    fs.sync_dir(dir).unwrap();
    file
}

#[test]
fn unsynced_bytes_are_dropped_and_synced_bytes_survive() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let file = durable_file(&fs, dir, "log");
    file.write_at(0, b"synced").unwrap();
    file.sync_data().unwrap();
    file.write_at(6, b"-lost").unwrap();
    file.write_at(0, b"S").unwrap();
    assert_eq!(read_all(&fs, &dir.join("log")), b"Synced-lost");

    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&fs, &dir.join("log")), b"synced");
    assert_eq!(fs.sync_count(), 1);
    assert_eq!(fs.bytes_written(), 12);
}

#[test]
fn unsynced_truncate_and_allocate_revert() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let file = durable_file(&fs, dir, "f");
    file.write_at(0, b"abcdef").unwrap();
    file.sync_all().unwrap();
    file.truncate(2).unwrap();
    file.allocate(100).unwrap();
    assert_eq!(file.len().unwrap(), 100);
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&fs, &dir.join("f")), b"abcdef");
}

#[test]
fn a_file_created_without_dir_sync_vanishes() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    let file = fs.create(&dir.join("new")).unwrap();
    file.write_at(0, b"data").unwrap();
    file.sync_all().unwrap();
    fs.crash(CrashMode::DropUnsynced);
    assert!(!fs.exists(&dir.join("new")));
    assert!(fs.exists(dir), "directories are durable at once");
    assert!(fs.list(dir).unwrap().is_empty());
}

#[test]
fn a_rename_without_dir_sync_reverts_and_with_it_sticks() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let file = durable_file(&fs, dir, "tmp");
    file.write_at(0, b"v1").unwrap();
    file.sync_data().unwrap();
    fs.rename(&dir.join("tmp"), &dir.join("CURRENT")).unwrap();
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(fs.list(dir).unwrap(), ["tmp"]);

    fs.rename(&dir.join("tmp"), &dir.join("CURRENT")).unwrap();
    fs.sync_dir(dir).unwrap();
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(fs.list(dir).unwrap(), ["CURRENT"]);
    assert_eq!(read_all(&fs, &dir.join("CURRENT")), b"v1");
}

#[test]
fn a_remove_without_dir_sync_comes_back() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let file = durable_file(&fs, dir, "old");
    file.write_at(0, b"keep").unwrap();
    file.sync_data().unwrap();
    fs.remove(&dir.join("old")).unwrap();
    assert!(!fs.exists(&dir.join("old")));
    // Open handles to a removed file keep working, as on Unix.
    file.write_at(4, b"!").unwrap();
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&fs, &dir.join("old")), b"keep");

    fs.remove(&dir.join("old")).unwrap();
    fs.sync_dir(dir).unwrap();
    fs.crash(CrashMode::DropUnsynced);
    assert!(!fs.exists(&dir.join("old")));
}

#[test]
fn old_handles_fail_and_locks_are_released_after_a_crash() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let file = durable_file(&fs, dir, "f");
    let lock = fs.lock(&dir.join("LOCK")).unwrap();
    assert_eq!(
        fs.lock(&dir.join("LOCK")).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    fs.crash(CrashMode::DropUnsynced);

    let mut buf = [0; 1];
    assert_eq!(file.write_at(0, b"x").unwrap_err().kind(), ErrorKind::Other);
    assert_eq!(
        file.read_at(0, &mut buf).unwrap_err().kind(),
        ErrorKind::Other
    );
    assert!(file.sync_data().is_err());
    assert!(file.sync_all().is_err());
    assert!(file.len().is_err());
    assert!(file.allocate(10).is_err());
    assert!(file.truncate(0).is_err());

    let relock = fs.lock(&dir.join("LOCK")).unwrap();
    // Dropping the stale guard must not free the new holder's lock.
    drop(lock);
    assert_eq!(
        fs.lock(&dir.join("LOCK")).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    drop(relock);
    let _again = fs.lock(&dir.join("LOCK")).unwrap();
}

#[test]
fn deep_clone_is_independent() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let file = durable_file(&fs, dir, "f");
    file.write_at(0, b"base").unwrap();
    file.sync_data().unwrap();
    file.write_at(4, b"+live").unwrap();

    let branch = fs.deep_clone();
    file.write_at(0, b"BASE").unwrap();
    assert_eq!(read_all(&branch, &dir.join("f")), b"base+live");

    branch.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&branch, &dir.join("f")), b"base");
    // The original neither crashed nor lost its handle.
    file.write_at(9, b"!").unwrap();
    assert_eq!(read_all(&fs, &dir.join("f")), b"BASE+live!");
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&fs, &dir.join("f")), b"base");
}

#[test]
fn corruption_and_torn_tails_at_rest_survive_a_crash() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let file = durable_file(&fs, dir, "f");
    file.write_at(0, b"abcdef").unwrap();
    file.sync_data().unwrap();
    fs.corrupt(&dir.join("f"), 1, 0x20).unwrap();
    fs.set_len_raw(&dir.join("f"), 4).unwrap();
    assert_eq!(read_all(&fs, &dir.join("f")), b"aBcd");
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&fs, &dir.join("f")), b"aBcd");
    assert!(fs.corrupt(&dir.join("f"), 99, 1).is_err());
    assert_eq!(
        fs.corrupt(&dir.join("nope"), 0, 1).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn paths_need_their_parent_directory() {
    let fs = MemFs::new();
    let err = fs.create(Path::new("/missing/f")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    fs.create_dir_all(Path::new("/a/b")).unwrap();
    fs.create(Path::new("/a/./b/../b/f")).unwrap();
    assert!(fs.exists(Path::new("/a/b/f")));
    let mut names = fs.list(Path::new("/a")).unwrap();
    names.sort();
    assert_eq!(names, ["b"]);
    assert_eq!(
        fs.create(Path::new("/a/b/f")).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    let reader = fs.open(Path::new("/a/b/f"), false).unwrap();
    assert!(reader.write_at(0, b"x").is_err(), "read-only handle");
    let mut buf = [7; 4];
    assert_eq!(reader.read_at(10, &mut buf).unwrap(), 0);
}

/// An unsynced operation, as the test sees it.
#[derive(Clone, Debug)]
enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

fn apply(image: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::Write(offset, data) => {
            if data.is_empty() {
                return;
            }
            let end = *offset as usize + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[*offset as usize..end].copy_from_slice(data);
        }
        Pending::SetLen(len) => image.resize(*len as usize, 0),
    }
}

/// Every image a crash may leave: the synced image plus `ops[..k]`, where the
/// last op, if a write, may be cut to any prefix of its bytes.
fn allowed_images(synced: &[u8], ops: &[Pending]) -> BTreeSet<Vec<u8>> {
    let mut allowed = BTreeSet::new();
    let mut image = synced.to_vec();
    allowed.insert(image.clone());
    for op in ops {
        if let Pending::Write(offset, data) = op {
            for torn in 0..=data.len() {
                let mut partial = image.clone();
                apply(
                    &mut partial,
                    &Pending::Write(*offset, data[..torn].to_vec()),
                );
                allowed.insert(partial);
            }
        }
        apply(&mut image, op);
        allowed.insert(image.clone());
    }
    allowed
}

#[test]
fn keep_random_prefix_keeps_an_in_order_prefix_with_a_torn_last_write() {
    let dir = Path::new("/db");
    let synced = b"0123456789".to_vec();
    let ops = vec![
        Pending::Write(8, b"abcdef".to_vec()),
        Pending::Write(2, b"XY".to_vec()),
        Pending::SetLen(12),
        Pending::Write(20, b"ghijklmn".to_vec()),
        Pending::Write(0, b"ZZZZZZZZZZZZZZZZZZZZZZZZZ".to_vec()),
    ];
    let allowed = allowed_images(&synced, &ops);

    let base = MemFs::new();
    let file = durable_file(&base, dir, "f");
    file.write_at(0, &synced).unwrap();
    file.sync_data().unwrap();
    for op in &ops {
        match op {
            Pending::Write(offset, data) => file.write_at(*offset, data).unwrap(),
            Pending::SetLen(len) => file.truncate(*len).unwrap(),
        }
    }

    let mut seen = BTreeSet::new();
    for seed in 0..2000 {
        let fs = base.deep_clone();
        fs.crash(CrashMode::KeepRandomPrefix { seed });
        let image = read_all(&fs, &dir.join("f"));
        assert!(allowed.contains(&image), "seed {seed}: {image:?}");
        seen.insert(image);
    }
    // The generator explores: nothing kept, everything kept, and torn writes.
    let mut full = synced.clone();
    ops.iter().for_each(|op| apply(&mut full, op));
    assert!(seen.contains(&synced));
    assert!(seen.contains(&full));
    assert!(seen.len() > 20, "only {} distinct images", seen.len());
    let mut whole_prefixes = BTreeSet::from([synced.clone()]);
    let mut image = synced.clone();
    for op in &ops {
        apply(&mut image, op);
        whole_prefixes.insert(image.clone());
    }
    assert!(
        seen.iter().any(|image| !whole_prefixes.contains(image)),
        "no torn write in 2000 seeds"
    );

    // The same seed replays the same crash.
    let (a, b) = (base.deep_clone(), base.deep_clone());
    a.crash(CrashMode::KeepRandomPrefix { seed: 7 });
    b.crash(CrashMode::KeepRandomPrefix { seed: 7 });
    assert_eq!(read_all(&a, &dir.join("f")), read_all(&b, &dir.join("f")));
}

#[derive(Clone, Debug)]
enum ModelOp {
    Write(u64, Vec<u8>),
    SyncData,
    Truncate(u64),
}

fn model_op() -> impl Strategy<Value = ModelOp> {
    prop_oneof![
        4 => (0u64..64, prop::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(offset, data)| ModelOp::Write(offset, data)),
        1 => Just(ModelOp::SyncData),
        1 => (0u64..80).prop_map(ModelOp::Truncate),
    ]
}

proptest! {
    /// MemFs agrees with a two-vector model (live and durable) on every read,
    /// and a crash leaves exactly the model's durable image.
    #[test]
    fn mem_fs_matches_a_live_and_durable_model(ops in prop::collection::vec(model_op(), 0..40)) {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let file = durable_file(&fs, dir, "f");
        let (mut live, mut durable) = (Vec::new(), Vec::new());
        for op in &ops {
            match op {
                ModelOp::Write(offset, data) => {
                    file.write_at(*offset, data).unwrap();
                    apply(&mut live, &Pending::Write(*offset, data.clone()));
                }
                ModelOp::SyncData => {
                    file.sync_data().unwrap();
                    durable.clone_from(&live);
                }
                ModelOp::Truncate(len) => {
                    file.truncate(*len).unwrap();
                    live.resize(*len as usize, 0);
                }
            }
            prop_assert_eq!(&read_all(&fs, &dir.join("f")), &live);
        }
        fs.crash(CrashMode::DropUnsynced);
        prop_assert_eq!(read_all(&fs, &dir.join("f")), durable);
    }

    /// Whatever the unsynced operations and the seed, a `KeepRandomPrefix`
    /// crash leaves one of the images `allowed_images` lists.
    #[test]
    fn keep_random_prefix_leaves_an_allowed_image(
        synced in prop::collection::vec(any::<u8>(), 0..32),
        ops in prop::collection::vec(model_op(), 0..12),
        seed in any::<u64>(),
    ) {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let file = durable_file(&fs, dir, "f");
        file.write_at(0, &synced).unwrap();
        file.sync_data().unwrap();
        let mut pending = Vec::new();
        for op in &ops {
            match op {
                ModelOp::Write(offset, data) => {
                    file.write_at(*offset, data).unwrap();
                    pending.push(Pending::Write(*offset, data.clone()));
                }
                // A sync in the middle would move the base; leave it out.
                ModelOp::SyncData => {}
                ModelOp::Truncate(len) => {
                    file.truncate(*len).unwrap();
                    pending.push(Pending::SetLen(*len));
                }
            }
        }
        fs.crash(CrashMode::KeepRandomPrefix { seed });
        let image = read_all(&fs, &dir.join("f"));
        prop_assert!(allowed_images(&synced, &pending).contains(&image));
    }
}

/// After `halt` nothing works, the file system's own operations included, so
/// that an engine still running after the simulated power cut cannot rename or
/// create files as no real process could; `restart` lets the next one in, on
/// the state the crash left.
#[test]
fn a_halted_file_system_refuses_everything_until_restart() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let file = durable_file(&fs, dir, "kept");
    file.write_at(0, b"x").unwrap();
    fs.create(&dir.join("unsynced")).unwrap();
    fs.halt(CrashMode::DropUnsynced);
    assert!(file.write_at(0, b"y").is_err(), "an old handle");
    assert!(fs.create(&dir.join("new")).is_err());
    assert!(fs.open(&dir.join("kept"), false).is_err());
    assert!(fs.rename(&dir.join("kept"), &dir.join("moved")).is_err());
    assert!(fs.remove(&dir.join("kept")).is_err());
    assert!(fs.list(dir).is_err());
    assert!(fs.sync_dir(dir).is_err());
    assert!(fs.lock(&dir.join("LOCK")).is_err());
    assert!(!fs.exists(&dir.join("kept")));
    fs.restart();
    assert_eq!(fs.list(dir).unwrap(), vec!["kept".to_string()]);
    assert_eq!(read_all(&fs, &dir.join("kept")), b"");
    fs.rename(&dir.join("kept"), &dir.join("moved")).unwrap();
    assert!(fs.exists(&dir.join("moved")));
}
