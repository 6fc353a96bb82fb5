//! Oracles shared by the fuzz targets in `fuzz_targets/` and by the proptests
//! in `crates/lsm/tests/sst_decoders_arbitrary.rs`, which include this file
//! by path: an input that breaks one driver replays in the other, and a crash
//! the fuzzer finds becomes a named regression test by pasting its bytes.
//!
//! Each oracle feeds arbitrary bytes to one decoder of `docs/format/sst.md`
//! and asserts what must hold of whatever it accepts. A panic, from the code
//! under test or from an assertion here, is a bug.

pub mod blob;
pub mod decoders;
pub mod ingest;
pub mod log_files;
pub mod open_dir;
