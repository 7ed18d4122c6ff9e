//! The cluster a run goes against: the sim the harness starts (with its audit log), or any
//! cluster through a kubeconfig (`--kubeconfig`), where the harness starts only the controllers
//! `--fleet` asks for and audits from watches. What a target cannot do is refused before the run
//! starts.

use std::path::{Path, PathBuf};

use anyhow::Context;
use batchfleet_sim::{SimCluster, SimConfig};
use jiff::Timestamp;

use crate::scenario::{FaultAction, Scenario};

/// Which controllers the harness starts.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FleetChoice {
    /// What the scenario's `fleet` says: coordinators and workers, or one standalone worker.
    #[default]
    Scenario,
    /// One `fleet-worker --standalone` owning every shard, whatever the scenario's `fleet` says.
    Standalone,
    /// None: the controllers are already deployed on the cluster (needs --kubeconfig).
    None,
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Run against the cluster of this kubeconfig (its current context) instead of starting
    /// the sim: the workload goes into namespaces of its own, the audits come from watches
    /// (those that need the sim's audit log are reported as skipped), and no API faults.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Which controllers the harness starts: `scenario` (as its `fleet` says), `standalone`
    /// (one `fleet-worker --standalone`), or `none` (already deployed; needs --kubeconfig).
    #[arg(long, value_enum, default_value_t = FleetChoice::Scenario)]
    pub fleet: FleetChoice,
}

/// `scenario` as `target` runs it, or why it cannot (the run exits 2): the faults that need a
/// process the harness will not start are refused here, before anything starts.
pub fn fit(mut scenario: Scenario, target: &TargetArgs) -> Result<Scenario, String> {
    let external = target.kubeconfig.is_some();
    if target.fleet == FleetChoice::None && !external {
        return Err("--fleet none needs --kubeconfig: on the sim the harness starts, nothing else \
                    runs the controllers"
            .into());
    }
    if scenario.scaling.is_some() && (external || target.fleet != FleetChoice::Scenario) {
        return Err("scaling: a scaling run starts each fleet, and the baseline, on a fresh sim of its \
                    own; drop --kubeconfig and --fleet"
            .into());
    }
    if target.fleet == FleetChoice::Standalone {
        scenario.fleet.standalone = true;
    }
    for (i, fault) in scenario.faults.iter().enumerate() {
        let action = fault.action.name();
        let refusal = match fault.action {
            FaultAction::ApiFaults if external => Some(
                "api-faults need the sim the harness starts (its fault injection); drop --kubeconfig"
                    .to_string(),
            ),
            FaultAction::LoseNode if external => Some(
                "lose-node needs the sim the harness starts (it stops a simulated kubelet); drop \
                 --kubeconfig"
                    .to_string(),
            ),
            _ if target.fleet == FleetChoice::None => Some(format!(
                "{action} needs the fleet's processes, and with --fleet none the harness starts none"
            )),
            FaultAction::ApiFaults => None,
            _ if scenario.fleet.standalone => Some(format!(
                "{action} needs a fleet of coordinators and workers, and the harness starts one \
                 standalone worker"
            )),
            _ => None,
        };
        if let Some(reason) = refusal {
            return Err(format!("faults[{i}] ({action} at {}): {reason}", fault.at));
        }
    }
    if target.fleet == FleetChoice::None && scenario.fleet.cron_clock_speed != 1.0 {
        return Err("fleet.cron_clock_speed: the deployed controllers run on the wall clock \
                    (--fleet none); only workers the harness starts take --test-clock"
            .into());
    }
    if external {
        // On a shared cluster the run's namespaces are its own: a second run, or other work,
        // is neither audited nor collided with.
        scenario.workload.namespace_prefix =
            format!("{}-{}", scenario.workload.namespace_prefix, run_suffix());
    }
    Ok(scenario)
}

/// A name part unique to this run among runs on one cluster: the UTC time and the process id.
fn run_suffix() -> String {
    format!("{}-{}", Timestamp::now().strftime("%H%M%S"), std::process::id() % 10_000)
}

/// The label on every Job and pod of the run's workload (`loadtest.batchfleet.io/run`), which
/// the run's watches select on.
pub const RUN_LABEL: &str = "loadtest.batchfleet.io/run";

/// The value of [`RUN_LABEL`] for this run: a label value (≤ 63 characters, alphanumeric ends).
pub fn run_label_value() -> String {
    format!("r{}-{}", Timestamp::now().strftime("%Y%m%dt%H%M%S"), std::process::id())
}

/// The cluster the run goes against.
pub struct Target {
    pub client: kube::Client,
    /// The kubeconfig the fleet's processes are given.
    pub kubeconfig: PathBuf,
    /// The sim, when the harness started it (dropped last: it stops with the run).
    pub sim: Option<SimCluster>,
    /// The sim's audit log, when the harness started it.
    pub audit_log: Option<PathBuf>,
}

impl Target {
    /// The sim (its audit log and kubeconfig in `out`), or the cluster of `kubeconfig`.
    pub async fn start(scenario: &Scenario, kubeconfig: Option<&Path>, out: &Path) -> anyhow::Result<Self> {
        if let Some(path) = kubeconfig {
            let path = std::fs::canonicalize(path).with_context(|| format!("reading {}", path.display()))?;
            let kc = kube::config::Kubeconfig::read_from(&path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            let config =
                kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                    .await
                    .with_context(|| format!("using kubeconfig {}", path.display()))?;
            let client = kube::Client::try_from(config)?;
            let version = client
                .apiserver_version()
                .await
                .with_context(|| format!("reaching the cluster of {}", path.display()))?;
            tracing::info!(kubeconfig = %path.display(), version = %version.git_version, "cluster reached");
            return Ok(Self { client, kubeconfig: path, sim: None, audit_log: None });
        }
        let audit_log = out.join("audit.log");
        let sim = SimCluster::start(SimConfig {
            nodes: scenario.sim.nodes,
            kubelet_events: scenario.sim.kubelet_events,
            event_ttl: scenario.sim.event_ttl.0,
            audit_log: Some(audit_log.clone()),
            ..SimConfig::default()
        })
        .await
        .context("starting the sim cluster")?;
        let kubeconfig = out.join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig)?;
        tracing::info!(url = %sim.url(), "sim cluster started");
        let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
        Ok(Self { client, kubeconfig, sim: Some(sim), audit_log: Some(audit_log) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(faults: &str) -> Scenario {
        let text = format!("duration: 5s\nworkload: {{}}\nfaults:\n{faults}");
        crate::scenario::parse(&text).map_err(|e| format!("{e:?}")).expect("parses")
    }

    fn external(fleet: FleetChoice) -> TargetArgs {
        TargetArgs { kubeconfig: Some("kubeconfig".into()), fleet }
    }

    #[test]
    fn faults_on_processes_the_harness_does_not_start_are_refused() {
        let kill = scenario("  - {at: 3s, action: kill-worker, worker: w-0}\n");
        let e = fit(kill.clone(), &external(FleetChoice::None)).expect_err("refused");
        assert!(
            e.starts_with("faults[0] (kill-worker at 3s): kill-worker needs the fleet's processes"),
            "{e}"
        );
        let e = fit(kill.clone(), &external(FleetChoice::Standalone)).expect_err("refused");
        assert!(e.contains("the harness starts one standalone worker"), "{e}");
        assert!(fit(kill, &external(FleetChoice::Scenario)).is_ok());
        let api = scenario("  - {at: 1s, action: api-faults, api: {}}\n");
        let e = fit(api.clone(), &external(FleetChoice::Scenario)).expect_err("refused");
        assert!(e.contains("api-faults need the sim the harness starts"), "{e}");
        assert!(fit(api, &TargetArgs::default()).is_ok());
    }

    #[test]
    fn an_external_run_gets_namespaces_of_its_own_and_none_needs_a_kubeconfig() {
        let none = TargetArgs { kubeconfig: None, fleet: FleetChoice::None };
        assert!(
            fit(scenario("  []\n"), &none).expect_err("refused").contains("--fleet none needs --kubeconfig")
        );
        let fitted = fit(scenario("  []\n"), &external(FleetChoice::None)).expect("fits");
        assert!(fitted.workload.namespace_prefix.starts_with("lt-"), "{}", fitted.workload.namespace_prefix);
        let local = fit(scenario("  []\n"), &TargetArgs::default()).expect("fits");
        assert_eq!(local.workload.namespace_prefix, "lt");
    }
}
