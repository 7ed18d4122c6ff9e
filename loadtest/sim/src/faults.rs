//! Fault injection, configured through the admin endpoint and deterministic under a seed:
//! latency and error rates per verb and resource, and watch drops.

use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// One rule; empty `verb`/`resource` match everything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FaultRule {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// Plural resource name (`pods`), optionally with its subresource (`jobs/status`).
    pub resource: String,
    pub latency_ms: u64,
    /// Probability in [0, 1] of each status code: 400, 403, 409, 422, 429, 500, 503 and 504
    /// are honoured.
    pub error_rates: Vec<ErrorRate>,
    /// Retry-After seconds sent with injected 429 and 503.
    pub retry_after_seconds: u64,
    /// The message of an injected error, in place of the default; e.g. an admission webhook's
    /// denial, as kube-apiserver words it: `admission webhook "x" denied the request: …`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorRate {
    pub code: u16,
    pub rate: f64,
}

/// How watches are cut short.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WatchFaults {
    /// Close each watch after it sent this many events.
    pub drop_after_events: Option<u64>,
    /// Close each watch after this many seconds.
    pub drop_after_seconds: Option<f64>,
    /// Hold every batch of events this long before sending it: caches lag the store.
    pub delay_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FaultConfig {
    pub seed: u64,
    pub rules: Vec<FaultRule>,
    pub watch: WatchFaults,
}

/// What to do to one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Injection {
    pub latency: Duration,
    pub error: Option<InjectedError>,
}

/// The error an injection answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct InjectedError {
    pub code: u16,
    pub retry_after_seconds: u64,
    /// The rule's message, if it has one.
    pub message: Option<String>,
}

pub struct Faults {
    state: Mutex<(FaultConfig, SmallRng)>,
}

impl Default for Faults {
    fn default() -> Self {
        Self { state: Mutex::new((FaultConfig::default(), SmallRng::seed_from_u64(0))) }
    }
}

impl Faults {
    pub fn configure(&self, config: FaultConfig) {
        let rng = SmallRng::seed_from_u64(config.seed);
        *self.state.lock() = (config, rng);
    }

    pub fn config(&self) -> FaultConfig {
        self.state.lock().0.clone()
    }

    pub fn watch(&self) -> WatchFaults {
        self.state.lock().0.watch.clone()
    }

    /// Decides the fate of one request. `resource` is `plural` or `plural/subresource`.
    pub fn inject(&self, verb: &str, resource: &str) -> Injection {
        let mut guard = self.state.lock();
        let (config, rng) = &mut *guard;
        if config.rules.is_empty() {
            return Injection::default();
        }
        let mut out = Injection::default();
        for rule in &config.rules {
            let verb_ok = rule.verb.is_empty() || rule.verb == verb;
            let resource_ok = rule.resource.is_empty()
                || rule.resource == resource
                || resource.split('/').next() == Some(rule.resource.as_str());
            if !(verb_ok && resource_ok) {
                continue;
            }
            out.latency += Duration::from_millis(rule.latency_ms);
            if out.error.is_none() {
                for rate in &rule.error_rates {
                    if rng.random::<f64>() < rate.rate {
                        out.error = Some(InjectedError {
                            code: rate.code,
                            retry_after_seconds: rule.retry_after_seconds,
                            message: rule.message.clone(),
                        });
                        break;
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(seed: u64) -> FaultConfig {
        FaultConfig {
            seed,
            rules: vec![FaultRule {
                verb: "create".into(),
                resource: "pods".into(),
                latency_ms: 5,
                error_rates: vec![ErrorRate { code: 429, rate: 0.3 }],
                retry_after_seconds: 1,
                message: None,
            }],
            watch: WatchFaults::default(),
        }
    }

    #[test]
    fn injection_is_deterministic_under_a_seed_and_scoped() {
        let run = |seed| {
            let f = Faults::default();
            f.configure(config(seed));
            (0..200).map(|_| f.inject("create", "pods").error.is_some()).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        let hits = run(7).iter().filter(|h| **h).count();
        assert!((30..90).contains(&hits), "{hits} of 200 at rate 0.3");
        let f = Faults::default();
        f.configure(config(7));
        assert_eq!(f.inject("get", "pods"), Injection::default());
        assert_eq!(f.inject("create", "pods/status").latency, Duration::from_millis(5));
    }

    #[test]
    fn a_rule_carries_its_message_to_the_injected_error() {
        let f = Faults::default();
        let denied = "admission webhook \"deny.example.com\" denied the request: no";
        f.configure(FaultConfig {
            rules: vec![FaultRule {
                verb: "patch".into(),
                resource: "pods".into(),
                error_rates: vec![ErrorRate { code: 400, rate: 1.0 }],
                message: Some(denied.into()),
                ..FaultRule::default()
            }],
            ..FaultConfig::default()
        });
        let error = f.inject("patch", "pods").error.expect("rate 1 always injects");
        assert_eq!((error.code, error.message.as_deref()), (400, Some(denied)));
        assert_eq!(f.inject("patch", "jobs").error, None);
    }
}
