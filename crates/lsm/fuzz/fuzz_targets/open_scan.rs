//! Fuzzes `open_scan`: see `src/decoders.rs` for what must hold of any answer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_lsm_fuzz::decoders::open_scan(data));
