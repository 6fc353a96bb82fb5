//! Unit tests of levels and versions; the scenarios are in `tests/version_*.rs`.
