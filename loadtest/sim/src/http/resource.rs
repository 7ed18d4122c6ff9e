//! Requests on resource paths: get, list, watch, create, update, patch, delete, deletecollection.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Value, json};

use super::list::{self, Filter};
use super::query::Query;
use super::route::ResourcePath;
use super::{Reply, Shared};
use crate::apiserver::decode;
use crate::apiserver::eviction::EvictionRequest;
use crate::apiserver::{
    ApiError, DeleteOptions, Propagation, Subresource, Target, WriteOptions, parse_yaml_or_json,
};
use crate::fields::{self, FieldValidation};
use crate::kubectl::{self, IncludeObject};
use crate::patch::{self, PatchType};

/// The verb a request maps to, as the apiserver names it (for counters and fault rules).
pub fn verb(method: &Method, path: &ResourcePath, q: &Query) -> &'static str {
    match (method.as_str(), path.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if q.flag("watch") => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

pub async fn handle(
    shared: &Arc<Shared>,
    method: &Method,
    path: &ResourcePath,
    q: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Reply, ApiError> {
    let target =
        shared.api.resolve(&path.group, &path.version, &path.plural).ok_or_else(ApiError::page_not_found)?;
    if path.namespace.is_some() && !target.rt.namespaced {
        return Err(ApiError::page_not_found());
    }
    let namespace = path.namespace.clone().unwrap_or_default();
    if let (Some("eviction"), Some(name)) = (path.subresource.as_deref(), path.name.as_deref())
        && target.rt.is("", "pods")
    {
        return evict(shared, method, &namespace, name, q, headers, &body);
    }
    if let (Some(name), Some(sub)) = (path.name.as_deref(), path.subresource.as_deref())
        && super::pod_streams::serves(&target, sub)
    {
        return super::pod_streams::handle(shared, method, &namespace, name, sub, q).await;
    }
    let sub = match path.subresource.as_deref() {
        None => Subresource::Main,
        Some("status") if target.rt.has_status => Subresource::Status,
        Some("finalize") if target.rt.is("", "namespaces") => Subresource::Main,
        Some(other) => return Err(ApiError::subresource_not_found(&target.rt, other)),
    };
    let table = accept_table(headers, q)?;
    let mut opts = write_options(q, method)?;
    let user_agent = headers.get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
    opts.manager =
        Some(opts.field_manager.clone().unwrap_or_else(|| patch::manager_from_user_agent(user_agent)));
    match (method.as_str(), path.name.as_deref()) {
        ("GET", Some(name)) => {
            let obj = shared.api.get(&target, &namespace, name)?;
            match table {
                Some(include) => {
                    let v = shared.api.view_value(&target, &obj);
                    let rv = json!({ "resourceVersion": obj.rv.to_string() });
                    Ok(Reply::json(
                        StatusCode::OK,
                        &kubectl::table(&target.rt, &[&v], rv, jiff::Timestamp::now(), include, true),
                    ))
                }
                None => Ok(Reply::bytes(StatusCode::OK, shared.api.render(&target, &obj))),
            }
        }
        ("GET", None) => {
            let ns = path.namespace.as_deref();
            let filter = Filter::from_query(&target, ns, q)?;
            if q.flag("watch") {
                let req = super::watch::WatchRequest::from_query(target, filter, q, table)?;
                let rx = super::watch::start(shared.clone(), req)?;
                return Ok(Reply::stream(rx));
            }
            let shard_echo = filter.shard.as_ref().map(|s| s.canonical());
            let page = list::list(&shared.api, &shared.snapshots, &target, &filter, q)?;
            match table {
                Some(include) => {
                    let values: Vec<Value> =
                        page.items.iter().map(|o| shared.api.view_value(&target, o)).collect();
                    let refs: Vec<&Value> = values.iter().collect();
                    let mut meta = json!({ "resourceVersion": page.rv.to_string() });
                    if let Some(c) = &page.continue_token {
                        meta["continue"] = json!(c);
                    }
                    Ok(Reply::json(
                        StatusCode::OK,
                        &kubectl::table(&target.rt, &refs, meta, jiff::Timestamp::now(), include, true),
                    ))
                }
                None => Ok(Reply::bytes(
                    StatusCode::OK,
                    list::render_list(&shared.api, &target, &page, shard_echo),
                )),
            }
        }
        ("POST", None) => {
            if target.rt.namespaced && path.namespace.is_none() {
                return Err(ApiError::method_not_supported(&target.rt, "create"));
            }
            let (obj, mut warnings) = decode_object(&target, headers, &body, &opts)?;
            warnings.extend(crate::admission::warnings_on_create(
                &target.rt.api_version(),
                &target.rt.kind,
                &obj,
            ));
            let created = shared.api.create(&target, &namespace, obj, &opts)?;
            let mut reply = Reply::bytes(StatusCode::CREATED, shared.api.render(&target, &created));
            reply.warnings = warnings;
            Ok(reply)
        }
        ("PUT", Some(name)) => {
            let (obj, mut warnings) = decode_object(&target, headers, &body, &opts)?;
            let old = old_for_update_warnings(shared, &target, &namespace, name, sub);
            let updated = shared.api.update(&target, &namespace, name, obj, sub, &opts)?;
            let mut reply = Reply::bytes(StatusCode::OK, shared.api.render(&target, &updated));
            warnings.extend(update_warnings(shared, &target, old.as_deref(), &updated));
            reply.warnings = warnings;
            Ok(reply)
        }
        ("PATCH", Some(name)) => {
            let ct = content_type(headers);
            let patch_type =
                PatchType::from_content_type(&ct).ok_or_else(|| ApiError::unsupported_media_type(&ct))?;
            let old = old_for_update_warnings(shared, &target, &namespace, name, sub);
            let patched = shared.api.patch(&target, &namespace, name, patch_type, &body, sub, &opts)?;
            let status = if patched.created { StatusCode::CREATED } else { StatusCode::OK };
            let mut reply = Reply::bytes(status, shared.api.render(&target, &patched.object));
            let mut warnings = patched.warnings;
            warnings.extend(update_warnings(shared, &target, old.as_deref(), &patched.object));
            reply.warnings = warnings;
            Ok(reply)
        }
        ("DELETE", Some(name)) => {
            let dopts = delete_options(q, &body)?;
            let deleted = shared.api.delete(&target, &namespace, name, &dopts)?;
            let mut reply = match (&deleted.object, &deleted.removed) {
                (Some(o), _) => Reply::bytes(StatusCode::OK, shared.api.render(&target, o)),
                (None, Some(r)) => Reply::json(
                    StatusCode::OK,
                    &crate::apiserver::errors::delete_success(&target.rt, name, &r.uid),
                ),
                (None, None) => Reply::json(
                    StatusCode::OK,
                    &crate::apiserver::errors::delete_success(&target.rt, name, ""),
                ),
            };
            reply.warnings = deleted.warnings;
            Ok(reply)
        }
        ("DELETE", None) => delete_collection(shared, &target, path, q, &body),
        (_, None) | (_, Some(_)) => {
            Err(ApiError::method_not_supported(&target.rt, &method.as_str().to_lowercase()))
        }
    }
}

/// `POST pods/NAME/eviction` (`apiserver::eviction`).
fn evict(
    shared: &Arc<Shared>,
    method: &Method,
    namespace: &str,
    name: &str,
    q: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Reply, ApiError> {
    if method != Method::POST {
        let rt = shared.api.builtin("", "v1", "pods").rt;
        return Err(ApiError::method_not_supported(&rt, &method.as_str().to_lowercase()));
    }
    let opts = write_options(q, method)?;
    let request =
        EvictionRequest::from_body(&decode_body(headers, body, "Eviction")?, namespace, name, opts.dry_run)?;
    let (code, status) = shared.api.evict(namespace, name, request)?;
    Ok(Reply::json(StatusCode::from_u16(code).unwrap_or(StatusCode::CREATED), &status))
}

fn delete_collection(
    shared: &Arc<Shared>,
    target: &Target,
    path: &ResourcePath,
    q: &Query,
    body: &Bytes,
) -> Result<Reply, ApiError> {
    let filter = Filter::from_query(target, path.namespace.as_deref(), q)?;
    let dopts = delete_options(q, body)?;
    let (all, _) = shared.api.store().list(target.rid, path.namespace.as_deref());
    let mut items = Vec::new();
    for o in all.iter().filter(|o| filter.matches(o)) {
        match shared.api.delete(target, &o.namespace, &o.name, &dopts) {
            Ok(d) => {
                if let Some(obj) = d.object.or(d.removed) {
                    items.push(shared.api.view_value(target, &obj));
                }
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": target.rt.list_kind(), "apiVersion": target.rt.api_version(),
        "metadata": { "resourceVersion": shared.api.store().current_rv().to_string() },
        "items": items,
    });
    Ok(Reply::json(StatusCode::OK, &list))
}

fn content_type(headers: &HeaderMap) -> String {
    headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// Decodes a create/update body: JSON or YAML; protobuf is not served.
/// A request body in JSON, YAML or protobuf; `kind` is what the handler expects, for messages.
fn decode_body(headers: &HeaderMap, body: &[u8], kind: &str) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    let base = ct.split(';').next().unwrap_or("").trim();
    match base {
        "" | "application/json" | "*/*" => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the object provided is unrecognized: {e}"))),
        "application/yaml" | "application/x-yaml" | "text/yaml" => parse_yaml_or_json(body),
        super::negotiate::PROTOBUF => super::negotiate::decode_body(body, &ct, kind),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// A create or update body, decoded and checked for unknown and duplicate fields as the
/// apiserver's strict decoder does; the warnings go in the `Warning` header.
fn decode_object(
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
    opts: &WriteOptions,
) -> Result<(Value, Vec<String>), ApiError> {
    let ct = content_type(headers);
    let is_json = matches!(ct.split(';').next().unwrap_or("").trim(), "" | "application/json" | "*/*");
    if is_json
        && opts.field_validation != FieldValidation::Ignore
        && let Ok((mut obj, false)) = fields::json_keys::parse_noting_duplicates(body)
    {
        // With no repeated key, the key events only order the unknown fields' issues: a body
        // with no issue is answered without them, any other is decoded again with them.
        if let Ok(warnings) = decode::check_body(&target.rt, &mut obj, Some(&[]), opts.field_validation)
            && warnings.is_empty()
        {
            return Ok((obj, warnings));
        }
    }
    let (mut obj, events) = if is_json && opts.field_validation != FieldValidation::Ignore {
        let (obj, events) = fields::json_keys::parse(body)
            .map_err(|e| ApiError::bad_request(format!("the object provided is unrecognized: {e}")))?;
        (obj, Some(events))
    } else {
        (decode_body(headers, body, &target.rt.kind)?, None)
    };
    let events = if is_json { Some(events.as_deref().unwrap_or(&[])) } else { None };
    let warnings = decode::check_body(&target.rt, &mut obj, events, opts.field_validation)?;
    Ok((obj, warnings))
}

fn write_options(q: &Query, method: &Method) -> Result<WriteOptions, ApiError> {
    let dry_run = match q.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
            )));
        }
    };
    let options_kind = match method.as_str() {
        "POST" => "CreateOptions",
        "PUT" => "UpdateOptions",
        _ => "PatchOptions",
    };
    let field_validation = match FieldValidation::parse(q.get("fieldValidation")) {
        Ok(v) => v,
        Err(detail) if matches!(method.as_str(), "POST" | "PUT" | "PATCH") => {
            return Err(decode::invalid_field_validation(options_kind, &detail));
        }
        Err(_) => FieldValidation::default(),
    };
    Ok(WriteOptions {
        dry_run,
        field_manager: q.non_empty("fieldManager").map(str::to_string),
        force: q.flag("force"),
        field_validation,
        manager: None,
    })
}

/// DeleteOptions from the body (JSON from kubectl and kube-rs, protobuf from kubectl drain) and the query.
fn delete_options(q: &Query, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else if crate::protobuf::envelope::has_magic(body) {
        crate::protobuf::delete_options::decode(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let propagation_text = b
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| q.non_empty("propagationPolicy").map(str::to_string));
    let orphan = b
        .get("orphanDependents")
        .and_then(Value::as_bool)
        .or_else(|| q.get("orphanDependents").map(|v| v == "true"));
    let propagation = match (propagation_text.as_deref(), orphan) {
        (Some("Background"), _) => Some(Propagation::Background),
        (Some("Foreground"), _) => Some(Propagation::Foreground),
        (Some("Orphan"), _) => Some(Propagation::Orphan),
        (Some(other), _) => {
            return Err(ApiError::bad_request(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
            )));
        }
        (None, Some(true)) => Some(Propagation::Orphan),
        (None, Some(false)) => Some(Propagation::Background),
        (None, None) => None,
    };
    let grace = b
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .or(q.int("gracePeriodSeconds").map_err(ApiError::bad_request)?);
    let pre = b.get("preconditions");
    let dry_run = b.get("dryRun").and_then(Value::as_array).is_some_and(|a| !a.is_empty())
        || q.get("dryRun") == Some("All");
    Ok(DeleteOptions {
        grace_period_seconds: grace,
        propagation,
        precondition_uid: pre.and_then(|p| p.get("uid")).and_then(Value::as_str).map(str::to_string),
        precondition_rv: pre
            .and_then(|p| p.get("resourceVersion"))
            .and_then(Value::as_str)
            .map(str::to_string),
        dry_run,
    })
}

/// Whether the client asked for a Table (kubectl get), and what each row's object should be.
fn accept_table(headers: &HeaderMap, q: &Query) -> Result<Option<IncludeObject>, ApiError> {
    let accept = headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !kubectl::wants_table(accept) {
        return Ok(None);
    }
    IncludeObject::from_query(q.get("includeObject"))
        .map(Some)
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The object before a main-resource write, for the Job and CronJob strategies'
/// `WarningsOnUpdate` (other kinds, pods included, have none, so nothing is read for them).
fn old_for_update_warnings(
    shared: &Shared,
    target: &Target,
    namespace: &str,
    name: &str,
    sub: Subresource,
) -> Option<Arc<crate::store::StoredObject>> {
    let batch = target.rt.is("batch", "jobs") || target.rt.is("batch", "cronjobs");
    if sub != Subresource::Main || !batch {
        return None;
    }
    shared.api.get(target, namespace, name).ok()
}

fn update_warnings(
    shared: &Shared,
    target: &Target,
    old: Option<&crate::store::StoredObject>,
    new: &crate::store::StoredObject,
) -> Vec<String> {
    let Some(old) = old else { return Vec::new() };
    crate::admission::warnings_on_update(
        &target.rt.api_version(),
        &target.rt.kind,
        &shared.api.view_value(target, new),
        &shared.api.view_value(target, old),
    )
}
