//! The fleet's processes through real work against a sim cluster, checked against deploy/:
//!
//! - **RBAC**: every call `fleet-coordinator` and `fleet-worker` made (from the sim's audit log,
//!   by User-Agent: verb, API group, resource, subresource, and whether it was in the fleet's
//!   namespace) is allowed by the rules deploy/base binds to its ServiceAccount, and every rule
//!   (group × resource × verb) was used by some call or by an admission check a call meets (an
//!   owner's `finalizers`). A missing rule or an unused one fails.
//! - **Metrics**: every metric name in the Grafana dashboard's queries and in the PrometheusRule's
//!   alert expressions is exported by a binary (a scrape of every process's `/metrics`).
//!
//! The work: two coordinators (one leads, on the Kubernetes store in namespace `batchfleet`) and
//! two workers on a fast CronJob clock. Jobs that succeed, fail (deleting their running pod),
//! finish with a TTL; a CronJob firing with a history limit; PodGC collecting terminated pods
//! over its threshold and a pod of a deleted node (its first deletes fail); a drain and undrain; a worker stopped with
//! SIGTERM (it drains and removes its lease); the leader stopped (the standby takes over).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use batchfleet_deploy_tests::{
    Etcd, Fleet, FleetSpec, Sim, Stack, deploy_dir, describe, documents, fleetctl, http_get,
};
use batchfleet_sim::SimConfig;
use batchfleet_sim::audit::read_log;
use batchfleet_sim::faults::{ErrorRate, FaultConfig, FaultRule};
use batchfleet_sim::http::NodeAdmin;
use batchfleet_sim::testing::wait_until;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::process::Child;

const SHARDS: u32 = 16;
const NAMESPACE: &str = "batchfleet";

fn signal(child: &Child, signal: &str) {
    let pid = child.id().expect("the child runs").to_string();
    let sent = std::process::Command::new("kill").args([signal, &pid]).status().expect("kill runs");
    assert!(sent.success(), "kill {signal} {pid}");
}

/// Sample names of a Prometheus text exposition (`name{…} value` or `name value`).
fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

fn job(name: &str, spec: Value) -> Job {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("job")
}

fn pod_template(annotations: Value) -> Value {
    json!({"metadata": {"annotations": annotations},
           "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}})
}

/// One call as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Call {
    verb: String,
    group: String,
    /// `resource` or `resource/subresource`.
    resource: String,
    /// In the fleet's own namespace (a Role may allow it), or not.
    in_fleet_namespace: bool,
}

/// One permission: a verb on a group's resource.
type Permission = (String, String, String);

/// The (verb, group, resource) triples of a role's rules.
fn permissions(role: &Value) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().into_iter().flatten() {
        let list = |k: &str| -> Vec<String> {
            rule[k].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect()
        };
        for group in list("apiGroups") {
            for resource in list("resources") {
                for verb in list("verbs") {
                    assert!(verb != "*" && resource != "*" && group != "*", "no wildcards in {rule}");
                    out.insert((verb.clone(), group.clone(), resource.clone()));
                }
            }
        }
    }
    out
}

/// The ClusterRole and Role bound to `service_account` in what deploy/base builds.
fn roles_of(objects: &[Value], service_account: &str) -> (BTreeSet<Permission>, BTreeSet<Permission>) {
    let bound = |kind: &str| -> BTreeSet<Permission> {
        let binding_kind = format!("{kind}Binding");
        let mut out = BTreeSet::new();
        for binding in objects.iter().filter(|o| o["kind"] == binding_kind.as_str()) {
            let subjects = binding["subjects"].as_array().into_iter().flatten();
            let ours = subjects.into_iter().any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == service_account && s["namespace"] == NAMESPACE
            });
            if !ours {
                continue;
            }
            assert_eq!(binding["roleRef"]["kind"], kind, "{}", describe(binding));
            let role = objects
                .iter()
                .find(|o| o["kind"] == kind && o["metadata"]["name"] == binding["roleRef"]["name"])
                .unwrap_or_else(|| panic!("{} names a missing role", describe(binding)));
            out.extend(permissions(role));
        }
        out
    };
    (bound("ClusterRole"), bound("Role"))
}

/// The permissions the OwnerReferencesPermissionEnforcement admission plugin checks on the
/// worker's creates: an owner reference with `blockOwnerDeletion` needs `update` on the owner's
/// `finalizers` subresource. Every pod the worker creates is owned so by its Job, and every Job
/// by its CronJob (pinned by the Job and CronJob cores' tests).
fn owner_reference_checks(calls: &BTreeSet<Call>) -> Vec<Call> {
    let owner_finalizers = |resource: &str| Call {
        verb: "update".into(),
        group: "batch".into(),
        resource: format!("{resource}/finalizers"),
        in_fleet_namespace: false,
    };
    calls
        .iter()
        .filter(|c| c.verb == "create" && !c.in_fleet_namespace)
        .filter_map(|c| match (c.group.as_str(), c.resource.as_str()) {
            ("", "pods") => Some(owner_finalizers("jobs")),
            ("batch", "jobs") => Some(owner_finalizers("cronjobs")),
            _ => None,
        })
        .collect()
}

/// Compares the calls of one binary with its rules; the failures.
fn compare(
    who: &str,
    calls: &BTreeSet<Call>,
    cluster: &BTreeSet<Permission>,
    local: &BTreeSet<Permission>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut used: BTreeSet<(bool, Permission)> = BTreeSet::new();
    for call in calls {
        let p = (call.verb.clone(), call.group.clone(), call.resource.clone());
        if call.in_fleet_namespace && local.contains(&p) {
            used.insert((false, p));
        } else if cluster.contains(&p) {
            used.insert((true, p));
        } else {
            failures.push(format!("{who}: no rule allows {call:?}"));
        }
    }
    for p in cluster {
        if !used.contains(&(true, p.clone())) {
            failures.push(format!("{who}: ClusterRole rule never used: {p:?}"));
        }
    }
    for p in local {
        if !used.contains(&(false, p.clone())) {
            failures.push(format!("{who}: Role rule (namespace {NAMESPACE}) never used: {p:?}"));
        }
    }
    failures
}

/// Metric names a PromQL expression refers to: identifiers that are not functions, keywords,
/// or label names (inside braces or the parentheses after by/without/on/ignoring/group_*), nor
/// inside strings or range brackets.
fn promql_metrics(expr: &str) -> BTreeSet<String> {
    const GROUPING: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
    const KEYWORDS: &[&str] = &["and", "or", "unless", "offset", "bool", "inf", "nan"];
    // Strings, label matchers and ranges hold no metric name.
    let mut cleaned = String::new();
    let mut skip_until = None;
    for c in expr.chars() {
        if let Some(close) = skip_until {
            if c == close {
                skip_until = None;
            }
            continue;
        }
        match c {
            '"' => skip_until = Some('"'),
            '{' => skip_until = Some('}'),
            '[' => skip_until = Some(']'),
            _ => cleaned.push(c),
        }
    }
    // Identifiers and the single characters between them (numbers start with a digit and are
    // taken whole, so `1e3` is no identifier).
    let mut tokens: Vec<String> = Vec::new();
    let chars: Vec<char> = cleaned.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '.';
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    let mut out = BTreeSet::new();
    let mut t = 0;
    while t < tokens.len() {
        let token = &tokens[t];
        // `sum by (le) (…)`: an aggregation is followed by `(` or by its grouping.
        let next_is_paren = tokens.get(t + 1).is_some_and(|n| n == "(" || GROUPING.contains(&n.as_str()));
        let is_ident = token.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == ':');
        if GROUPING.contains(&token.as_str()) && next_is_paren {
            while t < tokens.len() && tokens[t] != ")" {
                t += 1;
            }
        } else if is_ident && !next_is_paren && !KEYWORDS.contains(&token.as_str()) {
            out.insert(token.clone());
        }
        t += 1;
    }
    out
}

#[test]
fn promql_metrics_finds_the_metric_names_only() {
    let expr = r#"histogram_quantile(0.99, sum by (le) (rate(x_bucket{name="y"}[5m]))) > 5 or absent(up) and on (pod) sum without (shard) (z)"#;
    let found: Vec<String> = promql_metrics(expr).into_iter().collect();
    assert_eq!(found, ["up", "x_bucket", "z"]);
}

/// Every query of the dashboard and expression of the alerts.
fn queries() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let dashboard_path = deploy_dir().join("components/monitoring/batchfleet-dashboard.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(&dashboard_path).expect("dashboard"))
            .expect("the dashboard parses");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "the dashboard has its panels");
    for panel in panels {
        let targets = panel["targets"].as_array().expect("every panel has targets");
        assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("a query's expr").to_string();
            out.push((format!("dashboard panel {}", panel["title"]), expr));
        }
    }
    let rules = std::fs::read_to_string(deploy_dir().join("components/monitoring/prometheusrule.yaml"))
        .expect("rules");
    let rules = documents(&rules).remove(0);
    let mut alerts = BTreeSet::new();
    for group in rules["spec"]["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("an alert").to_string();
            out.push((format!("alert {name}"), rule["expr"].as_str().expect("expr").to_string()));
            alerts.insert(name);
        }
    }
    // The alerts issue 14 asks for.
    for wanted in [
        "BatchfleetNoLeader",
        "BatchfleetShardsUnowned",
        "BatchfleetShardTwoOwners",
        "BatchfleetSlowHandovers",
        "BatchfleetCronJobSkew",
        "BatchfleetJobSyncErrors",
        "BatchfleetWorkQueueDepth",
        "BatchfleetWorkerFenced",
    ] {
        assert!(alerts.contains(wanted), "no alert {wanted}: {alerts:?}");
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_calls_match_its_rbac_and_its_metrics_match_the_dashboard_and_alerts() {
    the_calls_match_the_rbac_of("base", None).await;
}

/// On etcd the fleet makes no Lease or ConfigMap call, and the base with the `etcd` component
/// grants none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd_the_fleets_calls_match_the_etcd_components_rbac() {
    let data = tempfile::tempdir().expect("tempdir");
    let etcd =
        batchfleet_deploy_tests::start_etcd(data.path(), "etcd", batchfleet_deploy_tests::free_port()).await;
    the_calls_match_the_rbac_of("base+etcd", Some(&etcd)).await;
}

/// Runs the work on a fleet (on `etcd` when given, else the Kubernetes store), then checks its
/// calls against the RBAC of `stack` (a `Stack`: `base`, `base+etcd`) and its metrics against
/// the dashboard and the alerts.
async fn the_calls_match_the_rbac_of(stack: &str, etcd: Option<&Etcd>) {
    let store_args = etcd.map(Etcd::store_args).unwrap_or_default();
    let sim = Sim::start(SimConfig { nodes: 3, ..SimConfig::default() }).await;
    let client = sim.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [NAMESPACE, "team-a", "team-b", "team-c"] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
        namespaces.create(&PostParams::default(), &ns).await.expect("create namespace");
    }
    let clock = format!("10@{}", jiff::Timestamp::now());
    let mut fleet = Fleet::start(
        &sim,
        FleetSpec {
            namespace: NAMESPACE,
            shards: SHARDS,
            coordinators: &["coordinator-0", "coordinator-1"],
            workers: &["w-0", "w-1"],
            worker_args: [vec!["--test-clock".into(), clock], store_args.clone()].concat(),
            coordinator_args: [
                ["--terminated-pod-gc-threshold", "1", "--podgc-period", "500ms", "--podgc-quarantine", "1s"]
                    .map(String::from)
                    .to_vec(),
                store_args,
            ]
            .concat(),
        },
    )
    .await;
    let admin = fleet.admin.clone();
    // A worker that registered after the first placement is filled by the next steps.
    wait_until("both workers own shards", Duration::from_secs(60), || async {
        let owners = fleet.settled_owners()?;
        (owners.values().any(|o| o == "w-0") && owners.values().any(|o| o == "w-1")).then_some(())
    })
    .await;

    // The work.
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    let quick = json!({"sim.batchfleet.io/run": "100ms"});
    jobs.create(
        &PostParams::default(),
        &job("ok", json!({"completions": 2, "template": pod_template(quick.clone())})),
    )
    .await
    .expect("create ok");
    let failing = json!({"sim.batchfleet.io/run-by-index": "0=2s,1=forever", "sim.batchfleet.io/exit-code-by-index": "0=1"});
    jobs.create(
        &PostParams::default(),
        &job(
            "fails",
            json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed", "backoffLimit": 0,
                   "template": pod_template(failing)}),
        ),
    )
    .await
    .expect("create fails");
    let ttl_jobs: Api<Job> = Api::namespaced(client.clone(), "team-b");
    ttl_jobs
        .create(
            &PostParams::default(),
            &job("ttl", json!({"ttlSecondsAfterFinished": 0, "template": pod_template(quick.clone())})),
        )
        .await
        .expect("create ttl");
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), "team-c");
    let cronjob: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "tick"},
        "spec": {"schedule": "* * * * *", "successfulJobsHistoryLimit": 1,
                 "jobTemplate": {"spec": {"template": pod_template(quick.clone())}}}
    }))
    .expect("cronjob");
    cronjobs.create(&PostParams::default(), &cronjob).await.expect("create cronjob");
    // Forbid with a Job that never ends: "JobAlreadyActive" every minute, an Event the recorder
    // patches (its count) rather than creates again.
    let busy: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "busy"},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid",
                 "jobTemplate": {"spec": {"template": pod_template(json!({"sim.batchfleet.io/run": "forever"}))}}}
    }))
    .expect("cronjob");
    Api::<CronJob>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), &busy)
        .await
        .expect("create busy");
    // A pod of a node that goes away: PodGC's orphan pass.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team-b");
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "annotations": {"sim.batchfleet.io/run": "forever"}},
        "spec": {"nodeName": "sim-node-2", "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &orphan).await.expect("create orphan pod");

    wait_until("ok succeeds, fails fails, ttl is deleted", Duration::from_secs(90), || async {
        let ok = jobs.get("ok").await.ok()?.status?.succeeded == Some(2);
        // Failed (index 0 exited 1 with backoffLimit 0), its running pod of index 1 deleted.
        let conditions = jobs.get("fails").await.ok()?.status?.conditions.unwrap_or_default();
        let failed = conditions.iter().any(|c| c.type_ == "Failed" && c.status == "True");
        let ttl_gone = ttl_jobs.get_opt("ttl").await.ok()?.is_none();
        (ok && failed && ttl_gone).then_some(())
    })
    .await;
    // The CronJob ran at least twice and its history limit removed a Job.
    let cron_jobs: Api<Job> = Api::namespaced(client.clone(), "team-c");
    let seen = std::sync::Mutex::new(BTreeSet::new());
    let seen = &seen;
    wait_until("the CronJob ran three times, keeping one", Duration::from_secs(120), || async {
        let names: BTreeSet<String> = cron_jobs
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter_map(|j| j.metadata.name)
            .collect();
        let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.extend(names.iter().cloned());
        (seen.len() >= 3 && names.len() < seen.len()).then_some(())
    })
    .await;
    // PodGC's first deletes of the orphan fail (a 500 from the sim), so that its error counter
    // is exported too; then they succeed.
    let fail_deletes = FaultRule {
        verb: "delete".into(),
        resource: "pods".into(),
        error_rates: vec![ErrorRate { code: 500, rate: 1.0 }],
        ..FaultRule::default()
    };
    sim.cluster.faults().configure(FaultConfig { rules: vec![fail_deletes], ..FaultConfig::default() });
    sim.cluster.nodes().delete_node("sim-node-2").expect("delete node");
    let leader_metrics = fleet.coordinators[0].metrics.clone();
    wait_until("PodGC counts a failed delete", Duration::from_secs(60), || async {
        let (_, text) = http_get(&leader_metrics, "/metrics").await?;
        text.contains("pod_gc_collector_force_delete_pod_errors_total{").then_some(())
    })
    .await;
    sim.cluster.faults().configure(FaultConfig::default());
    wait_until("PodGC collects the orphaned pod", Duration::from_secs(60), || async {
        pods.get_opt("orphan").await.ok()?.is_none().then_some(())
    })
    .await;

    // Fleet operations: drain and undrain w-0.
    fleetctl(&admin, &["drain", "w-0"]).expect("drain");
    wait_until("w-0 drained", Duration::from_secs(60), || async {
        fleet.settled_owners().filter(|o| o.values().all(|o| o == "w-1"))
    })
    .await;
    fleetctl(&admin, &["undrain", "w-0"]).expect("undrain");
    fleetctl(&admin, &["rebalance"]).expect("rebalance");
    wait_until("w-0 takes shards again", Duration::from_secs(60), || async {
        fleet.settled_owners().filter(|o| o.values().any(|o| o == "w-0"))
    })
    .await;

    // Scrape every process while it runs.
    let mut exported = BTreeSet::new();
    for p in fleet.coordinators.iter().chain(&fleet.workers) {
        let (code, text) =
            http_get(&p.metrics, "/metrics").await.unwrap_or_else(|| panic!("{} serves /metrics", p.id));
        assert_eq!(code, 200, "{}", p.id);
        exported.extend(sample_names(&text));
    }

    // SIGTERM w-1: it asks to be drained, waits, and removes its lease.
    let mut w1 = fleet.workers.remove(1).child;
    signal(&w1, "-TERM");
    let exited =
        tokio::time::timeout(Duration::from_secs(60), w1.wait()).await.expect("w-1 exits").expect("reaped");
    assert!(exited.success(), "w-1 exited with {exited}");
    // SIGTERM the leader: it resigns, and the standby leads.
    let mut c0 = fleet.coordinators.remove(0).child;
    signal(&c0, "-TERM");
    tokio::time::timeout(Duration::from_secs(30), c0.wait())
        .await
        .expect("coordinator-0 exits")
        .expect("reaped");
    wait_until("coordinator-1 leads with every shard on w-0", Duration::from_secs(60), || async {
        fleet.settled_owners().filter(|o| o.values().all(|o| o == "w-0"))
    })
    .await;
    let more =
        jobs.create(&PostParams::default(), &job("after", json!({"template": pod_template(quick)}))).await;
    more.expect("create after");
    wait_until("a Job completes after the fail-over", Duration::from_secs(60), || async {
        (jobs.get("after").await.ok()?.status?.succeeded == Some(1)).then_some(())
    })
    .await;
    drop(fleet);

    // RBAC: the calls against the rules; everything before the "after" Job's status was logged.
    check_calls_against(&sim, stack, "team-a", "after").await;

    // Metrics: every name the dashboard and the alerts use is exported.
    let mut unknown = Vec::new();
    for (what, expr) in queries() {
        for metric in promql_metrics(&expr) {
            if !exported.contains(&metric) {
                unknown.push(format!("{what}: {metric} (in {expr})"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics no binary exports:\n{}\n\nexported: {exported:?}",
        unknown.join("\n")
    );
}

/// The calls `fleet-coordinator` and `fleet-worker` made, from the sim's audit log, against the
/// rules `stack` binds to them. The log is written by a thread of its own: it is read once it
/// holds the status write of Job `namespace/last_job`, the last write of the work.
async fn check_calls_against(sim: &Sim, stack: &str, namespace: &str, last_job: &str) {
    let events = wait_until("the audit log caught up", Duration::from_secs(30), || async {
        let events = read_log(&sim.audit_log()).ok()?;
        let caught_up = events.iter().any(|e| {
            e.object_ref
                .as_ref()
                .is_some_and(|o| o.namespace == namespace && o.name == last_job && o.subresource == "status")
        });
        caught_up.then_some(events)
    })
    .await;
    let mut calls: BTreeMap<&str, BTreeSet<Call>> = BTreeMap::new();
    for e in &events {
        let who = if e.user_agent.starts_with("fleet-coordinator/") {
            "fleet-coordinator"
        } else if e.user_agent.starts_with("fleet-worker/") {
            "fleet-worker"
        } else {
            continue;
        };
        let Some(object) = &e.object_ref else {
            panic!("{who} made a non-resource request: {} {}", e.verb, e.request_uri);
        };
        let resource = if object.subresource.is_empty() {
            object.resource.clone()
        } else {
            format!("{}/{}", object.resource, object.subresource)
        };
        calls.entry(who).or_default().insert(Call {
            verb: e.verb.clone(),
            group: object.api_group.clone(),
            resource,
            in_fleet_namespace: object.namespace == NAMESPACE,
        });
    }
    if let Some(worker) = calls.get_mut("fleet-worker") {
        let checks = owner_reference_checks(worker);
        worker.extend(checks);
    }
    let objects = Stack::new(stack).build();
    let mut failures = Vec::new();
    for who in ["fleet-coordinator", "fleet-worker"] {
        let made = calls.get(who).cloned().unwrap_or_default();
        assert!(!made.is_empty(), "{who} made no call");
        let (cluster, local) = roles_of(&objects, who);
        failures.extend(compare(who, &made, &cluster, &local));
    }
    let summary: Vec<String> =
        calls.iter().flat_map(|(who, calls)| calls.iter().map(move |c| format!("{who}: {c:?}"))).collect();
    assert!(failures.is_empty(), "{}\n\nevery call made:\n{}", failures.join("\n"), summary.join("\n"));
}

/// Beside kube-controller-manager the workers reconcile only the Jobs managed by batchfleet, and
/// the coordinator runs no PodGC: the `beside-kcm` overlay grants exactly what that needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_kcm_the_fleets_calls_match_the_beside_kcm_overlays_rbac() {
    const MANAGED_BY: &str = "batchfleet.io/job-controller";
    let sim = Sim::start(SimConfig { nodes: 2, ..SimConfig::default() }).await;
    let client = sim.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [NAMESPACE, "team-a"] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
        namespaces.create(&PostParams::default(), &ns).await.expect("create namespace");
    }
    let mut fleet = Fleet::start(
        &sim,
        FleetSpec {
            namespace: NAMESPACE,
            shards: SHARDS,
            coordinators: &["coordinator-0"],
            workers: &["w-0", "w-1"],
            worker_args: ["--controllers", "job", "--job-managed-by", MANAGED_BY].map(String::from).to_vec(),
            coordinator_args: vec!["--controllers=-podgc".into()],
        },
    )
    .await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    let managed = |name: &str, mut spec: Value| {
        spec["managedBy"] = json!(MANAGED_BY);
        job(name, spec)
    };
    // Pod creations fail for a while: the same FailedCreate event again and again, which the
    // recorder patches (its count) rather than creates.
    let fail_creates = FaultRule {
        verb: "create".into(),
        resource: "pods".into(),
        error_rates: vec![ErrorRate { code: 500, rate: 1.0 }],
        ..FaultRule::default()
    };
    sim.cluster.faults().configure(FaultConfig { rules: vec![fail_creates], ..FaultConfig::default() });
    let quick = json!({"sim.batchfleet.io/run": "100ms"});
    jobs.create(
        &PostParams::default(),
        &managed("ok", json!({"completions": 2, "template": pod_template(quick.clone())})),
    )
    .await
    .expect("create ok");
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "team-a");
    wait_until("a FailedCreate event counted twice", Duration::from_secs(60), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedCreate") && e.count.unwrap_or(0) >= 2)
            .then_some(())
    })
    .await;
    sim.cluster.faults().configure(FaultConfig::default());
    let failing = json!({"sim.batchfleet.io/run-by-index": "0=2s,1=forever", "sim.batchfleet.io/exit-code-by-index": "0=1"});
    jobs.create(
        &PostParams::default(),
        &managed(
            "fails",
            json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed", "backoffLimit": 0,
                   "template": pod_template(failing)}),
        ),
    )
    .await
    .expect("create fails");
    wait_until("ok succeeds and fails fails", Duration::from_secs(90), || async {
        let ok = jobs.get("ok").await.ok()?.status?.succeeded == Some(2);
        let conditions = jobs.get("fails").await.ok()?.status?.conditions.unwrap_or_default();
        let failed = conditions.iter().any(|c| c.type_ == "Failed" && c.status == "True");
        (ok && failed).then_some(())
    })
    .await;
    // The last write: a Job completes after the others.
    jobs.create(&PostParams::default(), &managed("after", json!({"template": pod_template(quick)})))
        .await
        .expect("create after");
    wait_until("a last Job completes", Duration::from_secs(60), || async {
        (jobs.get("after").await.ok()?.status?.succeeded == Some(1)).then_some(())
    })
    .await;
    // SIGTERM w-1: it asks to be drained, waits, and removes its lease.
    let mut w1 = fleet.workers.remove(1).child;
    signal(&w1, "-TERM");
    let exited =
        tokio::time::timeout(Duration::from_secs(60), w1.wait()).await.expect("w-1 exits").expect("reaped");
    assert!(exited.success(), "w-1 exited with {exited}");
    drop(fleet);
    check_calls_against(&sim, "beside-kcm", "team-a", "after").await;
}
