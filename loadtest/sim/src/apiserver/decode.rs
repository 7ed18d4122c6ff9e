//! The apiserver's answers to unknown and duplicate fields: the glue between `crate::fields`
//! and the Status each handler returns (handlers/create.go, update.go, patch.go).

use serde_json::{Value, json};

use super::ApiError;
use crate::field_error::FieldError;
use crate::fields::{self, FieldValidation, KeyEvent, Order};
use crate::resources::ResourceType;

/// The 422 an unsupported `fieldValidation` value gets (`ValidateFieldValidation`, reported on
/// the request's options kind: `CreateOptions`, `UpdateOptions` or `PatchOptions`).
pub fn invalid_field_validation(options_kind: &str, detail: &str) -> ApiError {
    let field = "fieldValidation";
    let cause = detail.strip_prefix("fieldValidation: ").unwrap_or(detail);
    let mut e = ApiError::invalid_unnamed(&[]);
    e.message = format!("{options_kind}.meta.k8s.io \"\" is invalid: {detail}");
    e.details = Some(Box::new(json!({
        "group": "meta.k8s.io", "kind": options_kind,
        "causes": [{"reason": "FieldValueNotSupported", "message": cause, "field": field}]
    })));
    e
}

/// `Deployment in version "v1" cannot be handled as a Deployment: …` (`transformDecodeError`).
fn cannot_be_handled(rt: &ResourceType, detail: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {detail}",
        kind = rt.kind,
        version = rt.version
    ))
}

/// Whether `obj` names the endpoint's type (or leaves it to the endpoint). Other objects are left
/// for `incoming` to reject.
fn fill_type(rt: &ResourceType, obj: &mut Value) -> bool {
    let Some(map) = obj.as_object_mut() else { return false };
    let api_version = rt.api_version();
    let matches =
        |v: Option<&Value>, want: &str| v.and_then(Value::as_str).is_none_or(|s| s.is_empty() || s == want);
    if !matches(map.get("apiVersion"), &api_version) || !matches(map.get("kind"), &rt.kind) {
        return false;
    }
    map.insert("apiVersion".into(), json!(api_version));
    map.insert("kind".into(), json!(rt.kind));
    true
}

/// A create or update body: drops what the typed decode drops; Strict turns any unknown or
/// duplicate field into a 400, Warn into warnings (returned), Ignore into nothing. `events` are
/// the JSON body's keys (none for YAML, whose unknown fields are reported in sorted order).
pub fn check_body(
    rt: &ResourceType,
    obj: &mut Value,
    events: Option<&[KeyEvent]>,
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    if !fill_type(rt, obj) {
        return Ok(Vec::new());
    }
    let order = if events.is_some() { Order::Document } else { Order::Sorted };
    let dropped = match fields::prune_unknown(obj, order) {
        None => return Ok(Vec::new()),
        Some(Err(e)) => return Err(cannot_be_handled(rt, &e)),
        Some(Ok(d)) => d,
    };
    let issues = match events {
        Some(events) => fields::issues_in_document_order(events, &dropped.unknown),
        None => dropped.unknown.iter().map(|p| fields::unknown_field(p)).collect(),
    };
    decide(validation, issues, |issues| cannot_be_handled(rt, &fields::strict_decoding_error(issues)))
}

fn decide(
    validation: FieldValidation,
    issues: Vec<String>,
    strict: impl FnOnce(&[String]) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    match validation {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(issues),
        FieldValidation::Strict if issues.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(strict(&issues)),
    }
}

/// The duplicate keys of a JSON or merge/strategic patch body, as strict decoding of the patch
/// reports them (`duplicate field "spec.paused"`; for a JSON patch, `json patch unknown field
/// "[0].foo"` and `json patch duplicate field "[1].path"` for its operations).
pub fn patch_body_issues(body: &[u8], json_patch: bool) -> Vec<String> {
    // Only a JSON patch's keys can be unknown; any other patch has issues only if it repeats a
    // key, which the decode without key events tells.
    if !json_patch && !fields::json_keys::parse_noting_duplicates(body).is_ok_and(|(_, duplicate)| duplicate)
    {
        return Vec::new();
    }
    let Ok((_, events)) = fields::json_keys::parse(body) else { return Vec::new() };
    let mut out = Vec::new();
    for e in &events {
        if json_patch {
            let op_key = e.path.strip_prefix('[').and_then(|p| p.split_once("].")).map(|(_, k)| k);
            if let Some(k) = op_key.filter(|k| !k.contains(['.', '[']))
                && !matches!(k, "op" | "path" | "from" | "value")
            {
                out.push(format!("json patch {}", fields::unknown_field(&e.path)));
                continue;
            }
        }
        if e.duplicate {
            let text = fields::duplicate_field(&e.path);
            out.push(if json_patch { format!("json patch {text}") } else { text });
        }
    }
    out
}

/// Whether a merge or strategic merge `patch` leaves its result nothing to drop: every member
/// it sets is a field of the kind, of the field's type, and neither empty nor null. Its result
/// then holds only the live object's members (already as the typed decode keeps them) and the
/// patch's own, each at the same path, so walking the whole result again finds nothing; a null
/// (a deletion can empty a map, which Go omits), a directive or anything unsure says no, and the
/// result is walked. Walking the patch costs a fraction of walking a pod.
pub fn patch_leaves_nothing_to_drop(rt: &ResourceType, patch: &Value) -> bool {
    fn has_null(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Object(m) => m.values().any(has_null),
            Value::Array(items) => items.iter().any(has_null),
            _ => false,
        }
    }
    patch.is_object() && !has_null(patch) && fields::kept_as_is(patch, &rt.api_version(), &rt.kind)
}

/// The patched object of a JSON, merge or strategic merge patch: drops what the typed decode
/// drops and decides on the patch's issues plus the unknown fields of the result (sorted, as the
/// apiserver re-encodes the document). Without `walk` (the patch left nothing to drop: see
/// [`patch_leaves_nothing_to_drop`]) it decides on the patch's issues alone. Strict answers 422 on the field `patch` whose value is
/// `patch_text` (the patched JSON, or for a strategic merge patch Go's `%+v` of the patch).
pub fn check_patched(
    rt: &ResourceType,
    patched: &mut Value,
    mut issues: Vec<String>,
    patch_text: impl FnOnce(&Value) -> String,
    validation: FieldValidation,
    walk: bool,
) -> Result<Vec<String>, ApiError> {
    let original = (validation == FieldValidation::Strict).then(|| patched.clone());
    // A result that does not decode is left as it was (the sim is lenient there): prune_unknown
    // changes nothing when the typed decode fails.
    if walk
        && fill_type(rt, patched)
        && let Some(Ok(dropped)) = fields::prune_unknown(patched, Order::Sorted)
    {
        issues.extend(dropped.unknown.iter().map(|p| fields::unknown_field(p)));
    }
    decide(validation, issues, |issues| {
        let text = patch_text(original.as_ref().unwrap_or(&Value::Null));
        ApiError::invalid_unnamed(&[FieldError::invalid(
            "patch",
            &json!(text),
            &fields::strict_decoding_error(issues),
        )])
    })
}

/// Compact JSON with every object's keys sorted, as Go's `json.Marshal` of a map writes it.
pub fn sorted_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), sorted(v))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(v)).unwrap_or_default()
}

/// Server-side apply refuses unknown fields whatever `fieldValidation` says: structured-merge-diff
/// cannot type the patch (`failed to create typed patch object (ns/name; apps/v1, Kind=Deployment):
/// .spec.bogus: field not declared in schema`, a plain error: 500 with no reason).
pub fn check_applied(rt: &ResourceType, applied: &Value) -> Result<(), ApiError> {
    let mut probe = applied.clone();
    if !fill_type(rt, &mut probe) {
        return Ok(());
    }
    let Some(Ok(dropped)) = fields::prune_unknown(&mut probe, Order::Sorted) else { return Ok(()) };
    if dropped.unknown.is_empty() {
        return Ok(());
    }
    let errors: Vec<String> = dropped
        .unknown
        .iter()
        .map(|p| format!("{}: field not declared in schema", smd_path(applied, p)))
        .collect();
    let text =
        if errors.len() == 1 { errors[0].clone() } else { format!("errors:\n  {}", errors.join("\n  ")) };
    let meta = |k: &str| applied.pointer(&format!("/metadata/{k}")).and_then(Value::as_str).unwrap_or("");
    let group = if rt.group.is_empty() { String::new() } else { rt.group.clone() };
    let mut e = ApiError::internal("");
    e.reason = "";
    e.details = None;
    e.message = format!(
        "failed to create typed patch object ({}/{}; {group}/{}, Kind={}): {text}",
        meta("namespace"),
        meta("name"),
        rt.version,
        rt.kind
    );
    Err(e)
}

/// A field path as structured-merge-diff prints it: `.spec.containers[name="c"].bogus`; list
/// items with a `name` are named by it, others by their index.
fn smd_path(applied: &Value, path: &str) -> String {
    let mut out = String::new();
    let mut cur = Some(applied);
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let (index, tail) = after.split_once(']').unwrap_or((after, ""));
            let item = cur.and_then(|c| c.get(index.parse::<usize>().unwrap_or(usize::MAX)));
            match item.and_then(|i| i.get("name")).and_then(Value::as_str) {
                Some(name) => out.push_str(&format!("[name={name:?}]")),
                None => out.push_str(&format!("[{index}]")),
            }
            cur = item;
            rest = tail.strip_prefix('.').map_or(tail, |t| {
                out.push('.');
                t
            });
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let key = &rest[..end];
        if out.is_empty() || !out.ends_with('.') {
            out.push('.');
        }
        out.push_str(key);
        cur = cur.and_then(|c| c.get(key));
        rest = &rest[end..];
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whenever a merge or strategic merge patch is said to leave nothing to drop, walking its
    /// result (what the shortcut skips) drops nothing and reports nothing; the patches it must
    /// refuse are refused.
    #[test]
    fn a_patch_said_to_leave_nothing_to_drop_leaves_nothing_for_the_walk() {
        let registry = crate::resources::Registry::default();
        let pods = registry.find("", "v1", "pods").expect("pods served");
        let live = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "a"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]},
            "status": {"phase": "Running"}
        });
        let schema = crate::patch::SchemaKind::for_kind("v1", "Pod").expect("pod schema");
        let cases = [
            (json!({"metadata": {"labels": {"bench/updated": "true"}}}), true),
            (json!({"metadata": {"annotations": {"a": "b"}, "finalizers": ["f"]}}), true),
            (json!({"spec": {"containers": [{"name": "main", "image": "other"}]}}), true),
            (json!({"spec": {"activeDeadlineSeconds": 5}}), true),
            (json!({"metadata": {"labels": {"app": null}}}), false),
            (json!({"metadata": {"labels": {}}}), false),
            (json!({"metadata": {"finalizers": []}}), false),
            (json!({"spec": {"bogus": 1}}), false),
            (json!({"spec": {"containers": [{"name": "main", "bogus": 1}]}}), false),
            (json!({"spec": {"activeDeadlineSeconds": "five"}}), false),
            (json!({"$patch": "replace", "metadata": {"labels": {"x": "y"}}}), false),
            (json!({"spec": {"$setElementOrder/containers": [{"name": "main"}]}}), false),
            (json!([1]), false),
        ];
        for (patch, expected) in cases {
            assert_eq!(patch_leaves_nothing_to_drop(&pods, &patch), expected, "{patch}");
            if !expected {
                continue;
            }
            let results = [
                crate::patch::apply_merge_patch(&live, &patch),
                crate::patch::apply_strategic_merge_patch(&live, &patch, &schema).expect("applies"),
            ];
            for result in results {
                let mut walked = result.clone();
                let issues = check_patched(
                    &pods,
                    &mut walked,
                    Vec::new(),
                    |_| String::new(),
                    FieldValidation::Strict,
                    true,
                )
                .expect("no issue");
                assert!(issues.is_empty(), "{patch}: {issues:?}");
                assert_eq!(walked, result, "{patch}: the walk changed the result");
            }
        }
    }

    #[test]
    fn smd_paths_name_list_items_by_name() {
        let applied = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "bogus": 1}],
            "tolerations": [{"key": "k", "x": 1}]}}}});
        assert_eq!(smd_path(&applied, "spec.bogus"), ".spec.bogus");
        assert_eq!(
            smd_path(&applied, "spec.template.spec.containers[0].bogus"),
            ".spec.template.spec.containers[name=\"c\"].bogus"
        );
        assert_eq!(
            smd_path(&applied, "spec.template.spec.tolerations[0].x"),
            ".spec.template.spec.tolerations[0].x"
        );
    }

    /// `testFieldValidationPatchTyped`'s JSON patch: unknown and duplicate keys of the operations.
    #[test]
    fn json_patch_operation_issues() {
        let body = br#"[{"op": "add", "path": "/spec/unknown1", "value": "val1", "foo":"bar"},
            {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val1"}]"#;
        assert_eq!(
            patch_body_issues(body, true),
            ["json patch unknown field \"[0].foo\"", "json patch duplicate field \"[1].path\""]
        );
        let merge = br#"{"spec": {"paused": true, "paused": false}}"#;
        assert_eq!(patch_body_issues(merge, false), ["duplicate field \"spec.paused\""]);
    }
}
