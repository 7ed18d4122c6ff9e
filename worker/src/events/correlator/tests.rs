use super::*;
use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
use serde_json::json;

fn base() -> Timestamp {
    "2025-05-01T12:00:00.123456789Z".parse().unwrap()
}

/// makeObjectReference.
fn make_object_reference(kind: &str, name: &str, namespace: &str) -> ObjectReference {
    ObjectReference {
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: Some("C934D34AFB20242".into()),
        api_version: Some("version".into()),
        field_path: Some("spec.containers{mycontainer}".into()),
        ..ObjectReference::default()
    }
}

/// makeEvent.
fn make_event(reason: &str, message: &str, involved_object: ObjectReference) -> Event {
    let t = Some(Time(base()));
    Event {
        reason: Some(reason.into()),
        message: Some(message.into()),
        involved_object,
        source: Some(EventSource { component: Some("kubelet".into()), host: Some("kublet.node1".into()) }),
        count: Some(1),
        first_timestamp: t.clone(),
        last_timestamp: t,
        type_: Some("Normal".into()),
        ..Event::default()
    }
}

/// makeEvents.
fn make_events(num: usize, template: &Event) -> Vec<Event> {
    vec![template.clone(); num]
}

/// makeUniqueEvents.
fn make_unique_events(num: usize) -> Vec<Event> {
    (0..num)
        .map(|i| {
            let obj = make_object_reference("Pod", &format!("pod-{i}"), &format!("ns-{i}"));
            make_event(&format!("reason-{i}"), &format!("message-{i}"), obj)
        })
        .collect()
}

/// makeSimilarEvents.
fn make_similar_events(num: usize, template: &Event, message_prefix: &str) -> Vec<Event> {
    let mut events = make_events(num, template);
    for (i, e) in events.iter_mut().enumerate() {
        e.message = Some(format!("{message_prefix}-{i}-{}", s(&e.message)));
    }
    events
}

/// setCount.
fn set_count(mut event: Event, count: i32) -> Event {
    event.count = Some(count);
    event
}

/// clock.IntervalClock: every read returns the time and then moves it on by one step.
struct IntervalClock {
    time: Timestamp,
    step: SignedDuration,
}

impl IntervalClock {
    fn new(interval_seconds: i64) -> Self {
        Self { time: base(), step: SignedDuration::from_secs(interval_seconds) }
    }
    fn now(&mut self) -> Timestamp {
        let t = self.time;
        self.time = t.checked_add(self.step).unwrap();
        t
    }
}

/// One step of upstream's loop: the test reads the clock for the event's timestamps, then
/// EventCorrelate reads it twice (aggregator, then spam filter). Here both of its reads are
/// the one `now`; the third read keeps the clock spaced as upstream's is.
fn correlate_ticking(c: &mut EventCorrelator, clock: &mut IntervalClock, mut event: Event) -> Correlated {
    let t = Some(Time(clock.now()));
    event.first_timestamp = t.clone();
    event.last_timestamp = t;
    let now = clock.now();
    let result = c.correlate(event, now);
    clock.now();
    result
}

fn event_of(result: &Correlated) -> Option<&Event> {
    match result {
        Correlated::Skip => None,
        Correlated::Create(e) | Correlated::Patch { event: e, .. } => Some(e),
    }
}

/// validateEvent, plus: the result is a Patch exactly when the count is above 1, and its patch
/// is upstream's.
fn validate_event(scenario: &str, result: &Correlated, expected: &Event) {
    let actual = event_of(result).unwrap_or_else(|| panic!("{scenario}: skipped"));
    let mut recv = actual.clone();
    let expected_count = expected.count.unwrap_or(0);
    let (first, last) = (recv.first_timestamp.clone(), recv.last_timestamp.clone());
    assert!(first.is_some() && last.is_some(), "{scenario}: timestamp wasn't set: {recv:?}");
    if first == last {
        assert!(expected_count <= 1, "{scenario}: first and last timestamps must differ: {recv:?}");
    } else {
        assert!(expected_count != 1, "{scenario}: first and last timestamps must be equal: {recv:?}");
    }
    recv.first_timestamp = expected.first_timestamp.clone();
    recv.last_timestamp = expected.last_timestamp.clone();
    let (n, en) = (s(&recv.metadata.name), s(&expected.metadata.name));
    assert!(n.starts_with(en), "{scenario}: name {n:?} does not start with {en:?}");
    recv.metadata.name = expected.metadata.name.clone();
    assert_eq!(&recv, expected, "{scenario}");

    match result {
        Correlated::Patch { event, patch } => {
            assert!(expected_count > 1, "{scenario}: patch for a count of {expected_count}");
            let last = go_time_json(event.last_timestamp.as_ref());
            let want = json!({"count": expected_count, "lastTimestamp": last, "message": event.message});
            assert_eq!(patch, &want, "{scenario}");
        }
        Correlated::Create(_) => assert!(expected_count <= 1, "{scenario}: create for {expected_count}"),
        Correlated::Skip => unreachable!(),
    }
}

/// The TestEventCorrelator loop for one scenario; `expected: None` is `expectedSkip: true`.
fn run_scenario(
    scenario: &str,
    previous_events: Vec<Event>,
    new_event: Event,
    expected: Option<Event>,
    interval_seconds: i64,
) -> Correlated {
    let mut clock = IntervalClock::new(interval_seconds);
    let mut c = EventCorrelator::new();
    for event in previous_events {
        // "if we are skipping the event, we can avoid updating state"
        if let Some(e) = event_of(&correlate_ticking(&mut c, &mut clock, event)) {
            c.update_state(&e.clone());
        }
    }
    let result = correlate_ticking(&mut c, &mut clock, new_event);
    match expected {
        None => assert_eq!(result, Correlated::Skip, "{scenario}: expected skip"),
        Some(expected) => validate_event(scenario, &result, &expected),
    }
    result
}

fn first_event() -> Event {
    make_event("first", "i am first", make_object_reference("Pod", "my-pod", "my-ns"))
}
fn duplicate_event() -> Event {
    make_event("duplicate", "me again", make_object_reference("Pod", "my-pod", "my-ns"))
}
fn unique_event() -> Event {
    make_event("unique", "snowflake", make_object_reference("Pod", "my-pod", "my-ns"))
}
fn similar_event() -> Event {
    let mut e = make_event("similar", "similar message", make_object_reference("Pod", "my-pod", "my-ns"));
    e.involved_object.field_path = Some("spec.containers{container1}".into());
    e
}
fn aggregate_event() -> Event {
    let similar = similar_event();
    make_event(
        s(&similar.reason),
        &event_aggregator_by_reason_message_func(&similar),
        similar.involved_object.clone(),
    )
}
fn similar_but_different_container_event() -> Event {
    let mut e = similar_event();
    e.involved_object.field_path = Some("spec.containers{container2}".into());
    e
}

// ---- TestEventAggregatorByReasonFunc / TestEventAggregatorByReasonMessageFunc ----

/// Upstream TestEventAggregatorByReasonFunc: events that vary only by message share the
/// aggregate key and differ in the local key; another reason is another aggregate key.
#[test]
fn event_aggregator_by_reason_func_groups_by_reason() {
    let event1 = make_event("end-of-world", "it was fun", make_object_reference("Pod", "pod1", "other"));
    let event2 = make_event("end-of-world", "it was awful", make_object_reference("Pod", "pod1", "other"));
    let event3 = make_event("nevermind", "it was a bug", make_object_reference("Pod", "pod1", "other"));
    let (agg1, local1) = event_aggregator_by_reason_func(&event1);
    let (agg2, local2) = event_aggregator_by_reason_func(&event2);
    let (agg3, _) = event_aggregator_by_reason_func(&event3);
    assert_eq!(agg1, agg2);
    assert_ne!(local1, local2);
    assert_ne!(agg1, agg3);
}

/// The exact keys upstream builds: fields in upstream's order, joined with "".
#[test]
fn keys_are_built_exactly_as_upstream() {
    let mut e = make_event("R", "M", make_object_reference("Pod", "p", "ns"));
    e.reporting_component = Some("RC".into());
    e.reporting_instance = Some("RI".into());
    assert_eq!(
        get_event_key(&e),
        "kubeletkublet.node1Podnspspec.containers{mycontainer}C934D34AFB20242versionNormalRM"
    );
    assert_eq!(get_spam_key(&e), "kubeletkublet.node1PodnspC934D34AFB20242version");
    assert_eq!(
        event_aggregator_by_reason_func(&e),
        ("kubeletkublet.node1PodnspC934D34AFB20242versionNormalRRCRI".to_owned(), "M".to_owned())
    );
    // Unset fields are Go's empty strings.
    assert_eq!(get_event_key(&Event::default()), "");
    assert_eq!(event_aggregator_by_reason_func(&Event::default()), (String::new(), String::new()));
}

/// Upstream TestEventAggregatorByReasonMessageFunc (checked exactly here, not just the prefix).
#[test]
fn event_aggregator_by_reason_message_func_prefixes() {
    let event1 = make_event("end-of-world", "it was fun", make_object_reference("Pod", "pod1", "other"));
    assert_eq!(
        event_aggregator_by_reason_message_func(&event1),
        "(combined from similar events): it was fun"
    );
}

// ---- TestEventCorrelator ----

/// TestEventCorrelator "create-a-single-event".
#[test]
fn event_correlator_create_a_single_event() {
    let r =
        run_scenario("create-a-single-event", vec![], first_event(), Some(set_count(first_event(), 1)), 5);
    assert!(matches!(r, Correlated::Create(_)));
}

/// TestEventCorrelator "the-same-event-should-just-count".
#[test]
fn event_correlator_the_same_event_should_just_count() {
    let r = run_scenario(
        "the-same-event-should-just-count",
        make_events(1, &duplicate_event()),
        duplicate_event(),
        Some(set_count(duplicate_event(), 2)),
        5,
    );
    // The first occurrence's timestamp is kept; the patch carries the new lastTimestamp.
    let Correlated::Patch { event, patch } = r else { panic!("not a patch: {r:?}") };
    assert_eq!(event.first_timestamp, Some(Time(base())));
    let last = base().checked_add(SignedDuration::from_secs(15)).unwrap();
    assert_eq!(event.last_timestamp, Some(Time(last)));
    assert_eq!(patch, json!({"count": 2, "lastTimestamp": "2025-05-01T12:00:15Z", "message": "me again"}));
}

/// TestEventCorrelator "the-same-event-should-just-count-even-if-more-than-aggregate".
#[test]
fn event_correlator_the_same_event_should_just_count_even_if_more_than_aggregate() {
    run_scenario(
        "the-same-event-should-just-count-even-if-more-than-aggregate",
        make_events(DEFAULT_AGGREGATE_MAX_EVENTS, &duplicate_event()),
        duplicate_event(),
        Some(set_count(duplicate_event(), DEFAULT_AGGREGATE_MAX_EVENTS as i32 + 1)),
        30,
    );
}

/// TestEventCorrelator "the-same-event-is-spam-if-happens-too-frequently".
#[test]
fn event_correlator_the_same_event_is_spam_if_happens_too_frequently() {
    run_scenario(
        "the-same-event-is-spam-if-happens-too-frequently",
        make_events(DEFAULT_SPAM_BURST as usize + 1, &duplicate_event()),
        duplicate_event(),
        None,
        1,
    );
}

/// TestEventCorrelator "create-many-unique-events".
#[test]
fn event_correlator_create_many_unique_events() {
    run_scenario(
        "create-many-unique-events",
        make_unique_events(30),
        unique_event(),
        Some(set_count(unique_event(), 1)),
        5,
    );
}

/// TestEventCorrelator "similar-events-should-aggregate-event".
#[test]
fn event_correlator_similar_events_should_aggregate_event() {
    let similar = similar_event();
    let r = run_scenario(
        "similar-events-should-aggregate-event",
        make_similar_events(DEFAULT_AGGREGATE_MAX_EVENTS - 1, &similar, s(&similar.message)),
        similar_event(),
        Some(set_count(aggregate_event(), 1)),
        5,
    );
    // The aggregate is named "<involvedObject.name>.<hex UnixNano of the aggregator's now>"
    // and stamped with that now: 9 events of 3 clock reads each, then the test's read.
    let now = base().checked_add(SignedDuration::from_secs(5 * (9 * 3 + 1))).unwrap();
    let e = event_of(&r).unwrap();
    assert_eq!(e.metadata.name, Some(format!("my-pod.{:x}", now.as_nanosecond())));
    assert_eq!(e.first_timestamp, Some(Time(now)));
    assert_eq!(e.last_timestamp, Some(Time(now)));
}

/// TestEventCorrelator "similar-events-many-times-should-count-the-aggregate".
#[test]
fn event_correlator_similar_events_many_times_should_count_the_aggregate() {
    let similar = similar_event();
    let r = run_scenario(
        "similar-events-many-times-should-count-the-aggregate",
        make_similar_events(DEFAULT_AGGREGATE_MAX_EVENTS, &similar, s(&similar.message)),
        similar_event(),
        Some(set_count(aggregate_event(), 2)),
        5,
    );
    // The second aggregate patches the first one, by its name.
    let first_now = base().checked_add(SignedDuration::from_secs(5 * (9 * 3 + 1))).unwrap();
    let e = event_of(&r).unwrap();
    assert_eq!(e.metadata.name, Some(format!("my-pod.{:x}", first_now.as_nanosecond())));
    assert_eq!(e.first_timestamp, Some(Time(first_now)));
}

/// TestEventCorrelator "events-from-different-containers-do-not-aggregate".
#[test]
fn event_correlator_events_from_different_containers_do_not_aggregate() {
    run_scenario(
        "events-from-different-containers-do-not-aggregate",
        make_events(1, &similar_but_different_container_event()),
        similar_event(),
        Some(set_count(similar_event(), 1)),
        5,
    );
}

/// TestEventCorrelator "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate".
#[test]
fn event_correlator_similar_events_whose_interval_is_greater_than_aggregate_interval_do_not_aggregate() {
    let similar = similar_event();
    run_scenario(
        "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate",
        make_similar_events(DEFAULT_AGGREGATE_MAX_EVENTS - 1, &similar, s(&similar.message)),
        similar_event(),
        Some(set_count(similar_event(), 1)),
        DEFAULT_AGGREGATE_INTERVAL.as_secs(),
    );
}

// ---- TestEventSpamFilter ----

fn spam_key_func_based_on_objects_and_reason(e: &Event) -> String {
    get_spam_key(e) + s(&e.reason)
}

/// The TestEventSpamFilter loop (burst 1, 1 s interval clock) for one case.
fn run_spam_case(case: &str, spam_key: fn(&Event) -> String, new_event: Event, expected: Option<Event>) {
    let mut clock = IntervalClock::new(1);
    let mut c = EventCorrelator::with_spam_filter(1, spam_key);
    let original = make_event("original", "i am first", make_object_reference("Pod", "my-pod", "my-ns"));
    // Upstream passes these two events without restamping them.
    let first = c.correlate(original, clock.now());
    clock.now();
    if let Some(e) = event_of(&first) {
        c.update_state(&e.clone());
    }
    let result = c.correlate(new_event, clock.now());
    match expected {
        None => assert_eq!(result, Correlated::Skip, "{case}"),
        Some(expected) => validate_event(case, &result, &expected),
    }
}

fn different_reason_event() -> Event {
    make_event("duplicate", "me again", make_object_reference("Pod", "my-pod", "my-ns"))
}

/// TestEventSpamFilter "event should be reported as spam if object reference is the same for
/// default spam filter".
#[test]
fn event_spam_filter_same_object_is_spam_for_default_spam_filter() {
    run_spam_case("default key", get_spam_key, different_reason_event(), None);
}

/// TestEventSpamFilter "event should not be reported as spam if object reference is the same,
/// but reason is different for custom spam filter".
#[test]
fn event_spam_filter_different_reason_is_not_spam_for_custom_spam_filter() {
    run_spam_case(
        "custom key, other reason",
        spam_key_func_based_on_objects_and_reason,
        different_reason_event(),
        Some(different_reason_event()),
    );
}

/// TestEventSpamFilter "event should be reported as spam if object reference and reason is the
/// same, but message is different for custom spam filter".
#[test]
fn event_spam_filter_same_reason_other_message_is_spam_for_custom_spam_filter() {
    let spam_event = make_event("original", "me again", make_object_reference("Pod", "my-pod", "my-ns"));
    run_spam_case("custom key, same reason", spam_key_func_based_on_objects_and_reason, spam_event, None);
}

// ---- spam filter with the defaults ----

/// Event `i` about pod `pod`: its own reason, so no two aggregate or count together.
fn nth(pod: &str, i: usize) -> Event {
    make_event(&format!("reason-{i}"), "msg", make_object_reference("Pod", pod, "ns"))
}

/// 25 events of burst; the 26th is skipped; tokens refill continuously at 1/300 s (measured
/// from the last granted event), and the bucket never holds more than 25.
#[test]
fn spam_filter_burst_then_one_token_per_300_seconds() {
    let mut c = EventCorrelator::new();
    let t0 = base();
    let at = |ms: i64| t0.checked_add(SignedDuration::from_millis(ms)).unwrap();
    for i in 0..25 {
        assert!(matches!(c.correlate(nth("a", i), t0), Correlated::Create(_)), "event {i}");
    }
    assert_eq!(c.correlate(nth("a", 25), t0), Correlated::Skip);
    assert_eq!(c.correlate(nth("a", 26), at(150_000)), Correlated::Skip, "half a token");
    assert_eq!(c.correlate(nth("a", 27), at(299_999)), Correlated::Skip, "just short of a token");
    assert!(matches!(c.correlate(nth("a", 28), at(300_000)), Correlated::Create(_)), "a token after 300 s");
    assert_eq!(c.correlate(nth("a", 29), at(300_000)), Correlated::Skip, "and only one");
    // A day later the bucket is full again, but holds no more than the burst.
    let day = at(300_000 + 86_400_000);
    for i in 0..25 {
        assert!(matches!(c.correlate(nth("a", 100 + i), day), Correlated::Create(_)), "event {i}");
    }
    assert_eq!(c.correlate(nth("a", 200), day), Correlated::Skip);
}

/// The filter runs after the logger: skipped occurrences are still counted (upstream), so the
/// next one let through carries them.
#[test]
fn skipped_events_are_still_counted() {
    let mut c = EventCorrelator::new();
    let e = duplicate_event();
    for _ in 0..27 {
        c.correlate(e.clone(), base());
    }
    let later = base().checked_add(SignedDuration::from_secs(300)).unwrap();
    let r = c.correlate(e, later);
    assert_eq!(event_of(&r).and_then(|e| e.count), Some(28));
}

/// Events about one object neither use another's tokens nor count into its events.
#[test]
fn unrelated_objects_do_not_interfere() {
    let mut c = EventCorrelator::new();
    for i in 0..26 {
        c.correlate(nth("a", i), base());
    }
    assert_eq!(c.correlate(nth("a", 0), base()), Correlated::Skip);
    // Same reason and message as a's events, other object: a fresh event.
    for i in 0..25 {
        let r = c.correlate(nth("b", i), base());
        assert_eq!(event_of(&r).and_then(|e| e.count), Some(1), "b event {i}: {r:?}");
        assert!(matches!(r, Correlated::Create(_)));
    }
    assert_eq!(c.correlate(nth("b", 0), base()), Correlated::Skip);
    // Nor does one object's aggregation touch another's.
    let mut c = EventCorrelator::new();
    for i in 0..10 {
        let e = make_event("same", &format!("m{i}"), make_object_reference("Pod", "a", "ns"));
        c.correlate(e, base());
    }
    let e = make_event("same", "m0", make_object_reference("Pod", "b", "ns"));
    assert_eq!(c.correlate(e.clone(), base()), Correlated::Create(e));
}

// ---- LRU ----

/// `n` first events about `n` other pods.
fn flood(c: &mut EventCorrelator, prefix: &str, n: usize) {
    for i in 0..n {
        let e = make_event("r", "m", make_object_reference("Pod", &format!("{prefix}-{i}"), "ns"));
        assert!(matches!(c.correlate(e, base()), Correlated::Create(_)));
    }
}

/// 4096 keys are kept: after 4095 other events the first is still counted.
#[test]
fn lru_keeps_4096_keys() {
    let mut c = EventCorrelator::new();
    c.correlate(duplicate_event(), base());
    flood(&mut c, "other", 4095);
    let r = c.correlate(duplicate_event(), base());
    assert!(matches!(r, Correlated::Patch { .. }), "{r:?}");
    assert_eq!(event_of(&r).and_then(|e| e.count), Some(2));
}

/// The 4097th key evicts the least recently used one: the event counts from 1 again.
#[test]
fn lru_evicts_beyond_4096_keys() {
    let mut c = EventCorrelator::new();
    c.correlate(duplicate_event(), base());
    flood(&mut c, "other", 4096);
    assert_eq!(c.correlate(duplicate_event(), base()), Correlated::Create(duplicate_event()));
}

/// A hit makes a key most recently used (Get promotes): the key hit last is not the one evicted.
#[test]
fn lru_hit_promotes() {
    let mut c = EventCorrelator::new();
    c.correlate(duplicate_event(), base());
    flood(&mut c, "other", 4095);
    // Full now, with the duplicate least recently used until this hit.
    c.correlate(duplicate_event(), base());
    let fresh = make_event("r", "m", make_object_reference("Pod", "fresh", "ns"));
    c.correlate(fresh, base());
    let r = c.correlate(duplicate_event(), base());
    assert_eq!(event_of(&r).and_then(|e| e.count), Some(3), "{r:?}");
}

/// The spam filter's buckets live in an LRU too: an evicted object starts with a full bucket.
#[test]
fn spam_bucket_evicted_beyond_4096_keys() {
    let mut c = EventCorrelator::new();
    for i in 0..26 {
        c.correlate(nth("x", i), base());
    }
    flood(&mut c, "other", 4095);
    assert_eq!(c.correlate(nth("x", 500), base()), Correlated::Skip, "bucket still held");
    flood(&mut c, "more", 4096);
    assert!(matches!(c.correlate(nth("x", 501), base()), Correlated::Create(_)), "bucket evicted");
}

// ---- eventLogger ----

/// updateState takes the server's name, resourceVersion, count and firstTimestamp for the
/// next occurrence, whose patch is exactly upstream's.
#[test]
fn event_logger_update_state_carries_server_state() {
    let mut c = EventCorrelator::new();
    let Correlated::Create(mut written) = c.correlate(duplicate_event(), base()) else { panic!() };
    written.metadata.name = Some("my-pod.17d0".into());
    written.metadata.resource_version = Some("42".into());
    written.count = Some(7);
    let server_first: Timestamp = "2025-04-30T00:00:00Z".parse().unwrap();
    written.first_timestamp = Some(Time(server_first));
    c.update_state(&written);

    let mut next = duplicate_event();
    let now: Timestamp = "2025-05-01T12:05:00.9Z".parse().unwrap();
    next.last_timestamp = Some(Time(now));
    let Correlated::Patch { event, patch } = c.correlate(next, now) else { panic!() };
    assert_eq!(event.metadata.name.as_deref(), Some("my-pod.17d0"));
    assert_eq!(event.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(event.first_timestamp, Some(Time(server_first)));
    assert_eq!(event.count, Some(8));
    assert_eq!(patch, json!({"count": 8, "lastTimestamp": "2025-05-01T12:05:00Z", "message": "me again"}));
    assert_eq!(
        serde_json::to_string(&patch).unwrap(),
        r#"{"count":8,"lastTimestamp":"2025-05-01T12:05:00Z","message":"me again"}"#
    );
}

/// An event whose count is unset (Go's 0) is recorded with count 0 and so never counts up:
/// upstream only patches when the cached count is above 0.
#[test]
fn event_logger_zero_count_is_not_an_observation() {
    let mut c = EventCorrelator::new();
    let mut e = duplicate_event();
    e.count = None;
    assert_eq!(c.correlate(e.clone(), base()), Correlated::Create(e.clone()));
    assert_eq!(c.correlate(e.clone(), base()), Correlated::Create(e));
}

/// The patch leaves out what equals the "old" side (count 0, empty message, a lastTimestamp of
/// 1970-01-01T00:00:00Z) and sends null for an unset lastTimestamp.
#[test]
fn observe_patch_edges() {
    let mut e = Event { count: Some(3), message: Some(String::new()), ..Event::default() };
    assert_eq!(observe_patch(&e), json!({"count": 3, "lastTimestamp": null}));
    e.last_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    assert_eq!(observe_patch(&e), json!({"count": 3}));
    e.last_timestamp = Some(Time(Timestamp::from_second(-62_135_596_800).unwrap()));
    assert_eq!(observe_patch(&e), json!({"count": 3, "lastTimestamp": null}), "Go's zero time");
    e.count = Some(0);
    e.message = Some("x".into());
    e.last_timestamp = Some(Time("1969-12-31T23:59:59.5Z".parse().unwrap()));
    assert_eq!(observe_patch(&e), json!({"lastTimestamp": "1969-12-31T23:59:59Z", "message": "x"}));
}

/// Counts wrap like Go's int32/uint conversions instead of panicking; a count that wraps to
/// 0 or below is created, not patched.
#[test]
fn extreme_counts_wrap() {
    let mut c = EventCorrelator::new();
    let mut e = duplicate_event();
    e.count = Some(i32::MAX);
    c.update_state(&e);
    let r = c.correlate(duplicate_event(), base());
    assert_eq!(event_of(&r).and_then(|e| e.count), Some(i32::MIN));
    assert!(matches!(r, Correlated::Create(_)));

    let mut c = EventCorrelator::new();
    e.count = Some(-1);
    c.update_state(&e);
    let r = c.correlate(duplicate_event(), base());
    assert_eq!(event_of(&r).and_then(|e| e.count), Some(0));
    assert!(matches!(r, Correlated::Create(_)), "{r:?}");
}

/// Judgement call: an event first seen with a count above 1 has no patch (upstream would send
/// a patch with no body); it is created as it is.
#[test]
fn unseen_event_with_high_count_is_created() {
    let mut c = EventCorrelator::new();
    let e = set_count(duplicate_event(), 5);
    assert_eq!(c.correlate(e.clone(), base()), Correlated::Create(e));
}

/// Empty events and extreme times go through without panicking.
#[test]
fn no_panic_on_odd_input() {
    let mut c = EventCorrelator::new();
    for t in [Timestamp::MIN, Timestamp::MAX, Timestamp::UNIX_EPOCH, Timestamp::MIN, base()] {
        for _ in 0..12 {
            let _ = c.correlate(Event::default(), t);
            let mut e = make_event("r", &format!("{t}"), ObjectReference::default());
            e.last_timestamp = Some(Time(t));
            let r = c.correlate(e, t);
            if let Some(e) = event_of(&r) {
                c.update_state(&e.clone());
            }
        }
    }
    c.update_state(&Event::default());
}

// ---- aggregator ----

/// Go's %x of an int64, and UnixNano wrapping outside int64.
#[test]
fn aggregate_name_hex() {
    assert_eq!(go_hex(255), "ff");
    assert_eq!(go_hex(-255), "-ff");
    assert_eq!(go_hex(i64::MIN), "-8000000000000000");
    assert_eq!(unix_nano("1969-12-31T23:59:59.5Z".parse().unwrap()), -500_000_000);
    let t = Timestamp::from_second(i64::MAX / 1_000_000_000 + 1).unwrap();
    assert_eq!(unix_nano(t), (t.as_nanosecond() as i64));
}

fn similar_at(c: &mut EventCorrelator, msg: &str, now: Timestamp) -> Correlated {
    let e = make_event("similar", msg, make_object_reference("Pod", "my-pod", "my-ns"));
    c.correlate(e, now)
}

fn is_aggregate(r: &Correlated) -> bool {
    event_of(r).is_some_and(|e| s(&e.message).starts_with(AGGREGATE_MESSAGE_PREFIX))
}

/// The aggregate record is reset only when the gap since its last event exceeds 600 s;
/// exactly 600 s keeps it.
#[test]
fn aggregate_interval_boundary() {
    let t = |secs: i64| base().checked_add(SignedDuration::from_secs(secs)).unwrap();
    let mut c = EventCorrelator::new();
    for i in 0..9 {
        assert!(!is_aggregate(&similar_at(&mut c, &format!("m{i}"), t(600 * i))));
    }
    assert!(is_aggregate(&similar_at(&mut c, "m9", t(600 * 9))), "600 s apart is within the interval");

    let mut c = EventCorrelator::new();
    for i in 0..9 {
        similar_at(&mut c, &format!("m{i}"), t(i));
    }
    let r = similar_at(&mut c, "m9", t(8 + 601));
    assert!(!is_aggregate(&r), "601 s later starts afresh: {r:?}");
    assert_eq!(event_of(&r).and_then(|e| e.count), Some(1));
}

/// After aggregating, one key leaves the set (here the smallest, m0), so the set stays at 9:
/// a message still in the set passes through on its own, one that left it aggregates again.
#[test]
fn aggregate_pops_one_key() {
    let mut c = EventCorrelator::new();
    for i in 0..9 {
        similar_at(&mut c, &format!("m{i}"), base());
    }
    let first = similar_at(&mut c, "m9", base());
    assert!(is_aggregate(&first));
    let r = similar_at(&mut c, "m1", base());
    assert!(!is_aggregate(&r), "{r:?}");
    assert_eq!(event_of(&r).and_then(|e| e.count), Some(2), "m1 counted under its own key");
    let r = similar_at(&mut c, "m0", base());
    assert!(is_aggregate(&r), "{r:?}");
    assert_eq!(event_of(&r).and_then(|e| e.count), Some(2));
    assert_eq!(event_of(&r).map(|e| &e.metadata.name), event_of(&first).map(|e| &e.metadata.name));
}

/// The aggregate carries only the fields upstream sets: the event's namespace, not its other
/// metadata nor reporting fields.
#[test]
fn aggregate_event_fields() {
    let mut c = EventCorrelator::new();
    let mut last = None;
    for i in 0..10 {
        let mut e = make_event("similar", &format!("m{i}"), make_object_reference("Pod", "my-pod", "my-ns"));
        e.metadata.namespace = Some("event-ns".into());
        e.metadata.name = Some(format!("my-pod.{i}"));
        e.metadata.resource_version = Some("9".into());
        e.action = Some("act".into());
        last = Some(c.correlate(e, base()));
    }
    let Some(Correlated::Create(agg)) = last else { panic!("{last:?}") };
    let want = Event {
        metadata: ObjectMeta {
            name: Some(format!("my-pod.{:x}", base().as_nanosecond())),
            namespace: Some("event-ns".into()),
            ..ObjectMeta::default()
        },
        count: Some(1),
        first_timestamp: Some(Time(base())),
        last_timestamp: Some(Time(base())),
        involved_object: make_object_reference("Pod", "my-pod", "my-ns"),
        message: Some("(combined from similar events): m9".into()),
        type_: Some("Normal".into()),
        reason: Some("similar".into()),
        source: Some(EventSource { component: Some("kubelet".into()), host: Some("kublet.node1".into()) }),
        ..Event::default()
    };
    assert_eq!(agg, want);
}

/// Upstream quirk kept: UpdateState keys the written aggregate by its own event key, so the
/// next aggregate is counted from the aggregate key's observation, not the server's copy.
#[test]
fn aggregate_state_is_keyed_by_aggregate_key() {
    let mut c = EventCorrelator::new();
    for i in 0..9 {
        similar_at(&mut c, &format!("m{i}"), base());
    }
    let Correlated::Create(mut written) = similar_at(&mut c, "m9", base()) else { panic!() };
    written.metadata.resource_version = Some("77".into());
    written.count = Some(5);
    c.update_state(&written);
    let r = similar_at(&mut c, "m10", base());
    let Correlated::Patch { event, .. } = r else { panic!("{r:?}") };
    assert_eq!(event.count, Some(2));
    assert_eq!(event.metadata.resource_version, None);
}

/// Beyond upstream: with upstream's bucket of an object spent (burst 1 here), an Event of one of
/// batchfleet's own reasons still passes, in a bucket of its own; a second one is spam in that
/// bucket; upstream's reasons stay spam as in the case above.
#[test]
fn batchfleets_own_reasons_count_in_a_bucket_of_their_own() {
    let mut clock = IntervalClock::new(1);
    let mut c = EventCorrelator::with_spam_filter(1, get_spam_key);
    let pod = || make_object_reference("Pod", "my-pod", "my-ns");
    let first = c.correlate(make_event("original", "i am first", pod()), clock.now());
    assert!(event_of(&first).is_some());
    let upstream = c.correlate(make_event("duplicate", "me again", pod()), clock.now());
    assert_eq!(upstream, Correlated::Skip, "upstream's bucket is spent");
    let own = c.correlate(make_event("StatusSizeNearLimit", "near the limit", pod()), clock.now());
    assert!(event_of(&own).is_some(), "an own reason has a bucket of its own: {own:?}");
    let own_again = c.correlate(make_event("ForbidBlocked", "blocked", pod()), clock.now());
    assert_eq!(own_again, Correlated::Skip, "and its bucket has upstream's burst");
}
