//! How fleetctl prints what the admin API answered: aligned columns for people (`-o table`), JSON
//! for scripts (`-o json`, field names as documented in the README).

use batchfleet_proto::v1::{PlannedMove, ShardInfo, StatusResponse, WorkerInfo};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

pub fn status(s: &StatusResponse, format: Format) -> String {
    let by_state: serde_json::Map<String, Value> =
        sorted(s.shards_by_state.iter().map(|(k, v)| (k.clone(), *v)))
            .into_iter()
            .map(|(k, v)| (k, json!(v)))
            .collect();
    match format {
        Format::Json => pretty(&json!({
            "leader": s.leader,
            "store": s.store,
            "shard_count": s.shard_count,
            "workers": s.workers,
            "shards_by_state": by_state,
            "moves_in_progress": s.moves_in_progress,
        })),
        Format::Table => {
            let states = by_state.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            table(
                &["LEADER", "STORE", "SHARDS", "WORKERS", "SHARDS BY STATE", "MOVES"],
                &[vec![
                    s.leader.clone(),
                    s.store.clone(),
                    s.shard_count.to_string(),
                    s.workers.to_string(),
                    states,
                    s.moves_in_progress.to_string(),
                ]],
            )
        }
    }
}

pub fn workers(list: &[WorkerInfo], format: Format) -> String {
    match format {
        Format::Json => pretty(&Value::Array(
            list.iter()
                .map(|w| {
                    json!({"name": w.name, "state": w.state, "shards": w.shards, "load": w.load,
                           "lease_expires_in_ms": w.lease_expires_in_ms})
                })
                .collect(),
        )),
        Format::Table => table(
            &["NAME", "STATE", "SHARDS", "LOAD", "LEASE EXPIRES IN"],
            &list
                .iter()
                .map(|w| {
                    vec![
                        w.name.clone(),
                        w.state.clone(),
                        w.shards.to_string(),
                        format!("{:.1}", w.load),
                        format!("{:.1}s", w.lease_expires_in_ms as f64 / 1000.0),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
    }
}

pub fn shards(list: &[ShardInfo], format: Format) -> String {
    match format {
        Format::Json => pretty(&Value::Array(
            list.iter()
                .map(|s| {
                    let owner = if s.owner.is_empty() { Value::Null } else { json!(s.owner) };
                    json!({"shard": s.shard, "owner": owner, "epoch": s.epoch, "state": s.state,
                           "load": s.load, "pinned": s.pinned})
                })
                .collect(),
        )),
        Format::Table => table(
            &["SHARD", "OWNER", "EPOCH", "STATE", "LOAD", "PINNED"],
            &list
                .iter()
                .map(|s| {
                    vec![
                        s.shard.to_string(),
                        if s.owner.is_empty() { "<none>".into() } else { s.owner.clone() },
                        s.epoch.to_string(),
                        s.state.clone(),
                        format!("{:.1}", s.load),
                        if s.pinned { "yes".into() } else { "no".into() },
                    ]
                })
                .collect::<Vec<_>>(),
        ),
    }
}

pub fn moves(list: &[PlannedMove], format: Format) -> String {
    match format {
        Format::Json => pretty(&Value::Array(
            list.iter()
                .map(|m| {
                    let from = if m.from.is_empty() { Value::Null } else { json!(m.from) };
                    json!({"shard": m.shard, "from": from, "to": m.to})
                })
                .collect(),
        )),
        Format::Table if list.is_empty() => "no moves: the placement is balanced\n".into(),
        Format::Table => table(
            &["SHARD", "FROM", "TO"],
            &list
                .iter()
                .map(|m| {
                    vec![
                        m.shard.to_string(),
                        if m.from.is_empty() { "<none>".into() } else { m.from.clone() },
                        m.to.clone(),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
    }
}

pub fn reply(message: &str, format: Format) -> String {
    match format {
        Format::Json => pretty(&json!({"message": message})),
        Format::Table => format!("{message}\n"),
    }
}

fn sorted<K: Ord, V>(items: impl Iterator<Item = (K, V)>) -> Vec<(K, V)> {
    let mut v: Vec<_> = items.collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn pretty(v: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default())
}

/// Columns padded to their widest cell, separated by three spaces, as kubectl prints.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            out.push_str(cell);
            if i < last {
                out.push_str(&" ".repeat(w - cell.chars().count() + 3));
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_as_kubectl_does() {
        let out = table(
            &["NAME", "SHARDS"],
            &[vec!["worker-10".into(), "3".into()], vec!["w".into(), "120".into()]],
        );
        assert_eq!(out, "NAME        SHARDS\nworker-10   3\nw           120\n");
    }

    #[test]
    fn an_unowned_shard_is_null_in_json_and_none_in_tables() {
        let s = ShardInfo {
            shard: 4,
            owner: String::new(),
            epoch: 2,
            state: "unowned".into(),
            load: 1.0,
            pinned: false,
        };
        let json: Value = serde_json::from_str(&shards(std::slice::from_ref(&s), Format::Json)).unwrap();
        assert_eq!(json[0]["owner"], Value::Null);
        assert!(shards(&[s], Format::Table).contains("<none>"));
    }
}
