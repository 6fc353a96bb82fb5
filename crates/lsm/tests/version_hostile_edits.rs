//! Edits that break a rule are refused with a typed error, and neither the
//! builder's state nor the installed version changes: deleting a file that
//! is not there, adding a number twice, overlapping L1+ ranges, a level out
//! of range, an inverted file, a number never allocated, a log number going
//! back, another column family.

mod version_support;

use std::sync::Arc;

use strata_lsm::{EditError, InstallError, VersionBuilder, VersionEdit};
use version_support::*;

fn refused(edit: VersionEdit) -> EditError {
    let (inst, _rx) = installer();
    install(
        &inst,
        &[edit_with_log(
            &[
                (0, desc(1, 0, 9, 1, 1)),
                (1, desc(2, 10, 19, 2, 2)),
                (1, desc(3, 30, 39, 3, 3)),
            ],
            5,
        )],
    )
    .unwrap();
    let before = inst.load_full();
    let err = match install(&inst, &[edit]) {
        Err(InstallError::Edit(e)) => e,
        other => panic!("expected a refused edit, got {other:?}"),
    };
    assert!(
        Arc::ptr_eq(&before, &inst.load_full()),
        "the installed state is unchanged"
    );
    assert_eq!(before.version.total_files(), 3);
    err
}

fn edit_with_log(added: &[(u8, strata_lsm::FileDesc)], log: u64) -> VersionEdit {
    VersionEdit {
        log_number: Some(log),
        ..edit(added, &[])
    }
}

#[test]
fn deleting_a_file_that_is_not_there() {
    assert_eq!(
        refused(edit(&[], &[(1, 9)])),
        EditError::DeleteMissing {
            level: 1,
            number: 9
        }
    );
    assert_eq!(
        refused(edit(&[], &[(2, 2)])),
        EditError::DeleteMissing {
            level: 2,
            number: 2
        }
    );
    // Deleting twice in one edit.
    assert_eq!(
        refused(edit(&[], &[(1, 2), (1, 2)])),
        EditError::DeleteMissing {
            level: 1,
            number: 2
        }
    );
}

#[test]
fn adding_a_number_twice() {
    assert_eq!(
        refused(edit(&[(3, desc(2, 100, 109, 1, 1))], &[])),
        EditError::DuplicateNumber {
            level: 1,
            number: 2
        }
    );
    assert_eq!(
        refused(edit(
            &[(0, desc(7, 100, 109, 1, 1)), (0, desc(7, 100, 109, 1, 1))],
            &[]
        )),
        EditError::DuplicateNumber {
            level: 0,
            number: 7
        }
    );
}

#[test]
fn overlapping_ranges_in_l1_and_below() {
    for (lo, hi, other) in [
        (15, 25, 2),
        (5, 10, 2),
        (19, 30, 2),
        (20, 30, 3),
        (0, 100, 2),
        (39, 40, 3),
        (12, 13, 2),
    ] {
        assert_eq!(
            refused(edit(&[(1, desc(8, lo, hi, 1, 1))], &[])),
            EditError::Overlap {
                level: 1,
                number: 8,
                other
            },
            "{lo}..={hi}"
        );
    }
    // Two added files overlapping each other.
    assert_eq!(
        refused(edit(
            &[(4, desc(8, 0, 5, 1, 1)), (4, desc(9, 5, 6, 1, 1))],
            &[]
        )),
        EditError::Overlap {
            level: 4,
            number: 9,
            other: 8
        }
    );
    // Adjacent but disjoint is fine, and L0 may overlap.
    let (inst, _rx) = installer();
    install(
        &inst,
        &[edit(
            &[(1, desc(1, 0, 9, 1, 1)), (1, desc(2, 10, 19, 1, 1))],
            &[],
        )],
    )
    .unwrap();
    install(
        &inst,
        &[edit(
            &[(0, desc(3, 0, 9, 2, 2)), (0, desc(4, 0, 9, 3, 3))],
            &[],
        )],
    )
    .unwrap();
    assert_eq!(numbers(&inst.load().version, 0), [4, 3]);
}

#[test]
fn other_rules() {
    assert_eq!(
        refused(edit(&[(7, desc(8, 0, 1, 1, 1))], &[])),
        EditError::LevelOutOfRange {
            level: 7,
            levels: 7
        }
    );
    assert_eq!(
        refused(edit(&[], &[(200, 1)])),
        EditError::LevelOutOfRange {
            level: 200,
            levels: 7
        }
    );
    assert!(matches!(
        refused(edit(&[(2, desc(8, 9, 1, 1, 1))], &[])),
        EditError::InvalidFile(_)
    ));
    assert!(matches!(
        refused(edit(&[(2, desc(8, 1, 9, 5, 1))], &[])),
        EditError::InvalidFile(_)
    ));
    let mut unallocated = edit(&[(2, desc(50, 100, 101, 1, 1))], &[]);
    unallocated.next_file_number = Some(10);
    assert_eq!(
        refused(unallocated),
        EditError::NumberNotAllocated {
            number: 50,
            next: 10
        }
    );
    assert_eq!(
        refused(edit_with_log(&[], 4)),
        EditError::WentBackwards {
            field: "log number",
            from: 5,
            to: 4
        }
    );
    let other_cf = VersionEdit {
        column_family: 3,
        ..VersionEdit::new()
    };
    assert_eq!(
        refused(other_cf),
        EditError::ColumnFamily {
            expected: 0,
            found: 3
        }
    );
    // A move that changes the file's description.
    assert!(matches!(
        refused(edit(&[(2, desc(2, 10, 20, 2, 2))], &[(1, 2)])),
        EditError::InvalidFile(_)
    ));
}

#[test]
fn a_refused_edit_leaves_the_builder_as_it_was() {
    let (v, _rx) = empty_version();
    let mut b = VersionBuilder::new(&v);
    b.apply(&edit(&[(1, desc(1, 0, 9, 1, 1))], &[])).unwrap();
    // Half of this edit is fine (the deletion), half is not.
    let bad = edit(
        &[(1, desc(2, 5, 15, 2, 2)), (1, desc(3, 5, 6, 2, 2))],
        &[(1, 1)],
    );
    assert!(b.apply(&bad).is_err());
    let built = b.build();
    assert_eq!(numbers(&built.version, 1), [1]);
    assert!(built.removed.is_empty());
    assert_eq!(v.total_files(), 0, "the base never changes");
}
