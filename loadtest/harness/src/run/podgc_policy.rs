//! `loadtest run podgc-policy`: the coordinator's PodGC by policy (docs/beyond-upstream.md) on a
//! cluster of terminated pods. The harness creates them directly in the sim (phases, finish times
//! spread over hours, some force-deleted already and held by a finalizer, some with a finalizer
//! that will hold them once deleted), writes the caps ConfigMap (with one bad value), then starts
//! one coordinator with the scenario's policy flags. It computes the pods the policy names from
//! what it created, on its own, and audits the sim's audit log against it: exactly those pods
//! deleted, each once, none of the finalizer-held ones; the bad cap reported by one Event. Goals:
//! the pass time per 100,000 cached pods (the coordinator's `pod_gc_collector_pass_duration_seconds`)
//! and the coordinator's API budget (its client QPS and burst, from the audit log's times).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_sim::SimConfig;
use batchfleet_sim::audit::AuditEvent;
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::own_kind::{self, RunSim};
use crate::fleet_processes::{self, FleetLayout};
use crate::splitmix::SplitMix;

/// The `kind` of a scenario file this runner takes.
pub const KIND: &str = "podgc-policy";
/// Where the caps ConfigMap lives (not the coordinator's store namespace, so that its requests
/// are told apart from the store's).
const CAPS_NAMESPACE: &str = "podgc-config";
const CAPS_NAME: &str = "podgc-caps";
const HOLD: &str = "batchfleet.io/loadtest-hold";
/// No pod finishes this close to the max age, so that the pass's clock does not matter.
const AGE_MARGIN: i64 = 15 * 60;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub kind: String,
    pub description: String,
    pub pods: usize,
    pub namespaces: usize,
    /// Finish times spread evenly over this long before the start.
    pub finished_over: String,
    pub seed: u64,
    /// Every this-many-th pod is force-deleted (grace 0) before the coordinator starts, and held
    /// by a finalizer.
    pub finalizer_held_every: usize,
    /// Every this-many-th pod (offset by one) has a finalizer but is not deleted: once PodGC
    /// deletes it, it is held.
    pub finalizer_every: usize,
    pub coordinator: CoordinatorSpec,
    /// The caps ConfigMap's data.
    #[serde(default)]
    pub caps: BTreeMap<String, String>,
    pub settle: String,
    pub goals: Goals,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorSpec {
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    pub podgc_period: String,
    pub terminated_pod_gc_threshold: usize,
    pub podgc_max_age: String,
    pub podgc_namespace_threshold: usize,
    pub podgc_order: String,
    pub podgc_skip_finalizer_held: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Goals {
    pub pass_ms_per_100k_pods: f64,
}

/// The spec, or what is wrong with it (exit 2).
pub fn load(name_or_path: &str) -> Result<Spec, String> {
    let text = super::own_kind::read_spec(name_or_path).map_err(|e| format!("{name_or_path}: {e}"))?;
    let spec: Spec = serde_yaml::from_str(&text).map_err(|e| format!("{name_or_path}: {e}"))?;
    for (field, value) in [
        ("finished_over", &spec.finished_over),
        ("settle", &spec.settle),
        ("coordinator.podgc_period", &spec.coordinator.podgc_period),
        ("coordinator.podgc_max_age", &spec.coordinator.podgc_max_age),
    ] {
        humantime::parse_duration(value).map_err(|e| format!("{name_or_path}: {field}: {e}"))?;
    }
    if spec.pods == 0 || spec.namespaces == 0 || spec.finalizer_held_every == 0 || spec.finalizer_every == 0 {
        return Err(format!("{name_or_path}: pods, namespaces and the *_every fields must be above 0"));
    }
    if !matches!(spec.coordinator.podgc_order.as_str(), "upstream" | "succeeded-first") {
        return Err(format!("{name_or_path}: coordinator.podgc_order: upstream or succeeded-first"));
    }
    Ok(spec)
}

fn seconds(d: &str) -> i64 {
    humantime::parse_duration(d).map_or(0, |d| d.as_secs() as i64)
}

/// One pod the harness made, as it made it.
#[derive(Debug, Clone)]
struct Made {
    namespace: String,
    name: String,
    created: i64,
    succeeded: bool,
    finished: i64,
    /// Force-deleted and held before the coordinator starts.
    held: bool,
    finalizer: bool,
}

fn namespace_name(i: usize) -> String {
    format!("podgc-{i:02}")
}

/// The pods the policy names, computed from what was made (not with the coordinator's code):
/// past the max age by finish time; then each namespace's excess over its cap (a valid
/// ConfigMap value, else the flag's; 0: none); then the excess over the cluster-wide threshold
/// of what is left; each in the order the scenario sets. Under the skip, pods force-deleted
/// already and held are neither named nor counted.
fn expected(spec: &Spec, made: &[Made], now: i64) -> BTreeSet<(String, String)> {
    let c = &spec.coordinator;
    let max_age = seconds(&c.podgc_max_age);
    let succeeded_first = c.podgc_order == "succeeded-first";
    let key = |m: &Made| (succeeded_first && !m.succeeded, m.created, m.name.clone());
    let mut pods: Vec<&Made> = made.iter().filter(|m| !(c.podgc_skip_finalizer_held && m.held)).collect();
    pods.sort_by_key(|m| key(m));
    let mut named = vec![false; pods.len()];
    for (m, n) in pods.iter().zip(named.iter_mut()) {
        *n = now - m.finished > max_age;
    }
    let cap_of = |ns: &str| -> usize {
        spec.caps.get(ns).and_then(|v| v.trim().parse().ok()).unwrap_or(c.podgc_namespace_threshold)
    };
    let mut left: HashMap<&str, usize> = HashMap::new();
    for (m, _) in pods.iter().zip(&named).filter(|(_, n)| !**n) {
        *left.entry(m.namespace.as_str()).or_default() += 1;
    }
    let mut excess: HashMap<&str, usize> = left
        .iter()
        .map(|(ns, n)| (*ns, if cap_of(ns) == 0 { 0 } else { n.saturating_sub(cap_of(ns)) }))
        .collect();
    for (m, n) in pods.iter().zip(named.iter_mut()).filter(|(_, n)| !**n) {
        if let Some(e) = excess.get_mut(m.namespace.as_str()).filter(|e| **e > 0) {
            *e -= 1;
            *n = true;
        }
    }
    if c.terminated_pod_gc_threshold > 0 {
        let mut over = named.iter().filter(|n| !**n).count().saturating_sub(c.terminated_pod_gc_threshold);
        for n in named.iter_mut().filter(|n| !**n) {
            if over == 0 {
                break;
            }
            *n = true;
            over -= 1;
        }
    }
    pods.iter().zip(named).filter(|(_, n)| *n).map(|(m, _)| (m.namespace.clone(), m.name.clone())).collect()
}

#[derive(Debug, Serialize)]
pub struct PodgcPolicyReport {
    pub scenario: String,
    pub description: String,
    pub passed: bool,
    pub parameters: Spec,
    pub pods_created: usize,
    /// Made with a finalizer and not deleted: held once PodGC deletes them.
    pub pods_with_finalizer: usize,
    pub expected_deletions: usize,
    pub deleted: usize,
    pub passes: u64,
    pub pass_seconds_mean: f64,
    pub audits: Vec<Outcome>,
    pub goals: Vec<Outcome>,
    pub violations: BTreeMap<String, Vec<String>>,
    pub files: BTreeMap<String, String>,
    pub wall_seconds: f64,
}

/// Runs the scenario; answers whether every audit and goal passed, and the report's path.
pub async fn run(name: &str, spec: Spec, out: &Path) -> anyhow::Result<(bool, PathBuf)> {
    let wall = std::time::Instant::now();
    println!("scenario {name}: {}", spec.description);
    let RunSim { sim, kubeconfig, client, logs_dir, audit_path } =
        own_kind::start_sim(out, SimConfig { nodes: 3, kubelet: false, ..SimConfig::default() }).await?;

    let namespaces: Vec<String> = (0..spec.namespaces).map(namespace_name).collect();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in namespaces.iter().map(String::as_str).chain([CAPS_NAMESPACE]) {
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
        ns_api.create(&PostParams::default(), &object).await.with_context(|| format!("namespace {ns}"))?;
    }
    let caps: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": CAPS_NAME, "namespace": CAPS_NAMESPACE}, "data": spec.caps
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), CAPS_NAMESPACE)
        .create(&PostParams::default(), &caps)
        .await?;

    println!("creating {} terminated pods in {} namespaces", spec.pods, spec.namespaces);
    let started = Timestamp::now().as_second();
    let made = create_pods(&client, &spec, started).await?;

    let c = &spec.coordinator;
    let mut flags: Vec<String> = vec![
        "--kube-api-qps".into(),
        c.kube_api_qps.to_string(),
        "--kube-api-burst".into(),
        c.kube_api_burst.to_string(),
        "--podgc-period".into(),
        c.podgc_period.clone(),
        "--terminated-pod-gc-threshold".into(),
        c.terminated_pod_gc_threshold.to_string(),
        "--podgc-max-age".into(),
        c.podgc_max_age.clone(),
        "--podgc-namespace-threshold".into(),
        c.podgc_namespace_threshold.to_string(),
        "--podgc-namespace-caps".into(),
        format!("{CAPS_NAMESPACE}/{CAPS_NAME}"),
        "--podgc-order".into(),
        c.podgc_order.clone(),
        "--podgc-skip-finalizer-held".into(),
        c.podgc_skip_finalizer_held.to_string(),
    ];
    flags.extend(["--podgc-quarantine".into(), "1h".into()]);
    let layout = FleetLayout {
        shards: 16,
        coordinators: 1,
        workers: 0,
        coordinator_flags: flags,
        ..FleetLayout::default()
    };
    println!("starting the coordinator (logs in {})", logs_dir.display());
    let mut fleet = fleet_processes::start(&kubeconfig, &layout, &logs_dir).await?;
    let metrics_addr = fleet.coordinator_metrics[0];
    let want = expected(&spec, &made, Timestamp::now().as_second());
    // What the harness made and named, for looking into a failed audit.
    let listing: String = made
        .iter()
        .map(|m| {
            let named = want.contains(&(m.namespace.clone(), m.name.clone()));
            format!(
                "{}/{} created={} {} finished={} held={} finalizer={} named={named}\n",
                m.namespace,
                m.name,
                m.created,
                if m.succeeded { "Succeeded" } else { "Failed" },
                m.finished,
                m.held,
                m.finalizer
            )
        })
        .collect();
    std::fs::write(out.join("pods.txt"), listing)?;
    println!("the policy names {} pods; waiting for them to go", want.len());

    let settle = Duration::from_secs(seconds(&spec.settle).max(1) as u64);
    let deadline = std::time::Instant::now() + settle;
    let mut last = Scrape::default();
    while std::time::Instant::now() < deadline {
        last = scrape(metrics_addr).await.unwrap_or(last);
        if last.deleted >= want.len() as u64 && last.passes > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Three more passes: nothing more may go, nothing may be deleted again.
    let until = last.passes + 3;
    let more =
        std::time::Instant::now() + Duration::from_secs(60) + humantime::parse_duration(&c.podgc_period)? * 4;
    while std::time::Instant::now() < more && last.passes < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        last = scrape(metrics_addr).await.unwrap_or(last);
    }
    for child in &mut fleet.coordinators {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let warnings: Vec<Event> = Api::<Event>::namespaced(client.clone(), CAPS_NAMESPACE)
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(batchfleet_coordinator::podgc::controller::INVALID_CAP_REASON)
        })
        .collect();
    let events = super::settled_audit_log(&audit_path).await.context("reading the audit log")?;
    drop(sim);

    let coordinator = batchfleet_coordinator::kube_client::user_agent("coordinator-0");
    let mut audits = audit_deletions(&events, &coordinator, &made, &want);
    let bad_caps = spec.caps.values().filter(|v| v.trim().parse::<usize>().is_err()).count();
    audits.push(Outcome::from_violations(
        "bad-cap-reported-once",
        "one InvalidPodGCCap Event on the caps ConfigMap per bad value, not one per pass",
        bad_caps,
        "bad caps",
        if warnings.len() == bad_caps
            && warnings.iter().all(|e| e.involved_object.name.as_deref() == Some(CAPS_NAME))
        {
            Vec::new()
        } else {
            vec![format!("{} Events for {bad_caps} bad caps: {warnings:?}", warnings.len())]
        },
    ));
    let per_100k_ms = last.mean_pass_seconds() * 1000.0 * 100_000.0 / spec.pods as f64;
    let mut goals = vec![Outcome {
        name: "pass-time-per-100k-pods".into(),
        target: format!("< {} ms per 100,000 cached pods (mean pass)", spec.goals.pass_ms_per_100k_pods),
        measured: format!(
            "{per_100k_ms:.1} ms per 100k ({:.1} ms mean over {} passes, {} pods)",
            last.mean_pass_seconds() * 1000.0,
            last.passes,
            spec.pods
        ),
        passed: last.passes > 0 && per_100k_ms < spec.goals.pass_ms_per_100k_pods,
        skipped: None,
        violations: Vec::new(),
    }];
    goals.push(api_budget(&events, &coordinator, c.kube_api_qps, c.kube_api_burst));
    let passed = audits.iter().chain(&goals).all(Outcome::not_failed);
    let violations = crate::run::report::violations(audits.iter().chain(&goals));
    let report = PodgcPolicyReport {
        scenario: name.into(),
        description: spec.description.clone(),
        passed,
        pods_created: made.len(),
        pods_with_finalizer: made.iter().filter(|m| m.finalizer && !m.held).count(),
        expected_deletions: want.len(),
        deleted: last.deleted as usize,
        passes: last.passes,
        pass_seconds_mean: last.mean_pass_seconds(),
        parameters: spec,
        audits,
        goals,
        violations,
        files: BTreeMap::from([
            ("audit_log".to_string(), audit_path.display().to_string()),
            ("pods".to_string(), out.join("pods.txt").display().to_string()),
            ("process_logs".to_string(), logs_dir.display().to_string()),
        ]),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    let path = own_kind::write_report(out, &report, report.audits.iter().chain(&report.goals))?;
    Ok((report.passed, path))
}

async fn create_pods(client: &kube::Client, spec: &Spec, now: i64) -> anyhow::Result<Vec<Made>> {
    let spread = seconds(&spec.finished_over).max(1);
    let max_age = seconds(&spec.coordinator.podgc_max_age);
    let mut rng = SplitMix(spec.seed);
    let plan: Vec<(usize, bool, i64)> = (0..spec.pods)
        .map(|i| {
            let succeeded = rng.below(3) != 0;
            let mut age = (rng.next_f64() * spread as f64) as i64;
            if (age - max_age).abs() < AGE_MARGIN {
                age = max_age + AGE_MARGIN * if age < max_age { -1 } else { 1 };
            }
            (i, succeeded, now - age.max(0))
        })
        .collect();
    let made: Vec<anyhow::Result<Made>> = futures::stream::iter(plan)
        .map(|(i, succeeded, finished)| async move {
            let namespace = namespace_name(i % spec.namespaces);
            let name = format!("p-{i:07}");
            let held = i % spec.finalizer_held_every == 0;
            let finalizer = held || i % spec.finalizer_every == 1;
            let finalizers: Vec<&str> = if finalizer { vec![HOLD] } else { vec![] };
            let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "finalizers": finalizers},
                "spec": {"nodeName": format!("sim-node-{}", i % 3), "containers": [{"name": "c", "image": "busybox"}]}
            }))?;
            let created = api.create(&PostParams::default(), &pod).await.with_context(|| format!("creating {name}"))?;
            let at = Timestamp::from_second(finished)?.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            let status = json!({"status": {
                "phase": if succeeded { "Succeeded" } else { "Failed" },
                "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0, "image": "busybox", "imageID": "",
                    "state": {"terminated": {"exitCode": if succeeded { 0 } else { 1 }, "finishedAt": at, "startedAt": at}}}]
            }});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await?;
            if held {
                api.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await?;
            }
            let created = created.metadata.creation_timestamp.map_or(0, |t| t.0.as_second());
            Ok(Made { namespace, name, created, succeeded, finished, held, finalizer })
        })
        .buffer_unordered(64)
        .collect()
        .await;
    made.into_iter().collect()
}

/// The coordinator's DELETEs of pods against what the policy names.
fn audit_deletions(
    events: &[AuditEvent],
    coordinator: &str,
    made: &[Made],
    want: &BTreeSet<(String, String)>,
) -> Vec<Outcome> {
    let mut deletes: BTreeMap<(String, String), usize> = BTreeMap::new();
    for e in events.iter().filter(|e| e.user_agent == coordinator && e.verb == "delete") {
        let Some(o) = e.object_ref.as_ref().filter(|o| o.resource == "pods" && o.subresource.is_empty())
        else {
            continue;
        };
        if e.stage != batchfleet_sim::audit::Stage::ResponseComplete {
            continue;
        }
        *deletes.entry((o.namespace.clone(), o.name.clone())).or_default() += 1;
    }
    let deleted: BTreeSet<(String, String)> = deletes.keys().cloned().collect();
    let mut wrong: Vec<String> = want
        .difference(&deleted)
        .map(|(ns, n)| format!("{ns}/{n}: named by the policy, not deleted"))
        .collect();
    wrong.extend(
        deleted.difference(want).map(|(ns, n)| format!("{ns}/{n}: deleted, not named by the policy")),
    );
    let twice: Vec<String> = deletes
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((ns, n), c)| format!("{ns}/{n}: {c} DELETEs"))
        .collect();
    let held: Vec<String> = made
        .iter()
        .filter(|m| m.held && deletes.contains_key(&(m.namespace.clone(), m.name.clone())))
        .map(|m| format!("{}/{}: force-deleted already and held, deleted again", m.namespace, m.name))
        .collect();
    let held_count = made.iter().filter(|m| m.held).count();
    vec![
        Outcome::from_violations(
            "deleted-exactly-what-the-policy-names",
            "the coordinator deleted exactly the pods the harness computed from what it created",
            made.len(),
            "pods",
            wrong,
        ),
        Outcome::from_violations(
            "no-pod-deleted-twice",
            "one DELETE per pod (a pod with a finalizer stays, held, after it; the others go)",
            deletes.len(),
            "pods deleted",
            twice,
        ),
        Outcome::from_violations(
            "finalizer-held-pods-left-alone",
            "no DELETE of a pod force-deleted already and held by a finalizer",
            held_count,
            "held pods",
            held,
        ),
    ]
}

/// The coordinator's rate-limited client (pods, nodes, the caps ConfigMap, Events: every
/// request but the store's) within its token bucket: over any span of `t` seconds at most
/// `burst + qps·t` requests, with a tenth of the burst (at least 5) for arrival jitter.
fn api_budget(events: &[AuditEvent], coordinator: &str, qps: f64, burst: u32) -> Outcome {
    let mut times: Vec<f64> = events
        .iter()
        .filter(|e| e.user_agent == coordinator && e.stage == batchfleet_sim::audit::Stage::ResponseComplete)
        .filter(|e| {
            e.object_ref.as_ref().is_some_and(|o| match o.resource.as_str() {
                "pods" | "nodes" | "events" => true,
                "configmaps" => o.namespace == CAPS_NAMESPACE,
                _ => false,
            })
        })
        .filter(|e| e.verb != "watch")
        .filter_map(|e| e.request_received_timestamp.parse::<Timestamp>().ok())
        .map(|t| t.as_microsecond() as f64 / 1e6)
        .collect();
    times.sort_by(f64::total_cmp);
    // max over i ≤ j of (j − i + 1) − qps·(t_j − t_i)
    let mut worst = 0.0f64;
    let mut best_start = f64::INFINITY;
    for (j, t) in times.iter().enumerate() {
        best_start = best_start.min(j as f64 - qps * t);
        worst = worst.max(j as f64 - qps * t - best_start + 1.0);
    }
    let allowed = f64::from(burst) + (f64::from(burst) / 10.0).max(5.0);
    let spans = times.last().zip(times.first()).map_or(0.0, |(l, f)| l - f);
    Outcome {
        name: "api-budget".into(),
        target: format!("within --kube-api-qps {qps} and --kube-api-burst {burst}"),
        measured: format!(
            "{} requests over {spans:.1} s ({:.0}/s); the most above the rate in any span: {worst:.0} (allowed {allowed:.0})",
            times.len(),
            times.len() as f64 / spans.max(1e-3)
        ),
        passed: worst <= allowed,
        skipped: None,
        violations: Vec::new(),
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Scrape {
    deleted: u64,
    passes: u64,
    pass_seconds: f64,
}

impl Scrape {
    fn mean_pass_seconds(&self) -> f64 {
        if self.passes == 0 { 0.0 } else { self.pass_seconds / self.passes as f64 }
    }
}

async fn scrape(addr: SocketAddr) -> Option<Scrape> {
    let text = fleet_processes::http_get(addr, "/metrics").await?;
    let mut s = Scrape::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ')?;
        let value: f64 = value.parse().ok()?;
        if series.starts_with("pod_gc_collector_force_delete_pods_total")
            && series.contains("reason=\"terminated\"")
        {
            s.deleted += value as u64;
        } else if series == "pod_gc_collector_pass_duration_seconds_count" {
            s.passes = value as u64;
        } else if series == "pod_gc_collector_pass_duration_seconds_sum" {
            s.pass_seconds = value;
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(ns: &str, name: &str, created: i64, succeeded: bool, finished: i64) -> Made {
        Made {
            namespace: ns.into(),
            name: name.into(),
            created,
            succeeded,
            finished,
            held: false,
            finalizer: false,
        }
    }

    #[test]
    fn the_expected_set_follows_age_then_caps_then_the_threshold() {
        let mut spec = load("podgc-policy").expect("the scenario loads");
        spec.coordinator.podgc_max_age = "1h".into();
        spec.coordinator.podgc_namespace_threshold = 2;
        spec.coordinator.terminated_pod_gc_threshold = 3;
        spec.caps = BTreeMap::from([("b".to_string(), "1".to_string()), ("c".to_string(), "x".to_string())]);
        let now = 10_000;
        let pods = vec![
            made("a", "old", 0, true, now - 7200),
            made("a", "a1", 1, false, now),
            made("a", "a2", 2, true, now),
            made("a", "a3", 3, true, now),
            made("b", "b1", 1, true, now),
            made("b", "b2", 2, true, now),
            made("c", "c1", 5, false, now),
            Made { held: true, finalizer: true, ..made("c", "held", 0, true, now - 9999) },
        ];
        let want: Vec<String> = expected(&spec, &pods, now).into_iter().map(|(_, n)| n).collect();
        // old: by age; a: 3 left over cap 2 → a2 (succeeded first, oldest); b: cap 1 → b1; c:
        // the bad cap leaves the flag's 2. Left: b2, a3, a1, c1 = 4 over 3 → b2 (succeeded
        // first, oldest). The held pod is skipped however old.
        assert_eq!(want, ["a2", "old", "b1", "b2"]);
    }
}
