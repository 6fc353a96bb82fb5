//! Oracles for the SST decoders. Each takes any bytes; the decoder must
//! answer without panicking, and whatever it accepts must agree with itself
//! and with the encoders.

use std::path::Path;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_lsm::key;
use strata_lsm::sst::{
    decode_range_deletions, unseal_block, Block, BlockHandle, BloomFilter, Footer, KeyOrder,
    MetaIndex, Properties,
};
use strata_lsm::SstReader;

/// The most entries an oracle walks, so a huge accepted input stays quick.
const ENTRIES_MAX: usize = 4096;

/// Decodes `data[1..]` as a keyed block (byte 0 picks the key order) and
/// walks it: forward and backward agree, keys never descend, and seeking to
/// each key lands on an equal key.
pub fn block(data: &[u8]) {
    let Some((&order, rest)) = data.split_first() else {
        return;
    };
    let order = if order & 1 == 0 {
        KeyOrder::Internal
    } else {
        KeyOrder::Bytewise
    };
    let Ok(block) = Block::decode(rest.to_vec(), order) else {
        return;
    };
    let block = Arc::new(block);
    let mut it = block.iter();
    let mut forward = Vec::new();
    it.first();
    while it.valid() && forward.len() < ENTRIES_MAX {
        forward.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    if forward.len() < ENTRIES_MAX {
        assert_eq!(forward.len(), block.entries());
        let mut backward = Vec::new();
        it.last();
        while it.valid() {
            backward.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        backward.reverse();
        assert_eq!(forward, backward, "the two directions disagree");
    }
    for w in forward.windows(2) {
        assert!(order.compare(&w[0].0, &w[1].0).is_le(), "keys descend");
    }
    for (k, _) in forward.iter().take(64) {
        it.seek(k);
        assert!(
            it.valid() && it.key() == &k[..],
            "seek misses a present key"
        );
        it.seek_for_prev(k);
        assert!(
            it.valid() && it.key() == &k[..],
            "seek_for_prev misses a present key"
        );
    }
}

/// Decodes `data` as an index block (internal keys to block handles): every
/// value either decodes as a handle that re-encodes to itself, or errs.
pub fn index(data: &[u8]) {
    let Ok(block) = Block::decode(data.to_vec(), KeyOrder::Internal) else {
        return;
    };
    let block = Arc::new(block);
    let mut it = block.iter();
    it.first();
    let mut n = 0;
    while it.valid() && n < ENTRIES_MAX {
        if let Ok(h) = BlockHandle::decode(it.value()) {
            assert_eq!(h.encode(), it.value(), "a handle does not re-encode");
        }
        let _ = key::parse(it.key());
        it.next();
        n += 1;
    }
}

/// Decodes `data` as a bloom filter and probes it.
pub fn filter(data: &[u8]) {
    let Ok(f) = BloomFilter::decode(data) else {
        return;
    };
    assert!(!f.is_empty());
    for probe in [&b""[..], b"a", data.get(..8).unwrap_or(data)] {
        let _ = f.may_contain(probe);
    }
}

/// Decodes `data` as a properties block; what it accepts re-encodes to a
/// block that decodes to the same properties.
pub fn properties(data: &[u8]) {
    let Ok(p) = Properties::decode(data.to_vec()) else {
        return;
    };
    let again = Properties::decode(p.encode()).expect("re-encoded properties decode");
    assert_eq!(p, again);
}

/// Decodes `data` as a footer; an accepted footer re-encodes to its bytes.
pub fn footer(data: &[u8]) {
    let Ok(f) = Footer::decode(data) else {
        return;
    };
    assert_eq!(&f.encode()[..], data, "a footer does not re-encode");
}

/// Decodes `data` as a meta-index block; what it accepts round trips.
pub fn meta_index(data: &[u8]) {
    let Ok(m) = MetaIndex::decode(data.to_vec()) else {
        return;
    };
    assert_eq!(MetaIndex::decode(m.encode()).expect("re-encoded"), m);
}

/// Checks `data` as a stored block (payload and trailer), then decodes what
/// it holds as a range-deletion block.
pub fn stored_block(data: &[u8]) {
    if let Ok(raw) = unseal_block(data) {
        if let Ok(tombstones) = decode_range_deletions(raw) {
            for t in tombstones {
                assert!(t.start < t.end, "an empty range was accepted");
            }
        }
    }
}

/// Opens `data` as a whole SST file and reads all of it: a scan forward
/// must give strictly ascending keys, the scan backward the same entries,
/// and a lookup must return only versions the file holds.
pub fn open_scan(data: &[u8]) {
    let fs = MemFs::new();
    let path = Path::new("/f.sst");
    let file = fs.create(path).expect("create");
    file.write_at(0, data).expect("write");
    let Ok(r) = SstReader::open(&fs, path, 1, None) else {
        return;
    };
    let _ = r.properties();
    let _ = r.range_tombstones();
    let mut it = r.iter();
    let mut forward = Vec::new();
    let mut ok = it.first().is_ok();
    while ok && it.valid() && forward.len() < ENTRIES_MAX {
        forward.push((it.key().to_vec(), it.value().to_vec()));
        ok = it.next().is_ok();
    }
    for w in forward.windows(2) {
        assert!(key::compare(&w[0].0, &w[1].0).is_lt(), "scan not ascending");
    }
    let complete = ok && forward.len() < ENTRIES_MAX;
    if complete {
        let mut backward = Vec::new();
        let mut ok = it.last().is_ok();
        while ok && it.valid() {
            backward.push((it.key().to_vec(), it.value().to_vec()));
            ok = it.prev().is_ok();
        }
        if ok {
            backward.reverse();
            assert_eq!(forward, backward, "the two directions disagree");
        }
    }
    for (k, _) in forward.iter().take(64) {
        let (user_key, seqno, _) = key::parse(k).expect("scan returned a bad key");
        if let Ok(Some((kind, value))) = r.get(user_key, seqno) {
            // Index separators are trusted once their block's checksum
            // passes, so on a forged file get may miss versions; whatever it
            // returns must still be a version of the key at or below the
            // snapshot that the file holds.
            let held = forward.iter().any(|(e, v)| {
                key::parse(e).is_ok_and(|(u, s, kd)| u == user_key && s <= seqno && kd == kind)
                    && *v == value
            });
            assert!(held || !complete, "get returned a version the scan lacks");
        }
    }
}
