//! Oracles for the blob file decoders of `docs/format/blob.md`, shared with
//! the proptests in `crates/lsm/tests/blob_arbitrary.rs`.

use std::collections::HashMap;
use std::path::Path;

use strata_fs::{FileSystem, MemFs};
use strata_lsm::blob::{BlobFileReader, BlobRef};

/// The most records an oracle walks, so a huge accepted input stays quick.
const RECORDS_MAX: usize = 4096;

/// Decodes `data` as a blob reference: whatever is accepted re-encodes to a
/// reference that decodes to itself.
pub fn blob_ref(data: &[u8]) {
    let Ok(r) = BlobRef::decode(data) else {
        return;
    };
    let again = r.encode();
    assert!(again.len() <= data.len(), "re-encoding grew");
    assert_eq!(BlobRef::decode(&again).expect("re-encoded"), r);
}

/// Takes `data` as a whole blob file: opens it, walks it, and follows each
/// reference the walk found, and near misses of each. A reference answers
/// only with the value the walk found under it; anything else is an error.
pub fn blob_file(data: &[u8]) {
    let fs = MemFs::new();
    let path = Path::new("/000001.blob");
    let file = fs.create(path).expect("create");
    file.write_at(0, data).expect("write");
    let Ok(reader) = BlobFileReader::open(&fs, path, 1) else {
        return;
    };
    let mut found: HashMap<BlobRef, (Vec<u8>, Vec<u8>)> = HashMap::new();
    let mut order = Vec::new();
    let _ = reader.for_each_record(|r, record| {
        if order.len() < RECORDS_MAX {
            found.insert(r, (record.key.to_vec(), record.value.to_vec()));
            order.push(r);
        }
        Ok(())
    });
    for r in order.iter().take(256) {
        let (key, value) = &found[r];
        let got = reader.get(r, key).expect("a walked reference reads back");
        assert_eq!(&got, value, "{r:?}");
        let misses = [
            BlobRef {
                record_offset: r.record_offset.wrapping_add(1),
                ..*r
            },
            BlobRef {
                block_offset: r.block_offset.wrapping_sub(1),
                ..*r
            },
            BlobRef {
                value_len: r.value_len.wrapping_add(1),
                ..*r
            },
        ];
        for miss in misses {
            if let Ok(v) = reader.get(&miss, key) {
                let walked = found.get(&miss);
                assert!(
                    walked.is_some_and(|(k, wv)| k == key && *wv == v),
                    "{miss:?} answered a value the walk never found there"
                );
            }
        }
    }
}
