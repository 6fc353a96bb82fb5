//! Path normalization for the in-memory file system.
//!
//! A path becomes its list of normal components: `/a/./b/../c` and `a/c` are
//! both `["a", "c"]`. Relative paths are taken from the root, since `MemFs`
//! has no working directory; `..` at the root stays at the root, as in Unix.

use std::io;
use std::path::{Component, Path, PathBuf};

/// A normalized path: its components from the root.
pub(super) type Key = Vec<String>;

/// Returns the components of `path`; fails with `InvalidInput` on names that
/// are not UTF-8 (Strata never creates them).
pub(super) fn normalize(path: &Path) -> io::Result<Key> {
    let mut key = Vec::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                key.pop();
            }
            Component::Normal(name) => match name.to_str() {
                Some(name) => key.push(name.to_owned()),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "MemFs supports only UTF-8 names",
                    ))
                }
            },
        }
    }
    Ok(key)
}

/// Splits a file path into its directory and its name; the root has no name.
pub(super) fn split(path: &Path) -> io::Result<(Key, String)> {
    let mut dir = normalize(path)?;
    match dir.pop() {
        Some(name) => Ok((dir, name)),
        None => Err(io::Error::from_raw_os_error(libc::EISDIR)),
    }
}

/// Returns the absolute path a key stands for, as `MemFs` reports it.
pub(super) fn to_path(key: &Key) -> PathBuf {
    let mut path = PathBuf::from("/");
    path.extend(key);
    path
}

/// Returns the key of `name` in directory `dir`.
pub(super) fn join(dir: &Key, name: &str) -> Key {
    let mut key = dir.clone();
    key.push(name.to_owned());
    key
}
