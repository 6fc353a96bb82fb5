//! Fuzzes `ingest_mutated`: see `src/ingest.rs` for what must hold.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_lsm_fuzz::ingest::ingest_mutated(data));
