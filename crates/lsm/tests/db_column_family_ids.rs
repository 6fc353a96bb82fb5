//! Column family ids across drops and crashes.

mod db_support;

use db_support::{open, power_cut, small_options};
use strata_fs::{CrashMode, MemFs};
use strata_lsm::{ReadOptions, WriteOptions};

/// A family dropped with writes still in the WAL, then a new family: after
/// a crash, the new family must not hold the dropped one's writes (an id
/// taken again would let WAL replay hand them over).
#[test]
fn a_new_family_never_inherits_a_dropped_familys_writes() {
    let fs = MemFs::new();
    let db = open(&fs, small_options()).unwrap();
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    let old = db.create_column_family("old").unwrap();
    db.put(&sync, &old, b"k", b"dropped").unwrap();
    db.drop_column_family(&old).unwrap();
    let new = db.create_column_family("new").unwrap();
    let new_id = new.id();
    assert_eq!(db.get(&ReadOptions::default(), &new, b"k").unwrap(), None);
    db.put(&sync, &new, b"other", b"x").unwrap();
    let fs2 = power_cut(&fs, CrashMode::DropUnsynced);
    drop(db);
    let db = open(&fs2, small_options()).unwrap();
    let new = db.column_family("new").unwrap();
    assert_eq!(new.id(), new_id);
    assert_eq!(db.get(&ReadOptions::default(), &new, b"k").unwrap(), None);
    assert_eq!(
        db.get(&ReadOptions::default(), &new, b"other").unwrap(),
        Some(b"x".to_vec())
    );
    assert!(db.column_family("old").is_none());
}
