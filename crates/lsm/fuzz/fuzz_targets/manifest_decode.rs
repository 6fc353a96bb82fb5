//! Fuzzes the manifest's record decoder and reader: see `src/log_files.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_lsm_fuzz::log_files::manifest_decode(data));
