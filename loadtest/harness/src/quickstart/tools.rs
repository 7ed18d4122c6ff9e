//! The kubectl the printed commands name: one that exists on this machine, installed by
//! `scripts/setup` (kubectl 1.37 into `.tools/bin`) when there is none.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The workspace this binary was built from (where `scripts/setup` and `.tools/` are).
pub fn workspace() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

/// `BATCHFLEET_KUBECTL` when it names a file, else the workspace's `.tools/bin/kubectl`, else
/// `kubectl` on `path`.
pub fn locate_kubectl(
    env_override: Option<OsString>,
    workspace: &Path,
    path: Option<OsString>,
) -> Option<PathBuf> {
    let candidates = env_override
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace.join(".tools/bin/kubectl")])
        .chain(path.iter().flat_map(std::env::split_paths).map(|dir| dir.join("kubectl")));
    candidates.into_iter().find(|p| p.is_file()).map(|p| std::path::absolute(&p).unwrap_or(p))
}

/// What the printed commands can use for kubectl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kubectl {
    Found(PathBuf),
    /// None here; this tells how to get one.
    Missing {
        how: String,
    },
}

/// Finds kubectl, running `scripts/setup` (its output into `log`) when there is none.
pub fn kubectl_or_install(log: &Path) -> Kubectl {
    let workspace = workspace();
    let find =
        || locate_kubectl(std::env::var_os("BATCHFLEET_KUBECTL"), &workspace, std::env::var_os("PATH"));
    if let Some(found) = find() {
        return Kubectl::Found(found);
    }
    let setup = workspace.join("scripts/setup");
    let how = format!(
        "kubectl is not installed: run {} (it puts kubectl 1.37 into {}), or put any kubectl on PATH",
        setup.display(),
        workspace.join(".tools/bin").display()
    );
    if !setup.is_file() {
        return Kubectl::Missing { how };
    }
    eprintln!(
        "kubectl is not installed; installing it with {} (output in {})",
        setup.display(),
        log.display()
    );
    let output = std::fs::OpenOptions::new().create(true).append(true).open(log);
    let (stdout, stderr) = match output.and_then(|f| Ok((f.try_clone()?, f))) {
        Ok((a, b)) => (Stdio::from(a), Stdio::from(b)),
        Err(_) => (Stdio::null(), Stdio::null()),
    };
    let ran =
        std::process::Command::new(&setup).current_dir(&workspace).stdout(stdout).stderr(stderr).status();
    match (ran, find()) {
        (Ok(status), Some(found)) if status.success() => Kubectl::Found(found),
        (ran, _) => {
            tracing::warn!(?ran, "scripts/setup did not install kubectl");
            Kubectl::Missing { how }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_the_override_then_the_workspace_then_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let workspace = dir.path().join("ws");
        let on_path = dir.path().join("bin");
        std::fs::create_dir_all(workspace.join(".tools/bin")).expect("mkdir");
        std::fs::create_dir_all(&on_path).expect("mkdir");
        let path = Some(OsString::from(on_path.as_os_str()));
        assert_eq!(locate_kubectl(None, &workspace, path.clone()), None, "none anywhere");

        std::fs::write(on_path.join("kubectl"), "").expect("write");
        let found = locate_kubectl(None, &workspace, path.clone()).expect("on PATH");
        assert!(found.ends_with("bin/kubectl"), "{found:?}");

        std::fs::write(workspace.join(".tools/bin/kubectl"), "").expect("write");
        let found = locate_kubectl(None, &workspace, path.clone()).expect("in the workspace");
        assert!(found.ends_with(".tools/bin/kubectl"), "{found:?}");

        let missing = dir.path().join("nowhere/kubectl");
        let found = locate_kubectl(Some(missing.into_os_string()), &workspace, path.clone());
        assert!(found.is_some_and(|f| f.ends_with(".tools/bin/kubectl")), "a missing override is skipped");
        let custom = dir.path().join("kubectl-1.37");
        std::fs::write(&custom, "").expect("write");
        let found = locate_kubectl(Some(custom.clone().into_os_string()), &workspace, path);
        assert_eq!(found, Some(custom));
    }
}
