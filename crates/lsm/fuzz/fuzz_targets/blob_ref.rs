//! Fuzzes `blob_ref`: see `src/blob.rs` for what must hold of any answer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_lsm_fuzz::blob::blob_ref(data));
