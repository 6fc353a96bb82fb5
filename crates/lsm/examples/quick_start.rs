//! The engine in a few lines: open a database in a temporary directory,
//! write across two column families atomically, read at the latest state
//! and at a snapshot, iterate a range both ways, flush, compact, close and
//! reopen.
//!
//! Run it with `cargo run -p strata-lsm --example quick_start`.

use strata_lsm::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

fn main() -> strata_lsm::Result<()> {
    let dir = std::env::temp_dir().join(format!("strata-lsm-quick-start-{}", std::process::id()));
    let db = Db::open(&dir, Options::default())?;
    let users = db.default_column_family();
    let index = db.create_column_family("email-index")?;

    // One batch, atomic across both families; synced before it returns.
    let mut batch = WriteBatch::new();
    batch.put(users.id(), b"user:1", b"ada@example.com");
    batch.put(index.id(), b"ada@example.com", b"user:1");
    batch.put(users.id(), b"user:2", b"grace@example.com");
    batch.put(index.id(), b"grace@example.com", b"user:2");
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    db.write(&sync, &batch)?;

    // A snapshot keeps seeing what was there when it was taken.
    let before = db.snapshot();
    db.delete(&sync, &users, b"user:2")?;
    let latest = ReadOptions::default();
    let at_snapshot = ReadOptions {
        snapshot: Some(before.clone()),
        ..ReadOptions::default()
    };
    assert_eq!(db.get(&latest, &users, b"user:2")?, None);
    assert_eq!(
        db.get(&at_snapshot, &users, b"user:2")?.as_deref(),
        Some(&b"grace@example.com"[..])
    );

    // Iterators: bounds, both directions.
    let range = ReadOptions {
        lower_bound: Some(b"user:".to_vec()),
        upper_bound: Some(b"user;".to_vec()),
        ..at_snapshot
    };
    let mut it = db.iter(&range, &users)?;
    it.seek_to_last()?;
    while it.valid() {
        println!(
            "{} = {}",
            String::from_utf8_lossy(it.key()),
            String::from_utf8_lossy(it.value())
        );
        it.prev()?;
    }
    drop(it);
    drop(before);

    // Into SST files, then down the levels.
    db.flush(&users, true)?;
    db.compact_range(&users, None, None)?;
    println!(
        "files: {}, statistics: {:?}",
        db.property(&users, "strata.num-files")?.unwrap_or_default(),
        db.statistics()
    );
    db.close()?;

    // Everything is there after a reopen.
    let db = Db::open(&dir, Options::default())?;
    let index = db
        .column_family("email-index")
        .expect("the family persists");
    assert_eq!(
        db.get(&latest, &index, b"ada@example.com")?.as_deref(),
        Some(&b"user:1"[..])
    );
    db.close()?;
    std::fs::remove_dir_all(&dir).ok();
    println!("ok");
    Ok(())
}
