//! A value built from files, built again when one of them changes.
//!
//! Each use stats the files (a few microseconds, cheap beside a TLS handshake), so a rotated
//! certificate is used by the next connection, with no timer and no restart. A Kubernetes Secret
//! volume swaps its files at once through a symlink; a rotation by hand may write the certificate
//! and the key one after the other, and a build from such a half-rotated set fails: the previous
//! value stays in use until the files agree again.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What identifies one version of a file: a replaced file changes at least one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &PathBuf) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(FileStamp { modified: meta.modified().ok(), len: meta.len(), inode })
}

type Build<T, E> = Box<dyn Fn() -> Result<T, E> + Send + Sync>;

/// `T` as last built from `paths`.
pub struct Reloading<T, E = crate::TlsError> {
    what: &'static str,
    paths: Vec<PathBuf>,
    build: Build<T, E>,
    current: Mutex<(Vec<Option<FileStamp>>, Arc<T>)>,
}

impl<T, E: std::fmt::Display> Reloading<T, E> {
    /// Builds the first value; an error here is a configuration error of the process.
    pub fn new(
        what: &'static str,
        paths: Vec<PathBuf>,
        build: impl Fn() -> Result<T, E> + Send + Sync + 'static,
    ) -> Result<Self, E> {
        let stamps = paths.iter().map(stamp).collect();
        let first = build()?;
        Ok(Self { what, paths, build: Box::new(build), current: Mutex::new((stamps, Arc::new(first))) })
    }

    /// The value for the files as they are now.
    pub fn current(&self) -> Arc<T> {
        let stamps: Vec<_> = self.paths.iter().map(stamp).collect();
        let mut current = self.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if current.0 != stamps {
            // Remembered even when the build fails, so a bad file is reported once, not on
            // every connection; the next change to any of the files is tried again.
            current.0 = stamps;
            match (self.build)() {
                Ok(value) => {
                    tracing::info!(what = self.what, files = ?self.paths, "reloaded");
                    current.1 = Arc::new(value);
                }
                Err(e) => {
                    tracing::warn!(what = self.what, error = %e, "reload failed: the previous files stay in use");
                }
            }
        }
        current.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number_in(path: &std::path::Path) -> Result<u32, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        text.trim().parse().map_err(|_| format!("{text:?} is not a number"))
    }

    /// Replaces the file whole (a new inode), as a Secret volume update or `mv` does.
    fn replace(path: &std::path::Path, text: &str) {
        let staged = path.with_extension("staged");
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, path).unwrap();
    }

    #[test]
    fn a_changed_file_is_built_again_and_a_bad_one_keeps_the_last_good_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("value");
        std::fs::write(&path, "1").unwrap();
        let watched = path.clone();
        let reloading = Reloading::new("test", vec![path.clone()], move || number_in(&watched)).unwrap();
        assert_eq!(*reloading.current(), 1);
        replace(&path, "2");
        assert_eq!(*reloading.current(), 2);
        replace(&path, "half-written");
        assert_eq!(*reloading.current(), 2, "the last good value stays");
        replace(&path, "3");
        assert_eq!(*reloading.current(), 3);
    }

    #[test]
    fn a_bad_file_at_start_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing");
        let watched = path.clone();
        assert!(Reloading::new("test", vec![path], move || number_in(&watched)).is_err());
    }
}
