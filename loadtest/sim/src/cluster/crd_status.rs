//! What apiextensions-apiserver's naming and establishing controllers write on a
//! CustomResourceDefinition: `status.acceptedNames` (the spec's names: the sim serves every CRD
//! it is given, with no name conflicts to refuse), the `NamesAccepted` and `Established`
//! conditions, and `storedVersions`. `kubectl wait --for condition=Established crd/…`, which
//! installers run before creating custom resources, waits for this.

use serde_json::{Value, json};

/// Brings `crd`'s status to what the controllers write; whether anything changed.
pub fn establish(crd: &mut Value, now: &str) -> bool {
    let names = crd["spec"]["names"].clone();
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == json!(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let mut stored: Vec<Value> = crd["status"]["storedVersions"].as_array().cloned().unwrap_or_default();
    for v in storage {
        if !stored.contains(&v) {
            stored.push(v);
        }
    }
    let established = |ty: &str| {
        crd["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == ty && c["status"] == "True"))
    };
    if crd["status"]["acceptedNames"] == names
        && established("NamesAccepted")
        && established("Established")
        && crd["status"]["storedVersions"] == json!(stored)
    {
        return false;
    }
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": stored,
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_crd_is_established_once_and_then_left_alone() {
        let mut crd = json!({"spec": {"names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}, {"name": "v1beta1", "served": true}]}});
        assert!(establish(&mut crd, "2026-11-26T00:00:00Z"));
        assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
        assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
        assert!(!establish(&mut crd, "2026-11-26T00:01:00Z"), "a second pass changes nothing");
        crd["spec"]["names"]["shortNames"] = json!(["wd"]);
        assert!(establish(&mut crd, "2026-11-26T00:02:00Z"), "new names are accepted");
    }
}
