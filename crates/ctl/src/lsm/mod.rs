//! `strata-ctl lsm`: dump, check and stats of an lsm directory, read only,
//! through the engine's own decoders (the manifest replay is the one
//! `open` uses, so the tool and the engine never disagree on what a
//! directory holds).

mod blob;
mod check;
mod dump;

use std::path::{Path, PathBuf};

use strata_fs::FileSystem;
use strata_lsm::db::inspect::{replay_manifest, ManifestState};
use strata_lsm::{ObsoleteFiles, Options};

pub use blob::dump_blob;
pub use check::check;
pub use dump::{dump, dump_sst, stats};

/// Options under which any valid manifest replays: the most levels a
/// family may have (the directory's own options are not known here).
fn inspect_options() -> Options {
    let mut o = Options::default();
    o.default_column_family.compaction.num_levels = 16;
    o
}

/// Replays the manifest of `dir`: `Ok(None)` without CURRENT.
fn manifest_state(fs: &dyn FileSystem, dir: &Path) -> strata_lsm::Result<Option<ManifestState>> {
    let (queue, _rx) = ObsoleteFiles::channel();
    replay_manifest(fs, dir, &inspect_options(), &queue)
}

fn sst_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(strata_lsm::compaction::sst_file_name(number))
}

/// Bytes as a short string (KiB, MiB, GiB).
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.2} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// A key for printing: text when printable, hex otherwise.
fn show_key(k: &[u8]) -> String {
    if k.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}", String::from_utf8_lossy(k))
    } else {
        let hex: String = k.iter().take(32).map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{}", if k.len() > 32 { ".." } else { "" })
    }
}
