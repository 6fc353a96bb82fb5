//! Fuzzes opening a directory of arbitrary files: see `src/open_dir.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    strata_lsm_fuzz::open_dir::open_dir(data);
});
