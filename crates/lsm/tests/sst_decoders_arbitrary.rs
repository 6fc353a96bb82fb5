//! Feeds arbitrary and damaged bytes to every SST decoder (keyed block,
//! index, bloom filter, properties, footer, meta-index, stored block and
//! range deletions, whole-file open and scan) and proves that none panics and
//! that what they accept holds together (the oracles of
//! `fuzz/src/decoders.rs`). Damaged inputs start from valid encodings with a
//! flip, cut or insertion; for whole files the damaged block's checksum is
//! recomputed, so the damage reaches the decoders behind the checksum.
//!
//! The fuzz oracles are included by path, so an input found by `cargo fuzz`
//! replays here; freeze such an input at the end as a named regression test.

#[path = "../fuzz/src/decoders.rs"]
mod decoders;
mod sst_common;

use proptest::prelude::*;
use proptest::sample::Index;
use sst_common::*;
use strata_fs::File;
use strata_lsm::sst::{
    seal_block, BlockBuilder, BlockHandle, Compression, FilterBuilder, Footer, IndexKind,
    MetaIndex, Properties, SstWriterOptions,
};
use strata_lsm::InternalKey;

/// A flip, cut or insertion at a chosen place.
#[derive(Debug, Clone)]
enum Damage {
    Flip(Index, u8),
    Cut(Index),
    Insert(Index, u8),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<Index>(), 1..=255u8).prop_map(|(i, m)| Damage::Flip(i, m)),
        any::<Index>().prop_map(Damage::Cut),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Damage::Insert(i, b)),
    ]
}

fn apply(mut bytes: Vec<u8>, d: &Damage) -> Vec<u8> {
    if bytes.is_empty() {
        return bytes;
    }
    match d {
        Damage::Flip(i, m) => {
            let at = i.index(bytes.len());
            bytes[at] ^= m;
        }
        Damage::Cut(i) => bytes.truncate(i.index(bytes.len())),
        Damage::Insert(i, b) => bytes.insert(i.index(bytes.len() + 1), *b),
    }
    bytes
}

fn entries() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
    prop::collection::btree_map(
        prop::collection::vec(0u8..4, 0..6),
        prop::collection::vec(any::<u8>(), 0..8),
        0..40,
    )
    .prop_map(|m| {
        m.into_iter()
            .enumerate()
            .map(|(i, (k, v))| {
                let ik = InternalKey::new(&k, 1 + i as u64, strata_lsm::ValueKind::Put);
                (ik.encoded().to_vec(), v)
            })
            .collect()
    })
}

fn block_of(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Vec<u8> {
    let mut b = BlockBuilder::new(interval);
    let mut sorted = entries.to_vec();
    sorted.sort_by(|a, b| strata_lsm::key::compare(&a.0, &b.0));
    for (k, v) in &sorted {
        b.add(k, v);
    }
    b.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        decoders::block(&bytes);
        decoders::index(&bytes);
        decoders::filter(&bytes);
        decoders::properties(&bytes);
        decoders::footer(&bytes);
        decoders::meta_index(&bytes);
        decoders::stored_block(&bytes);
        decoders::open_scan(&bytes);
    }

    #[test]
    fn damaged_blocks_and_indexes(e in entries(), interval in 1..4usize, d in damage(), order in 0..2u8) {
        let raw = block_of(&e, interval);
        let mut with_order = vec![order];
        with_order.extend_from_slice(&raw);
        decoders::block(&with_order);
        decoders::block(&apply(with_order, &d));
        let mut index = BlockBuilder::new(1);
        for (i, (k, _)) in e.iter().enumerate() {
            index.add(k, &BlockHandle { offset: i as u64 * 100, size: 99 }.encode());
        }
        let index = index.finish();
        decoders::index(&index);
        decoders::index(&apply(index, &d));
        let (stored, _) = seal_block(&raw, Compression::Lz4, 3);
        decoders::stored_block(&apply(stored, &d));
    }

    #[test]
    fn damaged_meta_blocks(keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..6), 0..30), d in damage()) {
        let mut f = FilterBuilder::new(10);
        for k in &keys { f.add(k); }
        decoders::filter(&apply(f.finish(), &d));
        let mut p = Properties::default();
        for (i, k) in keys.iter().enumerate() {
            p.user.insert(format!("user.{i}"), k.clone());
        }
        p.smallest_key = keys.first().cloned();
        decoders::properties(&p.encode());
        decoders::properties(&apply(p.encode(), &d));
        let mut m = MetaIndex::default();
        for (i, _) in keys.iter().enumerate() {
            m.blocks.insert(format!("strata.block.{i}"), BlockHandle { offset: i as u64, size: 7 });
        }
        decoders::meta_index(&apply(m.encode(), &d));
        let footer = Footer {
            meta_index: BlockHandle { offset: keys.len() as u64, size: 3 },
            index: BlockHandle { offset: 0, size: 9 },
            index_kind: IndexKind::Single,
        };
        decoders::footer(&footer.encode());
        decoders::footer(&apply(footer.encode().to_vec(), &d));
    }

    /// Damages one block of a valid file and re-seals it, so the damage
    /// passes the checksum and reaches the block's decoder.
    #[test]
    fn damaged_files_behind_the_checksum(
        seed in 5..40u32,
        compression in prop_oneof![Just(Compression::None), Just(Compression::Lz4)],
        block in any::<Index>(),
        d in damage(),
    ) {
        let m = sample_model(seed);
        let (fs, path) = memfs_with(&m, tiny(compression));
        let bytes = {
            let f = fs.open_file(&path);
            let mut b = vec![0u8; f.len().unwrap() as usize];
            f.read_exact_at(0, &mut b).unwrap();
            b
        };
        decoders::open_scan(&bytes);
        // Walk the blocks: every block ends with a 5-byte trailer whose crc
        // covers what precedes it; find block boundaries by the reader's
        // handles is overkill here: re-seal a span ending at a boundary the
        // writer produced, found by scanning for valid trailers.
        let mut ends = Vec::new();
        let mut start = 0;
        for end in 5..=bytes.len().saturating_sub(52) {
            if strata_lsm::sst::unseal_block(&bytes[start..end]).is_ok() {
                ends.push((start, end));
                start = end;
            }
        }
        prop_assume!(!ends.is_empty());
        let (s, e) = ends[block.index(ends.len())];
        let raw = strata_lsm::sst::unseal_block(&bytes[s..e]).unwrap();
        let (resealed, _) = seal_block(&apply(raw, &d), Compression::None, 3);
        let mut damaged = bytes[..s].to_vec();
        damaged.extend_from_slice(&resealed);
        damaged.extend_from_slice(&bytes[e..]);
        decoders::open_scan(&damaged);
    }
}

/// Opens a file of a `MemFs` for reading.
trait OpenFile {
    fn open_file(&self, path: &std::path::Path) -> std::sync::Arc<dyn File>;
}

impl OpenFile for strata_fs::MemFs {
    fn open_file(&self, path: &std::path::Path) -> std::sync::Arc<dyn File> {
        strata_fs::FileSystem::open(self, path, true).unwrap()
    }
}

/// Found by `damaged_files_behind_the_checksum`: a data block that passes its
/// checksum but whose keys sort before the previous block's used to be
/// scanned out of order. The iterator now checks the order across blocks.
#[test]
fn forged_block_out_of_order_across_blocks_is_corruption() {
    let m = sample_model(20);
    let options = SstWriterOptions {
        restart_interval: 1,
        ..tiny(Compression::None)
    };
    let (fs, path) = memfs_with(&m, options);
    let f = fs.open_file(&path);
    let mut bytes = vec![0u8; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut bytes).unwrap();
    // The second data block: find block ends by their valid trailers.
    let first_end = (5..bytes.len())
        .find(|&e| strata_lsm::sst::unseal_block(&bytes[..e]).is_ok())
        .unwrap();
    let second_end = (first_end + 5..bytes.len())
        .find(|&e| strata_lsm::sst::unseal_block(&bytes[first_end..e]).is_ok())
        .unwrap();
    let mut raw = strata_lsm::sst::unseal_block(&bytes[first_end..second_end]).unwrap();
    // { shared = 0 | unshared | value_len | key ... }: lower the first key.
    assert_eq!((raw[0], raw[3]), (0, b'k'));
    raw[3] = b'a';
    let (resealed, _) = seal_block(&raw, Compression::None, 3);
    assert_eq!(resealed.len(), second_end - first_end);
    bytes[first_end..second_end].copy_from_slice(&resealed);
    decoders::open_scan(&bytes);
    f.write_at(0, &bytes).unwrap();
    let r = open(&*fs, &path).unwrap();
    let e = scan_forward(&mut r.iter()).unwrap_err().to_string();
    assert!(e.contains("out of order across blocks"), "{e}");
    let e = scan_backward(&mut r.iter()).unwrap_err().to_string();
    assert!(e.contains("out of order across blocks"), "{e}");
}

/// Writes the fuzz targets' seed corpus (`fuzz/corpus/<target>/`): valid
/// encodings of each decoder's input, so the fuzzer starts past the checks.
/// Run `cargo test -p strata-lsm --test sst_decoders_arbitrary -- --ignored`.
#[test]
#[ignore = "regenerates the checked-in fuzz seed corpus"]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let put = |target: &str, name: &str, bytes: &[u8]| {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    let m = sample_model(12);
    for (name, c) in [("none", Compression::None), ("lz4", Compression::Lz4)] {
        let (fs, path) = memfs_with(&m, tiny(c));
        let f = fs.open_file(&path);
        let mut bytes = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(0, &mut bytes).unwrap();
        put("open_scan", name, &bytes);
        let footer = &bytes[bytes.len() - 52..];
        put("footer", name, footer);
        let first_end = (5..bytes.len())
            .find(|&e| strata_lsm::sst::unseal_block(&bytes[..e]).is_ok())
            .unwrap();
        put("stored_block", name, &bytes[..first_end]);
    }
    let e: Vec<(Vec<u8>, Vec<u8>)> = (0..6u8)
        .map(|i| {
            let k = InternalKey::new(&[b'k', i], i as u64 + 1, strata_lsm::ValueKind::Put);
            (k.encoded().to_vec(), vec![i; 3])
        })
        .collect();
    let mut with_order = vec![0u8];
    with_order.extend_from_slice(&block_of(&e, 2));
    put("block", "internal", &with_order);
    let mut index = BlockBuilder::new(1);
    for (i, (k, _)) in e.iter().enumerate() {
        index.add(
            k,
            &BlockHandle {
                offset: i as u64 * 40,
                size: 35,
            }
            .encode(),
        );
    }
    put("index", "six", &index.finish());
    let mut f = FilterBuilder::new(10);
    for (k, _) in &e {
        f.add(k);
    }
    put("filter", "six", &f.finish());
    let mut p = Properties::default();
    p.user.insert("user.x".into(), vec![1, 2]);
    put("properties", "default", &p.encode());
    let mut mi = MetaIndex::default();
    mi.blocks.insert(
        "strata.properties".into(),
        BlockHandle {
            offset: 9,
            size: 90,
        },
    );
    put("meta_index", "one", &mi.encode());
}

/// Found by the `index` fuzz target: a block handle whose offset varint had
/// a redundant zero continuation byte (`b5 00` for 53) decoded, so two byte
/// strings named one handle. Handles must now be in their shortest form.
#[test]
fn index_handle_with_overlong_varint_is_refused() {
    let crash: &[u8] = &[
        0x0, 0xa, 0x2, 0x6b, 0x0, 0x1, 0x1, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x23, 0x0, 0xa, 0x2,
        0x6b, 0x1, 0x1, 0x2, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x28, 0x29, 0x0, 0xa, 0x2, 0x6b, 0x2,
        0x1, 0x3, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x50, 0x23, 0x0, 0xa, 0x2, 0x6b, 0x3, 0x1, 0x4,
        0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x78, 0x22, 0x0, 0xa, 0x3, 0x6b, 0x4, 0x40, 0x0, 0x0, 0xf,
        0x0, 0xb6, 0xb5, 0xb5, 0xb5, 0x0, 0x23, 0x0, 0xa, 0x3, 0x6b, 0x5, 0x1, 0x6, 0x0, 0x0, 0x0,
        0x0, 0x0, 0x0, 0x2d, 0x1, 0x23, 0x0, 0x0, 0x0, 0x0, 0xf, 0x0, 0x0, 0x0, 0x1e, 0x0, 0x0,
        0x0, 0x2d, 0x0, 0x0, 0x0, 0x3c, 0x0, 0x0, 0x0, 0x4c, 0x0, 0x0, 0x0, 0x6, 0x0, 0x0, 0x0,
    ];
    decoders::index(crash);
    assert!(BlockHandle::decode(&[0xb5, 0x00, 0x23]).is_err());
}

/// Found by the `block` fuzz target: an internal-order block holding an
/// empty key and eight 0xff bytes (an empty user key with the all-ones
/// trailer). The two compared equal, so a seek to the second found the
/// first. Only equal bytes compare equal now.
#[test]
fn block_with_a_short_key_and_its_all_ones_twin_seeks_each() {
    let crash: &[u8] = &[
        0x0, 0x0, 0x0, 0x80, 0x80, 0x80, 0x0, 0x80, 0x0, 0x0, 0x3b, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0,
        0x1, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0,
        0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0,
        0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0,
        0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0,
        0x0, 0xa4, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x2d, 0x0, 0x0, 0x0, 0x0, 0x0,
        0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0,
        0x0, 0x0, 0x94, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x8, 0x0, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0, 0x0, 0x0, 0x0, 0x1, 0x0, 0x0, 0x0,
    ];
    decoders::block(crash);
}
