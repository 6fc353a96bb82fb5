//! Properties, collectors and filters of whole files: engine properties
//! count what was written; collectors see every entry (range tombstones
//! too) and their properties round trip; reserved or duplicate names are
//! refused; the whole-key and prefix bloom filters have no false negatives
//! and a false-positive rate near the theory's; the writer refuses bad
//! arguments before writing.

mod sst_common;

use std::path::Path;

use sst_common::*;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::blob::BlobRef;
use strata_lsm::sst::IndexKind;
use strata_lsm::{
    Compression, Error, InternalKey, PropertiesCollector, SeqNo, SstWriter, SstWriterOptions,
    ValueKind,
};

/// Counts entries by kind and sums value bytes, as TiKV's MVCC collector does.
#[derive(Debug, Default)]
struct KindCounter {
    counts: [u64; 4],
    value_bytes: u64,
    max_seqno: SeqNo,
}

impl PropertiesCollector for KindCounter {
    fn add(&mut self, _user_key: &[u8], value: &[u8], kind: ValueKind, seqno: SeqNo) {
        self.counts[kind as usize] += 1;
        self.value_bytes += value.len() as u64;
        self.max_seqno = self.max_seqno.max(seqno);
    }

    fn finish(&mut self) -> Vec<(String, Vec<u8>)> {
        let mut counts = Vec::new();
        for c in self.counts {
            counts.extend_from_slice(&c.to_le_bytes());
        }
        vec![
            ("test.kind_counts".into(), counts),
            (
                "test.value_bytes".into(),
                self.value_bytes.to_le_bytes().to_vec(),
            ),
            (
                "test.max_seqno".into(),
                self.max_seqno.to_le_bytes().to_vec(),
            ),
        ]
    }
}

#[derive(Debug)]
struct Named(&'static str);

impl PropertiesCollector for Named {
    fn add(&mut self, _: &[u8], _: &[u8], _: ValueKind, _: SeqNo) {}
    fn finish(&mut self) -> Vec<(String, Vec<u8>)> {
        vec![(self.0.to_string(), vec![1])]
    }
}

fn fs() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/sst")).unwrap();
    fs
}

#[test]
fn blob_reference_bytes_are_summed_per_file_across_interleaved_runs() {
    let fs = fs();
    let path = Path::new("/sst/2.sst");
    let mut w = SstWriter::create(&fs, path, tiny(Compression::None)).unwrap();
    // Runs into one file, a file that comes back after another, one alone.
    let files = [5u64, 5, 7, 5, 9, 9, 9, 7, 5, 11];
    let mut want = std::collections::BTreeMap::new();
    for (i, &file) in files.iter().enumerate() {
        let value_len = 100 + i as u32 * 10;
        let r = BlobRef {
            file_number: file,
            block_offset: 28 + i as u64 * 4096,
            block_size: 2000,
            record_offset: 0,
            value_len,
        };
        let key = InternalKey::new(format!("k{i:02}").as_bytes(), 9, ValueKind::BlobIndex);
        w.add(key.encoded(), &r.encode()).unwrap();
        *want.entry(file).or_insert(0u64) += u64::from(value_len);
    }
    let info = w.finish().unwrap();
    assert_eq!(info.properties.blob_refs, want);
    assert_eq!(open(&fs, path).unwrap().properties().blob_refs, want);
}

#[test]
fn engine_properties_and_collectors_round_trip() {
    let m = sample_model(200);
    let fs = fs();
    let path = Path::new("/sst/1.sst");
    let mut w = SstWriter::create(&fs, path, tiny(Compression::Zstd)).unwrap();
    w.add_collector(Box::<KindCounter>::default()).unwrap();
    for (k, v) in &m.entries {
        w.add(k.encoded(), v).unwrap();
    }
    for (s, e, q) in &m.range_deletions {
        w.add_range_delete(s, e, *q).unwrap();
    }
    let info = w.finish().unwrap();
    let r = open(&fs, path).unwrap();
    let p = r.properties();
    assert_eq!(p, &info.properties);
    assert_eq!(r.footer().index_kind, IndexKind::Partitioned);
    assert!(p.index_partitions > 1 && p.num_data_blocks > 50, "{p:?}");
    assert_eq!(p.num_entries, m.entries.len() as u64);
    let kinds = |k| m.entries.keys().filter(|e| e.kind() == k).count() as u64;
    assert_eq!(p.num_deletions, kinds(ValueKind::Delete));
    assert_eq!(p.num_range_deletions, 2);
    let raw_keys: u64 = m.entries.keys().map(|k| k.user_key().len() as u64).sum();
    let raw_values: u64 = m.entries.values().map(|v| v.len() as u64).sum();
    assert_eq!((p.raw_key_bytes, p.raw_value_bytes), (raw_keys, raw_values));
    assert_eq!(p.smallest_key.as_deref(), Some(&b"key00000"[..]));
    assert_eq!(p.largest_key.as_deref(), Some(&b"key01393"[..]));
    let seqnos: Vec<u64> = m.entries.keys().map(|k| k.seqno()).collect();
    assert_eq!(p.smallest_seqno, *seqnos.iter().min().unwrap());
    assert_eq!(p.largest_seqno, 500.max(*seqnos.iter().max().unwrap()));
    assert_eq!(p.compression, Compression::Zstd);
    assert_eq!(p.prefix_len, Some(2));
    assert!(p.data_bytes > 0 && p.index_bytes > 0 && p.filter_bytes > 0);
    assert!(p.data_bytes + p.index_bytes + p.filter_bytes < info.file_size);

    let counts = &p.user["test.kind_counts"];
    let count = |i: usize| u64::from_le_bytes(counts[8 * i..8 * i + 8].try_into().unwrap());
    assert_eq!(count(ValueKind::Put as usize), kinds(ValueKind::Put));
    assert_eq!(count(ValueKind::Delete as usize), kinds(ValueKind::Delete));
    assert_eq!(
        count(ValueKind::BlobIndex as usize),
        kinds(ValueKind::BlobIndex)
    );
    assert_eq!(
        count(ValueKind::RangeDelete as usize),
        2,
        "collectors see range tombstones"
    );
    assert_eq!(
        p.user["test.max_seqno"],
        500u64.max(p.largest_seqno).to_le_bytes()
    );
}

#[test]
fn reserved_and_duplicate_collector_names_are_refused() {
    let fs = fs();
    for (i, names) in [vec!["strata.mine"], vec!["a", "a"]]
        .into_iter()
        .enumerate()
    {
        let path = format!("/sst/{i}.sst");
        let mut w = SstWriter::create(&fs, Path::new(&path), SstWriterOptions::default()).unwrap();
        for n in names {
            w.add_collector(Box::new(Named(n))).unwrap();
        }
        w.add(InternalKey::new(b"k", 1, ValueKind::Put).encoded(), b"v")
            .unwrap();
        assert!(matches!(w.finish(), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn writer_refuses_bad_arguments() {
    let fs = fs();
    let bad = SstWriterOptions {
        restart_interval: 0,
        ..SstWriterOptions::default()
    };
    assert!(matches!(
        SstWriter::create(&fs, Path::new("/sst/x.sst"), bad),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!fs.exists(Path::new("/sst/x.sst")), "nothing created");
    let mut w =
        SstWriter::create(&fs, Path::new("/sst/y.sst"), SstWriterOptions::default()).unwrap();
    let k = |u: &[u8], s, kind| InternalKey::new(u, s, kind).encoded().to_vec();
    w.add(&k(b"b", 5, ValueKind::Put), b"").unwrap();
    let refused = [
        w.add(&k(b"b", 5, ValueKind::Put), b""),
        w.add(&k(b"a", 9, ValueKind::Put), b""),
        w.add(&k(b"b", 6, ValueKind::Put), b""),
        w.add(&k(b"c", 1, ValueKind::RangeDelete), b"d"),
        w.add(b"short", b""),
        w.add_range_delete(b"z", b"a", 1),
        w.add_range_delete(b"a", b"a", 1),
        w.add_collector(Box::new(Named("late"))),
    ];
    for (i, r) in refused.into_iter().enumerate() {
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "case {i}: {r:?}"
        );
    }
    w.add(&k(b"b", 4, ValueKind::Delete), b"").unwrap();
    w.finish().unwrap();
}

#[test]
fn bloom_filters_have_no_false_negatives_and_few_false_positives() {
    let fs = fs();
    let path = Path::new("/sst/bloom.sst");
    let options = SstWriterOptions {
        prefix_len: Some(6),
        ..SstWriterOptions::default()
    };
    let mut w = SstWriter::create(&fs, path, options).unwrap();
    for i in 0..5000u32 {
        let key = format!("{:06}-{i}", i * 2);
        w.add(
            InternalKey::new(key.as_bytes(), 1, ValueKind::Put).encoded(),
            b"v",
        )
        .unwrap();
    }
    w.finish().unwrap();
    let r = open(&fs, path).unwrap();
    for i in 0..5000u32 {
        let key = format!("{:06}-{i}", i * 2);
        assert!(r.may_contain(key.as_bytes()));
        assert!(r.may_contain_prefix(key.as_bytes()));
        assert_eq!(r.get(key.as_bytes(), 1).unwrap().unwrap().1, b"v");
    }
    let fp = (0..10_000u32)
        .filter(|i| r.may_contain(format!("absent-{i}").as_bytes()))
        .count();
    // 10 bits per key: about 0.8% in theory; allow 2%.
    assert!(fp < 200, "{fp} whole-key false positives in 10000");
    let fp = (0..5000u32)
        .filter(|i| r.may_contain_prefix(format!("{:06}", i * 2 + 1).as_bytes()))
        .count();
    assert!(fp < 100, "{fp} prefix false positives in 5000");
    // Keys shorter than the prefix cannot be ruled out.
    assert!(r.may_contain_prefix(b"abc"));
    assert_eq!(r.get(b"absent", 1).unwrap(), None);
}

#[test]
fn empty_file_reads_as_empty() {
    let fs = fs();
    let path = Path::new("/sst/empty.sst");
    SstWriter::create(&fs, path, SstWriterOptions::default())
        .unwrap()
        .finish()
        .unwrap();
    let r = open(&fs, path).unwrap();
    assert!(scan_forward(&mut r.iter()).unwrap().is_empty());
    assert!(scan_backward(&mut r.iter()).unwrap().is_empty());
    assert_eq!(r.get(b"k", 9).unwrap(), None);
    assert_eq!(r.properties().smallest_key, None);
}

/// A compaction's iterator reads data blocks without putting them in the
/// block cache (it reads every block of its inputs once and would evict
/// what readers use); a reader's iterator fills it.
#[test]
fn a_compaction_iterator_does_not_fill_the_block_cache() {
    let options = SstWriterOptions {
        index_partition_bytes: 16 << 20,
        ..tiny(Compression::None)
    };
    let (fs, path) = memfs_with(&sample_model(300), options);
    let cache = std::sync::Arc::new(strata_lsm::BlockCache::new(1 << 20));
    let reader = strata_lsm::SstReader::open(&*fs, &path, 1, Some(cache.clone())).unwrap();
    assert_eq!(reader.footer().index_kind, IndexKind::Single);
    let mut it = reader.iter_without_filling_cache();
    let compacted = scan_forward(&mut it).unwrap();
    assert!(compacted.len() > 1);
    assert!(cache.is_empty(), "{} blocks cached", cache.len());
    let mut it = reader.iter();
    assert_eq!(scan_forward(&mut it).unwrap(), compacted);
    assert!(!cache.is_empty(), "a reader's scan cached nothing");
}
