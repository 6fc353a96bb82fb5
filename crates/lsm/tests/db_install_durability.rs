//! A flush publishes its version before the manifest sync that makes it
//! durable, outside the installer lock (`read_state.rs`). Caught in that
//! sync: the flushed data reads from its new file, writers go on, and a
//! power cut there, keeping any subset of the unsynced pages, loses
//! nothing acknowledged (the WAL that holds the flushed writes is deleted
//! only once the flush is durable).

mod db_support;

use db_support::*;
use std::sync::Arc;
use strata_fs::{CrashMode, FaultFs, FileSystem, MemFs, Op};
use strata_lsm::{Db, Hooks, WriteOptions};

fn property(db: &Db, name: &str) -> String {
    let cf = db.default_column_family();
    db.property(&cf, name).expect("property").expect(name)
}

#[test]
fn a_flush_caught_in_its_manifest_sync_is_published_and_survives_a_power_cut_there() {
    let mem = MemFs::new();
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let mut options = small_options();
    // One memtable's worth, flushed by the test alone.
    options.default_column_family.write_buffer_bytes = 1 << 20;
    options
        .default_column_family
        .compaction
        .level0_compaction_trigger = 8;
    let fs: Arc<dyn FileSystem> = Arc::new(ffs.clone());
    let db = Arc::new(Db::open_with(fs, DIR, options, Hooks::default()).expect("open"));
    let cf = db.default_column_family();
    let synced = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    let mut acked: Vec<u32> = Vec::new();
    for i in 0..200 {
        db.put(&synced, &cf, &key(i), &value(u64::from(i), 100))
            .expect("put");
        acked.push(i);
    }
    assert_eq!(property(&db, "strata.num-files-at-level0"), "0");

    let holds = [
        ffs.hold(Op::SyncData, "MANIFEST-"),
        ffs.hold(Op::SyncAll, "MANIFEST-"),
    ];
    let flushing = {
        let db = db.clone();
        std::thread::spawn(move || {
            let cf = db.default_column_family();
            db.flush(&cf, true)
        })
    };
    wait_until_any_held(&holds, "the flush never reached its manifest sync");

    // Published while its edit is not durable yet.
    assert_eq!(property(&db, "strata.num-files-at-level0"), "1");
    assert_eq!(property(&db, "strata.num-immutable-memtables"), "0");
    assert!(
        !flushing.is_finished(),
        "flush(wait) returned before its edit was durable"
    );
    check_acked(&db, &acked, 100, "while the flush syncs");
    // Writers do not wait for the install.
    for i in 1000..1010 {
        db.put(&synced, &cf, &key(i), &value(u64::from(i), 100))
            .expect("put while the flush syncs");
        acked.push(i);
    }

    // Power cuts at this instant, each keeping a different subset of the
    // unsynced pages, and one keeping none.
    let modes = (0..6)
        .map(|seed| CrashMode::KeepRandomPages { seed })
        .chain([CrashMode::DropUnsynced]);
    for mode in modes {
        let survivor = power_cut(&mem, mode);
        let reopened = open(&survivor, small_options()).expect("reopen after the cut");
        check_acked(
            &reopened,
            &acked,
            100,
            &format!("after a power cut ({mode:?})"),
        );
        reopened.close().expect("close");
    }

    drop(holds);
    flushing
        .join()
        .expect("flush thread")
        .expect("flush once its sync passes");
    check_acked(&db, &acked, 100, "after the flush");
    Arc::into_inner(db)
        .expect("one handle")
        .close()
        .expect("close");
}

/// Regression: once the manifest sync after an install was made by whoever
/// writes staged records, the marker vouching for the synced edit waited in
/// memory for the next install; on an idle engine it never reached the
/// file, and a bit flipped in the last edit read as a power cut's torn
/// tail, cut silently. The marker is written right after the sync: the
/// file ends with the edit, then an empty record that vouches for it.
#[test]
fn an_idle_engines_manifest_ends_with_a_marker_vouching_for_its_last_edit() {
    use strata_fs::FileSystem;
    use strata_log::record::scan_file;
    use strata_lsm::manifest::{decode_records, MANIFEST_FORMAT};

    let fs = strata_fs::MemFs::new();
    let db = db_support::open(&fs, db_support::small_options()).expect("open");
    let cf = db.default_column_family();
    db.put(&strata_lsm::WriteOptions::default(), &cf, b"k", b"v")
        .expect("put");
    db.flush(&cf, true).expect("flush");
    // A compaction's install, which no WAL deletion follows.
    db.compact_range(&cf, None, None).expect("compact");
    let dir = std::path::Path::new(db_support::DIR);
    let name = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .find(|n| n.starts_with("MANIFEST-"))
        .expect("a manifest");
    let file = fs.open(&dir.join(&name), false).expect("open");
    let mut bytes = vec![0; file.len().expect("len") as usize];
    file.read_exact_at(0, &mut bytes).expect("read");
    let scan = scan_file(&MANIFEST_FORMAT, &bytes, |_| Ok(())).expect("scan");
    let marker = scan.records.last().expect("records");
    assert!(decode_records(&marker.payload).expect("marker").is_empty());
    let edits = scan
        .records
        .iter()
        .filter(|r| !decode_records(&r.payload).expect("records").is_empty())
        .count();
    assert!(
        edits >= 3,
        "the snapshot, the flush's and the compaction's edits: {edits}"
    );
    assert_eq!(
        u64::from(marker.header.synced_end),
        marker.offset,
        "the marker vouches for every record before it"
    );
    drop(db);
}
