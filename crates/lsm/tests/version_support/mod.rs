//! Helpers shared by the `version_*` tests: file descriptions over a simple
//! key space (`k00000042`), and a fresh installer.

#![allow(dead_code)]

use std::sync::Arc;

use crossbeam_channel::Receiver;
use strata_lsm::version::ObsoleteFile;
use strata_lsm::{
    FileDesc, FileNumber, InstallError, Installer, InternalKey, Memtable, MemtableList,
    ObsoleteFiles, ReadState, SeqNo, ValueKind, Version, VersionEdit, NUM_LEVELS_DEFAULT,
};

/// The user key of integer `k`; the fixed width keeps byte order = integer order.
pub fn key(k: u32) -> Vec<u8> {
    format!("k{k:08}").into_bytes()
}

/// A file over user keys `lo..=hi` with seqnos `seq_lo..=seq_hi`.
pub fn desc(number: FileNumber, lo: u32, hi: u32, seq_lo: SeqNo, seq_hi: SeqNo) -> FileDesc {
    FileDesc {
        number,
        size: 1000 + number,
        smallest: InternalKey::new(&key(lo), seq_hi, ValueKind::Put),
        largest: InternalKey::new(&key(hi), seq_lo, ValueKind::Put),
        smallest_seqno: seq_lo,
        largest_seqno: seq_hi,
        blob_refs: Vec::new(),
        range_tombstones: false,
    }
}

/// An edit adding `files` and deleting `deleted`, naming a next file number
/// above every added one.
pub fn edit(added: &[(u8, FileDesc)], deleted: &[(u8, FileNumber)]) -> VersionEdit {
    VersionEdit {
        next_file_number: added.iter().map(|(_, d)| d.number + 1).max(),
        added: added.to_vec(),
        deleted: deleted.to_vec(),
        ..VersionEdit::default()
    }
}

/// An empty version of the default column family and its obsolete queue.
pub fn empty_version() -> (Arc<Version>, Receiver<ObsoleteFile>) {
    let (queue, rx) = ObsoleteFiles::channel();
    let v = Version::new(0, NUM_LEVELS_DEFAULT, queue).unwrap();
    (Arc::new(v), rx)
}

/// An installer over an empty version, memtable 1 active, visible 0.
pub fn installer() -> (Installer, Receiver<ObsoleteFile>) {
    let (version, rx) = empty_version();
    let state = ReadState {
        version,
        active: Arc::new(Memtable::new(1)),
        immutables: MemtableList::new(),
        visible: 0,
    };
    (Installer::new(state), rx)
}

/// Installs `edits` with a persist hook that succeeds.
pub fn install(
    installer: &Installer,
    edits: &[VersionEdit],
) -> Result<Arc<ReadState>, InstallError> {
    installer.install(
        strata_lsm::Install {
            edits,
            ..Default::default()
        },
        &mut |_: &[VersionEdit], _: &Arc<Version>| Ok(()),
    )
}

/// The numbers of a level's files, in the level's order.
pub fn numbers(v: &Version, level: usize) -> Vec<FileNumber> {
    v.level(level).unwrap().iter().map(|f| f.number()).collect()
}
