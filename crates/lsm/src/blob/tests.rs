//! Blob files written and read back, then damaged: every value comes back
//! by its reference and by the file walk, and no damage, truncation or
//! hostile reference ever yields a wrong value.

use std::path::Path;

use strata_fs::{FileSystem, MemFs};

use super::format::{BlobRef, Footer, Header, FOOTER_LEN, HEADER_LEN, MAGIC};
use super::{BlobFileReader, BlobFileWriter, BlobWriterOptions};
use crate::sst::format::Compression;
use crate::Error;

const PATH: &str = "/000007.blob";
const NUMBER: u64 = 7;

fn value(i: usize) -> Vec<u8> {
    // Sizes from 0 to ~5 KiB, compressible in part.
    let len = (i * 397) % 5000;
    (0..len).map(|j| ((i + j / 7) % 251) as u8).collect()
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Writes `n` records, sealing when full; returns each one's reference.
fn write(fs: &MemFs, n: usize, options: BlobWriterOptions) -> Vec<BlobRef> {
    write_with(fs, n, options, value).0
}

/// Writes `n` records of `value_of(i)` under `options`, sealing when full;
/// returns each one's reference and the file's size.
fn write_with(
    fs: &MemFs,
    n: usize,
    options: BlobWriterOptions,
    value_of: fn(usize) -> Vec<u8>,
) -> (Vec<BlobRef>, u64) {
    let mut w = BlobFileWriter::create(fs, Path::new(PATH), NUMBER, 3, options).unwrap();
    let mut refs = Vec::new();
    for i in 0..n {
        w.add(&key(i), i as u64 + 1, &value_of(i)).unwrap();
        if w.block_full() {
            refs.extend(w.seal_block().unwrap());
        }
    }
    refs.extend(w.seal_block().unwrap());
    let info = w.finish().unwrap();
    assert_eq!(info.footer.record_count, n as u64);
    assert_eq!(
        info.file_size,
        fs.open(Path::new(PATH), false).unwrap().len().unwrap()
    );
    (refs, info.file_size)
}

fn new_writer(fs: &MemFs) -> BlobFileWriter {
    BlobFileWriter::create(fs, Path::new(PATH), NUMBER, 0, BlobWriterOptions::default()).unwrap()
}

fn open(fs: &MemFs) -> crate::Result<BlobFileReader> {
    BlobFileReader::open(fs, Path::new(PATH), NUMBER)
}

#[test]
fn every_value_comes_back_by_reference_and_by_the_walk() {
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let fs = MemFs::new();
        let options = BlobWriterOptions {
            block_size_bytes: 8 << 10,
            compression,
            ..BlobWriterOptions::default()
        };
        let refs = write(&fs, 300, options);
        assert_eq!(refs.len(), 300);
        let reader = open(&fs).unwrap();
        assert_eq!(reader.header().column_family, 3);
        assert_eq!(reader.header().compression, compression);
        assert!(reader.footer().block_count > 10, "{:?}", reader.footer());
        for (i, r) in refs.iter().enumerate() {
            let decoded = BlobRef::decode(&r.encode()).unwrap();
            assert_eq!(&decoded, r);
            assert_eq!(
                reader.get(r, &key(i)).unwrap(),
                value(i),
                "{compression:?} {i}"
            );
        }
        let mut i = 0;
        reader
            .for_each_record(|r, record| {
                assert_eq!(r, refs[i]);
                assert_eq!(record.key, &key(i)[..]);
                assert_eq!(record.seqno, i as u64 + 1);
                assert_eq!(record.value, &value(i)[..]);
                i += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(i, 300);
        let total: u64 = (0..300).map(|i| value(i).len() as u64).sum();
        assert_eq!(reader.footer().value_bytes, total);
    }
}

#[test]
fn a_reference_followed_under_another_key_is_refused() {
    let fs = MemFs::new();
    let refs = write(&fs, 20, BlobWriterOptions::default());
    let reader = open(&fs).unwrap();
    let err = reader.get(&refs[3], &key(4)).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    let mut other = refs[3];
    other.file_number += 1;
    assert!(matches!(
        reader.get(&other, &key(3)),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn hostile_references_are_errors_never_panics_or_values() {
    let fs = MemFs::new();
    let refs = write(&fs, 50, BlobWriterOptions::default());
    let reader = open(&fs).unwrap();
    let len = fs.open(Path::new(PATH), false).unwrap().len().unwrap();
    let base = refs[10];
    let hostile = [
        BlobRef {
            block_offset: 0,
            ..base
        },
        BlobRef {
            block_offset: len - 10,
            ..base
        },
        BlobRef {
            block_offset: u64::MAX - 2,
            ..base
        },
        BlobRef {
            block_size: 3,
            ..base
        },
        BlobRef {
            block_size: base.block_size + 1,
            ..base
        },
        BlobRef {
            block_offset: base.block_offset + 1,
            ..base
        },
        BlobRef {
            record_offset: base.record_offset + 1,
            ..base
        },
        BlobRef {
            record_offset: u32::MAX,
            ..base
        },
        BlobRef {
            value_len: base.value_len + 1,
            ..base
        },
    ];
    for h in hostile {
        match reader.get(&h, &key(10)) {
            Err(Error::Corruption { .. }) => {}
            other => panic!("{h:?}: {other:?}"),
        }
    }
}

#[test]
fn every_single_bit_flip_is_caught() {
    let fs = MemFs::new();
    let options = BlobWriterOptions {
        block_size_bytes: 256,
        ..BlobWriterOptions::default()
    };
    let refs = write(&fs, 6, options);
    let len = fs.open(Path::new(PATH), false).unwrap().len().unwrap();
    for offset in 0..len {
        for bit in [0x01, 0x80] {
            let damaged = fs.deep_clone();
            damaged.corrupt(Path::new(PATH), offset, bit).unwrap();
            let Ok(reader) = open(&damaged) else {
                continue;
            };
            let mut bad = 0;
            for (i, r) in refs.iter().enumerate() {
                match reader.get(r, &key(i)) {
                    Ok(v) => assert_eq!(v, value(i), "flip {bit:#x} at {offset}: wrong value"),
                    Err(Error::Corruption { .. }) => bad += 1,
                    Err(e) => panic!("flip {bit:#x} at {offset}: {e}"),
                }
            }
            let walked = reader.for_each_record(|_, _| Ok(()));
            // The walk reads every byte between header and footer: a flip
            // there, or one the reads above caught, fails it.
            if bad > 0 || (HEADER_LEN as u64..len - FOOTER_LEN as u64).contains(&offset) {
                assert!(
                    walked.is_err(),
                    "flip {bit:#x} at {offset} not caught by the walk"
                );
            }
        }
    }
}

#[test]
fn a_file_cut_short_or_never_finished_is_refused() {
    let fs = MemFs::new();
    write(&fs, 40, BlobWriterOptions::default());
    let len = fs.open(Path::new(PATH), false).unwrap().len().unwrap();
    for cut in [
        0,
        10,
        HEADER_LEN as u64,
        len / 2,
        len - FOOTER_LEN as u64,
        len - 1,
    ] {
        let cut_fs = fs.deep_clone();
        cut_fs.set_len_raw(Path::new(PATH), cut).unwrap();
        assert!(open(&cut_fs).is_err(), "cut at {cut} opened");
    }
    // A writer dropped before `finish` leaves no footer.
    let fs = MemFs::new();
    let mut w = new_writer(&fs);
    for i in 0..100 {
        w.add(&key(i), 1, &value(i)).unwrap();
        w.seal_block().unwrap();
    }
    drop(w);
    assert!(open(&fs).is_err());
}

#[test]
fn finish_refuses_records_whose_references_were_never_handed_out() {
    let fs = MemFs::new();
    let mut w = new_writer(&fs);
    w.add(b"k", 1, b"v").unwrap();
    assert_eq!(w.unsealed_records(), 1);
    assert!(matches!(w.finish(), Err(Error::InvalidArgument(_))));
}

#[test]
fn bad_arguments_are_refused_before_anything_is_written() {
    let fs = MemFs::new();
    let zero = BlobWriterOptions {
        block_size_bytes: 0,
        ..BlobWriterOptions::default()
    };
    assert!(matches!(
        BlobFileWriter::create(&fs, Path::new(PATH), NUMBER, 0, zero),
        Err(Error::InvalidArgument(_))
    ));
    let mut w = new_writer(&fs);
    assert!(matches!(
        w.add(b"k", u64::MAX, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    let huge = vec![0u8; crate::sst::format::MAX_ENTRY_LEN];
    assert!(matches!(
        w.add(b"k", 1, &huge),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(w.unsealed_records(), 0);
}

#[test]
fn header_footer_and_reference_codecs_refuse_what_they_do_not_know() {
    let header = Header {
        flags: 0,
        column_family: 9,
        compression: Compression::Zstd,
    };
    let bytes = header.encode();
    assert_eq!(Header::decode(&bytes).unwrap(), header);
    assert_eq!(u64::from_le_bytes(bytes[..8].try_into().unwrap()), MAGIC);
    // An unknown flag with a good checksum: refused, not ignored.
    let flagged = Header { flags: 2, ..header }.encode();
    assert!(Header::decode(&flagged).is_err());
    assert!(Header::decode(&bytes[..HEADER_LEN - 1]).is_err());

    let footer = Footer {
        block_count: 3,
        record_count: 30,
        value_bytes: 1 << 20,
        data_end: 12345,
    };
    assert_eq!(Footer::decode(&footer.encode()).unwrap(), footer);
    assert!(Footer::decode(&footer.encode()[1..]).is_err());

    let r = BlobRef {
        file_number: 1 << 40,
        block_offset: 1 << 33,
        block_size: 4096,
        record_offset: 77,
        value_len: 1000,
    };
    let mut bytes = r.encode();
    assert!(bytes.len() <= super::format::MAX_REF_LEN);
    assert_eq!(BlobRef::decode(&bytes).unwrap(), r);
    for cut in 0..bytes.len() {
        assert!(BlobRef::decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    bytes.push(0);
    assert!(BlobRef::decode(&bytes).is_err(), "trailing byte accepted");
    let mut tag = r.encode();
    tag[0] = 2;
    assert!(BlobRef::decode(&tag).is_err(), "unknown tag accepted");
    let tiny = BlobRef { block_size: 4, ..r };
    assert!(BlobRef::decode(&tiny.encode()).is_err());
}

/// A small record of the kind a dictionary helps: the same fields and
/// shapes in every value, the contents varying.
fn record(i: usize) -> Vec<u8> {
    let x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!(
        "{{\"id\":{i},\"name\":\"customer-{:x}\",\"email\":\"c{:x}@example.org\",\
         \"plan\":\"{}\",\"balance\":{},\"country\":\"{}\",\"active\":{}}}",
        x >> 44,
        x >> 24,
        ["free", "pro", "team", "enterprise"][(x % 4) as usize],
        x % 100_000,
        ["FR", "DE", "US", "JP", "BR"][(x % 5) as usize],
        x.is_multiple_of(2)
    )
    .into_bytes()
}

/// Writes `n` records of [`record`] under `options`.
fn write_records(fs: &MemFs, n: usize, options: BlobWriterOptions) -> (Vec<BlobRef>, u64) {
    write_with(fs, n, options, record)
}

fn zstd_with_dictionary(block_size_bytes: usize, dictionary: usize) -> BlobWriterOptions {
    BlobWriterOptions {
        block_size_bytes,
        compression: Compression::Zstd,
        zstd_dictionary_bytes: dictionary,
        ..BlobWriterOptions::default()
    }
}

#[test]
fn a_trained_dictionary_shrinks_a_file_of_alike_small_values() {
    // 1 KiB blocks of ~180-byte records: measured 0.67 of the plain size.
    let n = 12_000;
    let plain = MemFs::new();
    let (_, plain_size) = write_records(&plain, n, zstd_with_dictionary(1 << 10, 0));
    let fs = MemFs::new();
    let (refs, size) = write_records(&fs, n, zstd_with_dictionary(1 << 10, 4 << 10));
    assert!(
        size * 10 < plain_size * 8,
        "with a dictionary {size} bytes, without {plain_size}"
    );
    let reader = open(&fs).unwrap();
    assert_eq!(reader.header().flags, super::dictionary::FLAG_DICTIONARY);
    assert!(reader.dictionary_bytes() >= 256 && reader.dictionary_bytes() <= 4 << 10);
    assert_eq!(open(&plain).unwrap().dictionary_bytes(), 0);
    for (i, r) in refs.iter().enumerate() {
        assert_eq!(reader.get(r, &key(i)).unwrap(), record(i), "record {i}");
    }
    let mut walked = 0;
    reader
        .for_each_record(|r, rec| {
            assert_eq!(r, refs[walked]);
            assert_eq!(rec.value, record(walked));
            walked += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!(walked, n);
}

#[test]
fn a_dictionary_that_does_not_pay_is_dropped() {
    // 16 KiB blocks hold their own repeats: a dictionary made them larger.
    let plain = MemFs::new();
    let (_, plain_size) = write_records(&plain, 12_000, zstd_with_dictionary(16 << 10, 0));
    let fs = MemFs::new();
    let (refs, size) = write_records(&fs, 12_000, zstd_with_dictionary(16 << 10, 4 << 10));
    assert_eq!(size, plain_size);
    let reader = open(&fs).unwrap();
    assert_eq!(reader.dictionary_bytes(), 0);
    assert_eq!(
        reader.get(&refs[9_000], &key(9_000)).unwrap(),
        record(9_000)
    );
}

#[test]
fn a_file_that_ends_before_its_samples_do_carries_no_dictionary() {
    let fs = MemFs::new();
    let (refs, _) = write_records(&fs, 50, zstd_with_dictionary(1 << 10, 16 << 10));
    let reader = open(&fs).unwrap();
    assert_eq!(reader.header().flags, 0);
    assert_eq!(reader.dictionary_bytes(), 0);
    for (i, r) in refs.iter().enumerate() {
        assert_eq!(reader.get(r, &key(i)).unwrap(), record(i));
    }
}

#[test]
fn every_bit_flip_in_a_dictionary_file_is_caught() {
    let fs = MemFs::new();
    let (refs, len) = write_records(&fs, 260, zstd_with_dictionary(1 << 10, 1 << 10));
    assert!(open(&fs).unwrap().dictionary_bytes() > 0);
    // Every byte of the tail (the blocks compressed with the dictionary,
    // the dictionary, the footer), a sample of the rest; a value in every
    // block is read back (the walk reads them all).
    let tail = len.saturating_sub(4 << 10);
    let offsets = (0..tail).step_by(61).chain(tail..len);
    for offset in offsets {
        let damaged = fs.deep_clone();
        damaged.corrupt(Path::new(PATH), offset, 0x04).unwrap();
        let Ok(reader) = open(&damaged) else {
            continue;
        };
        let mut bad = 0;
        for (i, r) in refs.iter().enumerate().step_by(3) {
            match reader.get(r, &key(i)) {
                Ok(v) => assert_eq!(v, record(i), "flip at {offset}: wrong value"),
                Err(Error::Corruption { .. }) => bad += 1,
                Err(e) => panic!("flip at {offset}: {e}"),
            }
        }
        let walked = reader.for_each_record(|_, _| Ok(()));
        if bad > 0 || (HEADER_LEN as u64..reader.footer().data_end).contains(&offset) {
            assert!(walked.is_err(), "flip at {offset} not caught by the walk");
        }
    }
}

#[test]
fn a_dictionary_size_outside_its_bounds_is_refused() {
    let fs = MemFs::new();
    for bytes in [1, 255, (1 << 20) + 1] {
        assert!(matches!(
            BlobFileWriter::create(
                &fs,
                Path::new(PATH),
                NUMBER,
                0,
                zstd_with_dictionary(4096, bytes)
            ),
            Err(Error::InvalidArgument(_))
        ));
    }
}
