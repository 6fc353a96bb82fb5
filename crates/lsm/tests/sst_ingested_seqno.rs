//! An ingested file read at its assigned seqno (`SstReader::open_assigned`)
//! behaves exactly as the same entries written at that seqno: every seek,
//! seek_for_prev, lookup and scan in both directions answers the same.
//! Files stored at other seqnos ignore the assignment.

use std::path::Path;

use strata_fs::MemFs;
use strata_lsm::sst::lookup_key;
use strata_lsm::{InternalKey, SstReader, SstWriter, SstWriterOptions, ValueKind, MAX_SEQNO};

const S: u64 = 40;

fn write(fs: &MemFs, path: &Path, seqno: u64) {
    let options = SstWriterOptions {
        block_size_bytes: 64,
        ..SstWriterOptions::default()
    };
    let mut w = SstWriter::create(fs, path, options).unwrap();
    for i in (0..60u32).step_by(3) {
        let k = format!("k{i:03}");
        let kind = if i % 9 == 0 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let v = if kind == ValueKind::Put {
            k.clone()
        } else {
            String::new()
        };
        w.add(
            InternalKey::new(k.as_bytes(), seqno, kind).encoded(),
            v.as_bytes(),
        )
        .unwrap();
    }
    w.finish().unwrap();
}

fn at(it: &strata_lsm::SstIter) -> Option<(Vec<u8>, u64, Vec<u8>)> {
    it.valid()
        .then(|| (it.key().to_vec(), it.seqno(), it.value().to_vec()))
}

#[test]
fn an_assigned_seqno_reads_as_if_written() {
    let fs = MemFs::new();
    write(&fs, Path::new("/zero.sst"), 0);
    write(&fs, Path::new("/real.sst"), S);
    let zero = SstReader::open_assigned(&fs, Path::new("/zero.sst"), 1, None, S).unwrap();
    let real = SstReader::open_assigned(&fs, Path::new("/real.sst"), 2, None, S + 5).unwrap();
    assert_eq!(zero.global_seqno(), Some(S));
    assert_eq!(
        real.global_seqno(),
        None,
        "a file not stored at 0 reads as stored"
    );
    for i in 0..62u32 {
        let k = format!("k{i:03}");
        for snapshot in [0, 1, S - 1, S, S + 1, MAX_SEQNO] {
            let target = lookup_key(k.as_bytes(), snapshot);
            let (mut a, mut b) = (zero.iter(), real.iter());
            a.seek(&target).unwrap();
            b.seek(&target).unwrap();
            assert_eq!(at(&a), at(&b), "seek {k}@{snapshot}");
            a.seek_for_prev(&target).unwrap();
            b.seek_for_prev(&target).unwrap();
            assert_eq!(at(&a), at(&b), "seek_for_prev {k}@{snapshot}");
            assert_eq!(
                zero.get_entry(k.as_bytes(), snapshot).unwrap(),
                real.get_entry(k.as_bytes(), snapshot).unwrap(),
                "get {k}@{snapshot}"
            );
        }
        // Targets between the kinds of one seqno.
        for trailer in [(S << 8) | 1, S << 8, ((S + 1) << 8)] {
            let mut t = k.as_bytes().to_vec();
            t.extend_from_slice(&u64::to_le_bytes(trailer));
            let (mut a, mut b) = (zero.iter(), real.iter());
            a.seek(&t).unwrap();
            b.seek(&t).unwrap();
            assert_eq!(at(&a), at(&b), "seek {k} trailer {trailer:#x}");
            a.seek_for_prev(&t).unwrap();
            b.seek_for_prev(&t).unwrap();
            assert_eq!(at(&a), at(&b), "seek_for_prev {k} trailer {trailer:#x}");
        }
    }
    let scan = |r: &SstReader| {
        let mut it = r.iter();
        let mut out = Vec::new();
        it.first().unwrap();
        while let Some(e) = at(&it) {
            out.push(e);
            it.next().unwrap();
        }
        let mut back = Vec::new();
        it.last().unwrap();
        while let Some(e) = at(&it) {
            back.push(e);
            it.prev().unwrap();
        }
        back.reverse();
        assert_eq!(out, back);
        out
    };
    assert_eq!(scan(&zero), scan(&real));
}
