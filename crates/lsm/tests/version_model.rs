//! Model test: random edits (L0 adds that overlap, L1+ adds that may or may
//! not overlap, deletions right and wrong, moves between levels) applied by
//! the builder and by a `BTreeMap` model of files per level. After every
//! edit the builder accepts exactly what the model accepts, and the levels,
//! sizes, point lookups and range lookups agree.

mod version_support;

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use strata_lsm::{FileNumber, Version, VersionBuilder, VersionEdit};
use version_support::*;

/// A file of the model: level, key range, seqno.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ModelFile {
    level: u8,
    lo: u32,
    hi: u32,
    seq: u64,
}

#[derive(Debug, Clone)]
enum Op {
    /// Add a new file at `level` over `lo..=lo+span`.
    Add { level: u8, lo: u32, span: u32 },
    /// Delete the `pick`-th existing file from its level.
    Delete { pick: usize },
    /// Delete the `pick`-th existing file from a wrong level, or a number
    /// never allocated.
    DeleteWrong { pick: usize, level: u8 },
    /// Move the `pick`-th existing file to `level`.
    Move { pick: usize, level: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..7, 0u32..1000, 0u32..40).prop_map(|(level, lo, span)| Op::Add { level, lo, span }),
        2 => any::<usize>().prop_map(|pick| Op::Delete { pick }),
        1 => (any::<usize>(), 0u8..8).prop_map(|(pick, level)| Op::DeleteWrong { pick, level }),
        1 => (any::<usize>(), 0u8..7).prop_map(|(pick, level)| Op::Move { pick, level }),
    ]
}

struct Model {
    files: BTreeMap<FileNumber, ModelFile>,
    next: FileNumber,
}

impl Model {
    fn overlaps(&self, f: &ModelFile) -> bool {
        f.level > 0
            && self
                .files
                .values()
                .any(|g| g.level == f.level && g.lo <= f.hi && f.lo <= g.hi)
    }

    /// Applies deletions then additions, as the builder does; None if the
    /// edit must be refused.
    fn apply(
        &self,
        deleted: &[(u8, FileNumber)],
        added: &[(u8, FileNumber, ModelFile)],
    ) -> Option<BTreeMap<FileNumber, ModelFile>> {
        let mut next = Model {
            files: self.files.clone(),
            next: self.next,
        };
        for &(level, n) in deleted {
            if level >= 7 || next.files.get(&n)?.level != level {
                return None;
            }
            next.files.remove(&n);
        }
        for &(_, n, f) in added {
            if next.files.contains_key(&n) || next.overlaps(&f) {
                return None;
            }
            next.files.insert(n, f);
        }
        Some(next.files)
    }
}

fn compare(v: &Version, model: &BTreeMap<FileNumber, ModelFile>, probes: &[u32]) {
    v.check().unwrap();
    assert_eq!(v.total_files(), model.len());
    for level in 0..7u8 {
        let mut expect: Vec<(FileNumber, ModelFile)> = model
            .iter()
            .filter(|(_, f)| f.level == level)
            .map(|(n, f)| (*n, *f))
            .collect();
        if level == 0 {
            expect.sort_by_key(|(n, f)| std::cmp::Reverse((f.seq, *n)));
        } else {
            expect.sort_by_key(|(_, f)| f.lo);
        }
        let want: Vec<FileNumber> = expect.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers(v, level.into()), want, "level {level}");
        let bytes: u64 = expect.iter().map(|(n, _)| 1000 + n).sum();
        assert_eq!(v.level_bytes(level.into()), bytes);
        for w in probes.windows(2) {
            let (a, b) = (w[0].min(w[1]), w[0].max(w[1]));
            let got: Vec<FileNumber> = v
                .files_in_range(level.into(), Some(&key(a)), Some(&key(b)))
                .iter()
                .map(|f| f.number())
                .collect();
            let want: Vec<FileNumber> = expect
                .iter()
                .filter(|(_, f)| f.lo <= b && a <= f.hi)
                .map(|(n, _)| *n)
                .collect();
            assert_eq!(got, want, "level {level} range {a}..={b}");
        }
    }
    for &p in probes {
        let got: Vec<(u8, FileNumber)> = v
            .files_for_key(&key(p))
            .into_iter()
            .map(|(l, f)| (l, f.number()))
            .collect();
        let mut want: Vec<(u8, FileNumber, u64)> = model
            .iter()
            .filter(|(_, f)| f.lo <= p && p <= f.hi)
            .map(|(n, f)| (f.level, *n, f.seq))
            .collect();
        want.sort_by_key(|&(l, n, s)| (l, std::cmp::Reverse((s, n))));
        let want: Vec<(u8, FileNumber)> = want.into_iter().map(|(l, n, _)| (l, n)).collect();
        assert_eq!(got, want, "files for key {p}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn builder_agrees_with_a_btreemap_model(
        steps in prop::collection::vec((prop::collection::vec(prop::collection::vec(op(), 1..4), 1..3), prop::collection::vec(0u32..1040, 6)), 1..40),
    ) {
        let (mut current, _rx) = empty_version();
        let mut model = Model { files: BTreeMap::new(), next: 1 };
        for (edits, probes) in steps {
            // Several edits per build: each is accepted or refused whole.
            let mut builder = VersionBuilder::new(&current);
            for ops in edits {
                let existing: Vec<(FileNumber, ModelFile)> = model.files.iter().map(|(n, f)| (*n, *f)).collect();
                let mut e = VersionEdit::new();
                let mut added = Vec::new();
                for op in ops {
                    match op {
                        Op::Add { level, lo, span } => {
                            let n = model.next;
                            model.next += 1;
                            let f = ModelFile { level, lo, hi: lo + span, seq: n };
                            e.add_file(level, desc(n, f.lo, f.hi, n, n));
                            added.push((level, n, f));
                        }
                        Op::Delete { pick } if !existing.is_empty() => {
                            let (n, f) = existing[pick % existing.len()];
                            e.delete_file(f.level, n);
                        }
                        Op::DeleteWrong { pick, level } if !existing.is_empty() && pick % 2 == 0 => {
                            let (n, f) = existing[pick % existing.len()];
                            let wrong = if level == f.level { (level + 1) % 8 } else { level };
                            e.delete_file(wrong, n);
                        }
                        Op::DeleteWrong { level, .. } => {
                            e.delete_file(level % 7, 1_000_000);
                        }
                        Op::Move { pick, level } if !existing.is_empty() => {
                            let (n, f) = existing[pick % existing.len()];
                            e.delete_file(f.level, n);
                            e.add_file(level, desc(n, f.lo, f.hi, f.seq, f.seq));
                            added.push((level, n, ModelFile { level, ..f }));
                        }
                        _ => {}
                    }
                }
                e.next_file_number = Some(model.next);
                let expect = model.apply(&e.deleted, &added);
                let got = builder.apply(&e);
                prop_assert_eq!(got.is_ok(), expect.is_some(), "edit {:?}: {:?}", e, got);
                if let Some(files) = expect {
                    model.files = files;
                }
            }
            let base = current.clone();
            let built = builder.build();
            current = built.version;
            compare(&current, &model.files, &probes);
            // The base is a value: building never changed it.
            base.check().unwrap();
            prop_assert!(Arc::strong_count(&base) >= 1);
        }
    }
}
