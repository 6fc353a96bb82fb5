//! Blob files: where key-value separation puts large values, so that
//! compaction moves a small reference instead of rewriting the value.
//!
//! A [`BlobFileWriter`] packs values into checksummed blocks compressed per
//! block (never per value), each record carrying its key and sequence
//! number, and hands out a [`BlobRef`] per value once its block is sealed;
//! an SST stores that reference, with kind `BlobIndex`, in place of the
//! value. A [`BlobFileReader`] answers a reference with its value, checked
//! against the key that led to it, and walks a file record by record for
//! GC and `strata-ctl`. The bytes are specified in `docs/format/blob.md`.
//!
//! One concept per file: `format` (header, footer, records, references),
//! `dictionary` (a file's optional zstd dictionary), `writer`, `reader`.
//!
//! Invariants every file of this module keeps: no decoder panics on any
//! input, and a bad byte is a typed error naming the file and the offset,
//! never a wrong value.

pub mod dictionary;
pub mod format;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

pub use format::{BlobRecord, BlobRef, Footer as BlobFooter, Header as BlobHeader};
pub use reader::{BlobBlock, BlobFileReader, Span};
pub use writer::{BlobFileInfo, BlobFileWriter, BlobWriterOptions};
