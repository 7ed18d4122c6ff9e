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

fn job_schema() -> SchemaKind {
    SchemaKind::for_kind("batch/v1", "Job").unwrap_or_else(|| panic!("the Job schema exists"))
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
    /// every leaf of both objects finds (structured-merge-diff's `Compare`), for random merge
    /// patches of a live Job and for random objects.
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
                    &managed::leaves(a, schema.schema(), part),
                    &managed::leaves(b, schema.schema(), part),
                );
                prop_assert_eq!(managed::diff(a, b, schema.schema(), part), expected, "part {:?}", part);
            }
        }
    }

    /// What a create records, built in one walk, is the FieldsV1 of every leaf.
    #[test]
    fn managed_fields_of_a_create_encode_every_leaf(obj in prop_oneof![Just(live_job()), arb_json()], patch in arb_json()) {
        let obj = apply_merge_patch(&obj, &patch);
        let schema = job_schema();
        for part in [managed::Part::All, managed::Part::Main, managed::Part::Status] {
            let every_leaf = managed::leaves(&obj, schema.schema(), part).into_keys().collect();
            prop_assert_eq!(
                managed::encode_leaves(&obj, schema.schema(), part),
                managed::encode_fields(&every_leaf),
                "part {:?}", part
            );
        }
    }
}
