//! `fleet-coordinator`'s `/livez` (`metrics_endpoint::Liveness`) over a real election on the sim
//! cluster's Leases: a store that answers slowly is not a stalled loop (every attempt times out
//! and the loop goes round), while a loop that stops going round fails the probe.

use std::sync::Arc;
use std::time::{Duration, Instant};

use batchfleet_coordinator::leader::{self, ElectionTiming};
use batchfleet_coordinator::metrics_endpoint::Liveness;
use batchfleet_coordinator::store::kubernetes::KubernetesStore;
use batchfleet_sim::faults::{FaultConfig, FaultRule};
use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};

const TIMING: ElectionTiming = ElectionTiming {
    lease_duration: Duration::from_secs(1),
    renew_deadline: Duration::from_millis(700),
    retry_period: Duration::from_millis(100),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livez_fails_only_when_the_election_loop_itself_stops() {
    let sim = SimCluster::start(SimConfig { kubelet: false, ..SimConfig::default() }).await.expect("sim");
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
    let store = Arc::new(KubernetesStore::new(client, "kube-system"));
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let liveness = Liveness::default();
    assert!(liveness.check().is_ok(), "live while starting");
    let (leadership, election) = leader::start(store, "c-0".into(), TIMING, stop);
    let stall_after = TIMING.lease_duration * 2 + TIMING.retry_period * 3;
    liveness.watch_election(leadership.clone(), stall_after);
    wait_until("c-0 leads", Duration::from_secs(30), || async { leadership.is_leader().then_some(()) }).await;

    // Every Lease request held for 5 s: each attempt times out, the loop goes round, /livez stays
    // 200 for longer than the stall bound (watched throughout, not sampled once).
    let slow_leases = FaultRule { resource: "leases".into(), latency_ms: 5000, ..FaultRule::default() };
    sim.faults().configure(FaultConfig { rules: vec![slow_leases], ..FaultConfig::default() });
    let watched_until = Instant::now() + stall_after * 2;
    while Instant::now() < watched_until {
        assert_eq!(liveness.check(), Ok("ok".to_string()), "a slow store is not a stalled loop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!leadership.is_leader(), "it stepped down: it could not renew");
    sim.faults().configure(FaultConfig::default());

    // The loop stops going round: /livez fails once the bound has passed.
    election.abort();
    let reason = wait_until("/livez fails", stall_after * 3, || async { liveness.check().err() }).await;
    assert!(reason.contains("leader election loop"), "{reason}");
}
