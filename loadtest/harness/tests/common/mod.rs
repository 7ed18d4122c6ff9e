//! Running `loadtest run` on a scenario of the test's, as a user runs it.

use std::path::Path;
use std::process::Output;

use tokio::process::Command;

/// What a run left: its output, its report, and both as text for a failing assertion.
pub struct Ran {
    // Not every test binary that shares this module reads the exit status.
    #[allow(dead_code)]
    pub output: Output,
    pub report: serde_json::Value,
    pub shown: String,
}

/// `loadtest run <dir>/scenario.yaml --out <out> ARGS` with `yaml` as the scenario; its report
/// read from `out`.
pub async fn run_scenario(dir: &Path, yaml: &str, out: &Path, args: &[&std::ffi::OsStr]) -> Ran {
    let scenario = dir.join("scenario.yaml");
    std::fs::write(&scenario, yaml).expect("scenario written");
    let output = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .arg("run")
        .arg(&scenario)
        .arg("--out")
        .arg(out)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("loadtest runs");
    let shown = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report = std::fs::read(out.join("report.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| panic!("no report in {}\n{shown}", out.display()));
    Ran { output, report, shown }
}
