//! The fleet as the cluster's objects show it: the shard map the coordinator keeps in the
//! ConfigMap `kube-system/batchfleet-shard-map` (the Kubernetes store), read as plain JSON so
//! that what the report says comes from the cluster, not from the fleet's admin API.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

const NAMESPACE: &str = "kube-system";
const NAME: &str = "batchfleet-shard-map";
const KEY: &str = "shards.json";

/// Who owns which shard.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShardMap {
    pub shard_count: u32,
    /// Per shard: its owner (if any) and epoch.
    pub shards: BTreeMap<u32, (Option<String>, u64)>,
    /// Shards a move is handing over.
    pub moving: usize,
}

impl ShardMap {
    /// Parses the ConfigMap's `shards.json`.
    pub fn parse(json: &str) -> anyhow::Result<Self> {
        let map: Value = serde_json::from_str(json).context("the shard map is not JSON")?;
        let shard_count = map["shardCount"].as_u64().context("the shard map has no shardCount")? as u32;
        let mut shards = BTreeMap::new();
        let mut moving = 0;
        for (index, record) in map["shards"].as_object().into_iter().flatten() {
            let index: u32 = index.parse().with_context(|| format!("shard index {index:?}"))?;
            let owner = record["owner"].as_str().map(String::from);
            moving += usize::from(record.get("movingTo").is_some_and(|m| !m.is_null()));
            shards.insert(index, (owner, record["epoch"].as_u64().unwrap_or(0)));
        }
        Ok(Self { shard_count, shards, moving })
    }

    /// Shards per owner.
    pub fn held(&self) -> BTreeMap<String, usize> {
        let mut held = BTreeMap::new();
        for owner in self.shards.values().filter_map(|(o, _)| o.clone()) {
            *held.entry(owner).or_default() += 1;
        }
        held
    }

    pub fn held_by(&self, worker: &str) -> usize {
        self.shards.values().filter(|(o, _)| o.as_deref() == Some(worker)).count()
    }

    pub fn owner(&self, shard: u32) -> Option<&str> {
        self.shards.get(&shard).and_then(|(o, _)| o.as_deref())
    }

    /// Per shard, its changes of owner (epoch − 1), as the tenure audit weighs them.
    pub fn moves(&self) -> BTreeMap<u32, u64> {
        self.shards.iter().map(|(s, (_, epoch))| (*s, epoch.saturating_sub(1))).collect()
    }
}

/// The shard map as the sim serves it now; `None` before the coordinator first wrote it.
pub async fn read(client: &kube::Client) -> anyhow::Result<Option<ShardMap>> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let Some(cm) = maps.get_opt(NAME).await.context("reading the shard map ConfigMap")? else {
        return Ok(None);
    };
    let json = cm.data.as_ref().and_then(|d| d.get(KEY)).with_context(|| format!("{NAME} has no {KEY}"))?;
    ShardMap::parse(json).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_owners_epochs_and_moves() {
        let map = ShardMap::parse(
            r#"{"shardCount":4,"shards":{"0":{"owner":"w-0","epoch":1},"1":{"owner":"w-1","epoch":3,"movingTo":"w-0"},"2":{"epoch":2}},"pins":{}}"#,
        )
        .expect("parses");
        assert_eq!(map.shard_count, 4);
        assert_eq!(map.held(), BTreeMap::from([("w-0".into(), 1), ("w-1".into(), 1)]));
        assert_eq!(map.moving, 1);
        assert_eq!(map.owner(2), None);
        assert_eq!(map.moves(), BTreeMap::from([(0, 0), (1, 2), (2, 1)]));
        assert!(ShardMap::parse(r#"{"shards":{}}"#).is_err());
    }
}
