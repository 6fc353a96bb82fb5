//! Fuzzes `index_section`: see `src/decoders.rs` for what must hold of any answer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_raftlog_fuzz::decoders::index_section(data));
