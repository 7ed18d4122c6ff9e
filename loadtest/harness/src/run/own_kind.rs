//! Scenarios of a kind of their own (`kind:` in the file): not a Job workload on a fleet but a
//! runner in `run/<kind>.rs` that starts its own sim and processes. What they share: finding
//! the file by name or path, and telling a file's kind.

use std::path::{Path, PathBuf};

/// The text of scenario `name_or_path`: a file, or `<name>.yaml` in the scenarios folder.
pub fn read_spec(name_or_path: &str) -> std::io::Result<String> {
    let path = Path::new(name_or_path);
    let path: PathBuf = if path.is_file() {
        path.to_path_buf()
    } else {
        crate::scenario::scenarios_dir().join(format!("{name_or_path}.yaml"))
    };
    std::fs::read_to_string(path)
}

/// Whether scenario `name_or_path` is a file of `kind`.
pub fn is_of_kind(name_or_path: &str, kind: &str) -> bool {
    read_spec(name_or_path).is_ok_and(|text| {
        serde_yaml::from_str::<serde_yaml::Value>(&text).is_ok_and(|v| v["kind"].as_str() == Some(kind))
    })
}
