//! A hole in the append queue, or a sealed file whose header is unreadable, is
//! never mistaken for a clean end.
//!
//! Proves: with one (or two) files removed from the middle of the append queue,
//! `open` fails with `Error::MissingFile` naming exactly the (first) missing
//! file, in every recovery mode; a sealed file whose header has a flipped bit,
//! is zeroed, is cut short, or names another file fails `open` with
//! `Error::Corruption` naming that file at offset 0, in `AbsoluteConsistency`
//! and `TolerateTailCorruption`.

mod fault_support;

use std::sync::Arc;

use fault_support::{
    append_files, config, open, overwrite, path, read_file, workload, write_all, Model, DIR, MODES,
};
use strata_fs::{FileSystem, MemFs};
use strata_raftlog::format::FILE_HEADER_LEN;
use strata_raftlog::{Engine, Error, RecoveryMode};

/// A way of damaging a file at rest.
type Damage<'a> = Box<dyn Fn(&MemFs) + 'a>;

/// A closed directory of at least five append files, and its state.
fn setup() -> (MemFs, Vec<String>, Model) {
    let base = MemFs::new();
    let engine = Engine::open_with_fs(
        DIR,
        config(RecoveryMode::TolerateTailCorruption),
        Arc::new(base.clone()),
    )
    .unwrap();
    let batches = workload(51, 160, 4, &[12, 90, 600, 2000]);
    write_all(&engine, &batches, 5);
    engine.close().unwrap();
    let names = append_files(&base);
    assert!(names.len() >= 5, "{names:?}");
    // The untouched directory opens, in every mode, with everything in it.
    let want = Model::replay(&batches);
    for mode in MODES {
        let engine = open(Arc::new(base.deep_clone()), config(mode), "untouched").unwrap();
        want.check(&engine).unwrap();
    }
    (base, names, want)
}

#[test]
fn a_missing_middle_file_fails_open_in_every_mode() {
    let (base, names, _) = setup();
    let mut cases = 0;
    for (i, name) in names.iter().enumerate() {
        if i == 0 || i + 1 == names.len() {
            continue; // Only a file with neighbours on both sides is a hole.
        }
        // One file gone, then it and the next (unless that is the last).
        let mut holes = vec![vec![name.clone()]];
        if i + 2 < names.len() {
            holes.push(vec![name.clone(), names[i + 1].clone()]);
        }
        for removed in holes {
            for mode in MODES {
                let case = format!("{removed:?} removed, {mode:?}");
                let fs = base.deep_clone();
                for r in &removed {
                    fs.remove(&path(r)).unwrap();
                }
                match open(Arc::new(fs), config(mode), &case) {
                    Err(Error::MissingFile { path: p }) => {
                        assert_eq!(p, path(&removed[0]), "{case}");
                    }
                    Err(e) => panic!("{case}: wrong error {e}"),
                    Ok(_) => panic!("{case}: opened with a hole in the log"),
                }
                cases += 1;
            }
        }
    }
    println!("{cases} cases over {} files", names.len());
    assert!(cases >= 3 * 3);
}

#[test]
fn a_damaged_header_in_a_sealed_file_is_named() {
    let (base, names, _) = setup();
    let mut cases = 0;
    // Every sealed file: all but the last.
    for (i, name) in names[..names.len() - 1].iter().enumerate() {
        let header = read_file(&base, name)[..FILE_HEADER_LEN].to_vec();
        let other = read_file(&base, &names[i + 1])[..FILE_HEADER_LEN].to_vec();
        let mut damages: Vec<(String, Damage)> = Vec::new();
        for byte in 0..FILE_HEADER_LEN as u64 {
            let bit = byte % 8;
            damages.push((
                format!("bit {bit} of byte {byte} flipped"),
                Box::new(move |fs: &MemFs| fs.corrupt(&path(name), byte, 1 << bit).unwrap()),
            ));
        }
        damages.push((
            "header zeroed".into(),
            Box::new(|fs: &MemFs| overwrite(fs, name, 0, &[0; FILE_HEADER_LEN])),
        ));
        damages.push((
            "header of the next file".into(),
            Box::new(move |fs: &MemFs| overwrite(fs, name, 0, &other)),
        ));
        damages.push((
            "cut inside the header".into(),
            Box::new(|fs: &MemFs| fs.set_len_raw(&path(name), 10).unwrap()),
        ));
        assert_eq!(header.len(), FILE_HEADER_LEN);
        for (what, damage) in &damages {
            for mode in [
                RecoveryMode::AbsoluteConsistency,
                RecoveryMode::TolerateTailCorruption,
            ] {
                let case = format!("{name}: {what}, {mode:?}");
                let fs = base.deep_clone();
                damage(&fs);
                match open(Arc::new(fs), config(mode), &case) {
                    Err(Error::Corruption {
                        path: p, offset, ..
                    }) => {
                        assert_eq!((p, offset), (path(name), 0), "{case}");
                    }
                    Err(e) => panic!("{case}: wrong error {e}"),
                    Ok(_) => panic!("{case}: opened"),
                }
                cases += 1;
            }
        }
    }
    println!("{cases} cases");
}
