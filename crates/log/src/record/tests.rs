//! The appender and the scanner together: what one writes the other reads,
//! and a power cut's tail is told from damage to synced data.

use std::path::Path;
use std::sync::Arc;

use strata_fs::{CrashMode, FileSystem, MemFs};

use super::*;

const TEST: FileFormat = FileFormat {
    magic: *b"STRATATS",
    name: "test",
    version: 1,
    supported_versions: &[1],
};

fn read(fs: &MemFs, path: &Path) -> Vec<u8> {
    let f = fs.open(path, false).unwrap();
    let mut buf = vec![0; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut buf).unwrap();
    buf
}

fn payloads() -> Vec<Vec<u8>> {
    vec![
        b"one".to_vec(),
        Vec::new(),
        // Compressible and large: stored as LZ4.
        (0..20_000u32).map(|i| (i % 7) as u8).collect(),
        b"four".to_vec(),
    ]
}

#[test]
fn appended_records_scan_back_and_end_at_the_marker() {
    let fs = MemFs::new();
    let path = Path::new("/f");
    let file = fs.create(path).unwrap();
    let mut a = Appender::create(file, &TEST, 3, 77, Some(4096)).unwrap();
    let all = payloads();
    let refs: Vec<&[u8]> = all.iter().map(|p| p.as_slice()).collect();
    a.append(&refs[..2]).unwrap();
    a.sync().unwrap();
    a.append(&refs[2..]).unwrap();
    let bytes = read(&fs, path);
    let scan = scan_file(&TEST, &bytes, |_| Ok(())).unwrap();
    assert_eq!(scan.header.kind, 3);
    assert_eq!(scan.header.file_id, 77);
    assert_eq!(scan.end, ScanEnd::Zeros);
    assert_eq!(scan.valid_end, a.offset());
    let got: Vec<Vec<u8>> = scan.records.iter().map(|r| r.payload.clone()).collect();
    assert_eq!(got, all);
    assert_eq!(scan.records[2].header.codec, CODEC_LZ4);
    assert_eq!(scan.records[0].header.synced_end, FILE_HEADER_LEN as u32);
    assert_eq!(
        scan.records[2].header.synced_end as u64,
        scan.records[2].offset
    );
}

/// Payloads are compressed whole up to the size where a sample decides,
/// kept compressed only when that saves an eighth, and the scratch buffer
/// reused across records never leaks one record's bytes into another's.
#[test]
fn small_payloads_are_compressed_when_it_pays_and_read_back_whole() {
    let fs = MemFs::new();
    let path = Path::new("/f");
    let mut a = Appender::create(fs.create(path).unwrap(), &TEST, 0, 1, Some(512)).unwrap();
    let compressible: Vec<u8> = (0..1024u32).map(|i| (i % 13) as u8).collect();
    let random = strata_test_support::noise(7, 1024);
    let under_threshold: Vec<u8> = vec![9; 511];
    let all = [
        compressible.clone(),
        random,
        under_threshold,
        compressible[..600].to_vec(),
    ];
    for p in &all {
        a.append(&[p]).unwrap();
    }
    let scan = scan_file(&TEST, &read(&fs, path), |_| Ok(())).unwrap();
    let got: Vec<Vec<u8>> = scan.records.iter().map(|r| r.payload.clone()).collect();
    assert_eq!(got, all);
    let codecs: Vec<u8> = scan.records.iter().map(|r| r.header.codec).collect();
    assert_eq!(codecs, [CODEC_LZ4, CODEC_NONE, CODEC_NONE, CODEC_LZ4]);
    assert!(scan.records[0].header.stored_len < 512);
}

#[test]
fn damage_before_a_record_that_claims_it_synced_is_synced() {
    let fs = MemFs::new();
    let path = Path::new("/f");
    let mut a = Appender::create(fs.create(path).unwrap(), &TEST, 0, 1, None).unwrap();
    a.append(&[b"first"]).unwrap();
    a.sync().unwrap();
    a.append(&[b"second"]).unwrap();
    let mut bytes = read(&fs, path);
    // Damage the first record: the second says it was synced.
    bytes[FILE_HEADER_LEN + RECORD_HEADER_LEN] ^= 1;
    let scan = scan_file(&TEST, &bytes, |_| Ok(())).unwrap();
    assert!(
        matches!(scan.end, ScanEnd::Damaged { synced: true, offset, .. } if offset == FILE_HEADER_LEN as u64)
    );
    // Damage the second one instead: nothing after it, not synced.
    let mut bytes = read(&fs, path);
    let last = bytes.len() - RECORD_HEADER_LEN - 1;
    bytes[last] ^= 1;
    let scan = scan_file(&TEST, &bytes, |_| Ok(())).unwrap();
    assert!(matches!(scan.end, ScanEnd::Damaged { synced: false, .. }));
    assert_eq!(scan.records.len(), 1);
}

#[test]
fn a_refusing_check_is_damage() {
    let fs = MemFs::new();
    let path = Path::new("/f");
    let mut a = Appender::create(fs.create(path).unwrap(), &TEST, 0, 1, None).unwrap();
    a.append(&[b"good", b"bad"]).unwrap();
    let bytes = read(&fs, path);
    let scan = scan_file(&TEST, &bytes, |p| {
        if p == b"bad" {
            Err("refused".into())
        } else {
            Ok(())
        }
    })
    .unwrap();
    assert_eq!(scan.records.len(), 1);
    assert!(matches!(scan.end, ScanEnd::Damaged { ref reason, .. } if reason == "refused"));
}

#[test]
fn synced_records_survive_every_power_cut() {
    for seed in 0..40 {
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepRandomPrefix { seed },
            CrashMode::KeepRandomPages { seed },
        ] {
            let fs = MemFs::new();
            let path = Path::new("/f");
            let mut a = Appender::create(fs.create(path).unwrap(), &TEST, 0, 9, None).unwrap();
            fs.sync_dir(Path::new("/")).unwrap();
            let payload = vec![seed as u8; 3000];
            for _ in 0..3 {
                a.append(&[&payload, &payload]).unwrap();
            }
            a.sync().unwrap();
            for _ in 0..3 {
                a.append(&[&payload]).unwrap();
            }
            fs.crash(mode);
            let bytes = read(&fs, path);
            let scan = scan_file(&TEST, &bytes, |_| Ok(())).unwrap();
            assert!(scan.records.len() >= 6, "{mode:?}: {}", scan.records.len());
            assert!(scan.records.iter().all(|r| r.payload == payload));
            if let ScanEnd::Damaged { synced, .. } = scan.end {
                assert!(!synced, "{mode:?}: an unsynced tail judged synced");
            }
        }
    }
}

#[test]
fn a_failed_appender_refuses_more() {
    use strata_fs::{FaultFs, Op};
    let mem = Arc::new(MemFs::new());
    let fs = FaultFs::new(mem.clone());
    let path = Path::new("/f");
    let mut a = Appender::create(fs.create(path).unwrap(), &TEST, 0, 1, None).unwrap();
    fs.fail_once_after(Op::SyncData, 0, libc_eio());
    a.append(&[b"x"]).unwrap();
    assert!(a.sync().is_err());
    assert!(a.append(&[b"y"]).is_err());
    assert!(a.sync().is_err());
}

/// Staged records take their place in the file when staged, reach it
/// through whichever comes first (handed out and written by the caller, the
/// next append, the next sync), and read back in order with what was
/// appended around them.
#[test]
fn staged_records_reach_the_file_in_their_place() {
    let fs = MemFs::new();
    let path = Path::new("/f");
    let mut a = Appender::create(fs.create(path).unwrap(), &TEST, 0, 1, Some(4096)).unwrap();
    let all = payloads();
    let refs: Vec<&[u8]> = all.iter().map(|p| p.as_slice()).collect();
    a.stage(&refs[..1]).unwrap();
    let staged_end = a.offset();
    assert!(staged_end > FILE_HEADER_LEN as u64);
    // Not written yet: the file ends at its header.
    let scan = scan_file(&TEST, &read(&fs, path), |_| Ok(())).unwrap();
    assert!(scan.records.is_empty());
    // Handed out and written by the caller, as the lsm's manifest does.
    let (at, bytes) = a.take_staged().unwrap();
    assert_eq!(at, FILE_HEADER_LEN as u64);
    a.file().write_at(at, &bytes).unwrap();
    assert!(a.take_staged().is_none());
    // Staged, then written by the next append, in one write before it.
    a.stage(&refs[1..2]).unwrap();
    a.append(&refs[2..3]).unwrap();
    // Staged, then written by the sync.
    a.stage(&refs[3..]).unwrap();
    a.sync().unwrap();
    assert_eq!(a.synced_end(), a.offset());
    let scan = scan_file(&TEST, &read(&fs, path), |_| Ok(())).unwrap();
    let got: Vec<Vec<u8>> = scan.records.iter().map(|r| r.payload.clone()).collect();
    assert_eq!(got, all);
    assert_eq!(scan.records[1].offset, staged_end);
    assert_eq!(scan.valid_end, a.offset());
    assert_eq!(scan.end, ScanEnd::Zeros);
}

/// A record prepared ahead is stored as the appender would store its
/// payload (compressed alike) and reads back whole, after records staged
/// and appended around it.
#[test]
fn a_prepared_record_is_stored_as_the_appender_would_store_it() {
    let fs = MemFs::new();
    let path = Path::new("/f");
    let mut a = Appender::create(fs.create(path).unwrap(), &TEST, 0, 1, Some(4096)).unwrap();
    let all = payloads();
    let prepared: Vec<PreparedRecord> = all
        .iter()
        .map(|p| PreparedRecord::new(p, Some(4096)).unwrap())
        .collect();
    a.stage_prepared(&prepared[0]).unwrap();
    a.stage(&[&all[1]]).unwrap();
    a.stage_prepared(&prepared[2]).unwrap();
    a.sync().unwrap();
    a.stage_prepared(&prepared[3]).unwrap();
    let (at, bytes) = a.take_staged().unwrap();
    a.file().write_at(at, &bytes).unwrap();
    let scan = scan_file(&TEST, &read(&fs, path), |_| Ok(())).unwrap();
    let got: Vec<Vec<u8>> = scan.records.iter().map(|r| r.payload.clone()).collect();
    assert_eq!(got, all);
    assert_eq!(scan.records[2].header.codec, CODEC_LZ4);
    assert_eq!(
        scan.records[3].header.synced_end as u64,
        scan.records[3].offset
    );
    assert_eq!(scan.valid_end, a.offset());
    let huge = vec![0u8; RECORD_PAYLOAD_MAX as usize + 1];
    assert_eq!(
        PreparedRecord::new(&huge, None).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
}

/// A staged record refused for its size changes nothing, and a sync that
/// cannot write the staged records fails the appender.
#[test]
fn staging_refuses_what_append_refuses_and_a_failed_write_fails_the_appender() {
    use strata_fs::{FaultFs, Op};
    let mem = Arc::new(MemFs::new());
    let fs = FaultFs::new(mem.clone());
    let path = Path::new("/f");
    let mut a = Appender::create(fs.create(path).unwrap(), &TEST, 0, 1, None).unwrap();
    let huge = vec![0u8; RECORD_PAYLOAD_MAX as usize + 1];
    let before = a.offset();
    let err = a.stage(&[&huge]).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(a.offset(), before);
    assert!(a.take_staged().is_none());
    a.stage(&[b"x"]).unwrap();
    fs.fail_once_after(Op::Write, 0, libc_eio());
    assert!(a.sync().is_err());
    assert!(a.failed());
    assert!(a.stage(&[b"y"]).is_err());
}

/// EIO, without a libc dependency for one number.
fn libc_eio() -> i32 {
    5
}
