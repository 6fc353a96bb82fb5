//! Fuzzes `blob_file`: see `src/blob.rs` for what must hold of any answer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_lsm_fuzz::blob::blob_file(data));
