//! Leader election on the coordination store, with client-go's timing: candidates try every
//! `retry_period`; the leader renews on the same period and steps down — by its own monotonic
//! clock, measured from when it *sent* its last successful renewal — once `renew_deadline` has
//! passed without one. `renew_deadline < lease_duration`, so a leader has stopped acting before any
//! standby can consider the lease lapsed. Whoever acts only as leader (PodGC, shard placement)
//! watches [`Leadership::is_leader`] and checks it before every write.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::store::{Candidate, CoordinationStore};

/// client-go's defaults for kube-controller-manager: 15 s, 10 s, 2 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionTiming {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for ElectionTiming {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the renew deadline ({renew_deadline:?}) must be shorter than the lease duration ({lease_duration:?})"
)]
pub struct BadTiming {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
}

impl ElectionTiming {
    pub fn validate(&self) -> Result<(), BadTiming> {
        if self.renew_deadline >= self.lease_duration || self.retry_period.is_zero() {
            return Err(BadTiming {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        Ok(())
    }
}

/// What the rest of the coordinator sees of the election.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderState {
    pub is_leader: bool,
    /// The current holder as last seen (ours when leading).
    pub holder: Option<String>,
    /// The address the holder advertised, for clients that reached a standby.
    pub holder_address: Option<String>,
}

/// A handle on a running election.
#[derive(Clone)]
pub struct Leadership {
    state: watch::Receiver<LeaderState>,
    /// When the election loop last finished an attempt (whatever its outcome).
    attempted: Arc<parking_lot::Mutex<Instant>>,
}

impl Leadership {
    /// How long ago the election loop last finished an attempt. Each attempt is bounded by a
    /// timeout and the loop sleeps at most the retry period, so a loop that runs never lets this
    /// grow past about three retry periods, whatever the store answers: more is a stalled loop
    /// (`/livez` of `fleet-coordinator`).
    pub fn since_last_attempt(&self) -> Duration {
        self.attempted.lock().elapsed()
    }

    pub fn is_leader(&self) -> bool {
        self.state.borrow().is_leader
    }

    pub fn state(&self) -> LeaderState {
        self.state.borrow().clone()
    }

    /// Waits until this process leads.
    pub async fn until_leader(&mut self) {
        let _ = self.state.wait_for(|s| s.is_leader).await;
    }

    /// Waits until this process no longer leads.
    pub async fn until_not_leader(&mut self) {
        let _ = self.state.wait_for(|s| !s.is_leader).await;
    }

    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.state.clone()
    }
}

/// Runs the election for `candidate` until `shutdown` fires; then resigns if leading.
pub fn start<S: CoordinationStore + 'static>(
    store: Arc<S>,
    candidate: Candidate,
    timing: ElectionTiming,
    mut shutdown: watch::Receiver<bool>,
) -> (Leadership, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(LeaderState::default());
    let attempted = Arc::new(parking_lot::Mutex::new(Instant::now()));
    let beat = attempted.clone();
    let task = tokio::spawn(async move {
        let identity = candidate.id.clone();
        let mut last_renewed: Option<Instant> = None;
        loop {
            let sent = Instant::now();
            // A leader's attempt may not outlast its renew deadline: it must be able to step down
            // in time, whatever the store does.
            let mut budget = timing.retry_period.max(Duration::from_millis(100)) * 2;
            if let Some(t) = last_renewed.filter(|_| tx.borrow().is_leader) {
                budget = budget.min((t + timing.renew_deadline).saturating_duration_since(sent));
            }
            let attempt = tokio::time::timeout(budget.max(Duration::from_millis(1)), async {
                store.campaign(&candidate, timing.lease_duration).await
            })
            .await;
            *beat.lock() = Instant::now();
            match attempt {
                Ok(Ok(outcome)) if outcome.is_leader => {
                    last_renewed = Some(sent);
                    if !tx.borrow().is_leader {
                        tracing::info!(%identity, "became the leader");
                    }
                    tx.send_replace(LeaderState {
                        is_leader: true,
                        holder: outcome.holder,
                        holder_address: outcome.holder_address,
                    });
                }
                Ok(Ok(outcome)) => {
                    if tx.borrow().is_leader {
                        tracing::warn!(%identity, holder = ?outcome.holder, "lost the leadership");
                    }
                    last_renewed = None;
                    tx.send_replace(LeaderState {
                        is_leader: false,
                        holder: outcome.holder,
                        holder_address: outcome.holder_address,
                    });
                }
                Ok(Err(e)) => tracing::warn!(%identity, error = %e, "campaign failed"),
                Err(_) => tracing::warn!(%identity, "campaign timed out"),
            }
            // Step down by our own clock once the renew deadline passed without a renewal.
            if tx.borrow().is_leader && last_renewed.is_none_or(|t| t.elapsed() >= timing.renew_deadline) {
                tracing::warn!(%identity, "could not renew within the renew deadline; stepping down");
                tx.send_modify(|s| s.is_leader = false);
            }
            let next = sent + timing.retry_period;
            let deadline_hit = last_renewed.map(|t| t + timing.renew_deadline);
            let wake = deadline_hit.filter(|_| tx.borrow().is_leader).map_or(next, |d| d.min(next));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        if tx.borrow().is_leader {
            tx.send_modify(|s| s.is_leader = false);
            if let Err(e) = store.resign(&identity).await {
                tracing::warn!(%identity, error = %e, "resigning failed; the lease will lapse");
            }
        }
    });
    (Leadership { state: rx, attempted }, task)
}
