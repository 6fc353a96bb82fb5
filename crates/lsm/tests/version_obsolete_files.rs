//! A file removed by an edit is queued for deletion only after every
//! version, snapshot and iterator-like holder that can reach it is dropped;
//! a file still in the current version is never queued, moved files keep
//! one owner, and a failed install queues nothing. Blob files follow the
//! same rule.

mod version_support;

use std::sync::Arc;

use strata_lsm::version::{BlobFileDesc, ObsoleteFile};
use strata_lsm::{Error, Install, ReadState, Version, VersionEdit};
use version_support::*;

/// What an iterator keeps: the state it was opened on.
struct PinnedIterator {
    _state: Arc<ReadState>,
}

#[test]
fn removed_file_queued_after_every_snapshot_and_iterator_is_dropped() {
    let (inst, rx) = installer();
    install(
        &inst,
        &[edit(
            &[(1, desc(1, 0, 9, 1, 1)), (1, desc(2, 10, 19, 2, 2))],
            &[],
        )],
    )
    .unwrap();
    let snapshot = inst.load_full();
    let iter = PinnedIterator {
        _state: inst.load_full(),
    };
    // Compaction replaces file 1 by file 3.
    install(&inst, &[edit(&[(2, desc(3, 0, 9, 1, 1))], &[(1, 1)])]).unwrap();
    assert!(inst.load().version.file(1).is_none());
    assert!(rx.try_recv().is_err(), "the snapshot still reaches file 1");
    drop(snapshot);
    assert!(rx.try_recv().is_err(), "the iterator still reaches file 1");
    drop(iter);
    assert_eq!(rx.try_recv().unwrap(), ObsoleteFile::Table(1));
    assert!(rx.try_recv().is_err(), "files 2 and 3 are current");
}

#[test]
fn dropping_an_old_version_never_queues_a_file_the_new_one_holds() {
    let (inst, rx) = installer();
    install(&inst, &[edit(&[(0, desc(1, 0, 9, 1, 1))], &[])]).unwrap();
    let old = inst.load_full();
    install(&inst, &[edit(&[(0, desc(2, 0, 9, 2, 2))], &[])]).unwrap();
    drop(old);
    let old_version: Arc<Version> = inst.load_full().version.clone();
    install(&inst, &[edit(&[(1, desc(3, 0, 9, 3, 3))], &[])]).unwrap();
    drop(old_version);
    assert!(rx.try_recv().is_err());
    assert_eq!(inst.load().version.total_files(), 3);
}

#[test]
fn a_moved_file_keeps_one_owner_and_is_queued_once() {
    let (inst, rx) = installer();
    install(&inst, &[edit(&[(1, desc(1, 0, 9, 1, 1))], &[])]).unwrap();
    let at_l1 = inst.load_full();
    // A trivial move: delete and add the same number one level down.
    install(&inst, &[edit(&[(2, desc(1, 0, 9, 1, 1))], &[(1, 1)])]).unwrap();
    let moved = inst.load_full();
    assert_eq!(moved.version.file(1).unwrap().0, 2);
    assert!(Arc::ptr_eq(
        at_l1.version.file(1).unwrap().1,
        moved.version.file(1).unwrap().1
    ));
    drop(moved);
    assert!(rx.try_recv().is_err(), "a move removes nothing");
    install(&inst, &[edit(&[], &[(2, 1)])]).unwrap();
    assert!(rx.try_recv().is_err(), "the L1 snapshot still reads file 1");
    drop(at_l1);
    assert_eq!(rx.try_recv().unwrap(), ObsoleteFile::Table(1));
    assert!(rx.try_recv().is_err());
}

/// A move out of L0 gives the file a new entry (the L0 one keeps its open
/// reader for the versions that hold it there): the file is still queued
/// once, when the last entry of either placement goes.
#[test]
fn a_file_moved_out_of_level0_is_queued_once_after_both_entries() {
    let (inst, rx) = installer();
    install(&inst, &[edit(&[(0, desc(1, 0, 9, 1, 1))], &[])]).unwrap();
    let at_l0 = inst.load_full();
    install(&inst, &[edit(&[(1, desc(1, 0, 9, 1, 1))], &[(0, 1)])]).unwrap();
    let moved = inst.load_full();
    let (level, entry) = moved.version.file(1).unwrap();
    assert_eq!(level, 1);
    assert!(entry.same_file(at_l0.version.file(1).unwrap().1));
    drop(moved);
    install(&inst, &[edit(&[], &[(1, 1)])]).unwrap();
    assert!(rx.try_recv().is_err(), "the L0 view still reads file 1");
    drop(at_l0);
    assert_eq!(rx.try_recv().unwrap(), ObsoleteFile::Table(1));
    assert!(rx.try_recv().is_err());
}

/// One edit that moves half of a level's files and replaces the other half
/// (a full compaction's shape): the moved keep their owners, the replaced
/// are queued once each. The moves are found by number, not by a search of
/// the edit's deletions per added file, which made such an edit cost n^2.
#[test]
fn one_edit_moving_and_replacing_many_files_keeps_the_moved_owners() {
    const N: u64 = 2_000;
    let (inst, rx) = installer();
    let files: Vec<(u8, strata_lsm::FileDesc)> = (1..=N)
        .map(|n| (1, desc(n, n as u32 * 10, n as u32 * 10 + 9, n, n)))
        .collect();
    install(&inst, &[edit(&files, &[])]).unwrap();
    let before = inst.load_full();
    let deleted: Vec<(u8, u64)> = (1..=N).map(|n| (1, n)).collect();
    // Odd numbers move to L2; even ones are rewritten as N + n.
    let added: Vec<(u8, strata_lsm::FileDesc)> = (1..=N)
        .map(|n| {
            let d = if n % 2 == 1 {
                desc(n, n as u32 * 10, n as u32 * 10 + 9, n, n)
            } else {
                desc(N + n, n as u32 * 10, n as u32 * 10 + 9, n, n)
            };
            (2, d)
        })
        .collect();
    install(&inst, &[edit(&added, &deleted)]).unwrap();
    let after = inst.load_full();
    assert_eq!(after.version.total_files(), N as usize);
    for n in (1..=N).step_by(2) {
        let (level, file) = after.version.file(n).unwrap();
        assert_eq!(level, 2);
        assert!(Arc::ptr_eq(before.version.file(n).unwrap().1, file));
    }
    drop(before);
    let mut queued: Vec<u64> = rx
        .try_iter()
        .map(|f| match f {
            ObsoleteFile::Table(n) => n,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    queued.sort_unstable();
    let replaced: Vec<u64> = (2..=N).step_by(2).collect();
    assert_eq!(queued, replaced);
}

#[test]
fn a_move_within_one_build_across_two_edits_keeps_the_file() {
    let (inst, rx) = installer();
    install(&inst, &[edit(&[(1, desc(1, 0, 9, 1, 1))], &[])]).unwrap();
    let old = inst.load_full();
    install(
        &inst,
        &[edit(&[], &[(1, 1)]), edit(&[(3, desc(1, 0, 9, 1, 1))], &[])],
    )
    .unwrap();
    drop(old);
    assert!(rx.try_recv().is_err());
    assert_eq!(inst.load().version.file(1).unwrap().0, 3);
}

#[test]
fn a_failed_persist_changes_nothing_and_queues_nothing() {
    let (inst, rx) = installer();
    install(&inst, &[edit(&[(1, desc(1, 0, 9, 1, 1))], &[])]).unwrap();
    let before = inst.load_full();
    let edits = [edit(&[(1, desc(2, 10, 19, 2, 2))], &[(1, 1)])];
    let err = inst
        .install(
            Install {
                edits: &edits,
                ..Default::default()
            },
            &mut |_: &[VersionEdit], _: &Arc<Version>| -> strata_lsm::Result<()> {
                Err(Error::InvalidArgument("disk full".into()))
            },
        )
        .unwrap_err();
    assert!(matches!(err, strata_lsm::InstallError::Persist(_)));
    assert!(Arc::ptr_eq(&before, &inst.load_full()));
    drop(before);
    assert!(
        rx.try_recv().is_err(),
        "file 1 is still current; file 2 was never installed"
    );
    assert_eq!(numbers(&inst.load().version, 1), [1]);
}

#[test]
fn a_blob_file_leaves_with_its_last_referencing_sst_and_is_queued_after_its_last_reader() {
    let (inst, rx) = installer();
    let blob = BlobFileDesc {
        number: 5,
        size: 1000,
        record_count: 3,
        value_bytes: 900,
    };
    let mut referencing = desc(1, 0, 9, 1, 1);
    referencing.blob_refs = vec![(5, 600)];
    let mut add = edit(&[(1, referencing), (1, desc(2, 10, 19, 2, 2))], &[]);
    add.add_blob_file(blob);
    add.next_file_number = Some(6);
    install(&inst, &[add]).unwrap();
    let v = inst.load().version.clone();
    assert_eq!(v.blob_file_count(), 1);
    assert_eq!(v.blob_live(5).bytes, 600);
    v.check().unwrap();
    drop(v);

    // A blob file an SST still references cannot be deleted.
    let mut early = VersionEdit::default();
    early.delete_blob_file(5);
    assert!(install(&inst, &[early]).is_err());

    // A compaction drops file 1 (its values were overwritten): blob file 5
    // has no reference left and leaves the version with it.
    let snapshot = inst.load_full();
    install(&inst, &[edit(&[], &[(1, 1)])]).unwrap();
    let v = inst.load().version.clone();
    assert!(v.blob_file(5).is_none());
    assert_eq!(v.blob_live(5).files, 0);
    v.check().unwrap();
    drop(v);
    assert_eq!(rx.try_recv().ok(), None, "the snapshot still reaches them");
    drop(snapshot);
    let mut queued: Vec<ObsoleteFile> = rx.try_iter().collect();
    queued.sort_by_key(|f| format!("{f:?}"));
    assert_eq!(queued, vec![ObsoleteFile::Blob(5), ObsoleteFile::Table(1)]);
}

#[test]
fn an_sst_referencing_a_blob_file_the_version_lacks_is_refused() {
    let (inst, _rx) = installer();
    let mut referencing = desc(1, 0, 9, 1, 1);
    referencing.blob_refs = vec![(7, 10)];
    let mut add = edit(&[(1, referencing)], &[]);
    add.next_file_number = Some(8);
    assert!(install(&inst, &[add]).is_err());
    assert_eq!(inst.load().version.total_files(), 0);
}
