//! The Eviction subresource, `POST pods/NAME/eviction` (policy/v1 and v1beta1 `Eviction`), as
//! `pkg/registry/core/pod/storage/eviction.go`: the pod is deleted with the eviction's
//! DeleteOptions unless its PodDisruptionBudget allows no disruption (429), after the pod gets
//! `DisruptionTarget=True`, reason `EvictionByEvictionAPI`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::meta;
use super::write::{DeleteOptions, Subresource};
use super::{ApiError, ApiServer, Target};
use crate::store::StoredObject;

/// `MaxDisruptedPodSize`.
const MAX_DISRUPTED_PODS: usize = 2000;
const TOO_MANY_REQUESTS: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
pub const EVICTION_REASON: &str = "EvictionByEvictionAPI";
pub const EVICTION_MESSAGE: &str = "Eviction API: evicting";

/// `metav1.LabelSelectorAsSelector(sel).Matches(labels)`, where an empty, missing or invalid
/// selector matches nothing (the eviction handler and the disruption controller agree on that).
pub fn label_selector_matches(selector: Option<&Value>, labels: Option<&Map<String, Value>>) -> bool {
    let Some(sel) = selector.and_then(Value::as_object) else { return false };
    let match_labels = sel.get("matchLabels").and_then(Value::as_object);
    let expressions = sel.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(Map::is_empty) && expressions.is_none_or(Vec::is_empty) {
        return false;
    }
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let labels_ok = match_labels.into_iter().flatten().all(|(k, v)| label(k) == v.as_str());
    let expressions_ok = expressions.into_iter().flatten().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => label(key).is_some_and(|l| values.contains(&l)),
            "NotIn" => label(key).is_none_or(|l| !values.contains(&l)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

/// `podutil.IsPodReady`.
pub fn pod_is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions").and_then(Value::as_array).into_iter().flatten().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("Ready")
            && c.get("status").and_then(Value::as_str) == Some("True")
    })
}

/// The Status a successful eviction answers, with code 201.
fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

fn too_many_requests(cause: String, retry_after: u64) -> ApiError {
    let mut details = json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    ApiError {
        code: 429,
        reason: "TooManyRequests",
        message: TOO_MANY_REQUESTS.to_string(),
        details: Some(Box::new(details)),
        retry_after: (retry_after > 0).then_some(retry_after),
    }
}

fn pdb_forbidden(name: &str, why: &str) -> ApiError {
    ApiError {
        code: 403,
        reason: "Forbidden",
        message: format!("poddisruptionbudget.policy \"{name}\" is forbidden: {why}"),
        details: Some(Box::new(json!({"name": name, "group": "policy", "kind": "poddisruptionbudget"}))),
        retry_after: None,
    }
}

/// What an Eviction body asks for.
#[derive(Debug, Default)]
pub struct EvictionRequest {
    pub delete: DeleteOptions,
}

impl EvictionRequest {
    /// Checks the body as the eviction REST handler does and reads its `deleteOptions`.
    pub fn from_body(
        body: &Value,
        namespace: &str,
        name: &str,
        query_dry_run: bool,
    ) -> Result<Self, ApiError> {
        let Some(obj) = body.as_object() else {
            return Err(ApiError::bad_request("the object provided is not a JSON object"));
        };
        match obj.get("apiVersion").and_then(Value::as_str) {
            None | Some("policy/v1" | "policy/v1beta1") => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({other}) does not match the expected API version (policy/v1)"
                )));
            }
        }
        match obj.get("kind").and_then(Value::as_str) {
            None | Some("Eviction") => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({other}) does not match the expected kind (Eviction)"
                )));
            }
        }
        if meta::str_field(body, "namespace").is_some_and(|ns| !ns.is_empty() && ns != namespace) {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        if meta::name(body) != name {
            return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
        }
        let opts = obj.get("deleteOptions").cloned().unwrap_or(Value::Null);
        let body_dry_run = opts.get("dryRun").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
        let pre = opts.get("preconditions");
        let delete = DeleteOptions {
            grace_period_seconds: opts.get("gracePeriodSeconds").and_then(Value::as_i64),
            propagation: None,
            precondition_uid: pre.and_then(|p| p.get("uid")).and_then(Value::as_str).map(str::to_string),
            precondition_rv: pre
                .and_then(|p| p.get("resourceVersion"))
                .and_then(Value::as_str)
                .map(str::to_string),
            dry_run: body_dry_run || query_dry_run,
        };
        Ok(Self { delete })
    }
}

impl ApiServer {
    /// `EvictionREST.Create`: the `Status` to answer (201 Success, or the 500 Status for a pod
    /// under several budgets), or the error.
    pub fn evict(
        &self,
        namespace: &str,
        name: &str,
        request: EvictionRequest,
    ) -> Result<(u16, Value), ApiError> {
        let pods = self.builtin("", "v1", "pods");
        let pod = self.get(&pods, namespace, name)?;
        let value = pod.value();
        let phase = value.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        let terminal = phase == "Succeeded" || phase == "Failed";
        let deleting = meta::is_deleting(&value);
        // canIgnorePDB: the pod's disruption already happened, or it never ran.
        if terminal || phase == "Pending" || deleting {
            let mut opts = request.delete.clone();
            // shouldEnforceResourceVersion: a pending pod must not become ready meanwhile.
            if !terminal && !deleting && opts.precondition_rv.is_none() {
                opts.precondition_rv = Some(pod.rv.to_string());
            }
            self.add_condition_and_delete(&pods, &pod, opts)?;
            return Ok((201, success()));
        }
        let budgets = self.budgets_for(namespace, &value);
        if budgets.len() > 1 {
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                "code": 500});
            return Ok((500, status));
        }
        let mut opts = request.delete.clone();
        if let Some(pdb) = budgets.first() {
            let pdb_value = pdb.value();
            let status = pdb_value.get("status").cloned().unwrap_or(Value::Null);
            let int = |k: &str| status.get(k).and_then(Value::as_i64).unwrap_or(0);
            let always_allow = pdb_value.pointer("/spec/unhealthyPodEvictionPolicy").and_then(Value::as_str)
                == Some("AlwaysAllow");
            let healthy_enough = int("currentHealthy") >= int("desiredHealthy") && int("desiredHealthy") > 0;
            if !pod_is_ready(&value) && (always_allow || healthy_enough) {
                // An unready pod does not count as healthy: no budget to spend, but the pod
                // must not become ready before it is deleted.
                if opts.precondition_rv.is_none() {
                    opts.precondition_rv = Some(pod.rv.to_string());
                }
            } else {
                self.check_and_decrement(pdb, name, opts.dry_run)?;
            }
        }
        self.add_condition_and_delete(&pods, &pod, opts)?;
        Ok((201, success()))
    }

    /// PodDisruptionBudgets in `namespace` whose selector matches the pod.
    pub fn budgets_for(&self, namespace: &str, pod: &Value) -> Vec<Arc<StoredObject>> {
        let pdbs = self.builtin("policy", "v1", "poddisruptionbudgets");
        let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
        let (all, _) = self.store().list(pdbs.rid, Some(namespace));
        all.into_iter()
            .filter(|p| label_selector_matches(p.value().pointer("/spec/selector"), labels))
            .collect()
    }

    /// `checkAndDecrement`: spends one disruption of the budget and records the pod in
    /// `status.disruptedPods` for the disruption controller.
    fn check_and_decrement(&self, pdb: &StoredObject, pod_name: &str, dry_run: bool) -> Result<(), ApiError> {
        let target = self.builtin("policy", "v1", "poddisruptionbudgets");
        let now = meta::now_seconds();
        let mut outcome: Result<(), ApiError> = Ok(());
        let write = self.update_with(&target, &pdb.namespace, &pdb.name, Subresource::Status, |p| {
            let generation =
                meta::meta(p).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
            let status = p.get("status").cloned().unwrap_or(Value::Null);
            let int = |k: &str| status.get(k).and_then(Value::as_i64).unwrap_or(0);
            let name = meta::name(p).to_string();
            if int("observedGeneration") < generation {
                outcome = Err(too_many_requests(
                    format!("The disruption budget {name} is still being processed by the server."),
                    10,
                ));
                return Ok(false);
            }
            let allowed = int("disruptionsAllowed");
            if allowed < 0 {
                outcome = Err(pdb_forbidden(&name, "pdb disruptions allowed is negative"));
                return Ok(false);
            }
            let disrupted = status.get("disruptedPods").and_then(Value::as_object).map_or(0, Map::len);
            if disrupted > MAX_DISRUPTED_PODS {
                outcome = Err(pdb_forbidden(
                    &name,
                    "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
                ));
                return Ok(false);
            }
            if allowed == 0 {
                outcome = Err(too_many_requests(
                    format!(
                        "The disruption budget {name} needs {} healthy pods and has {} currently",
                        int("desiredHealthy"),
                        int("currentHealthy")
                    ),
                    0,
                ));
                return Ok(false);
            }
            outcome = Ok(());
            if dry_run {
                return Ok(false);
            }
            p["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if allowed - 1 == 0 {
                set_disruption_allowed(p, false, &now);
            }
            if !p["status"]["disruptedPods"].is_object() {
                p["status"]["disruptedPods"] = json!({});
            }
            p["status"]["disruptedPods"][pod_name] = json!(now);
            Ok(true)
        });
        write?;
        outcome
    }

    /// `addConditionAndDeletePod`: `DisruptionTarget=True` on the live pod (honouring the
    /// preconditions), then the delete with the eviction's options.
    fn add_condition_and_delete(
        &self,
        pods: &Target,
        pod: &StoredObject,
        mut opts: DeleteOptions,
    ) -> Result<(), ApiError> {
        if !opts.dry_run {
            let now = meta::now_seconds();
            let mut precondition_failed: Option<ApiError> = None;
            let updated = self.update_with(pods, &pod.namespace, &pod.name, Subresource::Status, |p| {
                let uid = meta::str_field(p, "uid").unwrap_or("");
                let rv = meta::str_field(p, "resourceVersion").unwrap_or("");
                if let Some(want) = &opts.precondition_uid
                    && want != uid
                {
                    precondition_failed = Some(ApiError::conflict(
                        &pods.rt,
                        &pod.name,
                        &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
                    ));
                    return Ok(false);
                }
                if let Some(want) = &opts.precondition_rv
                    && want != rv
                {
                    precondition_failed = Some(ApiError::conflict(
                        &pods.rt,
                        &pod.name,
                        &format!(
                            "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                        ),
                    ));
                    return Ok(false);
                }
                Ok(set_disruption_target(p, EVICTION_REASON, EVICTION_MESSAGE, &now))
            })?;
            if let Some(e) = precondition_failed {
                return Err(e);
            }
            // Our own write moved the version the caller's precondition named.
            if opts.precondition_rv.is_some() {
                opts.precondition_rv = Some(updated.rv.to_string());
            }
        }
        self.delete(pods, &pod.namespace, &pod.name, &opts)?;
        Ok(())
    }
}

/// `pdbhelper.UpdateDisruptionAllowedCondition`: `DisruptionAllowed`, reason `SufficientPods`
/// or `InsufficientPods`.
pub fn set_disruption_allowed(pdb: &mut Value, allowed: bool, now: &str) {
    let (status, reason) = if allowed { ("True", "SufficientPods") } else { ("False", "InsufficientPods") };
    let generation = meta::meta(pdb).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
    if !pdb["status"]["conditions"].is_array() {
        pdb["status"]["conditions"] = json!([]);
    }
    let Some(list) = pdb["status"]["conditions"].as_array_mut() else { return };
    let condition = json!({"type": "DisruptionAllowed", "status": status, "reason": reason, "message": "",
                           "observedGeneration": generation, "lastTransitionTime": now});
    match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed")) {
        Some(existing) => {
            let mut next = condition;
            if existing.get("status").and_then(Value::as_str) == Some(status) {
                next["lastTransitionTime"] =
                    existing.get("lastTransitionTime").cloned().unwrap_or(json!(now));
            }
            *existing = next;
        }
        None => list.push(condition),
    }
}

/// `UpdatePodCondition` with `DisruptionTarget=True`: the transition time moves only when the
/// status does. Says whether anything changed.
pub fn set_disruption_target(pod: &mut Value, reason: &str, message: &str, now: &str) -> bool {
    let condition = json!({"type": "DisruptionTarget", "status": "True", "reason": reason,
                           "message": message, "lastProbeTime": null, "lastTransitionTime": now});
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    if !pod["status"]["conditions"].is_array() {
        pod["status"]["conditions"] = json!([]);
    }
    let Some(list) = pod["status"]["conditions"].as_array_mut() else { return false };
    match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionTarget")) {
        Some(existing) => {
            let mut next = condition;
            if existing.get("status").and_then(Value::as_str) == Some("True") {
                next["lastTransitionTime"] =
                    existing.get("lastTransitionTime").cloned().unwrap_or(json!(now));
            }
            if *existing == next {
                return false;
            }
            *existing = next;
        }
        None => list.push(condition),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disruption_target_is_added_once() {
        let mut pod = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(set_disruption_target(
            &mut pod,
            "DeletionByTaintManager",
            "Taint manager: deleting due to NoExecute taint",
            "t1"
        ));
        assert!(!set_disruption_target(
            &mut pod,
            "DeletionByTaintManager",
            "Taint manager: deleting due to NoExecute taint",
            "t2"
        ));
        let c = &pod["status"]["conditions"][1];
        assert_eq!(
            (c["reason"].as_str(), c["message"].as_str(), c["lastTransitionTime"].as_str()),
            (
                Some("DeletionByTaintManager"),
                Some("Taint manager: deleting due to NoExecute taint"),
                Some("t1")
            )
        );
    }

    /// `LabelSelectorAsSelector` semantics the eviction handler relies on (`getPodDisruptionBudgets`).
    #[test]
    fn selectors_match_as_upstream_and_empty_matches_nothing() {
        let labels = json!({"app": "web", "tier": "1"});
        let labels = labels.as_object();
        let cases = [
            (json!(null), false),
            (json!({}), false),
            (json!({"matchLabels": {}}), false),
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["1", "2"]}]}), true),
            (json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["1"]}]}), false),
            (json!({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}), true),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Exists"}], "matchLabels": {"tier": "2"}}),
                false,
            ),
        ];
        for (sel, want) in cases {
            assert_eq!(label_selector_matches(Some(&sel), labels), want, "{sel}");
        }
    }

    /// The bodies of `createTooManyRequestsError` and the zero-budget 429 (eviction.go).
    #[test]
    fn too_many_requests_bodies() {
        let e =
            too_many_requests("The disruption budget web needs 2 healthy pods and has 2 currently".into(), 0);
        assert_eq!(
            e.status(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                   "reason": "TooManyRequests", "code": 429,
                   "details": {"causes": [{"reason": "DisruptionBudget",
                       "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]}})
        );
        assert_eq!(e.retry_after, None);
        let e =
            too_many_requests("The disruption budget web is still being processed by the server.".into(), 10);
        assert_eq!(
            (e.retry_after, e.status()["details"]["retryAfterSeconds"].as_i64()),
            (Some(10), Some(10))
        );
    }

    #[test]
    fn the_body_must_name_the_pod() {
        let ok = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ns"},
                        "deleteOptions": {"gracePeriodSeconds": 5}});
        let r = EvictionRequest::from_body(&ok, "ns", "p", false).unwrap();
        assert_eq!(r.delete.grace_period_seconds, Some(5));
        let e = EvictionRequest::from_body(&ok, "ns", "q", false).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (400, "name in URL does not match name in Eviction object"));
        let v1beta1 = json!({"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "p"}});
        assert!(EvictionRequest::from_body(&v1beta1, "ns", "p", false).is_ok());
        let wrong = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert_eq!(EvictionRequest::from_body(&wrong, "ns", "p", false).unwrap_err().code, 400);
    }

    fn server() -> Arc<ApiServer> {
        let (api, _) = ApiServer::new(Arc::new(crate::store::Store::new(Default::default())));
        let ns = api.builtin("", "v1", "namespaces");
        api.create(&ns, "", json!({"metadata": {"name": "ns"}}), &Default::default()).unwrap();
        api
    }

    /// A running pod labelled app=web, Ready or not, and a budget over it with `status`.
    fn setup(api: &ApiServer, ready: bool, generation_seen: i64, allowed: i64) {
        let pods = api.builtin("", "v1", "pods");
        let pod = json!({"metadata": {"name": "p", "labels": {"app": "web"}},
                         "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}});
        api.create(&pods, "ns", pod, &Default::default()).unwrap();
        api.update_with(&pods, "ns", "p", Subresource::Status, |p| {
            p["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]});
            Ok(true)
        })
        .unwrap();
        let pdbs = api.builtin("policy", "v1", "poddisruptionbudgets");
        let pdb = json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
        api.create(&pdbs, "ns", pdb, &Default::default()).unwrap();
        api.update_with(&pdbs, "ns", "web", Subresource::Status, |p| {
            p["status"] = json!({"currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2,
                                 "disruptionsAllowed": allowed, "observedGeneration": generation_seen});
            Ok(true)
        })
        .unwrap();
    }

    /// `TestEviction`/`TestEvictionIgnorePDB` shapes (eviction_test.go): what each budget state
    /// answers, and whether the pod is then being deleted.
    #[test]
    fn budgets_decide_as_eviction_go() {
        let cases = [
            ("allowed: evicted and the budget spent", true, 1, 1, Ok(201), true),
            ("none allowed: 429", true, 1, 0, Err((429, None)), false),
            ("budget not yet observed: 429 with Retry-After", true, 0, 1, Err((429, Some(10))), false),
            ("negative: 403", true, 1, -1, Err((403, None)), false),
            ("an unready pod under a healthy budget goes without spending", false, 1, 0, Ok(201), true),
        ];
        for (name, ready, seen, allowed, want, deleting) in cases {
            let api = server();
            setup(&api, ready, seen, allowed);
            let got = api
                .evict("ns", "p", EvictionRequest::default())
                .map(|(code, _)| code)
                .map_err(|e| (e.code, e.retry_after));
            assert_eq!(got, want, "{name}");
            let pods = api.builtin("", "v1", "pods");
            let pod = api.get(&pods, "ns", "p").map(|p| p.value());
            let is_deleting = pod.as_ref().is_ok_and(meta::is_deleting) || pod.is_err();
            assert_eq!(is_deleting, deleting, "{name}");
            if deleting && let Ok(p) = &pod {
                let reasons: Vec<&str> = p["status"]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|c| c["reason"].as_str())
                    .collect();
                assert_eq!(reasons, ["EvictionByEvictionAPI"], "{name}");
            }
            let pdbs = api.builtin("policy", "v1", "poddisruptionbudgets");
            let status = api.get(&pdbs, "ns", "web").unwrap().value()["status"].clone();
            let spent = name.contains("spent");
            assert_eq!(
                status["disruptionsAllowed"].as_i64(),
                Some(if spent { 0 } else { allowed }),
                "{name}"
            );
            assert_eq!(status["disruptedPods"].get("p").is_some(), spent, "{name}");
        }
    }
}
