//! A scenario's `chaos:` section: faults of the listed kinds at random times, drawn from a seed so
//! that the same seed gives the same plan, and bounded so that the fleet is never left without
//! an acting worker, a coordinator, or a node to run pods on. The plan is expanded into the
//! scenario's faults when the file is parsed; the report lists it as applied.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::scenario::{ApiFaults, Fault, FaultAction, FleetSpec, LeaseSetting, Span, Store};
use crate::splitmix::SplitMix;

/// `min..max` durations: `10s..30s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanRange {
    pub min: Duration,
    pub max: Duration,
}

impl<'de> Deserialize<'de> for SpanRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let parse = |s: &str| humantime::parse_duration(s.trim());
        let range = match text.split_once("..") {
            Some((a, b)) => parse(a).and_then(|min| Ok(Self { min, max: parse(b)? })),
            None => parse(&text).map(|d| Self { min: d, max: d }),
        };
        range.map_err(|e| serde::de::Error::custom(format!("{text:?} is not a range like 10s..30s: {e}")))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chaos {
    /// The same seed gives the same plan.
    pub seed: u64,
    /// The gap between two faults, drawn evenly from the range.
    pub every: SpanRange,
    /// No fault before this (default: the shortest gap).
    #[serde(default)]
    pub from: Option<Span>,
    /// No fault after this (default: the scenario's duration less a minute, so that the last
    /// fault's effects settle while the workload still runs).
    #[serde(default)]
    pub until: Option<Span>,
    /// The kinds to draw from.
    pub actions: Vec<FaultAction>,
    /// `add-worker` stops at this many running workers (default: the fleet's workers + 2).
    #[serde(default)]
    pub max_workers: Option<usize>,
}

/// A field of `chaos:` that cannot work, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub reason: String,
}

/// Draws from the seed's generator.
trait Draw {
    fn within(&mut self, range: SpanRange) -> Duration;
}

impl Draw for SplitMix {
    fn within(&mut self, range: SpanRange) -> Duration {
        let span = range.max.saturating_sub(range.min).as_millis() as u64;
        range.min + Duration::from_millis(if span == 0 { 0 } else { self.next_u64() % (span + 1) })
    }
}

/// What the plan keeps track of to stay within bounds.
struct FleetState {
    /// Running workers, in start order.
    running: Vec<String>,
    /// Workers ever started (the next `add-worker` is `w-<started>`).
    started: usize,
    drained: Option<String>,
    coordinators: usize,
    nodes: Vec<String>,
}

impl FleetState {
    fn acting(&self) -> Vec<&String> {
        self.running.iter().filter(|w| self.drained.as_ref() != Some(*w)).collect()
    }
}

fn at(t: Duration, action: FaultAction) -> Fault {
    Fault {
        at: Span(t),
        action,
        worker: None,
        resume_after: None,
        restart_after: None,
        api: None,
        node: None,
    }
}

/// The API faults a chaos step sets (cleared at the step's middle): conflicts, throttling and
/// server errors on writes, some latency, watches dropped.
fn api_faults(seed: u64) -> ApiFaults {
    ApiFaults {
        seed,
        rules: serde_yaml::from_str(
            "[{verb: create, resource: pods, latency: 20ms, error_rates: {409: 0.05, 429: 0.05, 500: 0.03}, retry_after_seconds: 1},
              {verb: update, resource: jobs/status, error_rates: {409: 0.05, 503: 0.03}, retry_after_seconds: 1},
              {verb: patch, resource: jobs/status, error_rates: {409: 0.05, 503: 0.03}, retry_after_seconds: 1}]",
        )
        .unwrap_or_default(),
        watch_drop_after_events: None,
        watch_drop_after: Some(Span(Duration::from_secs(5))),
        watch_delay: None,
    }
}

impl Chaos {
    /// Checks what serde cannot, against the fleet it acts on.
    pub fn check(&self, fleet: &FleetSpec, nodes: usize, duration: Duration) -> Result<(), Invalid> {
        let invalid = |field: &str, reason: String| Err(Invalid { field: format!("chaos.{field}"), reason });
        if fleet.standalone {
            return invalid("actions", "chaos needs a fleet (fleet.standalone is true)".into());
        }
        if self.every.min < Duration::from_secs(1) || self.every.min > self.every.max {
            return invalid("every", "must be a range min..max with 1s ≤ min ≤ max".into());
        }
        if self.actions.is_empty() {
            return invalid("actions", "list at least one fault kind".into());
        }
        for (i, action) in self.actions.iter().enumerate() {
            let reason = match action {
                FaultAction::RestartEtcd if fleet.store != Store::Etcd => {
                    "restart-etcd needs fleet.store: etcd"
                }
                // Its outage is a third of the lease, which `default` leaves to the binary.
                FaultAction::RestartEtcd if fleet.worker_lease == LeaseSetting::BinaryDefault => {
                    "restart-etcd needs fleet.worker_lease set (etcd stays down a third of it)"
                }
                FaultAction::KillLeader if fleet.coordinators < 2 => {
                    "kill-leader needs fleet.coordinators ≥ 2 (a killed coordinator is not started again)"
                }
                FaultAction::LoseNode if nodes < 2 => "lose-node needs sim.nodes ≥ 2",
                FaultAction::UndrainWorker => "undrain-worker follows each drain-worker by itself",
                FaultAction::RollingRestart => {
                    "rolling-restart restarts every worker and waits for each: not a fault to draw"
                }
                _ => continue,
            };
            return invalid(&format!("actions[{i}]"), reason.into());
        }
        let (from, until) = self.window(duration);
        if from >= until {
            return invalid("until", format!("leaves no time for faults after {from:?}"));
        }
        Ok(())
    }

    /// When faults may fall.
    fn window(&self, duration: Duration) -> (Duration, Duration) {
        let from = self.from.map(|s| s.0).unwrap_or(self.every.min);
        let until = self.until.map(|s| s.0).unwrap_or(duration.saturating_sub(Duration::from_secs(60)));
        (from, until.min(duration))
    }

    /// The faults, in time order: the same for the same seed, fleet and duration. Each step
    /// draws one of the actions the fleet can take at that point: a worker is killed, stopped,
    /// paused, restarted or drained only while another one acts; a drain is undone halfway to
    /// the next step, API faults cleared likewise; a pause lasts past the worker lease but ends
    /// before the next step; etcd stays down for at most a third of the worker lease (as the
    /// `etcd-restart` scenario, an outage the leases ride out: one renewal missed, time left for
    /// etcd to start and the clients to reconnect); a leader is killed only while another
    /// coordinator is left; a node is lost only while two remain; workers are added up to
    /// `max_workers`.
    pub fn plan(&self, fleet: &FleetSpec, nodes: usize, duration: Duration) -> Vec<Fault> {
        let mut draw = SplitMix(self.seed);
        let mut state = FleetState {
            running: (0..fleet.workers).map(|i| format!("w-{i}")).collect(),
            started: fleet.workers,
            drained: None,
            coordinators: fleet.coordinators,
            nodes: (0..nodes).map(|i| format!("sim-node-{i}")).collect(),
        };
        let max_workers = self.max_workers.unwrap_or(fleet.workers + 2);
        let pause_for = fleet.worker_lease_at_most() + fleet.lease_margin_at_most() + Duration::from_secs(3);
        let etcd_down_for = (fleet.worker_lease_at_most() / 3).min(Duration::from_secs(3));
        let (from, until) = self.window(duration);
        let mut faults = Vec::new();
        let mut t = from;
        while t <= until {
            let gap = draw.within(self.every);
            let acting = state.acting().len();
            let possible: Vec<FaultAction> = self
                .actions
                .iter()
                .copied()
                .filter(|a| match a {
                    FaultAction::KillWorker | FaultAction::TerminateWorker | FaultAction::RestartWorker => {
                        acting >= 2
                    }
                    FaultAction::PauseWorker => acting >= 2 && gap > pause_for + Duration::from_secs(2),
                    FaultAction::DrainWorker => acting >= 2 && state.drained.is_none(),
                    FaultAction::AddWorker => state.running.len() < max_workers,
                    FaultAction::KillLeader => state.coordinators >= 2,
                    FaultAction::LoseNode => state.nodes.len() > 2,
                    FaultAction::UndrainWorker | FaultAction::RollingRestart => false,
                    FaultAction::ApiFaults | FaultAction::RestartEtcd => true,
                })
                .collect();
            if !possible.is_empty() {
                let action = possible[draw.below(possible.len())];
                let mut fault = at(t, action);
                let acting: Vec<String> = state.acting().into_iter().cloned().collect();
                let pick = |draw: &mut SplitMix| acting[draw.below(acting.len())].clone();
                match action {
                    FaultAction::KillWorker | FaultAction::TerminateWorker => {
                        let worker = pick(&mut draw);
                        state.running.retain(|w| *w != worker);
                        fault.worker = Some(worker);
                    }
                    FaultAction::RestartWorker => fault.worker = Some(pick(&mut draw)),
                    FaultAction::PauseWorker => {
                        fault.worker = Some(pick(&mut draw));
                        fault.resume_after = Some(Span(pause_for));
                    }
                    FaultAction::DrainWorker => {
                        let worker = pick(&mut draw);
                        let mut undrain = at(t + gap / 2, FaultAction::UndrainWorker);
                        undrain.worker = Some(worker.clone());
                        fault.worker = Some(worker);
                        faults.push(fault.clone());
                        fault = undrain;
                    }
                    FaultAction::AddWorker => {
                        state.running.push(format!("w-{}", state.started));
                        state.started += 1;
                    }
                    FaultAction::KillLeader => state.coordinators -= 1,
                    FaultAction::ApiFaults => {
                        fault.api = Some(api_faults(draw.next_u64()));
                        faults.push(fault.clone());
                        fault = at(t + gap / 2, FaultAction::ApiFaults);
                        fault.api = Some(ApiFaults::default());
                    }
                    FaultAction::RestartEtcd => fault.resume_after = Some(Span(etcd_down_for)),
                    FaultAction::LoseNode => {
                        let node = state.nodes.remove(draw.below(state.nodes.len()));
                        fault.node = Some(node);
                    }
                    FaultAction::UndrainWorker | FaultAction::RollingRestart => {}
                }
                faults.push(fault);
            }
            t += gap;
        }
        faults.sort_by_key(|f| f.at);
        faults
    }
}

/// One line per planned fault, for the terminal and the report.
pub fn describe(faults: &[Fault]) -> Vec<String> {
    faults
        .iter()
        .map(|f| {
            let target = f.worker.as_deref().or(f.node.as_deref()).unwrap_or("");
            let lasting = f.resume_after.map(|s| format!(" for {s}")).unwrap_or_default();
            format!("{:>7.1}s {} {target}{lasting}", f.at.0.as_secs_f64(), f.action.name())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(workers: usize, coordinators: usize) -> FleetSpec {
        let yaml = format!(
            "{{workers: {workers}, coordinators: {coordinators}, store: etcd, worker_lease: 5s, lease_margin: 1s}}"
        );
        serde_yaml::from_str(&yaml).expect("fleet")
    }

    fn chaos(seed: u64) -> Chaos {
        serde_yaml::from_str(&format!(
            "{{seed: {seed}, every: 5s..20s, actions: [kill-worker, terminate-worker, pause-worker, drain-worker, restart-worker, add-worker, kill-leader, api-faults, restart-etcd, lose-node]}}"
        ))
        .expect("chaos")
    }

    /// Replays a plan, checking its bounds at every step.
    fn assert_bounded(faults: &[Fault], fleet: &FleetSpec, nodes: usize) {
        let mut running: Vec<String> = (0..fleet.workers).map(|i| format!("w-{i}")).collect();
        let mut started = fleet.workers;
        let mut drained: Option<String> = None;
        let mut coordinators = fleet.coordinators;
        let mut nodes_left = nodes;
        let mut paused_until = Duration::ZERO;
        for f in faults {
            let acting = running.iter().filter(|w| drained.as_ref() != Some(*w)).count();
            let worker = f.worker.clone().unwrap_or_default();
            match f.action {
                FaultAction::KillWorker | FaultAction::TerminateWorker => {
                    assert!(
                        acting >= 2 && running.contains(&worker) && drained.as_ref() != Some(&worker),
                        "{f:?}"
                    );
                    running.retain(|w| *w != worker);
                }
                FaultAction::PauseWorker => {
                    assert!(acting >= 2 && running.contains(&worker), "{f:?}");
                    paused_until = f.at.0 + f.resume_after.expect("resume_after").0;
                }
                FaultAction::RestartWorker => assert!(acting >= 2 && running.contains(&worker), "{f:?}"),
                FaultAction::DrainWorker => {
                    assert!(drained.is_none() && acting >= 2 && running.contains(&worker), "{f:?}");
                    drained = Some(worker);
                }
                FaultAction::UndrainWorker => assert_eq!(drained.take(), Some(worker)),
                FaultAction::RollingRestart => panic!("chaos drew a rolling-restart: {f:?}"),
                FaultAction::AddWorker => {
                    running.push(format!("w-{started}"));
                    started += 1;
                }
                FaultAction::KillLeader => {
                    assert!(coordinators >= 2, "{f:?}");
                    coordinators -= 1;
                }
                FaultAction::LoseNode => {
                    assert!(nodes_left > 2, "{f:?}");
                    nodes_left -= 1;
                }
                FaultAction::RestartEtcd => {
                    let down = f.resume_after.expect("resume_after").0;
                    assert!(
                        down * 3 <= fleet.worker_lease_at_most(),
                        "{f:?}: etcd down past a third of the lease"
                    );
                }
                FaultAction::ApiFaults => {}
            }
            // A pause ends before anything else happens to the fleet's workers.
            if f.worker.is_some() && f.action != FaultAction::PauseWorker {
                assert!(f.at.0 >= paused_until, "{f:?} while a worker is paused");
            }
            assert!(!running.is_empty() && running.len() <= fleet.workers + 2);
        }
        assert!(drained.is_none(), "every drain is undone");
    }

    #[test]
    fn the_same_seed_gives_the_same_bounded_plan() {
        let three = fleet(3, 2);
        let ten_minutes = Duration::from_secs(600);
        let plan = chaos(7).plan(&three, 4, ten_minutes);
        assert_eq!(describe(&plan), describe(&chaos(7).plan(&three, 4, ten_minutes)));
        assert_ne!(describe(&plan), describe(&chaos(8).plan(&three, 4, ten_minutes)));
        assert!(plan.len() >= 20, "{:#?}", describe(&plan));
        assert!(plan.iter().all(|f| f.at.0 >= Duration::from_secs(5) && f.at.0 < ten_minutes));
        for seed in 0..200 {
            let plan = chaos(seed).plan(&three, 4, ten_minutes);
            assert_bounded(&plan, &three, 4);
        }
        // A lone worker is killed only once another joined; a lone coordinator never.
        let lone = fleet(1, 1);
        for seed in 0..50 {
            assert_bounded(&chaos(seed).plan(&lone, 2, ten_minutes), &lone, 2);
        }
    }

    #[test]
    fn the_api_faults_it_sets_parse_and_the_shipped_scenarios_load() {
        assert_eq!(api_faults(1).rules.len(), 3);
        for name in ["podgc-node-loss", "chaos-soak"] {
            let (_, scenario) = crate::scenario::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(scenario.faults.iter().any(|f| f.action == FaultAction::LoseNode), "{name}");
        }
        let (_, soak) = crate::scenario::load("chaos-soak").expect("loads");
        assert!(soak.chaos.is_some() && soak.faults.len() >= 15, "{}", describe(&soak.faults).join("\n"));
    }

    #[test]
    fn chaos_that_cannot_work_is_refused_naming_the_field() {
        let fleet = fleet(3, 1);
        let e = chaos(1).check(&fleet, 4, Duration::from_secs(600)).expect_err("one coordinator");
        assert_eq!(e.field, "chaos.actions[6]");
        let mut c: Chaos =
            serde_yaml::from_str("{seed: 1, every: 30s..10s, actions: [kill-worker]}").expect("parses");
        assert_eq!(c.check(&fleet, 4, Duration::from_secs(600)).expect_err("inverted").field, "chaos.every");
        c.every = SpanRange { min: Duration::from_secs(10), max: Duration::from_secs(30) };
        assert_eq!(c.check(&fleet, 4, Duration::from_secs(30)).expect_err("no window").field, "chaos.until");
        assert!(c.check(&fleet, 4, Duration::from_secs(600)).is_ok());
        let e = serde_yaml::from_str::<Chaos>("{seed: 1, every: often, actions: []}").expect_err("bad range");
        assert!(e.to_string().contains("\"often\" is not a range like 10s..30s"), "{e}");
    }
}
