//! The coordination store on the Kubernetes API alone: leadership is a `coordination.k8s.io/v1`
//! Lease held as client-go's leader election holds one, each worker renews a Lease of its own,
//! and the shard map is a ConfigMap written with resourceVersion preconditions.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::json;

use super::{
    Candidate, CoordinationStore, Leadership, Result, Revision, ShardMapRecord, StoreError, WorkerLease,
    decode_map, encode_map,
};
use crate::ids::WorkerId;

/// The Lease coordinators campaign for.
pub const LEADER_LEASE: &str = "batchfleet-coordinator";
/// The ConfigMap holding the shard map, and its key.
pub const SHARD_MAP: &str = "batchfleet-shard-map";
pub const SHARD_MAP_KEY: &str = "shards.json";
/// Worker Leases are named `batchfleet-worker-<id>` and carry this label.
pub const WORKER_LABEL: &str = "batchfleet.io/worker";
const WORKER_PREFIX: &str = "batchfleet-worker-";
const FIELD_MANAGER: &str = "fleet-coordinator";
/// The leader Lease's annotation naming the holder's advertised address.
pub const LEADER_ADDRESS_ANNOTATION: &str = "batchfleet.io/leader-address";

pub struct KubernetesStore {
    client: kube::Client,
    /// The Leases' collection path in the fleet's namespace, listed as [`WorkerLeaseRows`].
    leases_path: String,
    leases: Api<Lease>,
    config_maps: Api<ConfigMap>,
    /// The leader Lease's resourceVersion when this process last saw it change, and when.
    observed_leader: Mutex<Option<(String, Instant)>>,
    /// Workers whose Lease this process created or renewed: one found missing on a renewal was
    /// deleted behind the worker's back ([`StoreError::RecordLost`]).
    renewing: Mutex<BTreeSet<WorkerId>>,
}

impl KubernetesStore {
    /// A store in `namespace` (the fleet's own namespace).
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        Self {
            leases_path: <Lease as kube::Resource>::url_path(&(), Some(namespace)),
            client: client.clone(),
            leases: Api::namespaced(client.clone(), namespace),
            config_maps: Api::namespaced(client, namespace),
            observed_leader: Mutex::new(None),
            renewing: Mutex::new(BTreeSet::new()),
        }
    }

    /// Whether the holder of `lease` has let it lapse, as this process observed it.
    fn leader_lapsed(&self, lease: &Lease, now: Instant) -> bool {
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        let duration = lease.spec.as_ref().and_then(|s| s.lease_duration_seconds).unwrap_or(15).max(1);
        let mut observed = self.observed_leader.lock();
        let changed_at = match observed.as_ref() {
            Some((seen, at)) if *seen == rv => *at,
            _ => {
                *observed = Some((rv, now));
                now
            }
        };
        now.saturating_duration_since(changed_at) >= Duration::from_secs(duration.unsigned_abs().into())
    }
}

/// The part of a worker Lease list the leader reads. It lists them every period, a thousand
/// at a time: decoding whole Leases (their managedFields above all) into `k8s_openapi` types
/// was the largest share of an idle leader's CPU, and serde skips the fields named nowhere here.
#[derive(serde::Deserialize)]
struct WorkerLeaseRows {
    #[serde(default)]
    items: Vec<WorkerLeaseRow>,
}

#[derive(serde::Deserialize)]
struct WorkerLeaseRow {
    #[serde(default)]
    metadata: WorkerLeaseRowMeta,
    #[serde(default)]
    spec: Option<WorkerLeaseRowSpec>,
}

#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkerLeaseRowMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    resource_version: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkerLeaseRowSpec {
    #[serde(default)]
    lease_duration_seconds: Option<i32>,
}

fn now_micro() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn whole_seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs() + u64::from(d.subsec_nanos() > 0)).unwrap_or(i32::MAX).max(1)
}

fn backend(e: kube::Error) -> StoreError {
    match &e {
        kube::Error::Api(s) if s.code == 409 => StoreError::Conflict,
        _ => StoreError::Backend(e.to_string()),
    }
}

fn holder(lease: &Lease) -> Option<String> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.clone()).filter(|h| !h.is_empty())
}

/// Someone else's leadership as `lease` records it.
fn theirs(lease: Option<&Lease>) -> Leadership {
    let holder = lease.and_then(holder);
    // A resigned lease keeps the annotation of its last holder.
    let address = lease
        .filter(|_| holder.is_some())
        .and_then(|l| l.metadata.annotations.as_ref())
        .and_then(|a| a.get(LEADER_ADDRESS_ANNOTATION))
        .filter(|a| !a.is_empty())
        .cloned();
    Leadership { holder, holder_address: address, is_leader: false }
}

/// Records `candidate`'s address on the Lease it is about to hold.
fn advertise(meta: &mut ObjectMeta, candidate: &Candidate) {
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    if candidate.address.is_empty() {
        annotations.remove(LEADER_ADDRESS_ANNOTATION);
    } else {
        annotations.insert(LEADER_ADDRESS_ANNOTATION.into(), candidate.address.clone());
    }
}

impl CoordinationStore for KubernetesStore {
    fn kind(&self) -> &'static str {
        "kubernetes"
    }

    async fn campaign(&self, candidate: &Candidate, lease_duration: Duration) -> Result<Leadership> {
        let now = Instant::now();
        let id = candidate.id.as_str();
        let Some(mut lease) = self.leases.get_opt(LEADER_LEASE).await.map_err(backend)? else {
            let mut fresh = Lease {
                metadata: ObjectMeta { name: Some(LEADER_LEASE.into()), ..ObjectMeta::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(id.into()),
                    lease_duration_seconds: Some(whole_seconds(lease_duration)),
                    acquire_time: Some(now_micro()),
                    renew_time: Some(now_micro()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            advertise(&mut fresh.metadata, candidate);
            return match self.leases.create(&PostParams::default(), &fresh).await {
                Ok(_) => Ok(Leadership::ours(candidate)),
                // Another candidate created it first.
                Err(e) if matches!(backend_ref(&e), Some(409)) => {
                    Ok(theirs(self.leases.get_opt(LEADER_LEASE).await.map_err(backend)?.as_ref()))
                }
                Err(e) => Err(backend(e)),
            };
        };
        let current = holder(&lease);
        let ours = current.as_deref() == Some(id);
        if !ours && current.is_some() && !self.leader_lapsed(&lease, now) {
            return Ok(theirs(Some(&lease)));
        }
        advertise(&mut lease.metadata, candidate);
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if !ours {
            spec.holder_identity = Some(id.into());
            spec.acquire_time = Some(now_micro());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.lease_duration_seconds = Some(whole_seconds(lease_duration));
        spec.renew_time = Some(now_micro());
        // The resourceVersion read above is the precondition: two candidates never both win.
        match self.leases.replace(LEADER_LEASE, &PostParams::default(), &lease).await {
            Ok(_) => Ok(Leadership::ours(candidate)),
            Err(e) if matches!(backend_ref(&e), Some(409)) => {
                Ok(theirs(self.leases.get_opt(LEADER_LEASE).await.map_err(backend)?.as_ref()))
            }
            Err(e) => Err(backend(e)),
        }
    }

    async fn resign(&self, candidate: &str) -> Result<()> {
        let Some(mut lease) = self.leases.get_opt(LEADER_LEASE).await.map_err(backend)? else {
            return Ok(());
        };
        if holder(&lease).as_deref() != Some(candidate) {
            return Ok(());
        }
        // As client-go releases a lease: no holder, a one-second duration.
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now_micro());
        match self.leases.replace(LEADER_LEASE, &PostParams::default(), &lease).await {
            Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }

    async fn renew_worker(&self, worker: &WorkerId, ttl: Duration) -> Result<()> {
        let name = format!("{WORKER_PREFIX}{}", worker.0);
        let spec = json!({
            "holderIdentity": worker.0,
            "leaseDurationSeconds": whole_seconds(ttl),
            "renewTime": now_micro(),
        });
        let patch = json!({"spec": spec});
        match self.leases.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                self.renewing.lock().insert(worker.clone());
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 && self.renewing.lock().remove(worker) => {
                Err(StoreError::RecordLost)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name),
                        labels: Some(BTreeMap::from([(WORKER_LABEL.to_string(), "true".to_string())])),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(worker.0.clone()),
                        lease_duration_seconds: Some(whole_seconds(ttl)),
                        acquire_time: Some(now_micro()),
                        renew_time: Some(now_micro()),
                        ..LeaseSpec::default()
                    }),
                };
                self.leases.create(&PostParams::default(), &lease).await.map_err(backend)?;
                self.renewing.lock().insert(worker.clone());
                Ok(())
            }
            Err(e) => Err(backend(e)),
        }
    }

    async fn remove_worker(&self, worker: &WorkerId) -> Result<()> {
        self.renewing.lock().remove(worker);
        let name = format!("{WORKER_PREFIX}{}", worker.0);
        match self.leases.delete(&name, &Default::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }

    async fn workers(&self) -> Result<Vec<WorkerLease>> {
        let request = kube::core::Request::new(&self.leases_path)
            .list(&ListParams::default().labels(WORKER_LABEL))
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        let list: WorkerLeaseRows = self.client.request(request).await.map_err(backend)?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|lease| {
                let id = lease.metadata.name.strip_prefix(WORKER_PREFIX)?;
                let seconds = lease.spec.and_then(|s| s.lease_duration_seconds).unwrap_or(0).max(0);
                Some(WorkerLease {
                    worker: WorkerId(id.to_string()),
                    renewal: lease.metadata.resource_version,
                    expires_in_store: false,
                    ttl: Duration::from_secs(seconds.unsigned_abs().into()),
                })
            })
            .collect())
    }

    async fn load_shard_map(&self) -> Result<Option<(ShardMapRecord, Revision)>> {
        let Some(cm) = self.config_maps.get_opt(SHARD_MAP).await.map_err(backend)? else { return Ok(None) };
        let rv = Revision(cm.metadata.resource_version.clone().unwrap_or_default());
        let json =
            cm.data.as_ref().and_then(|d| d.get(SHARD_MAP_KEY)).ok_or_else(|| StoreError::Corrupt {
                what: format!("ConfigMap {SHARD_MAP}"),
                reason: format!("no {SHARD_MAP_KEY} key"),
            })?;
        Ok(Some((decode_map(json)?, rv)))
    }

    async fn store_shard_map(&self, map: &ShardMapRecord, expected: Option<&Revision>) -> Result<Revision> {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(SHARD_MAP.into()),
                resource_version: expected.map(|r| r.0.clone()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(SHARD_MAP_KEY.to_string(), encode_map(map)?)])),
            ..ConfigMap::default()
        };
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
        let written = match expected {
            None => self.config_maps.create(&params, &cm).await,
            Some(_) => self.config_maps.replace(SHARD_MAP, &params, &cm).await,
        }
        .map_err(backend)?;
        Ok(Revision(written.metadata.resource_version.unwrap_or_default()))
    }
}

fn backend_ref(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}
