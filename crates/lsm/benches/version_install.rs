//! What installing a version costs as levels grow: building (outside any
//! lock) and publishing a version whose edit removes one file and adds one
//! in a level of 1k, 10k and 100k files (two such levels), against copying
//! that level's file list (what a merge of the whole file set costs, as in
//! RocksDB's LogAndApply); and what a reader's load of the read state costs.
//!
//! Run: `cargo bench -p strata-lsm --bench version_install`.

use std::sync::Arc;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use strata_lsm::{
    FileDesc, FileMeta, Install, Installer, InternalKey, Memtable, MemtableList, ObsoleteFiles,
    ReadState, ValueKind, Version, VersionBuilder, VersionEdit, NUM_LEVELS_DEFAULT,
};

fn key(k: u64) -> Vec<u8> {
    format!("k{k:012}").into_bytes()
}

/// File `number` over keys `10k ..= 10k + 5` of its level.
fn desc(number: u64, k: u64) -> FileDesc {
    FileDesc {
        number,
        size: 64 << 20,
        smallest: InternalKey::new(&key(10 * k), 2, ValueKind::Put),
        largest: InternalKey::new(&key(10 * k + 5), 1, ValueKind::Put),
        smallest_seqno: 1,
        largest_seqno: 2,
        blob_refs: Vec::new(),
        range_tombstones: false,
    }
}

/// An installer whose version holds `n` files in L1 and in L2.
fn installer_with(n: u64) -> Installer {
    let (queue, rx) = ObsoleteFiles::channel();
    // The bench has no deleter: let the queue grow, unread.
    std::mem::forget(rx);
    let base = Arc::new(Version::new(0, NUM_LEVELS_DEFAULT, queue).unwrap());
    let mut e = VersionEdit {
        next_file_number: Some(2 * n + 1),
        ..VersionEdit::new()
    };
    for k in 0..n {
        e.add_file(1, desc(k + 1, k));
        e.add_file(2, desc(n + k + 1, k));
    }
    let mut b = VersionBuilder::new(&base);
    b.apply(&e).unwrap();
    Installer::new(ReadState {
        version: b.build().version,
        active: Arc::new(Memtable::new(1)),
        immutables: MemtableList::new(),
        visible: 0,
    })
}

fn install_one_in_one_out(c: &mut Criterion) {
    let mut g = c.benchmark_group("install_one_added_one_removed");
    for n in [1_000u64, 10_000, 100_000] {
        let inst = installer_with(n);
        // The file at key slot `slot` of L1 is replaced by a new number each
        // time; the slot walks the level so that every part of it is touched.
        let mut current: Vec<u64> = (1..=n).collect();
        let mut next_number = 2 * n + 1;
        let mut i = 0u64;
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                let slot = (i * 7919) % n;
                i += 1;
                let old = current[slot as usize];
                let mut e = VersionEdit {
                    next_file_number: Some(next_number + 1),
                    ..VersionEdit::new()
                };
                e.delete_file(1, old).add_file(1, desc(next_number, slot));
                current[slot as usize] = next_number;
                next_number += 1;
                let change = Install {
                    edits: &[e],
                    ..Default::default()
                };
                inst.install(change, &mut |_: &[VersionEdit], _: &Arc<Version>| Ok(()))
                    .unwrap()
            })
        });
    }
    g.finish();
}

fn copy_level(c: &mut Criterion) {
    let mut g = c.benchmark_group("copy_level_file_list");
    let (queue, _rx) = ObsoleteFiles::channel();
    for n in [1_000u64, 10_000, 100_000] {
        let files: Vec<Arc<FileMeta>> = (0..n)
            .map(|k| Arc::new(FileMeta::new(desc(k + 1, k), queue.clone())))
            .collect();
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| black_box(files.clone()))
        });
    }
    g.finish();
}

fn reader_load(c: &mut Criterion) {
    let inst = installer_with(100_000);
    c.bench_function("reader_load_guard", |b| {
        b.iter(|| black_box(inst.load().visible))
    });
    c.bench_function("reader_load_full", |b| {
        b.iter(|| black_box(inst.load_full()))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30);
    targets = install_one_in_one_out, copy_level, reader_load
}
criterion_main!(benches);
