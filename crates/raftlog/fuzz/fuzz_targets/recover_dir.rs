//! Fuzzes recovery: the input becomes a directory of log files that the engine
//! opens in every recovery mode; see `src/recover_dir.rs` for the layout and for
//! what must hold.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_raftlog_fuzz::recover_dir::run(data));
