//! Legacy (unaggregated) discovery and `/version` (apiserver `pkg/endpoints/discovery`; read by
//! client-go `discovery/discovery_client.go`). Serve these with a plain `application/json`
//! Content-Type: client-go then never expects an aggregated v2 body.

use serde_json::{Map, Value, json};

use crate::resources::{Registry, ResourceType};

const ALL_VERBS: &[&str] =
    &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
/// Namespaces have no deletecollection upstream.
const NAMESPACE_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// `GET /api`: APIVersions (no apiVersion field, as upstream).
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `GET /apis`: every non-core group, in registry order; the first registered version is the
/// preferred one.
pub fn api_group_list(reg: &Registry) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (group, version) in reg.group_versions() {
        if group.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, versions)) => versions.push(version),
            None => groups.push((group, vec![version])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(name, versions)| {
            let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
            let preferred = gv(&versions[0]);
            let versions: Vec<Value> = versions.iter().map(gv).collect();
            json!({"name": name, "versions": versions, "preferredVersion": preferred})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn resource_entry(rt: &ResourceType) -> Value {
    let verbs = if rt.group.is_empty() && rt.plural == "namespaces" { NAMESPACE_VERBS } else { ALL_VERBS };
    let mut e = Map::new();
    e.insert("name".into(), json!(rt.plural));
    e.insert("singularName".into(), json!(rt.singular));
    e.insert("namespaced".into(), json!(rt.namespaced));
    e.insert("kind".into(), json!(rt.kind));
    e.insert("verbs".into(), json!(verbs));
    if !rt.short_names.is_empty() {
        e.insert("shortNames".into(), json!(rt.short_names));
    }
    if !rt.categories.is_empty() {
        e.insert("categories".into(), json!(rt.categories));
    }
    Value::Object(e)
}

fn status_entry(rt: &ResourceType) -> Value {
    json!({
        "name": format!("{}/status", rt.plural),
        "singularName": "",
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": STATUS_VERBS,
    })
}

/// `GET /api/v1` or `/apis/{group}/{version}`: APIResourceList, resources sorted by name with
/// `x/status` entries; `None` when the group version is not served (answer 404).
pub fn api_resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<&ResourceType> =
        reg.all().iter().map(|t| &**t).filter(|t| t.group == group && t.version == version).collect();
    if types.is_empty() {
        return None;
    }
    let mut entries: Vec<(String, Value)> = Vec::new();
    for rt in types {
        entries.push((rt.plural.clone(), resource_entry(rt)));
        if rt.has_status {
            entries.push((format!("{}/status", rt.plural), status_entry(rt)));
        }
        if rt.is("", "pods") {
            // kubectl drain evicts only when discovery lists this, with its group and version.
            entries.push((
                "pods/eviction".into(),
                json!({
                    "name": "pods/eviction", "singularName": "", "namespaced": true,
                    "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"],
                }),
            ));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let resources: Vec<Value> = entries.into_iter().map(|(_, e)| e).collect();
    Some(if group.is_empty() {
        json!({"kind": "APIResourceList", "groupVersion": version, "resources": resources})
    } else {
        json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"),
            "resources": resources,
        })
    })
}

/// `GET /version`.
pub fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "37",
        "emulationMajor": "1",
        "emulationMinor": "37",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "36",
        "gitVersion": "v1.37.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_body() {
        assert_eq!(
            api_versions("127.0.0.1:6443"),
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]})
        );
    }

    #[test]
    fn group_list_excludes_core_and_prefers_first_version() {
        let reg = Registry::default();
        let list = api_group_list(&reg);
        assert_eq!(list["kind"], "APIGroupList");
        let groups = list["groups"].as_array().unwrap();
        let names: Vec<&str> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
        assert!(!names.contains(&""));
        for want in ["batch", "coordination.k8s.io", "events.k8s.io", "apps", "apiextensions.k8s.io"] {
            assert!(names.contains(&want), "{want}");
        }
        let batch = groups.iter().find(|g| g["name"] == "batch").unwrap();
        assert_eq!(
            *batch,
            json!({"name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
                   "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"}})
        );

        // A CRD serving two versions: both listed, the first registered preferred.
        let crd = |version: &str| ResourceType {
            group: "example.com".into(),
            version: version.into(),
            plural: "widgets".into(),
            singular: "widget".into(),
            kind: "Widget".into(),
            namespaced: true,
            short_names: vec![],
            categories: vec![],
            has_status: false,
            builtin: false,
            field_selectors: &[],
        };
        let reg = reg.with(vec![crd("v1"), crd("v1beta1")]);
        let list = api_group_list(&reg);
        let ex = list["groups"].as_array().unwrap().iter().find(|g| g["name"] == "example.com").unwrap();
        assert_eq!(ex["versions"].as_array().unwrap().len(), 2);
        assert_eq!(ex["preferredVersion"]["version"], "v1");
    }

    #[test]
    fn resource_lists() {
        let reg = Registry::default();
        assert!(api_resource_list(&reg, "batch", "v2").is_none());
        assert!(api_resource_list(&reg, "nope.io", "v1").is_none());

        let batch = api_resource_list(&reg, "batch", "v1").unwrap();
        assert_eq!(batch["apiVersion"], "v1");
        assert_eq!(batch["groupVersion"], "batch/v1");
        let names: Vec<&str> =
            batch["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]);
        assert_eq!(
            batch["resources"][2],
            json!({"name": "jobs", "singularName": "job", "namespaced": true, "kind": "Job", "verbs": ALL_VERBS,
                   "categories": ["all"]})
        );
        assert_eq!(
            batch["resources"][3],
            json!({"name": "jobs/status", "singularName": "", "namespaced": true, "kind": "Job",
                   "verbs": ["get", "patch", "update"]})
        );

        let core = api_resource_list(&reg, "", "v1").unwrap();
        assert_eq!(core["groupVersion"], "v1");
        assert!(core.get("apiVersion").is_none());
        let find = |name: &str| {
            core["resources"].as_array().unwrap().iter().find(|r| r["name"] == name).cloned().unwrap()
        };
        assert_eq!(find("pods")["shortNames"], json!(["po"]));
        assert_eq!(find("pods")["categories"], json!(["all"]));
        assert_eq!(find("namespaces")["verbs"], json!(NAMESPACE_VERBS));
        assert_eq!(find("namespaces")["namespaced"], false);
        assert_eq!(find("nodes/status")["namespaced"], false);
        assert!(find("configmaps").get("categories").is_none());
        assert!(core["resources"].as_array().unwrap().iter().all(|r| r["name"] != "events/status"));
    }

    #[test]
    fn version_is_1_37() {
        let v = version_info();
        assert_eq!((v["major"].as_str(), v["minor"].as_str()), (Some("1"), Some("37")));
        assert_eq!(v["gitVersion"], "v1.37.0");
    }
}
