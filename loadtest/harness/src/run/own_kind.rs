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

/// The sim a runner starts in its run's folder, with what it wrote there.
pub struct RunSim {
    pub sim: batchfleet_sim::SimCluster,
    /// The sim's kubeconfig, for the processes the runner starts.
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
    /// Where the runner's processes log.
    pub logs_dir: PathBuf,
    pub audit_path: PathBuf,
}

/// Starts the sim of `config` with its audit log in `out` (`audit.log`), its kubeconfig written
/// there and a folder `logs/` made for the processes.
pub async fn start_sim(out: &Path, config: batchfleet_sim::SimConfig) -> anyhow::Result<RunSim> {
    use anyhow::Context;
    let logs_dir = out.join("logs");
    std::fs::create_dir_all(&logs_dir)?;
    let audit_path = out.join("audit.log");
    let sim = batchfleet_sim::SimCluster::start(batchfleet_sim::SimConfig {
        audit_log: Some(audit_path.clone()),
        ..config
    })
    .await
    .context("starting the sim cluster")?;
    let kubeconfig = out.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)?;
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
    Ok(RunSim { sim, kubeconfig, client, logs_dir, audit_path })
}

/// Writes `report` to `out/report.json` and prints each outcome as a PASS or FAIL line; answers
/// the report's path.
pub fn write_report<'a>(
    out: &Path,
    report: &impl serde::Serialize,
    outcomes: impl IntoIterator<Item = &'a batchfleet_audits::Outcome>,
) -> anyhow::Result<PathBuf> {
    let path = out.join("report.json");
    std::fs::write(&path, serde_json::to_vec_pretty(report)?)?;
    for o in outcomes {
        println!(
            "{} {}: {} (target: {})",
            if o.passed { "PASS" } else { "FAIL" },
            o.name,
            o.measured,
            o.target
        );
    }
    Ok(path)
}
