//! The event sink against the sim cluster: core/v1 Events written the way client-go's recorder
//! writes them, repeats counted on one Event by a patch, and floods of similar events combined;
//! and fenced as every write is: an event of a shard no longer held at its epoch is dropped and
//! counted, never sent.

mod common;

use std::sync::Arc;
use std::time::Duration;

use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_worker::clock::SystemClock;
use batchfleet_worker::events::{EventSink, EventType, PendingEvent};
use batchfleet_worker::runtime::shard::ShardTable;
use batchfleet_worker::shards::ShardSpace;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

async fn setup() -> (SimCluster, kube::Client, ConfigMap) {
    let sim = SimCluster::start(SimConfig::default()).await.expect("sim starts");
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let regarding: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "subject"}})).expect("map");
    let regarding = maps.create(&PostParams::default(), &regarding).await.expect("create subject");
    (sim, client, regarding)
}

/// A table holding every shard Active at epoch 1, as `--standalone` does.
fn standalone() -> ShardTable {
    ShardTable::all_active(ShardSpace::new(4).unwrap())
}

async fn events_about(client: &kube::Client, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    api.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

#[tokio::test]
async fn repeats_count_on_one_event_and_similar_ones_are_combined() {
    let (_sim, client, subject) = setup().await;
    let (sink, task) =
        EventSink::new(client.clone(), "cronjob-controller", standalone(), Arc::new(SystemClock));
    tokio::spawn(task);

    // The same event three times: one Event, count 3.
    for _ in 0..3 {
        sink.publish(
            1,
            PendingEvent::for_object(&subject, EventType::Normal, "SuccessfulCreate", "Created job a"),
        );
    }
    let events = common::wait_until("one Event counted 3 times", Duration::from_secs(10), || async {
        let events = events_about(&client, "subject").await;
        (events.len() == 1 && events[0].count == Some(3)).then_some(events)
    })
    .await;
    let e = &events[0];
    assert_eq!(e.reason.as_deref(), Some("SuccessfulCreate"));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.source.as_ref().and_then(|s| s.component.as_deref()), Some("cronjob-controller"));
    assert_eq!(e.reporting_component.as_deref(), Some("cronjob-controller"));
    assert_eq!(e.involved_object.uid, subject.metadata.uid);
    assert!(e.first_timestamp.is_some() && e.last_timestamp >= e.first_timestamp);

    // Nine more distinct messages with the same reason make ten similar events: the tenth is
    // written as a combined Event.
    for i in 0..9 {
        sink.publish(
            1,
            PendingEvent::for_object(
                &subject,
                EventType::Normal,
                "SuccessfulCreate",
                &format!("Created job b{i}"),
            ),
        );
    }
    let combined = common::wait_until("a combined Event", Duration::from_secs(10), || async {
        events_about(&client, "subject")
            .await
            .into_iter()
            .find(|e| e.message.as_deref() == Some("(combined from similar events): Created job b8"))
    })
    .await;
    assert_eq!(combined.count, Some(1));
    // 1 counted Event + 8 single ones + the combined one.
    assert_eq!(events_about(&client, "subject").await.len(), 10);
}

#[tokio::test]
async fn an_object_gets_a_burst_of_25_events_then_is_rate_limited() {
    let (_sim, client, subject) = setup().await;
    let (sink, task) = EventSink::new(client.clone(), "job-controller", standalone(), Arc::new(SystemClock));
    tokio::spawn(task);
    // Distinct reasons, so nothing is counted or combined: only the spam filter stops them.
    for i in 0..30 {
        let event = PendingEvent::for_object(&subject, EventType::Warning, &format!("Reason{i}"), "m");
        sink.publish(1, event);
    }
    // A marker on another object shows the sink has worked through the queue.
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let other: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "other"}})).expect("map");
    let other = maps.create(&PostParams::default(), &other).await.expect("create other");
    sink.publish(1, PendingEvent::for_object(&other, EventType::Normal, "Marker", "m"));
    common::wait_until("the marker Event", Duration::from_secs(10), || async {
        (!events_about(&client, "other").await.is_empty()).then_some(())
    })
    .await;
    let events = events_about(&client, "subject").await;
    assert_eq!(events.len(), 25, "the spam filter lets 25 through");
    assert!(events.iter().all(|e| e.type_.as_deref() == Some("Warning")));
}

#[tokio::test]
async fn an_event_of_a_shard_no_longer_held_is_dropped_counted_and_never_sent() {
    let (_sim, client, subject) = setup().await;
    let shards = ShardTable::new(ShardSpace::new(4).unwrap());
    let shard = shards.shard_of("default");
    shards.prepare(shard, 1).unwrap();
    let (sink, task) =
        EventSink::new(client.clone(), "job-controller", shards.clone(), Arc::new(SystemClock));
    tokio::spawn(task);

    // Preparing: a watch handler's event is not even queued.
    sink.publish_if_active(PendingEvent::for_object(&subject, EventType::Normal, "WhilePreparing", "m"));
    assert_eq!(shards.stale_events(), 1);

    shards.activate(shard, 1).unwrap();
    sink.publish(1, PendingEvent::for_object(&subject, EventType::Normal, "WhileActive", "m"));
    common::wait_until("the Active tenure's Event", Duration::from_secs(10), || async {
        (!events_about(&client, "subject").await.is_empty()).then_some(())
    })
    .await;

    // REVOKE answered: an event the last reconcile queued under epoch 1 is not written, nor is
    // one of the older epoch once the shard comes back at epoch 2.
    assert_eq!(shards.revoke_and_drain(shard).await, Ok(0));
    sink.publish(1, PendingEvent::for_object(&subject, EventType::Normal, "AfterRevoke", "m"));
    shards.drop_shard(shard);
    shards.prepare(shard, 2).unwrap();
    shards.activate(shard, 2).unwrap();
    sink.publish(1, PendingEvent::for_object(&subject, EventType::Normal, "StaleEpoch", "m"));
    sink.publish(2, PendingEvent::for_object(&subject, EventType::Normal, "NewTenure", "m"));
    let reasons = common::wait_until("the new tenure's Event", Duration::from_secs(10), || async {
        let reasons: Vec<String> =
            events_about(&client, "subject").await.into_iter().filter_map(|e| e.reason).collect();
        reasons.iter().any(|r| r == "NewTenure").then_some(reasons)
    })
    .await;
    // Events are written in order, so the two stale ones were decided on before this.
    assert_eq!(reasons.len(), 2, "only WhileActive and NewTenure were written: {reasons:?}");
    assert!(reasons.contains(&"WhileActive".to_string()), "{reasons:?}");
    assert_eq!(shards.stale_events(), 3, "the preparing, revoked and stale-epoch events");
    assert_eq!(shards.stale_writes(), 0, "events are counted apart from object writes");
}

#[tokio::test]
async fn events_are_stamped_by_the_workers_clock() {
    let (_sim, client, subject) = setup().await;
    let start: jiff::Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
    let clock = Arc::new(batchfleet_worker::clock::ScaledClock::new(start, 1.0));
    let (sink, task) = EventSink::new(client.clone(), "job-controller", standalone(), clock);
    tokio::spawn(task);
    sink.publish(1, PendingEvent::for_object(&subject, EventType::Normal, "Stamped", "m"));
    let event = common::wait_until("the stamped Event", Duration::from_secs(10), || async {
        events_about(&client, "subject").await.into_iter().next()
    })
    .await;
    let first = event.first_timestamp.expect("firstTimestamp").0;
    assert!(
        start <= first && first < start + jiff::SignedDuration::from_mins(1),
        "stamped {first}, the clock started at {start}"
    );
    assert!(event.metadata.name.is_some_and(|n| n.starts_with("subject.")));
}
