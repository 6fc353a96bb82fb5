//! Arbitrary and damaged bytes fed to the manifest's record decoder and, as a
//! whole manifest that `CURRENT` names, to `read_current`: no panic, and what
//! is accepted re-encodes to itself (the oracle of `fuzz/src/log_files.rs`,
//! which the `manifest_decode` fuzz target runs).

#[path = "../fuzz/src/log_files.rs"]
#[allow(dead_code, reason = "the WAL oracle is another test's")]
mod log_files;

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::Index;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::manifest::{encode_records, ManifestRecord, ManifestWriter};
use strata_lsm::VersionEdit;

fn records() -> impl Strategy<Value = Vec<ManifestRecord>> {
    prop::collection::vec(
        prop_oneof![
            (any::<u32>(), "[a-z]{1,20}")
                .prop_map(|(id, name)| ManifestRecord::CreateColumnFamily { id, name }),
            any::<u32>().prop_map(|id| ManifestRecord::DropColumnFamily { id }),
            (any::<u32>(), any::<Option<u64>>()).prop_map(|(cf, log)| {
                let mut e = VersionEdit::new();
                e.column_family = cf;
                e.log_number = log;
                ManifestRecord::Edit(e)
            }),
        ],
        0..6,
    )
}

/// The bytes of a manifest holding `snapshot` then `appends`.
fn manifest_bytes(snapshot: &[ManifestRecord], appends: &[Vec<ManifestRecord>]) -> Vec<u8> {
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new("/m")).unwrap();
    let mut w = ManifestWriter::create(fs.clone(), Path::new("/m"), 1, snapshot).unwrap();
    for a in appends {
        w.append(a).unwrap();
    }
    let f = fs.open(w.path(), false).unwrap();
    let mut buf = vec![0; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut buf).unwrap();
    buf
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..300)) {
        log_files::manifest_decode(&data);
    }

    #[test]
    fn damaged_payloads_never_panic(r in records(), at in any::<Index>(), mask in 1..=255u8) {
        let mut bytes = encode_records(&r);
        log_files::manifest_decode(&bytes);
        let i = at.index(bytes.len());
        bytes[i] ^= mask;
        log_files::manifest_decode(&bytes);
    }

    #[test]
    fn damaged_manifests_never_panic(
        snapshot in records(),
        appends in prop::collection::vec(records(), 0..4),
        flips in prop::collection::vec((any::<Index>(), 1..=255u8), 0..3),
        cut in any::<Option<Index>>(),
    ) {
        let mut bytes = manifest_bytes(&snapshot, &appends);
        for (at, mask) in &flips {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        if let Some(c) = cut {
            let len = c.index(bytes.len() + 1);
            bytes.truncate(len);
        }
        log_files::manifest_decode(&bytes);
    }
}

/// Writes the `manifest_decode` fuzz target's seeds into
/// `fuzz/corpus/manifest_decode/`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/manifest_decode");
    std::fs::create_dir_all(&dir).unwrap();
    let mut edit = VersionEdit::new();
    edit.log_number = Some(5);
    edit.delete_file(1, 3);
    let r = vec![
        ManifestRecord::CreateColumnFamily {
            id: 1,
            name: "lock".into(),
        },
        ManifestRecord::Edit(edit),
        ManifestRecord::DropColumnFamily { id: 1 },
    ];
    std::fs::write(dir.join("payload"), encode_records(&r)).unwrap();
    std::fs::write(
        dir.join("manifest"),
        manifest_bytes(&r, std::slice::from_ref(&r)),
    )
    .unwrap();
}
