//! Oracles shared by the fuzz targets in `fuzz_targets/` and by the proptests in
//! `crates/raftlog/tests/decoders_arbitrary.rs`, which include these files by
//! path. So an input that breaks one driver replays in the other, and a crash the
//! fuzzer finds becomes a named regression test by pasting its bytes.
//!
//! Each oracle feeds arbitrary bytes to one decoder (or to recovery) and asserts
//! what must hold of whatever it answers. A panic, from the code under test or
//! from an assertion here, is a bug.

pub mod decoders;
pub mod recover_dir;
