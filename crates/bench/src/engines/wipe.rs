//! Clearing an engine's directory between runs, safely: every engine's
//! `wipe` names the files it writes, and nothing is removed unless every file
//! in the directory is one of them, so a mistyped `--dir` never costs the user
//! their data.

use std::path::Path;

use strata_fs::{DiskFs, FileSystem};

use super::EngineError;

/// Removes every file of `dir` if `is_ours` accepts all of their names; does
/// nothing if `dir` does not exist. Refuses, removing nothing, if any name is
/// not the engine's.
pub fn wipe_dir(
    engine: &'static str,
    dir: &Path,
    is_ours: impl Fn(&str) -> bool,
) -> Result<(), EngineError> {
    let fs = DiskFs::new();
    if !fs.exists(dir) {
        return Ok(());
    }
    let names = fs
        .list(dir)
        .map_err(|e| EngineError::new(engine, "list", format!("{}: {e}", dir.display())))?;
    if let Some(stranger) = names.iter().find(|n| !is_ours(n)) {
        return Err(EngineError::msg(
            engine,
            "wipe",
            format!(
                "{} holds {stranger:?}, which {engine} did not write; \
                 pass an empty directory or one used by an earlier run",
                dir.display()
            ),
        ));
    }
    for name in &names {
        let path = dir.join(name);
        fs.remove(&path)
            .map_err(|e| EngineError::new(engine, "wipe", format!("{}: {e}", path.display())))?;
    }
    // The removals' journal commit (and, on a file system mounted with
    // `discard`, the freed blocks' discards) happens here, not in the next
    // run's first sync, whichever engine that is.
    fs.sync_dir(dir)
        .map_err(|e| EngineError::new(engine, "wipe", format!("sync {}: {e}", dir.display())))
}
