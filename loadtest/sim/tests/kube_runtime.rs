//! kube-runtime's Controller (with owned objects), finalizer helper and event Recorder against
//! the sim.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use k8s_openapi::api::events::v1::Event as EventsV1;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ReconcileError(String);

struct Ctx {
    api: Api<ConfigMap>,
    reconciles: AtomicUsize,
}

/// Parents labelled `role=parent` get one child ConfigMap each, owned by them.
async fn reconcile(parent: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let name = format!("{}-child", parent.name_any());
    if ctx.api.get_opt(&name).await.map_err(|e| ReconcileError(e.to_string()))?.is_none() {
        let owner = parent.controller_owner_ref(&()).ok_or_else(|| ReconcileError("no owner ref".into()))?;
        let child: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"role": "child"}, "ownerReferences": [owner]},
            "data": {"from": parent.name_any()}
        }))
        .map_err(|e| ReconcileError(e.to_string()))?;
        match ctx.api.create(&PostParams::default(), &child).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(ReconcileError(e.to_string())),
        }
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn a_controller_with_owned_objects_recreates_a_deleted_child() {
    let sim = common::sim().await;
    let client = common::retrying_client(&sim);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let ctx = Arc::new(Ctx { api: api.clone(), reconciles: AtomicUsize::new(0) });
    let controller = Controller::new(api.clone(), watcher::Config::default().labels("role=parent"))
        .owns(api.clone(), watcher::Config::default().labels("role=child"))
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| futures::future::ready(()));
    let task = tokio::spawn(controller);

    for i in 0..3 {
        let parent: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("p{i}"), "labels": {"role": "parent"}}}),
        )
        .unwrap();
        api.create(&PostParams::default(), &parent).await.unwrap();
    }
    let children = |api: Api<ConfigMap>| async move {
        let l = api.list(&ListParams::default().labels("role=child")).await.unwrap();
        l.items.len()
    };
    common::wait_until("three children", Duration::from_secs(20), || {
        let api = api.clone();
        async move { (children(api).await == 3).then_some(()) }
    })
    .await;

    // Deleting an owned child triggers its owner's reconcile, which recreates it.
    let before = ctx.reconciles.load(Ordering::SeqCst);
    let uid = api.get("p1-child").await.unwrap().uid();
    api.delete("p1-child", &DeleteParams::default()).await.unwrap();
    common::wait_until("the child to be recreated", Duration::from_secs(20), || {
        let api = api.clone();
        let uid = uid.clone();
        async move { api.get_opt("p1-child").await.unwrap().filter(|c| c.uid() != uid).map(|_| ()) }
    })
    .await;
    assert!(ctx.reconciles.load(Ordering::SeqCst) > before);

    // Deleting a parent garbage-collects its child (background propagation).
    api.delete("p0", &DeleteParams::background()).await.unwrap();
    common::wait_until("the orphaned child to be collected", Duration::from_secs(20), || {
        let api = api.clone();
        async move { api.get_opt("p0-child").await.unwrap().is_none().then_some(()) }
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn the_finalizer_helper_adds_cleans_up_and_removes() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "f"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let cleaned = Arc::new(AtomicUsize::new(0));

    let run = |obj: ConfigMap| {
        let api = api.clone();
        let cleaned = cleaned.clone();
        async move {
            finalizer(&api, "example.com/cleanup", Arc::new(obj), |event| async move {
                if let FinalizerEvent::Cleanup(_) = event {
                    cleaned.fetch_add(1, Ordering::SeqCst);
                }
                Ok::<_, ReconcileError>(Action::await_change())
            })
            .await
        }
    };
    // First pass: the finalizer is added with a JSON patch whose `test` op expects null.
    run(api.get("f").await.unwrap()).await.unwrap();
    let with = api.get("f").await.unwrap();
    assert_eq!(with.finalizers(), ["example.com/cleanup".to_string()]);
    // Apply pass, then deletion: cleanup runs and the finalizer goes, and with it the object.
    run(with).await.unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    run(api.get("f").await.unwrap()).await.unwrap();
    assert_eq!(cleaned.load(Ordering::SeqCst), 1);
    assert!(api.get_opt("f").await.unwrap().is_none());
}

#[tokio::test]
async fn the_event_recorder_publishes_events_seen_in_both_apis() {
    let sim = common::api_only().await;
    let client = common::client(&sim);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "subject"}})).unwrap();
    let cm = api.create(&PostParams::default(), &cm).await.unwrap();
    let recorder =
        Recorder::new(client.clone(), Reporter { controller: "test-controller".into(), instance: None });
    let event = Event {
        type_: EventType::Normal,
        reason: "Tested".into(),
        note: Some("first".into()),
        action: "Test".into(),
        secondary: None,
    };
    let reference = cm.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    // The same event again becomes a series on the same object (a merge patch).
    recorder.publish(&event, &reference).await.unwrap();

    let v1: Api<EventsV1> = Api::namespaced(client.clone(), "default");
    let events = v1.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reporting_controller.as_deref(), Some("test-controller"));
    assert_eq!(events[0].series.as_ref().map(|s| s.count), Some(2));

    // kubectl describe reads the core/v1 view of the same store.
    let core: Api<CoreEvent> = Api::namespaced(client, "default");
    let listed =
        core.list(&ListParams::default().fields("involvedObject.name=subject,reason=Tested")).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].message.as_deref(), Some("first"));
    assert_eq!(listed.items[0].involved_object.kind.as_deref(), Some("ConfigMap"));
}
