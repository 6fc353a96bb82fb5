//! The `ingest_mutated` fuzz oracle (`fuzz/src/ingest.rs`, included by
//! path) on deterministic mutations of valid external files: every byte
//! flipped in turn, truncations, and each mode. An input the fuzzer finds
//! replays here; freeze one at the end as a named regression test.
//! `--ignored write_fuzz_seeds` writes the target's seed corpus.

#[path = "../fuzz/src/ingest.rs"]
mod ingest;

use ingest::{ingest_mutated, valid_file};

#[test]
fn valid_files_ingest_in_every_mode() {
    for mode in 0..4u8 {
        for file in [valid_file(3, 10, false), valid_file(0, 30, true)] {
            let mut data = vec![mode];
            data.extend_from_slice(&file);
            ingest_mutated(&data);
        }
    }
}

#[test]
fn flipped_bytes_and_truncations_never_change_the_database_on_error() {
    let file = valid_file(2, 12, true);
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    // Every 7th byte flipped (a different bit each time) keeps the run short.
    for at in (0..file.len()).step_by(7) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut data = vec![(rng % 4) as u8];
        data.extend_from_slice(&file);
        data[1 + at] ^= 1 << (rng % 8);
        ingest_mutated(&data);
    }
    for len in [0, 1, 10, file.len() / 2, file.len() - 1] {
        let mut data = vec![0u8];
        data.extend_from_slice(&file[..len]);
        ingest_mutated(&data);
    }
}

#[test]
#[ignore = "writes the fuzz target's seed corpus"]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/ingest_mutated");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, mode, file) in [
        ("ingest", 0u8, valid_file(3, 10, false)),
        ("replace_range", 1, valid_file(0, 30, true)),
        ("move", 2, valid_file(5, 4, false)),
    ] {
        let mut data = vec![mode];
        data.extend_from_slice(&file);
        std::fs::write(dir.join(name), data).unwrap();
    }
}
