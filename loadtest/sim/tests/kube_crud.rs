//! kube-rs CRUD against the sim: the semantics SIM-API.md §3 lists, as a real client sees them.

mod common;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test]
async fn create_get_update_with_conflicts_and_no_op_writes() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let created = api.create(&PostParams::default(), &configmap("a")).await.unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36), "uuid uid: {:?}", meta.uid);
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let dup = api.create(&PostParams::default(), &configmap("a")).await.unwrap_err();
    assert!(matches!(&dup, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"), "{dup:?}");

    // Writing the same object again makes no new resourceVersion.
    let same = api.replace("a", &PostParams::default(), &created).await.unwrap();
    assert_eq!(same.metadata.resource_version, created.metadata.resource_version);

    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "w".to_string())].into());
    let updated = api.replace("a", &PostParams::default(), &changed).await.unwrap();
    let rv2: u64 = updated.metadata.resource_version.as_deref().unwrap().parse().unwrap();
    assert!(rv2 > rv1);

    // The old resourceVersion is stale now.
    let stale = api.replace("a", &PostParams::default(), &changed).await.unwrap_err();
    match stale {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert!(s.message.contains("the object has been modified"), "{}", s.message);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }

    let missing = api.get("nope").await.unwrap_err();
    assert!(
        matches!(&missing, kube::Error::Api(s) if s.code == 404 && s.reason == "NotFound"),
        "{missing:?}"
    );
    assert!(api.get_opt("nope").await.unwrap().is_none());
}

#[tokio::test]
async fn generate_name_uid_and_missing_namespace() {
    let sim = common::api_only().await;
    let client = common::client(&sim);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let a = api.create(&PostParams::default(), &cm).await.unwrap();
    let b = api.create(&PostParams::default(), &cm).await.unwrap();
    let (na, nb) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(na.starts_with("gen-") && na.len() == 9, "{na}");
    assert_ne!(na, nb);

    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "missing");
    let err = elsewhere.create(&PostParams::default(), &configmap("x")).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404 && s.message.contains("namespaces \"missing\" not found")),
        "{err:?}"
    );

    let mut with_rv = configmap("rv");
    with_rv.metadata.resource_version = Some("5".into());
    let err = api.create(&PostParams::default(), &with_rv).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.message.contains("resourceVersion should not be set")),
        "{err:?}"
    );
}

#[tokio::test]
async fn status_is_a_separate_subresource_and_generation_follows_spec() {
    let sim = common::api_only().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &pod).await.unwrap();
    // Pod defaults, as the apiserver applies them.
    assert_eq!(created.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending"));
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(created.metadata.generation, Some(1));

    // A status write keeps the old spec; a main write keeps the old status.
    let status_patch = json!({"status": {"phase": "Running"}, "spec": {"activeDeadlineSeconds": 5}});
    let after = api.patch_status("p", &PatchParams::default(), &Patch::Merge(&status_patch)).await.unwrap();
    assert_eq!(after.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
    assert_eq!(after.spec.as_ref().unwrap().active_deadline_seconds, None);
    assert_eq!(after.metadata.generation, Some(1));

    let main_patch = json!({"status": {"phase": "Failed"}, "spec": {"activeDeadlineSeconds": 5}});
    let after = api.patch("p", &PatchParams::default(), &Patch::Merge(&main_patch)).await.unwrap();
    assert_eq!(after.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
    assert_eq!(after.spec.as_ref().unwrap().active_deadline_seconds, Some(5));
    assert_eq!(after.metadata.generation, Some(2));
}

#[tokio::test]
async fn patches_json_merge_and_strategic() {
    let sim = common::api_only().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x/one", "batch.kubernetes.io/job-tracking"]},
        "spec": {"containers": [{"name": "a", "image": "one"}, {"name": "b", "image": "two"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();

    // Strategic merge patch merges containers by name.
    let smp = json!({"spec": {"containers": [{"name": "b", "image": "three"}]}});
    let p = api.patch("p", &PatchParams::default(), &Patch::Strategic(&smp)).await.unwrap();
    let images: Vec<_> = p.spec.unwrap().containers.iter().map(|c| c.image.clone().unwrap()).collect();
    assert_eq!(images, ["one", "three"]);

    // The Job controller's finalizer-removal patch.
    let remove =
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["batch.kubernetes.io/job-tracking"]}});
    let p = api.patch("p", &PatchParams::default(), &Patch::Strategic(&remove)).await.unwrap();
    assert_eq!(p.metadata.finalizers, Some(vec!["x/one".to_string()]));

    // JSON patch, with a failing test operation.
    let ok: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/metadata/labels/a", "value": "2"}]))
            .unwrap();
    let p = api.patch("p", &PatchParams::default(), &Patch::Json::<()>(ok)).await.unwrap();
    assert_eq!(p.metadata.labels.unwrap()["a"], "2");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/labels/a", "value": "9"}])).unwrap();
    let err = api.patch("p", &PatchParams::default(), &Patch::Json::<()>(failing)).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 422), "{err:?}");

    // A merge patch that names a stale resourceVersion conflicts.
    let stale = json!({"metadata": {"resourceVersion": "1", "labels": {"b": "1"}}});
    let err = api.patch("p", &PatchParams::default(), &Patch::Merge(&stale)).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 409), "{err:?}");
}

#[tokio::test]
async fn server_side_apply_upserts() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let pp = PatchParams::apply("test-manager");
    let cm =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}});
    let first = api.patch("ssa", &pp, &Patch::Apply(&cm)).await.unwrap();
    assert_eq!(first.data.unwrap()["a"], "1");
    let managers: Vec<_> =
        first.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|m| m.manager).collect();
    assert!(managers.contains(&"test-manager".to_string()), "{managers:?}");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "2", "b": "3"}});
    let second = api.patch("ssa", &pp, &Patch::Apply(&cm)).await.unwrap();
    let data = second.data.unwrap();
    assert_eq!((data["a"].as_str(), data["b"].as_str()), ("2", "3"));
}

#[tokio::test]
async fn delete_preconditions_and_responses() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let created = api.create(&PostParams::default(), &configmap("d")).await.unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions { uid: Some("not-the-uid".into()), resource_version: None }),
        ..DeleteParams::default()
    };
    let err = api.delete("d", &wrong).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.message.contains("Precondition failed")),
        "{err:?}"
    );
    let right = DeleteParams {
        preconditions: Some(Preconditions { uid: created.metadata.uid.clone(), resource_version: None }),
        ..DeleteParams::default()
    };
    // Gone at once: the answer is a Status, not the object.
    let gone = api.delete("d", &right).await.unwrap();
    assert!(gone.is_right(), "{gone:?}");
    assert!(api.get_opt("d").await.unwrap().is_none());

    // With a finalizer the object stays, marked for deletion, and the answer is the object.
    let mut held = configmap("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let pending = api.delete("held", &DeleteParams::default()).await.unwrap();
    let obj = pending.left().expect("object while finalizers remain");
    assert!(obj.metadata.deletion_timestamp.is_some());
    // No finalizer may be added now.
    let add = json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}});
    let err = api.patch("held", &PatchParams::default(), &Patch::Merge(&add)).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("no new finalizers")),
        "{err:?}"
    );
    // Removing the last finalizer completes the deletion.
    let clear = json!({"metadata": {"finalizers": null}});
    api.patch("held", &PatchParams::default(), &Patch::Merge(&clear)).await.unwrap();
    assert!(api.get_opt("held").await.unwrap().is_none());
}

#[tokio::test]
async fn list_pagination_and_selectors() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    for i in 0..7 {
        let mut cm = configmap(&format!("cm-{i}"));
        cm.metadata.labels =
            Some([("parity".to_string(), if i % 2 == 0 { "even" } else { "odd" }.to_string())].into());
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut first_rv = None;
    loop {
        let page = api.list(&lp).await.unwrap();
        first_rv.get_or_insert(page.metadata.resource_version.clone());
        // Later pages come from the first page's snapshot.
        assert_eq!(Some(page.metadata.resource_version.clone()), first_rv);
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => {
                lp = ListParams::default().limit(3).continue_token(&c);
                // A write between pages must not show up in them.
                let _ =
                    api.create(&PostParams::default(), &configmap(&format!("late-{}", names.len()))).await;
            }
            _ => break,
        }
    }
    // The namespace's own root CA ConfigMap (root-ca-cert-publisher) sorts last.
    assert_eq!(names.pop().as_deref(), Some("kube-root-ca.crt"));
    assert_eq!(names, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());

    let even = api.list(&ListParams::default().labels("parity=even")).await.unwrap();
    assert_eq!(even.items.len(), 4);
    let set = api.list(&ListParams::default().labels("parity in (odd),!missing")).await.unwrap();
    assert_eq!(set.items.len(), 3);
    let by_name = api.list(&ListParams::default().fields("metadata.name=cm-3")).await.unwrap();
    assert_eq!(by_name.items.len(), 1);
    let err = api.list(&ListParams::default().fields("spec.nope=1")).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400 && s.message.contains("not a known field selector")),
        "{err:?}"
    );
}

#[tokio::test]
async fn job_defaults_selector_and_status_validation() {
    let sim = common::api_only().await;
    let api: Api<Job> = Api::namespaced(common::client(&sim), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &job).await.unwrap();
    let spec = created.spec.as_ref().unwrap();
    assert_eq!((spec.parallelism, spec.completions, spec.backoff_limit), (Some(1), Some(1), Some(6)));
    assert_eq!(spec.completion_mode.as_deref(), Some("NonIndexed"));
    let uid = created.metadata.uid.clone().unwrap();
    let selector = spec.selector.as_ref().unwrap().match_labels.as_ref().unwrap();
    assert_eq!(selector["batch.kubernetes.io/controller-uid"], uid);
    let labels = spec.template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
    for key in
        ["batch.kubernetes.io/controller-uid", "controller-uid", "batch.kubernetes.io/job-name", "job-name"]
    {
        assert!(labels.contains_key(key), "template label {key}");
    }

    // The apiserver rejects a Complete condition without SuccessCriteriaMet.
    let bad = json!({"status": {"succeeded": 1, "completionTime": "2026-01-01T00:00:00Z", "startTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "Complete", "status": "True"}]}});
    let err = api.patch_status("j", &PatchParams::default(), &Patch::Merge(&bad)).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 422 && s.reason == "Invalid"), "{err:?}");

    // The pod template is immutable.
    let change = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "other"}]}}}});
    let err = api.patch("j", &PatchParams::default(), &Patch::Strategic(&change)).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("immutable")),
        "{err:?}"
    );
}

#[tokio::test]
async fn namespaces_bootstrap_and_cascade() {
    let sim = common::sim().await;
    let client = common::client(&sim);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let names: Vec<_> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for ns in ["default", "kube-system", "kube-node-lease"] {
        assert!(names.contains(&ns.to_string()), "{names:?}");
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    cms.create(&PostParams::default(), &configmap("c")).await.unwrap();
    namespaces.delete("doomed", &DeleteParams::default()).await.unwrap();
    let err = cms.create(&PostParams::default(), &configmap("d")).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403 && s.message.contains("being terminated")),
        "{err:?}"
    );
    common::wait_until("the namespace to be gone", std::time::Duration::from_secs(10), || async {
        namespaces.get_opt("doomed").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(cms.get_opt("c").await.unwrap().is_none());
}
