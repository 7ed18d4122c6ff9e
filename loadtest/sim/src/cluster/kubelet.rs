//! The simulated kubelet of every node: runs bound pods through their phases as their annotations
//! script, restarts containers in place (under restartPolicy OnFailure and Always) with the
//! kubelet's crash-loop back-off, records the kubelet's pod events, evicts, and confirms graceful
//! deletions.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::annotations::{RunFor, Script};
use super::backoff::{self, BackoffConfig, RestartBackoff};
use super::follow::{Follower, Following};
use super::nodes::Nodes;
use super::pod_events::{self, EventRecorder, KubeletEvent, PodRef};
use crate::apiserver::meta;
use crate::apiserver::{ApiError, ApiServer, DeleteOptions, Subresource, Target};
use crate::cluster::sleep_until;
use crate::store::{Change, ChangeKind, StoredObject};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    Ready,
    Exit,
    Evict,
    /// The end of a crash-loop back-off: the containers start again.
    Restart,
}

/// A timer: at `at`, do `action` to the pod with `uid`, if it is still on run `run`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    at: Instant,
    seq: u64,
    uid: Box<str>,
    run: u32,
    action: Action,
}

/// What the kubelet tracks of a running pod.
struct Running {
    namespace: Box<str>,
    name: Box<str>,
    node: Box<str>,
    /// Increments with every container (re)start; stale timers are ignored.
    run: u32,
}

/// What the kubelet needs of one container of the spec.
struct ContainerSpec {
    name: String,
    image: String,
    pull_policy: String,
}

/// How the simulated kubelet behaves.
#[derive(Debug, Clone, Copy)]
pub struct KubeletConfig {
    pub restart_backoff: BackoffConfig,
    /// Record pod events.
    pub events: bool,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self { restart_backoff: BackoffConfig::default(), events: true }
    }
}

pub struct Kubelet {
    api: Arc<ApiServer>,
    nodes: Arc<Nodes>,
    pods: Target,
    node_rid: crate::store::ResourceId,
    running: HashMap<Box<str>, Running>,
    timers: BinaryHeap<Reverse<Timer>>,
    seq: u64,
    /// Attempts per (job or owner, completion index), for `fail-attempts`.
    attempts: HashMap<(String, String), u64>,
    pod_ip: u32,
    /// Deleting pods left alone while deletion confirmation is off.
    unconfirmed: HashSet<(Box<str>, Box<str>)>,
    backoff: RestartBackoff,
    events: EventRecorder,
    /// (node, image) pairs pulled so far, for `IfNotPresent`.
    images: HashSet<(Box<str>, Box<str>)>,
}

impl Kubelet {
    pub fn new(api: Arc<ApiServer>, nodes: Arc<Nodes>, config: KubeletConfig) -> Self {
        let pods = api.builtin("", "v1", "pods");
        let node_rid = api.builtin("", "v1", "nodes").rid;
        Self {
            events: EventRecorder::new(api.clone(), config.events),
            api,
            nodes,
            pods,
            node_rid,
            running: HashMap::new(),
            timers: BinaryHeap::new(),
            seq: 0,
            attempts: HashMap::new(),
            pod_ip: 0,
            unconfirmed: HashSet::new(),
            backoff: RestartBackoff::new(config.restart_backoff),
            images: HashSet::new(),
        }
    }

    /// Runs forever, reacting to pod changes and timers.
    pub async fn run(mut self) {
        let (pods, mut following) =
            Following::start(self.api.store().clone(), self.pods.rid, &[self.node_rid]);
        for p in pods {
            self.on_pod(&p);
        }
        let mut recheck = tokio::time::interval(Duration::from_millis(200));
        loop {
            let next = self.timers.peek().map(|Reverse(t)| t.at);
            tokio::select! {
                received = following.recv() => if !following.handle(&mut self, received) {
                    return;
                },
                _ = sleep_until(next) => self.fire_due(),
                // Whether the node confirms deletions again is asked at each tick: nothing else
                // wakes this loop when it changes.
                _ = recheck.tick(), if !self.unconfirmed.is_empty() => if self.nodes.confirms_deletions() {
                    for (ns, name) in std::mem::take(&mut self.unconfirmed) {
                        if let Some(p) = self.api.store().get(self.pods.rid, &ns, &name) {
                            self.on_pod(&p);
                        }
                    }
                }
            }
        }
    }

    fn forget(&mut self, uid: &str) {
        self.running.remove(uid);
        self.backoff.forget_pod(uid);
        self.events.forget_pod(uid);
    }

    fn on_change(&mut self, change: &Change) {
        if change.object.resource != self.pods.rid {
            if change.kind == ChangeKind::Deleted && change.object.resource == self.node_rid {
                self.nodes.forget(&change.object.name);
            }
            return;
        }
        if change.kind == ChangeKind::Deleted {
            self.forget(&change.object.uid);
            return;
        }
        self.on_pod(&change.object);
    }

    fn on_pod(&mut self, stored: &StoredObject) {
        // Every pod write reaches the kubelet, most of them none of its business (a controller's
        // patch, its own status writes). The selectable fields and a probe for deletion decide
        // without building the pod; it is parsed only to act on it. Parsing each one made the
        // kubelet fall behind a busy store, and a resync of every pod kept it behind.
        let node = stored.field("spec.nodeName").unwrap_or("");
        // An unset phase reads as "" there, and the kubelet takes it as Pending.
        let phase = match stored.field("status.phase").unwrap_or("") {
            "" => "Pending",
            phase => phase,
        };
        // Unbound pods are the scheduler's (`cluster::scheduler`).
        if node.is_empty() || !self.nodes.is_ready(node) {
            return;
        }
        let deleting = meta::stored_is_deleting(stored);
        let starts = phase == "Pending" && !self.running.contains_key(&stored.uid);
        if !deleting && !starts {
            return;
        }
        let result = if !deleting {
            let node = node.to_string();
            self.start(stored, &stored.value(), &node)
        } else if self.nodes.confirms_deletions() {
            self.confirm_deletion(stored, phase == "Succeeded" || phase == "Failed")
        } else {
            self.unconfirmed.insert((stored.namespace.clone(), stored.name.clone()));
            Ok(())
        };
        if let Err(e) = result
            && e.code != 404
            && e.code != 409
        {
            tracing::warn!(pod = %stored.name, namespace = %stored.namespace, error = %e, "kubelet step failed");
        }
    }

    fn start(&mut self, stored: &StoredObject, pod: &Value, node: &str) -> Result<(), ApiError> {
        let script = Script::of(pod);
        self.pod_ip = self.pod_ip.wrapping_add(1);
        let ip = format!(
            "10.{}.{}.{}",
            64 + (self.pod_ip >> 16) % 64,
            (self.pod_ip >> 8) & 0xff,
            self.pod_ip & 0xff
        );
        let host_ip =
            pod.pointer("/spec/nodeName").and_then(Value::as_str).map(|n| self.nodes.internal_ip(n));
        let now = meta::now_seconds();
        let ready_now = script.ready_after.is_zero();
        let uid = stored.uid.clone();
        self.api.update_with(&self.pods, &stored.namespace, &stored.name, Subresource::Status, |p| {
            if *meta::str_field(p, "uid").unwrap_or("") != *uid {
                return Ok(false);
            }
            let containers = container_names(p);
            p["status"] = json!({
                "phase": "Running",
                "conditions": conditions(&now, true, ready_now),
                "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
                "podIP": ip, "podIPs": [{"ip": ip}],
                "startTime": now,
                // Set by the apiserver at create (ComputePodQOS); the kubelet keeps it.
                "qosClass": p.pointer("/status/qosClass").cloned().unwrap_or(json!("BestEffort")),
                "containerStatuses": containers.iter().map(|c| running_status(c, &now, ready_now, 0, None)).collect::<Vec<_>>(),
            });
            Ok(true)
        })?;
        self.running.insert(
            stored.uid.clone(),
            Running {
                namespace: stored.namespace.clone(),
                name: stored.name.clone(),
                node: node.into(),
                run: 1,
            },
        );
        self.record_starts(&stored.namespace, &stored.name, &stored.uid, node, pod);
        self.arm(&stored.uid, 1, &script);
        if let Some(after) = script.evict_after {
            self.timer(after, &stored.uid, 1, Action::Evict);
        }
        Ok(())
    }

    fn arm(&mut self, uid: &str, run: u32, script: &Script) {
        if !script.ready_after.is_zero() {
            self.timer(script.ready_after, uid, run, Action::Ready);
        }
        if let RunFor::Duration(d) = script.run {
            self.timer(d, uid, run, Action::Exit);
        }
    }

    fn timer(&mut self, after: Duration, uid: &str, run: u32, action: Action) {
        self.seq += 1;
        self.timers.push(Reverse(Timer {
            at: Instant::now() + after,
            seq: self.seq,
            uid: uid.into(),
            run,
            action,
        }));
    }

    fn fire_due(&mut self) {
        let now = Instant::now();
        while let Some(Reverse(t)) = self.timers.peek() {
            if t.at > now {
                break;
            }
            let Some(Reverse(t)) = self.timers.pop() else { break };
            let Some(r) = self.running.get(&t.uid) else { continue };
            if r.run != t.run && t.action != Action::Evict {
                continue;
            }
            // The node was deleted or its heartbeat stopped: its pods stay as they were, for
            // PodGC (or the node's return) to deal with.
            if !self.nodes.kubelet_alive(&r.node) {
                continue;
            }
            let (ns, name) = (r.namespace.clone(), r.name.clone());
            let result = match t.action {
                Action::Ready => self.set_ready(&ns, &name, &t.uid),
                Action::Exit => self.exit(&ns, &name, &t.uid),
                Action::Evict => self.evict(&ns, &name, &t.uid),
                Action::Restart => self.restart_after_back_off(&ns, &name, &t.uid, t.run),
            };
            if let Err(e) = result
                && e.code != 404
                && e.code != 409
            {
                tracing::warn!(pod = %name, namespace = %ns, error = %e, "kubelet timer step failed");
            }
        }
    }

    fn set_ready(&mut self, ns: &str, name: &str, uid: &str) -> Result<(), ApiError> {
        let now = meta::now_seconds();
        self.api.update_with(&self.pods, ns, name, Subresource::Status, |p| {
            if meta::str_field(p, "uid") != Some(uid)
                || p.pointer("/status/phase").and_then(Value::as_str) != Some("Running")
            {
                return Ok(false);
            }
            set_condition(p, "Ready", "True", &now);
            set_condition(p, "ContainersReady", "True", &now);
            if let Some(cs) = p.pointer_mut("/status/containerStatuses").and_then(Value::as_array_mut) {
                for c in cs {
                    c["ready"] = json!(true);
                }
            }
            Ok(true)
        })?;
        Ok(())
    }

    /// The key `fail-attempts` counts under: the owning Job (or owner) and completion index.
    fn attempt_key(pod: &Value, script: &Script) -> (String, String) {
        let owner = meta::owner_uids(pod).first().map(|u| u.to_string()).unwrap_or_else(|| {
            format!("{}/{}", meta::str_field(pod, "namespace").unwrap_or(""), meta::name(pod))
        });
        (owner, script.index.clone().unwrap_or_default())
    }

    fn exit(&mut self, ns: &str, name: &str, uid: &str) -> Result<(), ApiError> {
        let current = self.api.get(&self.pods, ns, name)?;
        let pod = current.value();
        if meta::str_field(&pod, "uid") != Some(uid) {
            return Ok(());
        }
        let script = Script::of(&pod);
        let key = Self::attempt_key(&pod, &script);
        let attempt = {
            let n = self.attempts.entry(key).or_default();
            *n += 1;
            *n
        };
        let failing_code = if script.exit_code == 0 { 1 } else { script.exit_code };
        let code = if script.index_fails == Some(true) {
            failing_code
        } else if script.fail_attempts > 0 {
            if attempt <= script.fail_attempts { failing_code } else { 0 }
        } else if script.index_fails == Some(false) {
            0
        } else {
            script.exit_code
        };
        let policy =
            pod.pointer("/spec/restartPolicy").and_then(Value::as_str).unwrap_or("Always").to_string();
        let restart = policy == "Always" || (policy == "OnFailure" && code != 0);
        let now = meta::now_seconds();
        if restart {
            let Some(r) = self.running.get_mut(uid) else { return Ok(()) };
            // A new run: the finished run's timers are stale from here on.
            r.run += 1;
            let run = r.run;
            let node = r.node.clone();
            let finished = Instant::now();
            let mut wait = Duration::ZERO;
            for c in container_specs(&pod) {
                wait = wait.max(self.backoff.on_exit(&backoff::key(uid, &c.name), finished));
            }
            if wait.is_zero() {
                return self.run_again(ns, name, uid, &node, run, Some(code));
            }
            self.back_off(ns, name, uid, &node, code, wait)?;
            self.timer(wait, uid, run, Action::Restart);
            return Ok(());
        }
        self.running.remove(uid);
        self.api.update_with(&self.pods, ns, name, Subresource::Status, |p| {
            if meta::str_field(p, "uid") != Some(uid) {
                return Ok(false);
            }
            terminate(p, code, if code == 0 { "Succeeded" } else { "Failed" }, &now);
            Ok(true)
        })?;
        Ok(())
    }

    /// The containers start again (run `run`) right after they exited with `exited`, or after a
    /// back-off (`None`: the last state was recorded when the wait began).
    fn run_again(
        &mut self,
        ns: &str,
        name: &str,
        uid: &str,
        node: &str,
        run: u32,
        exited: Option<i64>,
    ) -> Result<(), ApiError> {
        let now = meta::now_seconds();
        let mut started_pod = None;
        let mut ready_after = Duration::ZERO;
        self.api.update_with(&self.pods, ns, name, Subresource::Status, |p| {
            if meta::str_field(p, "uid") != Some(uid) {
                return Ok(false);
            }
            ready_after = Script::of(p).ready_after;
            let ready_now = ready_after.is_zero();
            let previous =
                p.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
            let statuses: Vec<Value> = container_names(p)
                .iter()
                .map(|c| {
                    let old =
                        previous.iter().find(|s| s.get("name").and_then(Value::as_str) == Some(c.0.as_str()));
                    let restarts =
                        old.and_then(|s| s.get("restartCount")).and_then(Value::as_i64).unwrap_or(0) + 1;
                    let last = match exited {
                        Some(code) => {
                            let from = old
                                .and_then(|s| s.pointer("/state/running/startedAt"))
                                .and_then(Value::as_str)
                                .unwrap_or(&now);
                            Some(terminated_state(code, from, &now))
                        }
                        None => old.and_then(|s| s.get("lastState")).cloned(),
                    };
                    running_status(c, &now, ready_now, restarts, last)
                })
                .collect();
            p["status"]["containerStatuses"] = json!(statuses);
            set_condition(p, "Ready", if ready_now { "True" } else { "False" }, &now);
            set_condition(p, "ContainersReady", if ready_now { "True" } else { "False" }, &now);
            started_pod = Some(p.clone());
            Ok(true)
        })?;
        if let Some(pod) = started_pod {
            self.record_starts(ns, name, uid, node, &pod);
            let script = Script::of(&pod);
            self.arm(uid, run, &script);
        }
        Ok(())
    }

    /// The containers exited with `code` and wait `wait` before they start again: each shows
    /// `CrashLoopBackOff` with the kubelet's message, and a BackOff event is recorded.
    fn back_off(
        &mut self,
        ns: &str,
        name: &str,
        uid: &str,
        node: &str,
        code: i64,
        wait: Duration,
    ) -> Result<(), ApiError> {
        let now = meta::now_seconds();
        let pod_ref = PodRef { namespace: ns, name, uid, node };
        let formatted = pod_events::format_pod(&pod_ref);
        let backoff = crate::go_fmt::go_duration(wait);
        let mut names = Vec::new();
        self.api.update_with(&self.pods, ns, name, Subresource::Status, |p| {
            if meta::str_field(p, "uid") != Some(uid) {
                return Ok(false);
            }
            names.clear();
            if let Some(cs) = p.pointer_mut("/status/containerStatuses").and_then(Value::as_array_mut) {
                for c in cs {
                    let container = c.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                    let from =
                        c.pointer("/state/running/startedAt").and_then(Value::as_str).unwrap_or(&now).to_string();
                    c["lastState"] = terminated_state(code, &from, &now);
                    c["state"] = json!({"waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": format!("back-off {backoff} restarting failed container={container} pod={formatted}"),
                    }});
                    c["ready"] = json!(false);
                    c["started"] = json!(false);
                    names.push(container);
                }
            }
            set_condition(p, "Ready", "False", &now);
            set_condition(p, "ContainersReady", "False", &now);
            Ok(true)
        })?;
        for container in &names {
            self.events.record(&pod_ref, Some(container), pod_events::back_off(container, &pod_ref));
        }
        Ok(())
    }

    /// The back-off of run `run` is over: the back-off windows double and the containers start.
    fn restart_after_back_off(&mut self, ns: &str, name: &str, uid: &str, run: u32) -> Result<(), ApiError> {
        let Some(node) = self.running.get(uid).map(|r| r.node.clone()) else { return Ok(()) };
        let current = self.api.get(&self.pods, ns, name)?;
        let now = Instant::now();
        for c in container_specs(&current.value()) {
            self.backoff.restarted(&backoff::key(uid, &c.name), now);
        }
        self.run_again(ns, name, uid, &node, run, None)
    }

    /// Pulling/Pulled, Created and Started for every container of a pod that (re)starts.
    fn record_starts(&mut self, ns: &str, name: &str, uid: &str, node: &str, pod: &Value) {
        let pod_ref = PodRef { namespace: ns, name, uid, node };
        for c in container_specs(pod) {
            let present = self.images.contains(&(node.into(), c.image.as_str().into()));
            let pull = match c.pull_policy.as_str() {
                "Always" => true,
                "Never" => false,
                _ => !present,
            };
            if pull {
                self.events.record(&pod_ref, Some(&c.name), pod_events::pulling(&c.image));
                self.events.record(&pod_ref, Some(&c.name), pod_events::pulled(&c.image));
                self.images.insert((node.into(), c.image.as_str().into()));
            } else {
                self.events.record(&pod_ref, Some(&c.name), pod_events::already_present(&c.image));
            }
            self.events.record(&pod_ref, Some(&c.name), pod_events::created(&c.name));
            self.events.record(&pod_ref, Some(&c.name), pod_events::started(&c.name));
        }
    }

    /// Killing for every container still running of a pod being deleted.
    fn record_kills(&mut self, pod: &Value, ns: &str, name: &str, uid: &str) {
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
        let pod_ref = PodRef { namespace: ns, name, uid, node };
        let running: Vec<String> = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter(|c| c.pointer("/state/running").is_some())
                    .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        for container in running {
            let event: KubeletEvent = pod_events::killing(&container);
            self.events.record(&pod_ref, Some(&container), event);
        }
    }

    fn evict(&mut self, ns: &str, name: &str, uid: &str) -> Result<(), ApiError> {
        self.running.remove(uid);
        let now = meta::now_seconds();
        self.api.update_with(&self.pods, ns, name, Subresource::Status, |p| {
            if meta::str_field(p, "uid") != Some(uid) {
                return Ok(false);
            }
            terminate(p, 137, "Failed", &now);
            p["status"]["reason"] = json!("Evicted");
            p["status"]["message"] = json!("The node was low on resource: memory.");
            if let Some(cs) = p["status"]["conditions"].as_array_mut() {
                cs.push(json!({"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                    "message": "The node was low on resource: memory.", "lastProbeTime": null, "lastTransitionTime": now}));
            }
            Ok(true)
        })?;
        Ok(())
    }

    /// Graceful deletion: the containers are stopped, the pod goes terminal, then the kubelet
    /// deletes it with grace 0 and a uid precondition.
    fn confirm_deletion(&mut self, stored: &StoredObject, terminal: bool) -> Result<(), ApiError> {
        self.running.remove(&stored.uid);
        if !terminal {
            self.record_kills(&stored.value(), &stored.namespace, &stored.name, &stored.uid);
            let now = meta::now_seconds();
            let uid = stored.uid.clone();
            self.api.update_with(&self.pods, &stored.namespace, &stored.name, Subresource::Status, |p| {
                if *meta::str_field(p, "uid").unwrap_or("") != *uid {
                    return Ok(false);
                }
                let phase = p.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
                if phase == "Succeeded" || phase == "Failed" {
                    return Ok(false);
                }
                terminate(p, 137, "Failed", &now);
                Ok(true)
            })?;
        }
        let opts = DeleteOptions {
            grace_period_seconds: Some(0),
            precondition_uid: Some(stored.uid.to_string()),
            ..Default::default()
        };
        self.api.delete(&self.pods, &stored.namespace, &stored.name, &opts)?;
        Ok(())
    }
}

fn container_names(pod: &Value) -> Vec<(String, String)> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                        c.get("image").and_then(Value::as_str).unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn container_specs(pod: &Value) -> Vec<ContainerSpec> {
    let field = |c: &Value, key: &str| c.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| ContainerSpec {
                    name: field(c, "name"),
                    image: field(c, "image"),
                    pull_policy: field(c, "imagePullPolicy"),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn conditions(now: &str, scheduled: bool, ready: bool) -> Value {
    let c = |t: &str, s: bool| json!({"type": t, "status": if s {"True"} else {"False"}, "lastProbeTime": null, "lastTransitionTime": now});
    json!([
        c("PodReadyToStartContainers", true),
        c("Initialized", true),
        c("Ready", ready),
        c("ContainersReady", ready),
        c("PodScheduled", scheduled),
    ])
}

fn set_condition(pod: &mut Value, kind: &str, status: &str, now: &str) {
    if let Some(cs) = pod.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
        for c in cs.iter_mut().filter(|c| c.get("type").and_then(Value::as_str) == Some(kind)) {
            if c.get("status").and_then(Value::as_str) != Some(status) {
                c["status"] = json!(status);
                c["lastTransitionTime"] = json!(now);
            }
        }
    }
}

fn running_status(
    (name, image): &(String, String),
    now: &str,
    ready: bool,
    restarts: i64,
    last: Option<Value>,
) -> Value {
    let mut s = json!({
        "name": name, "image": image, "imageID": format!("sim://{image}"),
        "containerID": format!("sim://{}", uuid::Uuid::new_v4().simple()),
        "ready": ready, "started": true, "restartCount": restarts,
        "state": {"running": {"startedAt": now}},
        "lastState": {},
    });
    if let Some(l) = last {
        s["lastState"] = l;
    }
    s
}

fn terminated_state(code: i64, started: &str, now: &str) -> Value {
    json!({"terminated": {
        "exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
        "startedAt": started, "finishedAt": now, "containerID": format!("sim://{}", uuid::Uuid::new_v4().simple())
    }})
}

/// Moves the pod to a terminal phase with every container terminated with `code`.
fn terminate(p: &mut Value, code: i64, phase: &str, now: &str) {
    p["status"]["phase"] = json!(phase);
    set_condition(p, "Ready", "False", now);
    set_condition(p, "ContainersReady", "False", now);
    set_condition(p, "PodReadyToStartContainers", "False", now);
    let started = p.pointer("/status/startTime").and_then(Value::as_str).unwrap_or(now).to_string();
    if let Some(cs) = p.pointer_mut("/status/containerStatuses").and_then(Value::as_array_mut) {
        for c in cs {
            let from =
                c.pointer("/state/running/startedAt").and_then(Value::as_str).unwrap_or(&started).to_string();
            c["state"] = terminated_state(code, &from, now);
            c["ready"] = json!(false);
            c["started"] = json!(false);
        }
    }
}

impl Follower for Kubelet {
    fn on_change(&mut self, change: &Change) {
        Kubelet::on_change(self, change);
    }

    fn relist(&mut self, pods: Vec<Arc<StoredObject>>) {
        let live: HashSet<&str> = pods.iter().map(|p| &*p.uid).collect();
        let gone: Vec<Box<str>> =
            self.running.keys().filter(|uid| !live.contains(&***uid)).cloned().collect();
        for uid in gone {
            self.forget(&uid);
        }
        for p in &pods {
            self.on_pod(p);
        }
    }
}
