//! PodGC by policy (docs/beyond-upstream.md, issue 29 §4): which terminated pods to collect
//! beside upstream's cluster-wide count — by age, by per-namespace caps, Succeeded before Failed —
//! and which pods, force-deleted already and held only by finalizers, to leave out. With every
//! knob at its default the decision is upstream's `gcTerminated` exactly. Time is an argument; no
//! I/O.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::core::{self, Deletion, PodView, Reason};

/// The order terminated pods are collected in, within each rule. (The variants carry no doc
/// comments: clap would print the flag's possible values as a list, and every flag's help in
/// its long form.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    // upstream's: evicted first, then the oldest by creation, then by name.
    #[default]
    Upstream,
    // Succeeded pods before the others (failures are what people debug: k/k#118992), then
    // upstream's order within each.
    SucceededFirst,
}

/// What decides the terminated pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminatedPolicy {
    /// `--terminated-pod-gc-threshold`: terminated pods kept cluster-wide; 0 turns that count
    /// off (the other rules still apply).
    pub threshold: usize,
    /// `--podgc-max-age`: a terminated pod whose termination time is older goes, whatever the
    /// counts.
    pub max_age: Option<Duration>,
    /// `--podgc-namespace-threshold`: terminated pods kept per namespace; 0: no cap.
    pub namespace_threshold: usize,
    pub order: Order,
}

impl Default for TerminatedPolicy {
    fn default() -> Self {
        Self {
            threshold: core::DEFAULT_TERMINATED_POD_THRESHOLD,
            max_age: None,
            namespace_threshold: 0,
            order: Order::Upstream,
        }
    }
}

/// Per-namespace caps from the `--podgc-namespace-caps` ConfigMap; they override
/// `--podgc-namespace-threshold` for their namespace, and 0 exempts a namespace from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceCaps(HashMap<String, usize>);

/// A ConfigMap entry that is not a cap: left out, and reported.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct BadCap {
    pub namespace: String,
    pub value: String,
}

impl std::fmt::Display for BadCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the PodGC cap of namespace {:?} is {:?}, not a whole number of pods (0 for no cap); it is ignored",
            self.namespace, self.value
        )
    }
}

impl NamespaceCaps {
    /// Reads a ConfigMap's `data`, `<namespace>: "<cap>"`; a value that is not a whole number is
    /// returned apart and has no effect.
    pub fn parse(data: &BTreeMap<String, String>) -> (Self, Vec<BadCap>) {
        let mut caps = HashMap::new();
        let mut bad = Vec::new();
        for (namespace, value) in data {
            match value.trim().parse::<usize>() {
                Ok(cap) => {
                    caps.insert(namespace.clone(), cap);
                }
                Err(_) => bad.push(BadCap { namespace: namespace.clone(), value: value.clone() }),
            }
        }
        (Self(caps), bad)
    }

    fn cap(&self, namespace: &str, default: usize) -> usize {
        self.0.get(namespace).copied().unwrap_or(default)
    }

    fn is_empty(&self) -> bool {
        self.0.values().all(|cap| *cap == 0)
    }
}

/// A pod force-deleted already (grace period 0) that only its finalizers keep: another DELETE
/// cannot move it (k/k#141190), only the finalizers' owners can.
pub fn is_finalizer_held(pod: &PodView<'_>) -> bool {
    pod.deleting && pod.grace_zero && pod.has_finalizers
}

/// The pods the passes look at: all of them, or without the finalizer-held ones under
/// `--podgc-skip-finalizer-held`, so that those are neither deleted again nor counted.
pub fn eligible<'a>(pods: Vec<PodView<'a>>, skip_finalizer_held: bool) -> Vec<PodView<'a>> {
    if !skip_finalizer_held {
        return pods;
    }
    pods.into_iter().filter(|p| !is_finalizer_held(p)).collect()
}

/// Finalizer-held pods: how many, and how long ago the oldest was deleted (seconds; 0 when none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FinalizerBacklog {
    pub pods: usize,
    pub oldest_age_seconds: i64,
}

pub fn finalizer_backlog(pods: &[PodView<'_>], now: i64) -> FinalizerBacklog {
    let held = pods.iter().filter(|p| is_finalizer_held(p));
    let (count, oldest) = held.fold((0, None::<i64>), |(n, oldest), p| {
        (n + 1, Some(oldest.map_or(p.deleted_at, |o| o.min(p.deleted_at))))
    });
    FinalizerBacklog { pods: count, oldest_age_seconds: oldest.map_or(0, |o| (now - o).max(0)) }
}

fn order_of(order: Order) -> impl Fn(&PodView<'_>, &PodView<'_>) -> Ordering {
    move |a, b| {
        let first = match order {
            Order::Upstream => Ordering::Equal,
            Order::SucceededFirst => (a.phase != "Succeeded").cmp(&(b.phase != "Succeeded")),
        };
        first.then_with(|| core::eviction_and_creation_order(a, b))
    }
}

/// The terminated pass: every terminated pod past `max_age`; then, of those left, each
/// namespace's excess over its cap; then, of those left, the excess over the cluster-wide
/// threshold — each rule taking pods in `order`. The deletions come in that order too.
pub fn gc_terminated(
    pods: &[PodView<'_>],
    policy: &TerminatedPolicy,
    caps: &NamespaceCaps,
    now: i64,
) -> Vec<Deletion> {
    let by_namespace = policy.namespace_threshold > 0 || !caps.is_empty();
    let mut terminated: Vec<&PodView<'_>> = pods.iter().filter(|p| core::is_terminated(p)).collect();
    let over_threshold = policy.threshold > 0 && terminated.len() > policy.threshold;
    if policy.max_age.is_none() && !by_namespace && !over_threshold {
        // upstream's early return: no sort while under the threshold.
        return Vec::new();
    }
    let order = order_of(policy.order);
    terminated.sort_by(|a, b| order(a, b));
    let mut chosen = vec![false; terminated.len()];
    if let Some(max_age) = policy.max_age {
        let max_age = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
        for (pod, chosen) in terminated.iter().zip(chosen.iter_mut()) {
            *chosen = now.saturating_sub(pod.terminated_at) > max_age;
        }
    }
    if by_namespace {
        let mut left: HashMap<&str, usize> = HashMap::new();
        for (pod, _) in terminated.iter().zip(&chosen).filter(|(_, c)| !**c) {
            *left.entry(pod.namespace).or_default() += 1;
        }
        let mut excess: HashMap<&str, usize> = left
            .into_iter()
            .filter_map(|(ns, n)| match caps.cap(ns, policy.namespace_threshold) {
                0 => None,
                cap => Some((ns, n.saturating_sub(cap))),
            })
            .filter(|(_, excess)| *excess > 0)
            .collect();
        for (pod, chosen) in terminated.iter().zip(chosen.iter_mut()).filter(|(_, c)| !**c) {
            if let Some(n) = excess.get_mut(pod.namespace).filter(|n| **n > 0) {
                *n -= 1;
                *chosen = true;
            }
        }
    }
    if policy.threshold > 0 {
        let left = chosen.iter().filter(|c| !**c).count();
        let mut excess = left.saturating_sub(policy.threshold);
        for chosen in chosen.iter_mut().filter(|c| !**c) {
            if excess == 0 {
                break;
            }
            *chosen = true;
            excess -= 1;
        }
    }
    terminated
        .into_iter()
        .zip(chosen)
        .filter(|(_, c)| *c)
        .map(|(p, _)| core::deletion(p, Reason::Terminated))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podgc::core::Uid;

    const HOUR: i64 = 3600;
    const NOW: i64 = 100 * HOUR;

    fn pod<'a>(ns: &'a str, name: &'a str, phase: &'a str, created: i64) -> PodView<'a> {
        PodView {
            namespace: ns,
            name,
            uid: Uid::Text(name),
            phase,
            node_name: "n",
            deleting: false,
            has_finalizers: false,
            grace_zero: false,
            created,
            terminated_at: created,
            deleted_at: 0,
            evicted_reason: false,
        }
    }

    fn held<'a>(ns: &'a str, name: &'a str, deleted_at: i64) -> PodView<'a> {
        PodView {
            deleting: true,
            grace_zero: true,
            has_finalizers: true,
            deleted_at,
            ..pod(ns, name, "Succeeded", 0)
        }
    }

    fn names(d: &[Deletion]) -> Vec<&str> {
        d.iter().map(|d| d.name.as_str()).collect()
    }

    fn policy(threshold: usize) -> TerminatedPolicy {
        TerminatedPolicy { threshold, ..TerminatedPolicy::default() }
    }

    fn caps(entries: &[(&str, &str)]) -> (NamespaceCaps, Vec<BadCap>) {
        NamespaceCaps::parse(&entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    /// The defaults are upstream's pass: TestGCTerminated's table (threshold 1, pods an hour
    /// apart), and, for every threshold over a mixed set, the same deletions in the same order.
    #[test]
    fn with_the_defaults_the_pass_is_upstreams() {
        let upstream = [
            (
                vec![
                    pod("d", "a", "Failed", 0),
                    pod("d", "b", "Succeeded", HOUR),
                    pod("d", "c", "Failed", 2 * HOUR),
                ],
                vec!["a", "b"],
            ),
            (
                vec![
                    pod("d", "a", "Running", 0),
                    pod("d", "b", "Succeeded", HOUR),
                    pod("d", "c", "Failed", 2 * HOUR),
                ],
                vec!["b"],
            ),
            (
                vec![
                    pod("d", "a", "Failed", 0),
                    pod("d", "b", "Succeeded", HOUR),
                    PodView { evicted_reason: true, ..pod("d", "c", "Failed", 2 * HOUR) },
                ],
                vec!["c", "a"],
            ),
        ];
        for (pods, want) in upstream {
            assert_eq!(names(&gc_terminated(&pods, &policy(1), &NamespaceCaps::default(), NOW)), want);
        }
        let phases = ["Succeeded", "Failed", "", "Running", "Pending", "Unknown"];
        let names_: Vec<String> = (0..60).map(|i| format!("p{i:02}")).collect();
        let mixed: Vec<PodView<'_>> = names_
            .iter()
            .enumerate()
            .map(|(i, n)| PodView {
                evicted_reason: i % 7 == 0,
                ..pod(["a", "b", "c"][i % 3], n, phases[i % phases.len()], ((i * 37) % 11) as i64 * HOUR)
            })
            .collect();
        for threshold in 0..40 {
            assert_eq!(
                gc_terminated(&mixed, &policy(threshold), &NamespaceCaps::default(), NOW),
                core::gc_terminated(&mixed, threshold),
                "threshold {threshold}"
            );
        }
    }

    /// k/k#78693 and PR #79047: operators wanted terminated pods gone sooner than 12,500 of them
    /// pile up; test-infra's sinker collects by time since termination (`terminated_pod_ttl`).
    #[test]
    fn max_age_collects_pods_terminated_longer_ago_whatever_the_count() {
        let pods = [
            PodView { terminated_at: NOW - 3 * HOUR, ..pod("a", "old-finish", "Succeeded", 0) },
            // Created long ago, finished a minute ago: its age is from its finish.
            PodView { terminated_at: NOW - 60, ..pod("a", "recent-finish", "Failed", 0) },
            PodView { terminated_at: NOW - 2 * HOUR, ..pod("b", "exactly-the-age", "Failed", HOUR) },
            pod("b", "running", "Running", 0),
        ];
        let p = TerminatedPolicy { max_age: Some(Duration::from_secs(2 * 3600)), ..policy(12_500) };
        assert_eq!(names(&gc_terminated(&pods, &p, &NamespaceCaps::default(), NOW)), ["old-finish"]);
        let p = TerminatedPolicy { threshold: 0, ..p };
        assert_eq!(
            names(&gc_terminated(&pods, &p, &NamespaceCaps::default(), NOW)),
            ["old-finish"],
            "threshold 0 turns off the count only"
        );
    }

    /// k/k#63483: one namespace's terminated pods push out another's under a single
    /// cluster-wide threshold; a cap per namespace keeps each namespace's newest.
    #[test]
    fn namespace_caps_collect_each_namespaces_excess_oldest_first() {
        let pods = [
            pod("noisy", "n1", "Succeeded", 0),
            pod("noisy", "n2", "Failed", HOUR),
            pod("noisy", "n3", "Succeeded", 2 * HOUR),
            pod("noisy", "n4", "Succeeded", 3 * HOUR),
            pod("quiet", "q1", "Failed", -HOUR),
            pod("quiet", "q2", "Succeeded", 0),
            pod("exempt", "e1", "Failed", -2 * HOUR),
            pod("exempt", "e2", "Failed", -2 * HOUR),
            pod("exempt", "e3", "Failed", -2 * HOUR),
        ];
        let (overrides, bad) = caps(&[("exempt", "0"), ("quiet", "1")]);
        assert!(bad.is_empty());
        let p = TerminatedPolicy { namespace_threshold: 2, ..policy(0) };
        assert_eq!(names(&gc_terminated(&pods, &p, &overrides, NOW)), ["q1", "n1", "n2"]);
        // The cluster-wide threshold then counts what the caps left (2 + 1 + 3 = 6).
        let p = TerminatedPolicy { threshold: 4, ..p };
        assert_eq!(names(&gc_terminated(&pods, &p, &overrides, NOW)), ["e1", "e2", "q1", "n1", "n2"]);
        // Caps from the ConfigMap alone, without the flag.
        let (only_quiet, _) = caps(&[("quiet", "1")]);
        assert_eq!(names(&gc_terminated(&pods, &policy(0), &only_quiet, NOW)), ["q1"]);
    }

    /// k/k#118992: with `succeeded-first`, Succeeded pods go before Failed ones (evicted ones
    /// included), upstream's order within each.
    #[test]
    fn succeeded_first_keeps_failures_longest() {
        let pods = [
            PodView { evicted_reason: true, ..pod("d", "evicted", "Failed", 2 * HOUR) },
            pod("d", "failed-old", "Failed", 0),
            pod("d", "ok-new", "Succeeded", 3 * HOUR),
            pod("d", "ok-old", "Succeeded", HOUR),
            pod("d", "no-phase", "", 0),
        ];
        let p = TerminatedPolicy { order: Order::SucceededFirst, ..policy(2) };
        assert_eq!(
            names(&gc_terminated(&pods, &p, &NamespaceCaps::default(), NOW)),
            ["ok-old", "ok-new", "evicted"]
        );
        assert_eq!(
            names(&gc_terminated(&pods, &policy(2), &NamespaceCaps::default(), NOW)),
            ["evicted", "failed-old", "no-phase"]
        );
        let by_ns = TerminatedPolicy { order: Order::SucceededFirst, namespace_threshold: 4, ..policy(0) };
        assert_eq!(names(&gc_terminated(&pods, &by_ns, &NamespaceCaps::default(), NOW)), ["ok-old"]);
    }

    /// k/k#141190: a pod deleted with grace 0 and kept by finalizers is force-deleted again
    /// every pass upstream, and counted; skipped, it is neither.
    #[test]
    fn finalizer_held_pods_are_left_out_when_skipped_and_always_counted_in_the_backlog() {
        let pods = vec![
            held("d", "held-1", NOW - 50),
            held("d", "held-2", NOW - 500),
            PodView { grace_zero: false, ..held("d", "graceful", NOW - 900) },
            PodView { has_finalizers: false, ..held("d", "no-finalizer", NOW - 900) },
            pod("d", "done", "Succeeded", HOUR),
        ];
        assert_eq!(finalizer_backlog(&pods, NOW), FinalizerBacklog { pods: 2, oldest_age_seconds: 500 });
        assert_eq!(finalizer_backlog(&pods[2..], NOW), FinalizerBacklog::default());
        let upstream =
            gc_terminated(&eligible(pods.clone(), false), &policy(1), &NamespaceCaps::default(), NOW);
        assert_eq!(names(&upstream), ["graceful", "held-1", "held-2", "no-finalizer"]);
        let skipped = gc_terminated(&eligible(pods, true), &policy(1), &NamespaceCaps::default(), NOW);
        assert_eq!(names(&skipped), ["graceful", "no-finalizer"], "neither deleted again nor counted");
    }

    #[test]
    fn a_cap_that_is_not_a_number_is_reported_and_ignored() {
        let (parsed, bad) = caps(&[("a", " 5 "), ("b", "ten"), ("c", "-1"), ("d", "")]);
        assert_eq!(parsed.cap("a", 9), 5);
        assert_eq!(parsed.cap("b", 9), 9, "the flag's value stays");
        let bad_namespaces: Vec<&str> = bad.iter().map(|b| b.namespace.as_str()).collect();
        assert_eq!(bad_namespaces, ["b", "c", "d"]);
        assert!(bad[0].to_string().contains("\"ten\""), "{}", bad[0]);
    }
}
