//! Property tests: every body decoder and patch function answers random and mutated input with a
//! value or a `PatchError`/`ApiError`, never a panic.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::apiserver::parse_yaml_or_json;

/// Keys that reach the interesting branches: object structure, list merge keys and directives.
const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "labels",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "uid",
    "spec",
    "template",
    "containers",
    "env",
    "ports",
    "containerPort",
    "protocol",
    "volumes",
    "tolerations",
    "nodeSelector",
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$deleteFromPrimitiveList/finalizers",
    "op",
    "path",
    "from",
    "value",
    "",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => proptest::sample::select(KEYS).prop_map(str::to_string), 1 => "[a-z/~0-9$-]{0,6}"]
}

/// Arbitrary JSON, biased towards Kubernetes-looking shapes.
pub(crate) fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        proptest::sample::select(
            &[
                "replace",
                "merge",
                "delete",
                "add",
                "remove",
                "move",
                "copy",
                "test",
                "/",
                "/spec",
                "/metadata/name",
                "/-",
                "/spec/containers/0",
                "",
                "v1",
                "batch/v1",
                "Job",
                "Pod",
                "ConfigMap",
                "a",
                "80",
            ][..]
        )
        .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A live Job as the apiserver stores it.
fn live_job() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "default", "labels": {"a": "1"}, "finalizers": ["f"],
            "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "batch/v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]}
        ], "volumes": [{"name": "v", "emptyDir": {}}]}}},
        "status": {"active": 1}
    })
}

const INSERTS: &[&[u8]] = &[b"[", b"{", b"null", b"\"", b",", b"]", b"}", b":", b"- "];

/// Bytes of a valid body with one byte changed, a prefix cut off, or bytes inserted.
fn mutated(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = base.len();
    prop_oneof![
        (0..len, any::<u8>()).prop_map({
            let base = base.clone();
            move |(i, b)| {
                let mut v = base.clone();
                v[i] = b;
                v
            }
        }),
        (0..len).prop_map({
            let base = base.clone();
            move |n| base[..n].to_vec()
        }),
        (0..len, proptest::sample::select(INSERTS)).prop_map(move |(i, ins)| {
            let mut v = base.clone();
            v.splice(i..i, ins.iter().copied());
            v
        }),
    ]
}

fn bodies() -> impl Strategy<Value = Vec<u8>> {
    let job = serde_json::to_vec(&live_job()).unwrap_or_default();
    let yaml = b"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: i\n".to_vec();
    let ops = br#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"x"},{"op":"add","path":"/metadata/labels/b","value":"2"},{"op":"remove","path":"/status"},{"op":"move","from":"/metadata/labels","path":"/spec/x"},{"op":"test","path":"/metadata/name","value":"j"}]"#.to_vec();
    prop_oneof![
        arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
        proptest::collection::vec(any::<u8>(), 0..64),
        mutated(job),
        mutated(yaml),
        mutated(ops),
    ]
}

/// A Job a first manager wrote with a random merge patch (`patched_by`), a second random merge
/// patch, the two managers (distinct, of three) and the part they write.
fn second_writes() -> impl Strategy<Value = (Value, Value, Vec<&'static str>, managed::Part)> {
    const PARTS: [managed::Part; 3] = [managed::Part::All, managed::Part::Main, managed::Part::Status];
    (
        arb_json(),
        arb_json(),
        proptest::sample::subsequence(&["m", "a", "b"][..], 2),
        proptest::sample::select(&PARTS[..]),
    )
        .prop_map(|(first, second, managers, part)| {
            let mid = patched_by(&first, &job_schema(), part, managers[0]);
            (mid, second, managers, part)
        })
}

/// An `Update` of a batch/v1 object by `manager` at `now`.
fn batch<'a>(manager: &'a str, now: &'a str) -> managed::Identity<'a> {
    managed::Identity { manager, api_version: "batch/v1", subresource: "", now }
}

fn job_schema() -> SchemaKind {
    SchemaKind::for_kind("batch/v1", "Job").unwrap_or_else(|| panic!("the Job schema exists"))
}

/// [`live_job`] after `manager` merge-patched it with `patch`, its managedFields tracked: a Job
/// that two managers wrote.
fn patched_by(patch: &Value, schema: &SchemaKind, part: managed::Part, manager: &str) -> Value {
    let old = live_job();
    let mut patched = apply_merge_patch(&old, patch);
    managed::track_update(Some(&old), &mut patched, Some(schema), part, &batch(manager, "t1"));
    patched
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn yaml_or_json_decoding_never_panics(body in bodies()) {
        let _ = parse_yaml_or_json(&body);
    }

    #[test]
    fn json_patch_never_panics(doc in prop_oneof![Just(live_job()), arb_json()], body in bodies()) {
        let _ = apply_json_patch(&doc, &body);
    }

    #[test]
    fn json_patch_ops_never_panic(doc in prop_oneof![Just(live_job()), arb_json()], ops in proptest::collection::vec(arb_json(), 0..6)) {
        let body = serde_json::to_vec(&ops).unwrap_or_default();
        let _ = apply_json_patch(&doc, &body);
    }

    #[test]
    fn merge_patch_never_panics(doc in prop_oneof![Just(live_job()), arb_json()], body in bodies()) {
        // Decoded noting duplicates: the same value (key order too), the same errors, and no
        // issue to look for unless it repeats a key.
        let noting = parse_merge_patch_noting_duplicates(&body);
        if let Ok((_, false)) = &noting {
            prop_assert!(crate::apiserver::decode::patch_body_issues(&body, false).is_empty());
        }
        let text = |v: &Value| serde_json::to_string(v).unwrap_or_default();
        prop_assert_eq!(
            noting.map(|(v, _)| text(&v)).map_err(|e| e.message()),
            parse_merge_patch(&body).map(|v| text(&v)).map_err(|e| e.message())
        );
        if let Ok(patch) = parse_merge_patch(&body) {
            let _ = apply_merge_patch(&doc, &patch);
        }
    }

    #[test]
    fn strategic_merge_patch_never_panics(doc in prop_oneof![Just(live_job()), arb_json()], patch in arb_json()) {
        let _ = apply_strategic_merge_patch(&doc, &patch, &job_schema());
        let pod = SchemaKind::for_kind("v1", "Pod");
        if let Some(pod) = pod {
            let _ = apply_strategic_merge_patch(&doc, &patch, &pod);
        }
    }

    #[test]
    fn strategic_merge_patch_bodies_never_panic(body in bodies()) {
        if let Ok(patch) = parse_strategic_merge_patch(&body) {
            let _ = apply_strategic_merge_patch(&live_job(), &patch, &job_schema());
        }
    }

    #[test]
    fn apply_patch_never_panics(live in prop_oneof![Just(None), Just(Some(live_job())), arb_json().prop_map(Some)], applied in arb_json()) {
        let _ = apply_server_side(live.as_ref(), &applied, Some(&job_schema()), "mgr", "2026-01-01T00:00:00Z", ApplyOptions::default());
        let _ = apply_server_side(live.as_ref(), &applied, None, "mgr", "2026-01-01T00:00:00Z", ApplyOptions::default());
    }

    #[test]
    fn apply_patch_bodies_never_panic(body in bodies()) {
        if let Ok(applied) = parse_yaml_or_json(&body) {
            let _ = apply_server_side(Some(&live_job()), &applied, Some(&job_schema()), "mgr", "2026-01-01T00:00:00Z", ApplyOptions::default());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `managed::diff`, which walks only the members that differ, finds exactly what comparing
    /// every leaf, list item and container of both objects finds (structured-merge-diff's
    /// `Compare`), for random merge patches of a live Job and for random objects.
    #[test]
    fn managed_fields_diff_equals_comparing_every_leaf(
        old in prop_oneof![Just(live_job()), arb_json()],
        patch in arb_json(),
    ) {
        let new = apply_merge_patch(&old, &patch);
        let schema = job_schema();
        for part in [managed::Part::All, managed::Part::Main, managed::Part::Status] {
            for (a, b) in [(&old, &new), (&new, &old)] {
                let expected = managed::compare(
                    &managed::field_paths(a, schema.schema(), part, managed::Marks::Containers),
                    &managed::field_paths(b, schema.schema(), part, managed::Marks::Containers),
                );
                let c = managed::diff(a, b, schema.schema(), part);
                // `track_update` answers a change found by the diff for "the objects differ",
                // which spares `replace` comparing them whole.
                prop_assert!(c.is_empty() || a != b, "a change between equal objects: {:?}", c);
                prop_assert_eq!(c, expected, "part {:?}", part);
            }
        }
    }

    /// What a create records, built in one walk, is the FieldsV1 of every leaf, list item and
    /// container the kind's zero value lacks.
    #[test]
    fn managed_fields_of_a_create_encode_what_the_zero_value_lacks(
        obj in prop_oneof![Just(live_job()), arb_json()],
        patch in arb_json(),
    ) {
        let obj = apply_merge_patch(&obj, &patch);
        let schema = job_schema();
        for part in [managed::Part::All, managed::Part::Main, managed::Part::Status] {
            let created = managed::field_paths(&obj, schema.schema(), part, managed::Marks::BeyondZeroValue);
            prop_assert_eq!(
                managed::encode_created(&obj, schema.schema(), part),
                managed::encode_fields(&created.into_keys().collect()),
                "part {:?}", part
            );
        }
    }
}

/// A field path of up to three elements from a small alphabet, so random sets share prefixes.
fn field_path() -> impl Strategy<Value = managed::FieldPath> {
    let element =
        proptest::sample::select(
            &[
                "f:a",
                "f:b",
                "f:spec",
                "k:{\"name\":\"c\"}",
                "k:{\"name\":\"d\"}",
                "v:\"x\"",
                "v:1",
                "i:0",
                "x",
            ][..],
        )
        .prop_map(str::to_string);
    proptest::collection::vec(element, 1..4)
}

fn field_set() -> impl Strategy<Value = std::collections::BTreeSet<managed::FieldPath>> {
    proptest::collection::btree_set(field_path(), 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Adding or removing a path in a FieldsV1 value gives what encoding the changed set gives.
    #[test]
    fn fields_v1_edits_equal_encoding_the_edited_set(set in field_set(), path in field_path()) {
        let encoded = managed::encode_fields(&set);
        prop_assert!(fields_v1::canonical(&encoded), "{}", encoded);
        let mut added = encoded.clone();
        fields_v1::insert(&mut added, &path);
        let mut with = set.clone();
        with.insert(path.clone());
        prop_assert_eq!(&added, &managed::encode_fields(&with));
        let mut removed = encoded;
        fields_v1::remove(&mut removed, &path);
        let mut without = set;
        without.remove(&path);
        prop_assert_eq!(&removed, &managed::encode_fields(&without));
    }

    /// A value that is not what `encode_fields` writes is never taken for canonical.
    #[test]
    fn fields_v1_canonical_only_if_encoding_keeps_it(v in arb_json()) {
        if fields_v1::canonical(&v) {
            let mut set = std::collections::BTreeSet::new();
            let mut decoded = managed::entries(&json!({"metadata": {"managedFields": [{"fieldsV1": v.clone()}]}}));
            if let Some(e) = decoded.pop() {
                set = e.fields;
            }
            prop_assert_eq!(&managed::encode_fields(&set), &v);
        }
    }

    /// An update's managedFields, each set edited in place, are those decoding and encoding every
    /// set gives, for random merge patches by random managers of a Job two managers wrote.
    #[test]
    fn managed_fields_edited_in_place_equal_the_decoded_update(
        (mid, second, managers, part) in second_writes(),
    ) {
        let schema = job_schema();
        let mut new = apply_merge_patch(&mid, &second);
        let mut decoded = new.clone();
        managed::track_update(Some(&mid), &mut new, Some(&schema), part, &batch(managers[1], "t2"));
        let live = mid.pointer("/metadata/managedFields").filter(|l| l.as_array().is_some_and(|a| !a.is_empty()));
        let sent = decoded.pointer("/metadata/managedFields");
        if live.is_some() && (sent.is_none() || sent == live) {
            let c = managed::diff(&mid, &decoded, schema.schema(), part);
            managed::update_decoded(&mid, &mut decoded, &c, &batch(managers[1], "t2"));
            prop_assert_eq!(new, decoded);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// A merge patch's result made without copying the live managedFields, tracked by
    /// `track_update_moving_live`, is the result made by copying them, tracked by `track_update`
    /// (key order too: compared as serialized), with the same answer; when the answer is that
    /// the write changes something, the whole objects differ (`replace` then skips comparing
    /// them). For random merge patches by random managers of a Job two managers wrote.
    #[test]
    fn managed_fields_moved_from_the_live_object_equal_copying_them(
        (mid, second, managers, part) in second_writes(),
    ) {
        let schema = job_schema();
        let names_managed_fields = second.get("metadata").is_some_and(|m| !m.is_object() || m.get("managedFields").is_some());
        prop_assume!(!names_managed_fields);
        let mut copied = apply_merge_patch(&mid, &second);
        let copied_changes =
            managed::track_update(Some(&mid), &mut copied, Some(&schema), part, &batch(managers[1], "t2"));
        let mut live = mid.clone();
        let (mut moved, left_out) = apply_merge_patch_leaving_managed_fields(&mut live, &second);
        prop_assert_eq!(&live, &mid, "the live object gets its managedFields back");
        let moved_changes = if left_out {
            managed::track_update_moving_live(&mut live, &mut moved, Some(&schema), part, &batch(managers[1], "t2"))
        } else {
            managed::track_update(Some(&live), &mut moved, Some(&schema), part, &batch(managers[1], "t2"))
        };
        prop_assert_eq!(serde_json::to_string(&moved).ok(), serde_json::to_string(&copied).ok());
        prop_assert_eq!(moved_changes, copied_changes);
        prop_assert!(!moved_changes || copied != mid);
    }
}

/// [`managed::track_update_moving_live`] when the live entries cannot be edited in place (a set
/// that is not canonical) or the write changes nothing: the placeholder gets a copy of them and
/// the update is `track_update`'s.
#[test]
fn managed_fields_moved_fall_back_to_a_copy() {
    let schema = job_schema();
    let mut odd = live_job();
    odd["metadata"]["managedFields"][0]["fieldsV1"] = json!({"f:spec": {"f:x": {"f:y": 1}}});
    for (live, patch) in [
        (live_job(), json!({"metadata": {"labels": {"b": "2"}}})),
        (live_job(), json!({"metadata": {"labels": {"a": "1"}}})),
        (odd.clone(), json!({"metadata": {"labels": {"b": "2"}}})),
        (odd, json!({"spec": {"parallelism": 2}})),
    ] {
        let mut copied = apply_merge_patch(&live, &patch);
        let copied_changes = managed::track_update(
            Some(&live),
            &mut copied,
            Some(&schema),
            managed::Part::Main,
            &batch("w", "t"),
        );
        let mut old = live.clone();
        let (mut moved, left_out) = apply_merge_patch_leaving_managed_fields(&mut old, &patch);
        assert!(left_out);
        assert_eq!(moved.pointer("/metadata/managedFields"), Some(&Value::Null));
        let moved_changes = managed::track_update_moving_live(
            &mut old,
            &mut moved,
            Some(&schema),
            managed::Part::Main,
            &batch("w", "t"),
        );
        assert_eq!(serde_json::to_string(&moved).ok(), serde_json::to_string(&copied).ok(), "{patch}");
        assert_eq!(moved_changes, copied_changes, "{patch}");
    }
}
