//! The scenario files of `loadtest run` (YAML, `loadtest/scenarios/`): the fleet to start, the
//! workload to send, the faults to inject over time, and the goals that make the run pass. The
//! schema is this module's types; an unknown or malformed field is an error naming it. See
//! `loadtest/scenarios/README.md` for the schema with examples.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Why a scenario could not be used; `loadtest run` exits 2 on any of them.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("no scenario {name:?}: neither a file nor one of {dir} ({known})")]
    NotFound { name: String, dir: String, known: String },
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {source}")]
    Parse { path: String, source: serde_yaml::Error },
    #[error("{path}: {field}: {reason}")]
    Invalid { path: String, field: String, reason: String },
}

/// A duration as humans write it in YAML: `500ms`, `10s`, `2m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Span(pub Duration);

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map(Span).map_err(|e| {
            serde::de::Error::custom(format!("{text:?} is not a duration like 500ms or 10s: {e}"))
        })
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// One line on what the scenario shows.
    #[serde(default)]
    pub description: String,
    /// How long Jobs are created and faults injected.
    pub duration: Span,
    /// How long after `duration` the run waits for every Job to finish (and every TTL to expire).
    #[serde(default = "default_settle")]
    pub settle: Span,
    #[serde(default)]
    pub sim: SimSpec,
    #[serde(default)]
    pub fleet: FleetSpec,
    pub workload: WorkloadSpec,
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Faults at random, bounded and seeded; expanded into `faults` when parsed.
    #[serde(default)]
    pub chaos: Option<crate::chaos::Chaos>,
    #[serde(default)]
    pub goals: Goals,
    /// Makes the run a scaling run: the workload on each fleet size, and the baseline.
    #[serde(default)]
    pub scaling: Option<ScalingSpec>,
    /// Measures each `kill-worker`'s recovery with probe Jobs in the victim's shards.
    #[serde(default)]
    pub crash_recovery: Option<CrashRecoverySpec>,
}

/// `loadtest run crash-recovery`: at each `kill-worker`, the shards the victim held (by the
/// leader's shard map) each get a probe Job right after the SIGKILL, in a namespace of that
/// shard; a shard has recovered when its probe's first pod is created.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashRecoverySpec {
    /// The probe Jobs' pods (one completion each).
    #[serde(default)]
    pub probe: PodBehaviour,
}

/// `loadtest run scaling`: the same workload on a fresh sim for each fleet size (one
/// coordinator, `workers` workers, each at `fleet.kube_api_qps`), and on one `fleet-worker
/// --standalone` at kube-controller-manager's defaults (QPS 20, burst 30, 5 syncs per
/// controller); the throughputs give the scaling curve and its goals.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingSpec {
    /// The fleet sizes, ascending.
    pub workers: Vec<usize>,
    /// Also the standalone baseline.
    #[serde(default)]
    pub baseline: bool,
    /// Goal: throughput at the largest size ÷ (size × throughput at the smallest, per worker).
    #[serde(default = "default_efficiency_goal")]
    pub efficiency_goal: f64,
    /// Goal: throughput of 4 workers (the largest size up to 4) ÷ the baseline's.
    #[serde(default = "default_baseline_ratio_goal")]
    pub baseline_ratio_goal: f64,
}

fn default_efficiency_goal() -> f64 {
    0.9
}
fn default_baseline_ratio_goal() -> f64 {
    4.0
}

fn default_settle() -> Span {
    Span(Duration::from_secs(120))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimSpec {
    /// Simulated nodes the scheduler binds pods to.
    #[serde(default = "default_nodes")]
    pub nodes: usize,
    /// Whether the sim's kubelet and scheduler record pod Events (Scheduled, Pulled, Created,
    /// Started, …), as a real cluster's do. Off for runs whose scale the sim could not hold with
    /// them: they are the cluster's load, not the fleet's, and nothing deletes them during a run
    /// (a real API server keeps Events an hour).
    #[serde(default = "yes")]
    pub kubelet_events: bool,
    /// How long an Event outlives its last write: kube-apiserver's `--event-ttl`, whose default
    /// (1h) keeps every Event of a run; a large cluster sets it shorter.
    #[serde(default = "default_event_ttl")]
    pub event_ttl: Span,
}

fn default_event_ttl() -> Span {
    Span(batchfleet_sim::cluster::event_ttl::DEFAULT_EVENT_TTL)
}

fn yes() -> bool {
    true
}

fn default_nodes() -> usize {
    4
}

impl Default for SimSpec {
    fn default() -> Self {
        Self { nodes: default_nodes(), kubelet_events: true, event_ttl: default_event_ttl() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Store {
    #[default]
    Kubernetes,
    Etcd,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    /// One `fleet-worker --standalone` owning every shard instead of coordinators and workers.
    #[serde(default)]
    pub standalone: bool,
    #[serde(default = "one")]
    pub coordinators: usize,
    #[serde(default = "three")]
    pub workers: usize,
    #[serde(default)]
    pub store: Store,
    /// Virtual shards (a power of two).
    #[serde(default = "default_shards")]
    pub shards: u32,
    /// The workers' `--lease-duration`; `default`: no flag, the binary's own default.
    #[serde(default = "default_worker_lease")]
    pub worker_lease: LeaseSetting,
    /// The coordinators' `--worker-lease-margin`; `default`: no flag, the binary's own default.
    #[serde(default = "default_lease_margin")]
    pub lease_margin: LeaseSetting,
    /// The coordinators' `--leader-elect-lease-duration` (renew deadline ¾ of it, retry a tenth).
    #[serde(default = "default_leader_lease")]
    pub leader_lease: Span,
    /// The CronJob controller's clock runs this many times faster than the wall clock
    /// (`fleet-worker --test-clock`), so that minutes of schedule pass in seconds.
    #[serde(default = "one_f64")]
    pub cron_clock_speed: f64,
    /// The workers' `--kube-api-qps` and `--kube-api-burst` (kube-controller-manager's 20 and 30
    /// when absent): the client rate each worker's controllers may write at.
    #[serde(default)]
    pub kube_api_qps: Option<f64>,
    #[serde(default)]
    pub kube_api_burst: Option<u32>,
    /// More `fleet-worker` flags, as given (`--concurrent-cron-job-syncs`, …).
    #[serde(default)]
    pub worker_args: Vec<String>,
}

fn one() -> usize {
    1
}
fn three() -> usize {
    3
}
fn one_f64() -> f64 {
    1.0
}
fn default_shards() -> u32 {
    64
}
fn default_worker_lease() -> LeaseSetting {
    LeaseSetting::Set(Span(Duration::from_secs(15)))
}
fn default_lease_margin() -> LeaseSetting {
    LeaseSetting::Set(Span(Duration::from_secs(2)))
}

/// The longest lease and margin the binaries default to (`fleet-worker --lease-duration`,
/// `fleet-coordinator --worker-lease-margin`): the audits' bounds under `default`.
const BINARY_DEFAULT_LEASE_AT_MOST: Duration = Duration::from_secs(15);
const BINARY_DEFAULT_MARGIN_AT_MOST: Duration = Duration::from_secs(2);

/// A lease flag of the fleet's processes: a duration the harness passes, or `default` (no flag:
/// the binary's own default, which may depend on the store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseSetting {
    Set(Span),
    BinaryDefault,
}

impl<'de> Deserialize<'de> for LeaseSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "default" {
            return Ok(Self::BinaryDefault);
        }
        humantime::parse_duration(&text).map(|d| Self::Set(Span(d))).map_err(|e| {
            serde::de::Error::custom(format!("{text:?} is neither `default` nor a duration like 10s: {e}"))
        })
    }
}

impl LeaseSetting {
    /// The flag's value, when the harness passes one.
    pub fn flag(self) -> Option<String> {
        match self {
            Self::Set(span) => Some(humantime::format_duration(span.0).to_string()),
            Self::BinaryDefault => None,
        }
    }

    fn at_most(self, binary_default: Duration) -> Duration {
        match self {
            Self::Set(span) => span.0,
            Self::BinaryDefault => binary_default,
        }
    }
}

impl FleetSpec {
    /// The workers' lease: as set, or the longest the binary defaults to (for bounds).
    pub fn worker_lease_at_most(&self) -> Duration {
        self.worker_lease.at_most(BINARY_DEFAULT_LEASE_AT_MOST)
    }

    /// The coordinators' margin: as set, or the longest the binary defaults to (for bounds).
    pub fn lease_margin_at_most(&self) -> Duration {
        self.lease_margin.at_most(BINARY_DEFAULT_MARGIN_AT_MOST)
    }
}
fn default_leader_lease() -> Span {
    Span(Duration::from_secs(15))
}

impl Default for FleetSpec {
    fn default() -> Self {
        Self {
            standalone: false,
            coordinators: 1,
            workers: 3,
            store: Store::Kubernetes,
            shards: default_shards(),
            worker_lease: default_worker_lease(),
            lease_margin: default_lease_margin(),
            leader_lease: default_leader_lease(),
            cron_clock_speed: 1.0,
            kube_api_qps: None,
            kube_api_burst: None,
            worker_args: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Namespaces `<namespace_prefix>-<i>`, spread over the shards, created first; Jobs go
    /// round-robin over them.
    #[serde(default = "default_namespaces")]
    pub namespaces: usize,
    #[serde(default = "default_namespace_prefix")]
    pub namespace_prefix: String,
    #[serde(default)]
    pub jobs: Vec<JobSpec>,
    #[serde(default)]
    pub cronjobs: Vec<CronJobSpec>,
}

fn default_namespaces() -> usize {
    8
}
fn default_namespace_prefix() -> String {
    "lt".into()
}

/// How many candidate names `namespace_names` tries before it stops spreading.
const NAME_CANDIDATES: usize = 1_000_000;

impl WorkloadSpec {
    /// `<prefix>-<i>` names spread evenly over `shards`: names differing only in their last
    /// characters share FNV-1a's high bits (one shard), so each is taken only while its shard
    /// holds less than its share.
    pub fn namespace_names(&self, shards: u32) -> Vec<String> {
        let share = self.namespaces.div_ceil(shards.max(1) as usize);
        let mut per_shard = std::collections::HashMap::new();
        let mut names = Vec::with_capacity(self.namespaces);
        for i in 0..NAME_CANDIDATES {
            if names.len() == self.namespaces {
                return names;
            }
            let name = format!("{}-{i}", self.namespace_prefix);
            let taken = per_shard.entry(batchfleet_audits::agents::shard_of(&name, shards)).or_insert(0);
            if *taken < share {
                *taken += 1;
                names.push(name);
            }
        }
        // Out of candidates: the rest unspread.
        let mut i = NAME_CANDIDATES;
        while names.len() < self.namespaces {
            names.push(format!("{}-{i}", self.namespace_prefix));
            i += 1;
        }
        names
    }
}

/// What a pod does, through the sim's pod annotations.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodBehaviour {
    /// `sim.batchfleet.io/run`: time from Running to exit (default 1s).
    #[serde(default)]
    pub run: Option<Span>,
    /// `sim.batchfleet.io/run-by-index`: `i=duration,…`.
    #[serde(default)]
    pub run_by_index: Option<String>,
    /// `sim.batchfleet.io/exit-code`: 0 succeeds, else fails (default 0).
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// `sim.batchfleet.io/fail-attempts`: the first n pods (per index) fail with `exit_code`.
    #[serde(default)]
    pub fail_attempts: Option<i32>,
}

/// A stream of Jobs of one shape.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Name prefix: Jobs are `<name>-<n>`.
    pub name: String,
    /// How many Jobs.
    pub count: usize,
    /// Jobs created per second (over all namespaces); they all go at once when absent.
    #[serde(default)]
    pub rate: Option<f64>,
    /// Seconds after the start before the first.
    #[serde(default)]
    pub start: Span,
    #[serde(default)]
    pub completions: Option<i32>,
    #[serde(default)]
    pub parallelism: Option<i32>,
    #[serde(default)]
    pub indexed: bool,
    #[serde(default)]
    pub backoff_limit: Option<i32>,
    #[serde(default)]
    pub ttl_seconds_after_finished: Option<i32>,
    #[serde(default)]
    pub pod: PodBehaviour,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CronJobSpec {
    pub name: String,
    /// Standard five-field schedule; its Jobs are named after the scheduled minute, so at most
    /// one a minute.
    pub schedule: String,
    /// In the first this-many namespaces (default: all).
    #[serde(default)]
    pub namespaces: Option<usize>,
    #[serde(default)]
    pub pod: PodBehaviour,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultAction {
    /// SIGKILL a worker.
    KillWorker,
    /// SIGTERM a worker: it asks to be drained, then exits.
    TerminateWorker,
    /// SIGSTOP a worker, SIGCONT it `resume_after` later.
    PauseWorker,
    /// Drain a worker through the admin API (as `fleetctl drain`).
    DrainWorker,
    UndrainWorker,
    /// SIGTERM a worker, wait for it to exit, start it again with the same id (one step of a
    /// rolling restart).
    RestartWorker,
    /// Start one more worker.
    AddWorker,
    /// SIGKILL the leading coordinator.
    KillLeader,
    /// Sets the sim's API faults (`api`): latency, error rates, watch drops; an empty `api`
    /// clears them.
    ApiFaults,
    /// Deletes a node (`node`) with its pods on it, as a cloud's node controller does with a
    /// vanished machine: its pods are orphans for PodGC, their Jobs must replace them.
    LoseNode,
    /// SIGKILL etcd (the etcd store), and start it again on its data `resume_after` later.
    RestartEtcd,
    /// Restart every worker, one at a time, in StatefulSet order (the highest ordinal first), as
    /// `kubectl rollout restart statefulset` does: SIGTERM, wait for the exit, start the same
    /// id, wait until its `/readyz` answers 200, next.
    RollingRestart,
}

impl FaultAction {
    /// As the scenario file names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::KillWorker => "kill-worker",
            Self::TerminateWorker => "terminate-worker",
            Self::PauseWorker => "pause-worker",
            Self::DrainWorker => "drain-worker",
            Self::UndrainWorker => "undrain-worker",
            Self::RestartWorker => "restart-worker",
            Self::AddWorker => "add-worker",
            Self::KillLeader => "kill-leader",
            Self::ApiFaults => "api-faults",
            Self::RestartEtcd => "restart-etcd",
            Self::LoseNode => "lose-node",
            Self::RollingRestart => "rolling-restart",
        }
    }

    fn needs_worker(self) -> bool {
        !matches!(
            self,
            Self::AddWorker
                | Self::KillLeader
                | Self::ApiFaults
                | Self::RestartEtcd
                | Self::LoseNode
                | Self::RollingRestart
        )
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// Time since the workload started.
    pub at: Span,
    pub action: FaultAction,
    /// The worker id (`w-0`, …) the action is for.
    #[serde(default)]
    pub worker: Option<String>,
    /// For `pause-worker` and `restart-etcd`: how long it stays stopped.
    #[serde(default)]
    pub resume_after: Option<Span>,
    /// For `kill-worker`: start it again under its id this long after the kill, as a
    /// StatefulSet recreates the pod (absent: it stays dead).
    #[serde(default)]
    pub restart_after: Option<Span>,
    /// For `api-faults`: what the sim does to requests from then on.
    #[serde(default)]
    pub api: Option<ApiFaults>,
    /// For `lose-node`: the sim node (`sim-node-<i>`).
    #[serde(default)]
    pub node: Option<String>,
}

/// The sim's fault injection (its admin endpoint's `FaultConfig`), checked field by field.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiFaults {
    /// Seeds the sim's choices, so that a run can be repeated.
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub rules: Vec<ApiFaultRule>,
    /// Close each watch after this many events.
    #[serde(default)]
    pub watch_drop_after_events: Option<u64>,
    /// Close each watch after this long.
    #[serde(default)]
    pub watch_drop_after: Option<Span>,
    /// Hold every batch of watch events this long.
    #[serde(default)]
    pub watch_delay: Option<Span>,
}

/// Requests of a verb and resource (empty: all) get latency and errors at rates.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiFaultRule {
    #[serde(default)]
    pub verb: String,
    /// Plural resource, optionally with its subresource (`jobs/status`).
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub latency: Option<Span>,
    /// Status code → probability in [0, 1]; 400, 403, 409, 422, 429, 500, 503 and 504 are
    /// honoured.
    #[serde(default)]
    pub error_rates: std::collections::BTreeMap<u16, f64>,
    /// Retry-After seconds sent with 429 and 503.
    #[serde(default)]
    pub retry_after_seconds: u64,
    /// The injected errors' message, e.g. an admission webhook's denial.
    #[serde(default)]
    pub message: Option<String>,
}

impl ApiFaults {
    /// As the sim takes it.
    pub fn to_sim(&self) -> batchfleet_sim::faults::FaultConfig {
        use batchfleet_sim::faults::{ErrorRate, FaultConfig, FaultRule, WatchFaults};
        FaultConfig {
            seed: self.seed,
            rules: self
                .rules
                .iter()
                .map(|r| FaultRule {
                    verb: r.verb.clone(),
                    resource: r.resource.clone(),
                    latency_ms: r.latency.map_or(0, |l| l.0.as_millis() as u64),
                    error_rates: r
                        .error_rates
                        .iter()
                        .map(|(code, rate)| ErrorRate { code: *code, rate: *rate })
                        .collect(),
                    retry_after_seconds: r.retry_after_seconds,
                    message: r.message.clone(),
                })
                .collect(),
            watch: WatchFaults {
                drop_after_events: self.watch_drop_after_events,
                drop_after_seconds: self.watch_drop_after.map(|d| d.0.as_secs_f64()),
                delay_ms: self.watch_delay.map(|d| d.0.as_millis() as u64),
            },
        }
    }
}

/// The goals a run passes or fails on, besides the audits; each is checked only when set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goals {
    /// p99 of Job creation → first pod seen.
    #[serde(default)]
    pub first_pod_p99: Option<Span>,
    /// p99 of Job creation → its last pod seen.
    #[serde(default)]
    pub all_pods_created_p99: Option<Span>,
    /// p99 of Job creation → finished (Complete or Failed) seen.
    #[serde(default)]
    pub finished_p99: Option<Span>,
    /// The most any TTL deletion came after the Job's expiry.
    #[serde(default)]
    pub ttl_lag_max: Option<Span>,
    /// Peak RSS of any fleet process, in MiB.
    #[serde(default)]
    pub peak_rss_mib: Option<f64>,
    /// The least rate of pod lifecycles end to end: the pods the finished Jobs count, per
    /// second from the workload's start to the last finish.
    #[serde(default)]
    pub pod_lifecycles_per_second: Option<f64>,
    /// With a `rolling-restart`: the p99 of its hand-over gaps (from the audit log: when a shard
    /// needed its new owner, after the old owner's last write, until the new owner's first write).
    #[serde(default)]
    pub rollout_gap_p99: Option<Span>,
    /// With a `rolling-restart`: the seconds shards with work had no acting owner over the
    /// rollout, at most this much per move.
    #[serde(default)]
    pub rollout_unowned_per_move: Option<Span>,
    /// With a `rolling-restart`: its moves (the shards' epochs in the stored map, after − before)
    /// at most this many times the shards.
    #[serde(default)]
    pub rollout_moves_per_shard: Option<f64>,
    /// With a `rolling-restart`: the p99 of creation → finished of the Jobs alive during the
    /// rollout, at most this many times that of the Jobs that lived wholly before it (the
    /// baseline, from 5 s after the workload's start).
    #[serde(default)]
    pub rollout_finished_p99_ratio: Option<f64>,
    /// p99 over the kills of `crash_recovery` of kill → every shard of the victim acting again
    /// (its probe Job's first pod created): one duration, or one per store.
    #[serde(default)]
    pub recovery_p99: Option<PerStore>,
    /// The most worker lease lapses outside the pauses of that worker (a slow renewal judged a
    /// death).
    #[serde(default)]
    pub false_expiries_max: Option<usize>,
}

impl Goals {
    /// Whether a goal needs a `rolling-restart` to measure.
    fn needs_rollout(&self) -> bool {
        self.rollout_gap_p99.is_some()
            || self.rollout_unowned_per_move.is_some()
            || self.rollout_moves_per_shard.is_some()
            || self.rollout_finished_p99_ratio.is_some()
    }
}

/// A goal that depends on the coordination store: one duration for both, or
/// `{etcd: 5s, kubernetes: 8s}` (a store left out has no goal).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum PerStore {
    Both(Span),
    Each(StoreSpans),
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSpans {
    #[serde(default)]
    pub etcd: Option<Span>,
    #[serde(default)]
    pub kubernetes: Option<Span>,
}

impl PerStore {
    /// The goal for a fleet on `store`.
    pub fn on(&self, store: Store) -> Option<Span> {
        match (self, store) {
            (Self::Both(span), _) => Some(*span),
            (Self::Each(each), Store::Etcd) => each.etcd,
            (Self::Each(each), Store::Kubernetes) => each.kubernetes,
        }
    }
}

/// Where `loadtest run NAME` looks for NAME.yaml.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// A scenario by file path, or by name in [`scenarios_dir`]; answers its name and content.
pub fn load(name_or_path: &str) -> Result<(String, Scenario), ScenarioError> {
    let as_path = Path::new(name_or_path);
    let path = if as_path.is_file() {
        as_path.to_path_buf()
    } else {
        let named = scenarios_dir().join(format!("{name_or_path}.yaml"));
        if !named.is_file() {
            let mut known: Vec<String> = std::fs::read_dir(scenarios_dir())
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".yaml").map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            known.sort();
            return Err(ScenarioError::NotFound {
                name: name_or_path.into(),
                dir: scenarios_dir().display().to_string(),
                known: known.join(", "),
            });
        }
        named
    };
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(&path)
        .map_err(|source| ScenarioError::Read { path: shown.clone(), source })?;
    let scenario = parse(&text).map_err(|e| match e {
        ParseFailure::Yaml(source) => ScenarioError::Parse { path: shown.clone(), source },
        ParseFailure::Invalid { field, reason } => {
            ScenarioError::Invalid { path: shown.clone(), field, reason }
        }
    })?;
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario").to_string();
    Ok((name, scenario))
}

#[derive(Debug)]
pub enum ParseFailure {
    Yaml(serde_yaml::Error),
    Invalid { field: String, reason: String },
}

/// Parses and checks what serde cannot: the relations between fields.
pub fn parse(text: &str) -> Result<Scenario, ParseFailure> {
    let mut scenario: Scenario = serde_yaml::from_str(text).map_err(ParseFailure::Yaml)?;
    if let Some(chaos) = &scenario.chaos {
        chaos
            .check(&scenario.fleet, scenario.sim.nodes, scenario.duration.0)
            .map_err(|e| ParseFailure::Invalid { field: e.field, reason: e.reason })?;
        let planned = chaos.plan(&scenario.fleet, scenario.sim.nodes, scenario.duration.0);
        scenario.faults.extend(planned);
        scenario.faults.sort_by_key(|f| f.at);
    }
    let invalid = |field: String, reason: &str| Err(ParseFailure::Invalid { field, reason: reason.into() });
    let fleet = &scenario.fleet;
    if !fleet.shards.is_power_of_two() {
        return invalid("fleet.shards".into(), "must be a power of two");
    }
    if !(fleet.cron_clock_speed.is_finite() && fleet.cron_clock_speed > 0.0) {
        return invalid("fleet.cron_clock_speed".into(), "must be a positive number");
    }
    if !fleet.standalone && (fleet.coordinators == 0 || fleet.workers == 0) {
        return invalid("fleet.workers".into(), "a fleet needs at least one coordinator and one worker");
    }
    if scenario.workload.namespaces == 0 {
        return invalid("workload.namespaces".into(), "must be at least 1");
    }
    for (i, job) in scenario.workload.jobs.iter().enumerate() {
        if job.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return invalid(
                format!("workload.jobs[{i}].rate"),
                "must be a positive number of Jobs per second",
            );
        }
        if job.pod.fail_attempts.is_some() && job.pod.exit_code.unwrap_or(0) == 0 {
            return invalid(
                format!("workload.jobs[{i}].pod.fail_attempts"),
                "needs a non-zero pod.exit_code",
            );
        }
    }
    for (i, cj) in scenario.workload.cronjobs.iter().enumerate() {
        if let Err(e) = batchfleet_cron::Schedule::parse_standard(&cj.schedule) {
            return invalid(format!("workload.cronjobs[{i}].schedule"), e.message());
        }
    }
    for (i, fault) in scenario.faults.iter().enumerate() {
        if fleet.standalone {
            return invalid(format!("faults[{i}]"), "faults need a fleet (fleet.standalone is true)");
        }
        if fault.action.needs_worker() && fault.worker.is_none() {
            return invalid(format!("faults[{i}].worker"), "this action needs the worker's id");
        }
        let stops = matches!(fault.action, FaultAction::PauseWorker | FaultAction::RestartEtcd);
        if stops != fault.resume_after.is_some() {
            return invalid(
                format!("faults[{i}].resume_after"),
                "set for pause-worker and restart-etcd, and only for them",
            );
        }
        if fault.restart_after.is_some() && fault.action != FaultAction::KillWorker {
            return invalid(format!("faults[{i}].restart_after"), "set only for kill-worker");
        }
        if fault.action == FaultAction::RestartEtcd && fleet.store != Store::Etcd {
            return invalid(format!("faults[{i}].action"), "restart-etcd needs fleet.store: etcd");
        }
        let node_known = fault.node.as_deref().is_some_and(|n| {
            n.strip_prefix("sim-node-")
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i < scenario.sim.nodes)
        });
        if (fault.action == FaultAction::LoseNode) != fault.node.is_some()
            || (fault.node.is_some() && !node_known)
        {
            return invalid(
                format!("faults[{i}].node"),
                "set for lose-node, and only for it, to a sim node sim-node-<i> (i < sim.nodes)",
            );
        }
        if (fault.action == FaultAction::ApiFaults) != fault.api.is_some() {
            return invalid(format!("faults[{i}].api"), "set for api-faults, and only for it");
        }
        for (j, rule) in fault.api.iter().flat_map(|a| a.rules.iter()).enumerate() {
            if let Some((code, rate)) = rule.error_rates.iter().find(|(_, r)| !(0.0..=1.0).contains(*r)) {
                return invalid(
                    format!("faults[{i}].api.rules[{j}].error_rates.{code}"),
                    &format!("{rate} is not a probability in [0, 1]"),
                );
            }
        }
    }
    let rollouts = scenario.faults.iter().filter(|f| f.action == FaultAction::RollingRestart).count();
    if rollouts > 1 {
        return invalid("faults".into(), "at most one rolling-restart: its goals measure one rollout");
    }
    if scenario.goals.needs_rollout() && rollouts == 0 {
        return invalid(
            "goals".into(),
            "the rollout_* goals measure a rolling-restart; the faults have none",
        );
    }
    if let Some(scaling) = &scenario.scaling {
        check_scaling(&scenario, scaling)?;
    }
    if scenario.crash_recovery.is_some() && fleet.standalone {
        return invalid("crash_recovery".into(), "measures a fleet's kills; fleet.standalone is true");
    }
    if scenario.goals.recovery_p99.is_some() && scenario.crash_recovery.is_none() {
        return invalid("goals.recovery_p99".into(), "needs crash_recovery (the probes it measures)");
    }
    Ok(scenario)
}

/// `scenario` with its fleet on `store` (`loadtest run --store`), or why not.
pub fn on_store(mut scenario: Scenario, store: Store) -> Result<Scenario, String> {
    scenario.fleet.store = store;
    match scenario.faults.iter().position(|f| f.action == FaultAction::RestartEtcd && store != Store::Etcd) {
        Some(i) => Err(format!("faults[{i}] (restart-etcd): needs the etcd store, not --store kubernetes")),
        None => Ok(scenario),
    }
}

/// A scaling run needs fleet sizes to compare, a per-worker QPS to be bound by, and no faults.
fn check_scaling(scenario: &Scenario, scaling: &ScalingSpec) -> Result<(), ParseFailure> {
    let invalid =
        |field: &str, reason: &str| Err(ParseFailure::Invalid { field: field.into(), reason: reason.into() });
    if scaling.workers.is_empty() || scaling.workers.contains(&0) {
        return invalid("scaling.workers", "must list fleet sizes of at least one worker");
    }
    if !scaling.workers.is_sorted_by(|a, b| a < b) {
        return invalid("scaling.workers", "must be ascending, each size once");
    }
    if scenario.fleet.kube_api_qps.is_none_or(|q| !(q.is_finite() && q > 0.0)) {
        return invalid("fleet.kube_api_qps", "a scaling run limits each worker to this QPS; set it");
    }
    if scenario.fleet.standalone {
        return invalid("fleet.standalone", "a scaling run starts fleets (and the baseline itself)");
    }
    if !scenario.faults.is_empty() {
        return invalid("faults", "a scaling run measures throughput without faults");
    }
    for (field, goal) in [
        ("scaling.efficiency_goal", scaling.efficiency_goal),
        ("scaling.baseline_ratio_goal", scaling.baseline_ratio_goal),
    ] {
        if !(goal.is_finite() && goal >= 0.0) {
            return invalid(field, "must be a number, 0 or more");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "duration: 10s\nworkload:\n  jobs:\n    - {name: a, count: 3}\n";

    fn error(text: &str) -> String {
        match parse(text) {
            Ok(s) => panic!("accepted: {s:?}"),
            Err(ParseFailure::Yaml(e)) => e.to_string(),
            Err(ParseFailure::Invalid { field, reason }) => format!("{field}: {reason}"),
        }
    }

    #[test]
    fn a_minimal_scenario_gets_the_defaults() {
        let s = parse(MINIMAL).map_err(|e| format!("{e:?}")).expect("parses");
        assert_eq!(s.duration, Span(Duration::from_secs(10)));
        assert_eq!((s.fleet.workers, s.fleet.coordinators, s.fleet.shards), (3, 1, 64));
        let names = s.workload.namespace_names(4);
        assert_eq!(names.len(), 8);
        let mut shards: Vec<u32> = names.iter().map(|n| batchfleet_audits::agents::shard_of(n, 4)).collect();
        shards.sort();
        assert_eq!(shards, vec![0, 0, 1, 1, 2, 2, 3, 3], "{names:?}");
    }

    #[test]
    fn a_lease_left_to_the_binarys_default_passes_no_flag_and_bounds_at_the_longest_default() {
        let fleet = |yaml: &str| {
            parse(&format!("duration: 10s\nfleet: {yaml}\nworkload: {{}}\n"))
                .map_err(|e| format!("{e:?}"))
                .expect("parses")
                .fleet
        };
        let set = fleet("{worker_lease: 4s, lease_margin: 500ms}");
        assert_eq!(
            (set.worker_lease.flag(), set.lease_margin.flag()),
            (Some("4s".into()), Some("500ms".into()))
        );
        assert_eq!(
            (set.worker_lease_at_most(), set.lease_margin_at_most()),
            (Duration::from_secs(4), Duration::from_millis(500))
        );
        let defaults = fleet("{worker_lease: default, lease_margin: default}");
        assert_eq!((defaults.worker_lease.flag(), defaults.lease_margin.flag()), (None, None));
        assert_eq!(defaults.worker_lease_at_most(), BINARY_DEFAULT_LEASE_AT_MOST);
        let unset = fleet("{}");
        assert_eq!(unset.worker_lease.flag(), Some("15s".into()), "the harness's default is unchanged");
        let e = error("duration: 1s\nfleet: {worker_lease: soon}\nworkload: {}\n");
        assert!(e.starts_with("fleet") && e.contains("\"soon\" is neither `default` nor a duration"), "{e}");
        let e = error(
            "duration: 60s\nfleet: {store: etcd, worker_lease: default}\nworkload: {}\nchaos: {seed: 1, every: 5s..9s, actions: [restart-etcd]}\n",
        );
        assert!(e.starts_with("chaos.actions[0]: restart-etcd needs fleet.worker_lease set"), "{e}");
    }

    #[test]
    fn a_recovery_goal_is_one_duration_or_one_per_store() {
        let with_goal = |goal: &str| {
            parse(&format!(
                "duration: 10s\ncrash_recovery: {{}}\nworkload: {{}}\ngoals: {{recovery_p99: {goal}}}\n"
            ))
            .map_err(|e| format!("{e:?}"))
            .expect("parses")
            .goals
            .recovery_p99
            .expect("set")
        };
        let secs = |s| Some(Span(Duration::from_secs(s)));
        let both = with_goal("5s");
        assert_eq!((both.on(Store::Etcd), both.on(Store::Kubernetes)), (secs(5), secs(5)));
        let each = with_goal("{etcd: 5s, kubernetes: 8s}");
        assert_eq!((each.on(Store::Etcd), each.on(Store::Kubernetes)), (secs(5), secs(8)));
        let etcd_only = with_goal("{etcd: 5s}");
        assert_eq!(etcd_only.on(Store::Kubernetes), None);
        let e = error("duration: 1s\nworkload: {}\ngoals: {recovery_p99: 5s}\n");
        assert_eq!(e, "goals.recovery_p99: needs crash_recovery (the probes it measures)");
        let e = error(
            "duration: 1s\nworkload: {}\nfaults:\n  - {at: 1s, action: pause-worker, worker: w-0, resume_after: 2s, restart_after: 1s}\n",
        );
        assert_eq!(e, "faults[0].restart_after: set only for kill-worker");
        let etcd = parse("duration: 1s\nfleet: {store: etcd}\nworkload: {}\nfaults:\n  - {at: 1s, action: restart-etcd, resume_after: 1s}\n")
            .map_err(|e| format!("{e:?}"))
            .expect("parses");
        assert!(on_store(etcd.clone(), Store::Kubernetes).is_err());
        assert_eq!(on_store(etcd, Store::Etcd).map(|s| s.fleet.store), Ok(Store::Etcd));
    }

    #[test]
    fn an_unknown_or_malformed_field_is_named() {
        let e = error("duration: 10s\nworkload:\n  jobs:\n    - {name: a, count: 3, paralellism: 2}\n");
        assert!(e.contains("workload.jobs[0]") && e.contains("unknown field `paralellism`"), "{e}");
        let e = error("duration: soon\nworkload: {}\n");
        assert!(e.contains("duration") && e.contains("\"soon\" is not a duration"), "{e}");
        let e = error("duration: 1s\nworkload: {}\nfaults:\n  - {at: 1s, action: explode}\n");
        assert!(e.contains("faults[0].action") && e.contains("unknown variant `explode`"), "{e}");
        let e = error("duration: 1s\nworkload: {}\nfaults:\n  - {at: 1s, action: kill-worker}\n");
        assert_eq!(e, "faults[0].worker: this action needs the worker's id");
        let e = error(
            "duration: 1s\nworkload: {}\nfaults:\n  - {at: 1s, action: api-faults, api: {rules: [{verb: create, error_rates: {429: 2}}]}}\n",
        );
        assert_eq!(e, "faults[0].api.rules[0].error_rates.429: 2 is not a probability in [0, 1]");
        let e = error(
            "duration: 1s\nworkload: {}\nfaults:\n  - {at: 1s, action: api-faults, api: {rules: [{verbs: create}]}}\n",
        );
        assert!(e.contains("faults[0].api.rules[0]") && e.contains("unknown field `verbs`"), "{e}");
        let e =
            error("duration: 1s\nworkload: {}\nfaults:\n  - {at: 1s, action: lose-node, node: sim-node-9}\n");
        assert!(e.starts_with("faults[0].node: "), "{e}");
        let e =
            error("duration: 1s\nworkload: {}\nchaos: {seed: 1, every: 1s..2s, actions: [kill-worker]}\n");
        assert_eq!(e, "chaos.until: leaves no time for faults after 1s");
        let e = error("duration: 1s\nfleet: {shards: 12}\nworkload: {}\n");
        assert_eq!(e, "fleet.shards: must be a power of two");
        let e = error("duration: 1s\nfleet: {kube_api_qps: 50}\nworkload: {}\nscaling: {workers: [2, 1]}\n");
        assert_eq!(e, "scaling.workers: must be ascending, each size once");
        let e = error("duration: 1s\nworkload: {}\nscaling: {workers: [1, 2]}\n");
        assert!(e.starts_with("fleet.kube_api_qps: "), "{e}");
        let e = error("duration: 1s\nworkload:\n  cronjobs: [{name: c, schedule: '* * *'}]\n");
        assert!(e.starts_with("workload.cronjobs[0].schedule: "), "{e}");
    }
}
