//! Round trips of random files against a `BTreeMap` model: random keys with
//! several versions of every point kind, every compression, block and
//! partition sizes from one entry per block up; point lookups at random
//! snapshots, forward and backward scans, seeks both ways, random walks of
//! next/prev, and user-key bounds.

mod sst_common;

use proptest::prelude::*;
use sst_common::*;
use strata_lsm::sst::lookup_key;
use strata_lsm::{Compression, InternalKey, SeqNo, SstWriterOptions, ValueKind};

fn kind() -> impl Strategy<Value = ValueKind> {
    prop_oneof![
        Just(ValueKind::Put),
        Just(ValueKind::Delete),
        Just(ValueKind::BlobIndex)
    ]
}

fn user_key() -> impl Strategy<Value = Vec<u8>> {
    // A small alphabet makes shared prefixes, equal keys and near misses common.
    prop::collection::vec(
        prop_oneof![Just(b'a'), Just(b'b'), Just(b'c'), Just(0xff)],
        0..5,
    )
}

fn model() -> impl Strategy<Value = Model> {
    (
        prop::collection::vec(
            (
                user_key(),
                1..40u64,
                kind(),
                prop::collection::vec(any::<u8>(), 0..24),
            ),
            0..120,
        ),
        prop::collection::vec((user_key(), user_key(), 1..40u64), 0..4),
    )
        .prop_map(|(entries, ranges)| {
            let mut m = Model::default();
            for (k, s, kind, v) in entries {
                let v = match kind {
                    ValueKind::BlobIndex => blob_ref(v.len() as u64 % 3, s),
                    _ => v,
                };
                m.entries.insert(InternalKey::new(&k, s, kind), v);
            }
            for (a, b, s) in ranges {
                if a < b {
                    m.range_deletions.push((a, b, s));
                }
            }
            m
        })
}

fn options() -> impl Strategy<Value = SstWriterOptions> {
    (
        prop_oneof![
            Just(Compression::None),
            Just(Compression::Lz4),
            Just(Compression::Zstd)
        ],
        prop_oneof![Just(1usize), Just(48), Just(200), Just(4096)],
        prop_oneof![Just(1usize), Just(2), Just(16)],
        prop_oneof![Just(1usize), Just(64), Just(4096)],
        prop_oneof![Just(0u32), Just(10)],
        prop_oneof![Just(None), Just(Some(1usize)), Just(Some(2))],
    )
        .prop_map(
            |(compression, block, restart, partition, bits, prefix)| SstWriterOptions {
                block_size_bytes: block,
                restart_interval: restart,
                compression,
                index_partition_bytes: partition,
                bloom_bits_per_key: bits,
                prefix_len: prefix,
                ..SstWriterOptions::default()
            },
        )
}

/// The model's entries whose user key is in `[lower, upper)`.
fn bounded(m: &Model, lower: &Option<Vec<u8>>, upper: &Option<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.entries
        .iter()
        .filter(|(k, _)| lower.as_deref().is_none_or(|l| k.user_key() >= l))
        .filter(|(k, _)| upper.as_deref().is_none_or(|u| k.user_key() < u))
        .map(|(k, v)| (k.encoded().to_vec(), v.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn reads_back_what_was_written(
        m in model(),
        opts in options(),
        probes in prop::collection::vec((user_key(), 0..45u64), 1..24),
        walk in prop::collection::vec(any::<bool>(), 0..40),
        bounds in (prop::option::of(user_key()), prop::option::of(user_key())),
    ) {
        let (fs, path) = memfs_with(&m, opts.clone());
        let r = open(&*fs, &path).unwrap();
        let list = m.list();

        // Scans.
        prop_assert_eq!(&scan_forward(&mut r.iter()).unwrap(), &list);
        prop_assert_eq!(&scan_backward(&mut r.iter()).unwrap(), &list);

        // Point lookups at random snapshots.
        for (k, snap) in &probes {
            prop_assert_eq!(r.get(k, *snap).unwrap(), m.get(k, *snap), "get {:?}@{}", k, snap);
        }
        for (k, _) in m.entries.iter().take(30) {
            let snap: SeqNo = k.seqno();
            prop_assert_eq!(r.get(k.user_key(), snap).unwrap(), m.get(k.user_key(), snap));
            prop_assert!(r.may_contain(k.user_key()));
            prop_assert!(r.may_contain_prefix(k.user_key()));
        }

        // Seeks both ways, then a random walk.
        for (k, snap) in &probes {
            let target = lookup_key(k, *snap);
            let at = list.partition_point(|(e, _)| strata_lsm::key::compare(e, &target).is_lt());
            let mut it = r.iter();
            it.seek(&target).unwrap();
            prop_assert_eq!(it.valid(), at < list.len());
            if it.valid() { prop_assert_eq!(it.key(), &list[at].0[..]); }
            let before = list.partition_point(|(e, _)| strata_lsm::key::compare(e, &target).is_le());
            it.seek_for_prev(&target).unwrap();
            prop_assert_eq!(it.valid(), before > 0);
            let mut pos = before as i64 - 1;
            if it.valid() { prop_assert_eq!(it.key(), &list[pos as usize].0[..]); }
            for &forward in &walk {
                if pos < 0 || pos >= list.len() as i64 { break; }
                if forward { it.next().unwrap(); pos += 1; } else { it.prev().unwrap(); pos -= 1; }
                let in_range = pos >= 0 && pos < list.len() as i64;
                prop_assert_eq!(it.valid(), in_range);
                if in_range { prop_assert_eq!(it.key(), &list[pos as usize].0[..]); }
            }
        }

        // Bounds.
        let (lower, upper) = bounds;
        let want = bounded(&m, &lower, &upper);
        let mut it = r.iter_bounded(
            lower.as_deref().map(std::sync::Arc::from),
            upper.as_deref().map(std::sync::Arc::from),
        );
        prop_assert_eq!(&scan_forward(&mut it).unwrap(), &want);
        prop_assert_eq!(&scan_backward(&mut it).unwrap(), &want);
        for (k, snap) in &probes {
            let target = lookup_key(k, *snap);
            it.seek(&target).unwrap();
            let first = want.iter().find(|(e, _)| strata_lsm::key::compare(e, &target).is_ge());
            prop_assert_eq!(it.valid().then(|| it.key().to_vec()), first.map(|(e, _)| e.clone()));
            it.seek_for_prev(&target).unwrap();
            let last = want.iter().rev().find(|(e, _)| strata_lsm::key::compare(e, &target).is_le());
            prop_assert_eq!(it.valid().then(|| it.key().to_vec()), last.map(|(e, _)| e.clone()));
        }

        // Range tombstones and properties.
        let mut tombstones: Vec<_> = m.range_deletions.iter().map(|(s, e, q)| (s.clone(), e.clone(), *q)).collect();
        tombstones.sort_by(|a, b| a.0.cmp(&b.0).then(b.2.cmp(&a.2)).then(a.1.cmp(&b.1)));
        let got: Vec<_> = r.range_tombstones().iter().map(|t| (t.start.clone(), t.end.clone(), t.seqno)).collect();
        prop_assert_eq!(got, tombstones);
        let p = r.properties();
        prop_assert_eq!(p.num_entries, m.entries.len() as u64);
        prop_assert_eq!(p.num_deletions, m.entries.keys().filter(|k| k.kind() == ValueKind::Delete).count() as u64);
        prop_assert_eq!(p.num_range_deletions, m.range_deletions.len() as u64);
        prop_assert_eq!(p.compression, opts.compression);
        let smallest = m.entries.keys().map(|k| k.user_key().to_vec())
            .chain(m.range_deletions.iter().map(|r| r.0.clone())).min();
        prop_assert_eq!(&p.smallest_key, &smallest);
        let largest = m.entries.keys().map(|k| k.user_key().to_vec())
            .chain(m.range_deletions.iter().map(|r| r.1.clone())).max();
        prop_assert_eq!(&p.largest_key, &largest);
        let seqnos = m.entries.keys().map(|k| k.seqno()).chain(m.range_deletions.iter().map(|r| r.2));
        if let (Some(lo), Some(hi)) = (seqnos.clone().min(), seqnos.max()) {
            prop_assert_eq!((p.smallest_seqno, p.largest_seqno), (lo, hi));
        }
    }
}

/// `open` reads a file's meta blocks, index partitions among them, in three
/// reads, and a point lookup then reads only its data block: with no block
/// cache, one read per lookup from the first, and a scan reads each data
/// block once. Counted on the file system.
/// (Partitions read on first use made a cold lookup two device reads.)
#[test]
fn open_reads_the_meta_blocks_in_three_reads_and_reads_then_take_only_data_blocks() {
    let mut m = Model::default();
    for i in 0..400u32 {
        let k = format!("key{i:05}").into_bytes();
        m.entries
            .insert(InternalKey::new(&k, 1, ValueKind::Put), vec![i as u8; 40]);
    }
    m.range_deletions
        .push((b"key00010".to_vec(), b"key00011".to_vec(), 0));
    let mem = strata_fs::MemFs::new();
    let path = std::path::Path::new("/t.sst");
    let options = SstWriterOptions {
        block_size_bytes: 256,
        index_partition_bytes: 128,
        ..SstWriterOptions::default()
    };
    write(&mem, path, &m, options);
    let fs = strata_fs::FaultFs::new(std::sync::Arc::new(mem));
    let r = strata_lsm::SstReader::open(&fs, path, 1, None).unwrap();
    assert_eq!(
        fs.count(strata_fs::Op::Read),
        3,
        "footer, behind the index, before it"
    );
    assert!(r.properties().index_partitions > 4, "{:?}", r.properties());
    assert_eq!(r.range_tombstones().len(), 1);
    assert!(r.may_contain(b"key00007") && !r.may_contain(b"nokey"));
    let read = |r: &strata_lsm::SstReader| {
        let before = fs.count(strata_fs::Op::Read);
        for (k, v) in &m.entries {
            let got = r.get(k.user_key(), 10).unwrap();
            assert_eq!(got, Some((ValueKind::Put, v.clone())));
        }
        fs.count(strata_fs::Op::Read) - before
    };
    assert_eq!(
        read(&r),
        m.entries.len() as u64,
        "one data block per lookup"
    );
    assert_eq!(read(&r), m.entries.len() as u64, "and again");
    // Iterators take the partitions the open file keeps: a scan either way
    // reads each data block once and nothing else.
    let blocks = r.properties().num_data_blocks;
    let before = fs.count(strata_fs::Op::Read);
    assert_eq!(scan_forward(&mut r.iter()).unwrap(), m.list());
    assert_eq!(fs.count(strata_fs::Op::Read) - before, blocks, "forward");
    let before = fs.count(strata_fs::Op::Read);
    assert_eq!(scan_backward(&mut r.iter()).unwrap(), m.list());
    assert_eq!(fs.count(strata_fs::Op::Read) - before, blocks, "backward");
}
