//! The shard map as the coordination store holds it, read by the harness itself: the owners and
//! epochs the leader stored, not what any process says about them.

use batchfleet_store::{CoordinationStore, ShardMapRecord, etcd::EtcdStore, kubernetes::KubernetesStore};

/// The fleet's store, as the coordinators the harness starts use it (their default namespace
/// and etcd prefix).
pub enum StoredMap {
    // Boxed: the stores' clients are large, and the map is read a few times a run.
    Kubernetes(Box<KubernetesStore>),
    Etcd(Box<EtcdStore>),
}

/// Where the coordinators keep their Leases and shard map on the Kubernetes store (their
/// `--namespace` default).
const FLEET_NAMESPACE: &str = "kube-system";
/// Their `--etcd-prefix` default.
const ETCD_PREFIX: &str = "/batchfleet/";

impl StoredMap {
    /// The Kubernetes store through `client`, or etcd at `etcd_endpoint`.
    pub async fn open(client: &kube::Client, etcd_endpoint: Option<&str>) -> anyhow::Result<Self> {
        Ok(match etcd_endpoint {
            Some(endpoint) => {
                Self::Etcd(Box::new(EtcdStore::connect(&[endpoint.to_string()], ETCD_PREFIX).await?))
            }
            None => Self::Kubernetes(Box::new(KubernetesStore::new(client.clone(), FLEET_NAMESPACE))),
        })
    }

    /// The stored map now; an empty one before the leader first stored it.
    pub async fn load(&self) -> anyhow::Result<ShardMapRecord> {
        let loaded = match self {
            Self::Kubernetes(store) => store.load_shard_map().await?,
            Self::Etcd(store) => store.load_shard_map().await?,
        };
        Ok(loaded.map(|(map, _)| map).unwrap_or_default())
    }
}

/// The shards `worker` owns in `map`, or is handing over (the owner of a move in flight).
pub fn owned_by(map: &ShardMapRecord, worker: &str) -> Vec<u32> {
    map.shards.iter().filter(|(_, r)| r.owner.as_deref() == Some(worker)).map(|(s, _)| *s).collect()
}

/// Whether every shard has an owner and none is moving.
pub fn settled(map: &ShardMapRecord) -> bool {
    map.shard_count > 0
        && (0..map.shard_count)
            .all(|s| map.shards.get(&s).is_some_and(|r| r.owner.is_some() && r.moving_to.is_none()))
}

/// Every shard's epoch.
pub fn epochs(map: &ShardMapRecord) -> std::collections::BTreeMap<u32, u64> {
    map.shards.iter().map(|(s, r)| (*s, r.epoch)).collect()
}

#[cfg(test)]
mod tests {
    use batchfleet_store::ShardRecord;

    use super::*;

    fn record(owner: Option<&str>, epoch: u64, moving_to: Option<&str>) -> ShardRecord {
        ShardRecord { owner: owner.map(String::from), epoch, moving_to: moving_to.map(String::from) }
    }

    #[test]
    fn a_map_is_settled_when_every_shard_is_owned_and_none_moves() {
        let mut map = ShardMapRecord { shard_count: 2, ..Default::default() };
        assert!(!settled(&map), "no shard placed yet");
        map.shards.insert(0, record(Some("w-0"), 1, None));
        map.shards.insert(1, record(Some("w-1"), 3, Some("w-0")));
        assert!(!settled(&map), "shard 1 moves");
        assert_eq!(owned_by(&map, "w-1"), vec![1]);
        map.shards.insert(1, record(Some("w-0"), 3, None));
        assert!(settled(&map));
        assert_eq!(owned_by(&map, "w-0"), vec![0, 1]);
        assert!(owned_by(&map, "w-1").is_empty());
        assert_eq!(epochs(&map), [(0, 1), (1, 3)].into());
        map.shards.insert(1, record(None, 4, None));
        assert!(!settled(&map), "shard 1 has no owner");
    }
}
