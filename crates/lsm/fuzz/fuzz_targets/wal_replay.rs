//! Fuzzes WAL replay over one or two files: see `src/log_files.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_lsm_fuzz::log_files::wal_replay(data));
