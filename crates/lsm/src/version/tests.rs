//! Unit tests of levels and versions; the scenarios are in `tests/version_*.rs`.

use std::sync::Arc;

use super::*;
use crate::key::{InternalKey, ValueKind};

fn desc(number: FileNumber, lo: &[u8], hi: &[u8], seq: SeqNo) -> FileDesc {
    FileDesc {
        number,
        size: 10,
        smallest: InternalKey::new(lo, seq, ValueKind::Put),
        largest: InternalKey::new(hi, seq, ValueKind::Put),
        smallest_seqno: seq,
        largest_seqno: seq,
        blob_refs: Vec::new(),
        range_tombstones: false,
    }
}

fn built(edit: &VersionEdit) -> Arc<Version> {
    let (queue, _rx) = ObsoleteFiles::channel();
    let base = Arc::new(Version::new(0, NUM_LEVELS_DEFAULT, queue).unwrap());
    let mut b = VersionBuilder::new(&base);
    b.apply(edit).unwrap();
    b.build().version
}

#[test]
fn lookups_by_key_and_range() {
    let mut e = VersionEdit {
        next_file_number: Some(10),
        ..VersionEdit::new()
    };
    e.add_file(0, desc(1, b"a", b"z", 1))
        .add_file(0, desc(2, b"m", b"n", 2))
        .add_file(1, desc(3, b"a", b"f", 1))
        .add_file(1, desc(4, b"g", b"p", 1))
        .add_file(1, desc(5, b"q", b"t", 1))
        .add_file(3, desc(6, b"m", b"m", 1));
    let v = built(&e);
    v.check().unwrap();
    let for_key = |k: &[u8]| -> Vec<(u8, FileNumber)> {
        v.files_for_key(k)
            .into_iter()
            .map(|(l, f)| (l, f.number()))
            .collect()
    };
    assert_eq!(for_key(b"m"), [(0, 2), (0, 1), (1, 4), (3, 6)]);
    assert_eq!(for_key(b"fz"), [(0, 1)]);
    assert_eq!(for_key(b"zz"), []);
    let range = |l, s: Option<&[u8]>, e: Option<&[u8]>| -> Vec<FileNumber> {
        v.files_in_range(l, s, e)
            .iter()
            .map(|f| f.number())
            .collect()
    };
    assert_eq!(range(1, None, None), [3, 4, 5]);
    assert_eq!(range(1, Some(b"h"), None), [4, 5]);
    assert_eq!(range(1, None, Some(b"g")), [3, 4]);
    assert_eq!(range(1, Some(b"f"), Some(b"g")), [3, 4]);
    assert_eq!(range(1, Some(b"u"), None), Vec::<FileNumber>::new());
    assert_eq!(range(0, Some(b"o"), Some(b"p")), [1]);
    assert_eq!(range(9, None, None), Vec::<FileNumber>::new());
    assert_eq!(v.level_len(1), 3);
    assert_eq!(v.level_bytes(1), 30);
    assert_eq!(v.total_files(), 6);
}

#[test]
fn levels_out_of_bounds_are_refused() {
    let (queue, _rx) = ObsoleteFiles::channel();
    assert!(Version::new(0, 0, queue.clone()).is_err());
    assert!(Version::new(0, NUM_LEVELS_MAX + 1, queue).is_err());
}

/// A reader for `pin_reader`: one small SST file on a `MemFs`.
fn a_reader() -> crate::sst::SstReader {
    use strata_fs::FileSystem;
    let fs = strata_fs::MemFs::new();
    let path = std::path::Path::new("/t.sst");
    let mut w = crate::sst::SstWriter::create(&fs, path, Default::default()).unwrap();
    w.add(InternalKey::new(b"a", 1, ValueKind::Put).encoded(), b"v")
        .unwrap();
    w.finish().unwrap();
    fs.sync_dir(std::path::Path::new("/")).unwrap();
    crate::sst::SstReader::open(&fs, path, 1, None).unwrap()
}

/// Only L0's entries keep an open reader (so the files open beyond the
/// table cache's bound are L0's): a move out of L0 gives the file a new
/// entry without one, over the same file, and the old versions' entry
/// keeps its reader; a move between sorted levels keeps the entry.
#[test]
fn a_move_out_of_level0_leaves_the_kept_reader_behind() {
    let mut e = VersionEdit {
        next_file_number: Some(10),
        ..VersionEdit::new()
    };
    e.add_file(0, desc(1, b"a", b"c", 1));
    let at_l0 = built(&e);
    let entry = at_l0.file(1).unwrap().1.clone();
    entry.pin_reader(a_reader());
    assert!(entry.pinned_reader().is_some());

    let mut b = VersionBuilder::new(&at_l0);
    let mut mv = VersionEdit::new();
    mv.delete_file(0, 1).add_file(1, desc(1, b"a", b"c", 1));
    b.apply(&mv).unwrap();
    let built1 = b.build();
    assert!(built1.removed.is_empty(), "a move removes nothing");
    let (level, moved) = built1.version.file(1).unwrap();
    assert_eq!(level, 1);
    assert!(moved.same_file(&entry) && !Arc::ptr_eq(moved, &entry));
    assert!(moved.pinned_reader().is_none(), "no reader kept out of L0");
    assert!(entry.pinned_reader().is_some(), "L0's versions keep theirs");

    let mut b = VersionBuilder::new(&built1.version);
    let mut down = VersionEdit::new();
    down.delete_file(1, 1).add_file(2, desc(1, b"a", b"c", 1));
    b.apply(&down).unwrap();
    let built2 = b.build();
    assert!(Arc::ptr_eq(built2.version.file(1).unwrap().1, moved));
}
