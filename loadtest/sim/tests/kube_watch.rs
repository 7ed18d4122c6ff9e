//! kube-runtime's watcher and reflector against the sim: relisting after 410 and after dropped
//! watches, bookmarks, streaming lists, and selector transitions.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use batchfleet_sim::faults::{FaultConfig, WatchFaults};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

fn configmap(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})).unwrap()
}

async fn reflect_until(store: &reflector::Store<ConfigMap>, want: &BTreeSet<String>, what: &str) {
    common::wait_until(what, Duration::from_secs(20), || async {
        (test_config_maps(store) == *want).then_some(())
    })
    .await;
}

/// The ConfigMaps a test made: every namespace also holds the root-ca-cert-publisher's.
fn test_config_maps(store: &reflector::Store<ConfigMap>) -> BTreeSet<String> {
    store.state().iter().filter_map(|c| c.metadata.name.clone()).filter(|n| n != "kube-root-ca.crt").collect()
}

fn request_count(sim: &batchfleet_sim::SimCluster, verb: &str) -> u64 {
    sim.counters().snapshot()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verb"] == verb && r["resource"] == "configmaps")
        .map(|r| r["count"].as_u64().unwrap())
        .sum()
}

/// The reflector converges when the server drops every watch after a few events and compacts
/// its history, so that resumed watches get 410 Expired and the watcher relists.
#[tokio::test]
async fn reflector_recovers_from_expired_history_and_dropped_watches() {
    let sim = common::api_only().await;
    sim.faults().configure(FaultConfig {
        watch: WatchFaults { drop_after_events: Some(3), drop_after_seconds: Some(0.05), delay_ms: None },
        ..FaultConfig::default()
    });
    let client = common::client(&sim);
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .applied_objects()
        .for_each(|_| futures::future::ready(()));
    let task = tokio::spawn(stream);
    reader.wait_until_ready().await.unwrap();

    let mut want = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut i = 0;
    // Write, then move history past the watcher's last resourceVersion with a write it does not
    // watch, and compact: its next resumption is expired and it must relist.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(common::client(&sim), "default");
    while request_count(&sim, "list") < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watcher never relisted: {}",
            sim.counters().snapshot()
        );
        api.create(&PostParams::default(), &configmap(&format!("b{i}"), json!({}))).await.unwrap();
        want.insert(format!("b{i}"));
        let secret = serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}})).unwrap();
        secrets.create(&PostParams::default(), &secret).await.unwrap();
        sim.api().store().compact();
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    api.delete("b0", &Default::default()).await.unwrap();
    want.remove("b0");
    for j in 0..5 {
        api.create(&PostParams::default(), &configmap(&format!("c{j}"), json!({}))).await.unwrap();
        want.insert(format!("c{j}"));
    }
    reflect_until(&reader, &want, "convergence after compaction and dropped watches").await;
    assert!(request_count(&sim, "watch") > 2, "watches were reopened");
    task.abort();
}

/// A raw watch from an expired resourceVersion gets 200 with an ERROR 410 event, never HTTP 410.
#[tokio::test]
async fn expired_resource_version_is_an_error_event_inside_the_stream() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let first = api.create(&PostParams::default(), &configmap("x", json!({}))).await.unwrap();
    api.create(&PostParams::default(), &configmap("y", json!({}))).await.unwrap();
    sim.api().store().compact();
    let rv = first.metadata.resource_version.unwrap();
    let mut stream = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    let event = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.unwrap().unwrap().unwrap();
    match event {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(e.message.starts_with("too old resource version"), "{}", e.message);
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
}

/// Bookmarks carry apiVersion and kind (kube-rs requires them); a watch ends at timeoutSeconds.
#[tokio::test]
async fn bookmarks_and_timeouts() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let list = api.list(&Default::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let wp = WatchParams { bookmarks: true, ..WatchParams::default() }.timeout(3);
    let started = std::time::Instant::now();
    let events: Vec<_> = api.watch(&wp, &rv).await.unwrap().collect().await;
    assert!(started.elapsed() >= Duration::from_secs(2), "the watch lasted until its timeout");
    let bookmarks = events.iter().filter(|e| matches!(e, Ok(WatchEvent::Bookmark(_)))).count();
    assert!(bookmarks >= 1, "{events:?}");
}

/// A watch of a quiet kind passes the writes of other kinds by its bookmarks: the store hands it
/// none of them, and its bookmark carries the store's version, so resuming from it does not
/// replay (or outlive in history) what never concerned it.
#[tokio::test]
async fn a_quiet_watch_bookmarks_past_other_kinds_writes() {
    use k8s_openapi::api::core::v1::Secret;
    let sim = common::api_only().await;
    let client = common::client(&sim);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let rv = config_maps.list(&Default::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut written = 0u64;
    for i in 0..3 {
        let secret: Secret = serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}})).unwrap();
        let created = secrets.create(&PostParams::default(), &secret).await.unwrap();
        written = created.metadata.resource_version.unwrap().parse().unwrap();
    }
    // The common sims send a bookmark a second; the watch ends at its timeout.
    let wp = WatchParams { bookmarks: true, ..WatchParams::default() }.timeout(3);
    let events: Vec<_> = config_maps.watch(&wp, &rv).await.unwrap().collect().await;
    let bookmarked: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Ok(WatchEvent::Bookmark(b)) => b.metadata.resource_version.parse().ok(),
            _ => None,
        })
        .collect();
    assert!(bookmarked.iter().any(|rv| *rv >= written), "bookmarks {bookmarked:?}, last secret at {written}");
    assert!(
        !events.iter().any(|e| matches!(e, Ok(WatchEvent::Added(_) | WatchEvent::Modified(_)))),
        "{events:?}"
    );
}

/// A streaming list (sendInitialEvents) gives the current objects, then the initial-events-end
/// bookmark, then changes.
#[tokio::test]
async fn streaming_lists_end_with_the_initial_events_bookmark() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &configmap(&format!("s{i}"), json!({}))).await.unwrap();
    }
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default().streaming_lists()))
        .applied_objects()
        .for_each(|_| futures::future::ready(()));
    let task = tokio::spawn(stream);
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready()).await.unwrap().unwrap();
    assert_eq!(test_config_maps(&reader).len(), 3);
    api.create(&PostParams::default(), &configmap("s3", json!({}))).await.unwrap();
    let want: BTreeSet<String> = (0..4).map(|i| format!("s{i}")).collect();
    reflect_until(&reader, &want, "the change after the streaming list").await;
    task.abort();

    // Without bookmarks a streaming list is invalid.
    let (status, _, body) = common::raw(
        &common::client(&sim),
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        None,
        vec![],
    )
    .await;
    assert_eq!(status, 422, "{body}");
}

/// An object that leaves a label selector is DELETED for that watch; one that enters is ADDED.
#[tokio::test]
async fn selector_transitions_are_added_and_deleted() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let list = api.list(&Default::default()).await.unwrap();
    let wp = WatchParams::default().labels("tier=web");
    let mut stream = api.watch(&wp, &list.metadata.resource_version.unwrap()).await.unwrap().boxed();
    api.create(&PostParams::default(), &configmap("t", json!({"tier": "db"}))).await.unwrap();
    let enter = json!({"metadata": {"labels": {"tier": "web"}}});
    api.patch("t", &PatchParams::default(), &Patch::Merge(&enter)).await.unwrap();
    let leave = json!({"metadata": {"labels": {"tier": "db"}}});
    api.patch("t", &PatchParams::default(), &Patch::Merge(&leave)).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let e = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.unwrap().unwrap().unwrap();
        seen.push(match e {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("{e:?}"),
        });
    }
    assert_eq!(seen, ["ADDED", "DELETED"]);
}

/// A watcher that falls behind the live stream catches up from history and misses nothing, even
/// while writes keep coming as it catches up (kube-apiserver never skips an event in a watch).
/// The sim keeps a live buffer of 4 changes here, so the watcher falls behind over and over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_falls_behind_misses_no_change() {
    use batchfleet_sim::store::HistoryConfig;
    let sim = common::start(batchfleet_sim::SimConfig {
        nodes: 0,
        kubelet: false,
        history: HistoryConfig { live_buffer: 4, ..HistoryConfig::default() },
        ..batchfleet_sim::SimConfig::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let from = api.list(&Default::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut events = api.watch(&WatchParams::default().timeout(120), &from).await.unwrap().boxed();

    const WRITERS: usize = 4;
    const EACH: usize = 600;
    let created = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (api, created) = (api.clone(), created.clone());
            tokio::spawn(async move {
                for i in 0..EACH {
                    api.create(&PostParams::default(), &configmap(&format!("w{w}-{i}"), json!({})))
                        .await
                        .unwrap();
                    created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Read nothing until a third of the creates are in: the watcher is then far behind, and
    // catches up while the rest are still being written.
    common::wait_until("a third of the creates", Duration::from_secs(60), || {
        let n = created.load(std::sync::atomic::Ordering::Relaxed);
        async move { (n >= WRITERS * EACH / 3).then_some(()) }
    })
    .await;
    let mut seen = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while seen.len() < WRITERS * EACH {
        let next = tokio::time::timeout_at(deadline, events.next()).await;
        match next {
            Ok(Some(Ok(WatchEvent::Added(cm)))) => {
                seen.insert(cm.metadata.name.unwrap());
                // A slow reader: the watcher keeps falling behind while the writes go on.
                if seen.len() % 8 == 0 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            Ok(Some(Ok(WatchEvent::Bookmark(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)))) => {}
            other => {
                // The writers are done by now or the stream ended: name what went missing.
                let missing: Vec<String> = (0..WRITERS)
                    .flat_map(|w| (0..EACH).map(move |i| format!("w{w}-{i}")))
                    .filter(|n| !seen.contains(n))
                    .take(10)
                    .collect();
                panic!(
                    "the watch ended or stalled ({other:?}) with {} of {} creates seen; missing: {missing:?}",
                    seen.len(),
                    WRITERS * EACH
                );
            }
        }
    }
    for w in writers {
        w.await.unwrap();
    }
}
