//! The coordination store on etcd: leadership is a key bound to an etcd lease, created only if
//! absent; each worker's key is bound to an etcd lease of its TTL, which the worker renews by
//! keep-alives (no write to etcd's log: a thousand workers cost the store nothing at rest) and
//! which etcd expires on its own clock from the last keep-alive it received, removing a dead
//! worker's key; so the key's presence is what the observer judges (`expires_in_store`). The
//! shard map is a key written in transactions on its mod revision.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::{
    Candidate, CoordinationStore, Leadership, Result, Revision, ShardMapRecord, StoreError, WorkerLease,
    decode_map, encode_map,
};
use crate::ids::WorkerId;

pub struct EtcdStore {
    client: Client,
    prefix: String,
    /// The etcd lease behind our leadership key, while we hold it.
    leader_lease: Mutex<Option<i64>>,
    /// The etcd lease behind each worker key this process renews.
    worker_leases: Mutex<BTreeMap<WorkerId, i64>>,
}

/// What a worker key holds.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkerValue {
    ttl_seconds: i64,
    renewed: String,
}

fn backend(e: etcd_client::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn ttl_seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs() + u64::from(d.subsec_nanos() > 0)).unwrap_or(i64::MAX).max(1)
}

impl EtcdStore {
    /// Connects to `endpoints`; every key lives under `prefix` (e.g. `/batchfleet/`).
    pub async fn connect(endpoints: &[String], prefix: &str) -> Result<Self> {
        let client = Client::connect(endpoints, None).await.map_err(backend)?;
        Ok(Self {
            client,
            prefix: prefix.to_string(),
            leader_lease: Mutex::new(None),
            worker_leases: Mutex::new(BTreeMap::new()),
        })
    }

    fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// Renews `lease` once; `false` when etcd no longer knows it.
    async fn keep_alive(&self, lease: i64) -> Result<bool> {
        let renewed = async {
            let (mut keeper, mut stream) = self.client.clone().lease_keep_alive(lease).await?;
            keeper.keep_alive().await?;
            stream.message().await
        };
        match renewed.await {
            Ok(answer) => Ok(answer.is_some_and(|a| a.ttl() > 0)),
            // etcd answers an expired lease with "lease not found".
            Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(false),
            Err(e) => Err(backend(e)),
        }
    }

    async fn holder(&self) -> Result<Option<String>> {
        let got = self.client.clone().get(self.key("leader"), None).await.map_err(backend)?;
        Ok(got.kvs().first().and_then(|kv| kv.value_str().ok()).map(str::to_string))
    }
}

impl CoordinationStore for EtcdStore {
    fn kind(&self) -> &'static str {
        "etcd"
    }

    async fn campaign(&self, candidate: &Candidate, lease_duration: Duration) -> Result<Leadership> {
        let held = *self.leader_lease.lock();
        if let Some(lease) = held {
            if self.keep_alive(lease).await? && self.holder().await?.as_deref() == Some(candidate.id.as_str())
            {
                return Ok(Leadership::ours(candidate));
            }
            *self.leader_lease.lock() = None;
        }
        let mut client = self.client.clone();
        let lease = client.lease_grant(ttl_seconds(lease_duration), None).await.map_err(backend)?.id();
        let (key, address_key) = (self.key("leader"), self.key("leader-address"));
        // The address key shares the leadership key's lease: both go with the holder.
        let bound = || Some(PutOptions::new().with_lease(lease));
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(key.clone(), candidate.id.as_str(), bound()),
                TxnOp::put(address_key.clone(), candidate.address.as_str(), bound()),
            ])
            .or_else([TxnOp::get(key, None), TxnOp::get(address_key, None)]);
        let response = client.txn(txn).await.map_err(backend)?;
        if response.succeeded() {
            *self.leader_lease.lock() = Some(lease);
            return Ok(Leadership::ours(candidate));
        }
        // Someone holds it: our lease is not needed. etcd expires the key with its holder's lease.
        let _ = client.lease_revoke(lease).await;
        let mut values = response.op_responses().into_iter().map(|r| match r {
            TxnOpResponse::Get(g) => g
                .kvs()
                .first()
                .and_then(|kv| kv.value_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_string),
            _ => None,
        });
        let holder = values.next().flatten();
        let holder_address = values.next().flatten();
        Ok(Leadership { holder, holder_address, is_leader: false })
    }

    async fn resign(&self, candidate: &str) -> Result<()> {
        let held = self.leader_lease.lock().take();
        if let Some(lease) = held
            && self.holder().await?.as_deref() == Some(candidate)
        {
            // Revoking the lease deletes the key at once.
            self.client.clone().lease_revoke(lease).await.map_err(backend)?;
        }
        Ok(())
    }

    async fn renew_worker(&self, worker: &WorkerId, ttl: Duration) -> Result<()> {
        let mut client = self.client.clone();
        let key = self.key(&format!("workers/{}", worker.0));
        let known = self.worker_leases.lock().get(worker).copied();
        if let Some(lease) = known
            && self.keep_alive(lease).await?
        {
            // A keep-alive is no write to etcd's log: renewing costs the store nothing at rest.
            // The record it keeps must still be there, or the coordinator may be freeing this
            // worker's shards already.
            let got =
                client.get(key.as_str(), Some(GetOptions::new().with_keys_only())).await.map_err(backend)?;
            if got.kvs().is_empty() {
                self.worker_leases.lock().remove(worker);
                let _ = client.lease_revoke(lease).await;
                return Err(StoreError::RecordLost);
            }
            return Ok(());
        }
        let lease = client.lease_grant(ttl_seconds(ttl), None).await.map_err(backend)?.id();
        self.worker_leases.lock().insert(worker.clone(), lease);
        let value =
            WorkerValue { ttl_seconds: ttl_seconds(ttl), renewed: jiff::Timestamp::now().to_string() };
        let value = serde_json::to_string(&value).map_err(|e| StoreError::Backend(e.to_string()))?;
        client.put(key, value, Some(PutOptions::new().with_lease(lease))).await.map(|_| ()).map_err(backend)
    }

    async fn remove_worker(&self, worker: &WorkerId) -> Result<()> {
        let mut client = self.client.clone();
        let lease = self.worker_leases.lock().remove(worker);
        if let Some(lease) = lease {
            let _ = client.lease_revoke(lease).await;
        }
        client.delete(self.key(&format!("workers/{}", worker.0)), None).await.map(|_| ()).map_err(backend)
    }

    async fn workers(&self) -> Result<Vec<WorkerLease>> {
        let prefix = self.key("workers/");
        let got = self
            .client
            .clone()
            .get(prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(backend)?;
        let mut leases = Vec::new();
        for kv in got.kvs() {
            let key = kv.key_str().map_err(backend)?;
            let id = key.strip_prefix(&prefix).unwrap_or(key);
            let value: WorkerValue = serde_json::from_slice(kv.value())
                .map_err(|e| StoreError::Corrupt { what: key.to_string(), reason: e.to_string() })?;
            leases.push(WorkerLease {
                worker: WorkerId(id.to_string()),
                renewal: kv.mod_revision().to_string(),
                expires_in_store: true,
                ttl: Duration::from_secs(value.ttl_seconds.max(0).unsigned_abs()),
            });
        }
        Ok(leases)
    }

    async fn load_shard_map(&self) -> Result<Option<(ShardMapRecord, Revision)>> {
        let got = self.client.clone().get(self.key("shard-map"), None).await.map_err(backend)?;
        let Some(kv) = got.kvs().first() else { return Ok(None) };
        let json = kv.value_str().map_err(backend)?;
        Ok(Some((decode_map(json)?, Revision(kv.mod_revision().to_string()))))
    }

    async fn store_shard_map(&self, map: &ShardMapRecord, expected: Option<&Revision>) -> Result<Revision> {
        let key = self.key("shard-map");
        let condition = match expected {
            None => Compare::create_revision(key.clone(), CompareOp::Equal, 0),
            Some(rev) => {
                let rev: i64 = rev.0.parse().map_err(|_| StoreError::Conflict)?;
                Compare::mod_revision(key.clone(), CompareOp::Equal, rev)
            }
        };
        let txn = Txn::new().when([condition]).and_then([TxnOp::put(key, encode_map(map)?, None)]);
        let response = self.client.clone().txn(txn).await.map_err(backend)?;
        if !response.succeeded() {
            return Err(StoreError::Conflict);
        }
        let revision = response.header().map(|h| h.revision()).unwrap_or_default();
        Ok(Revision(revision.to_string()))
    }
}
