//! Writes: create, update (main resource or status), patch and delete.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::{self, meta_mut};
use super::{
    ApiError, ApiServer, FOREGROUND_FINALIZER, GcWork, ORPHAN_FINALIZER, Target, View, decode, events,
};
use crate::admission;
use crate::fields::FieldValidation;
use crate::patch::{self, PatchType, SchemaKind};
use crate::resources::ResourceType;
use crate::store::{Expect, Prepared, RV_PLACEHOLDER, StoreError, StoredObject, materialize};

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    Main,
    Status,
}

#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    /// What to do with unknown and duplicate fields of a patch (create and update bodies are
    /// checked by the HTTP layer, which has their bytes).
    pub field_validation: crate::fields::FieldValidation,
    /// Who makes a non-apply write, for its `Update` managedFields entry (`fieldManager`, else
    /// derived from the User-Agent); `None` for the sim's own controllers (not tracked).
    pub manager: Option<String>,
}

/// Where the managedFields of the object an update writes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ManagedFieldsSent {
    /// In the object, as sent or as a patch left them.
    InObject,
    /// `null` holds their place and they are the live ones: a merge patch's result, made without
    /// copying them (`patch::apply_merge_patch_leaving_managed_fields`).
    Live,
}

/// The part of an object a write owns fields of: the status subresource owns `status`, the main
/// resource of a kind with one everything else.
fn part_of(rt: &ResourceType, sub: Subresource) -> patch::Part {
    match sub {
        Subresource::Status => patch::Part::Status,
        Subresource::Main if rt.has_status => patch::Part::Main,
        Subresource::Main => patch::Part::All,
    }
}

/// The answer to a PATCH: the object, whether an apply patch created it, and warnings for the
/// `Warning` header.
#[derive(Debug)]
pub struct Patched {
    pub object: Arc<StoredObject>,
    pub created: bool,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

/// The answer to a DELETE: the object while it still exists (finalizers, graceful deletion), or
/// `None` once it is gone; plus warnings for the `Warning` header.
#[derive(Debug)]
pub struct Deleted {
    pub object: Option<Arc<StoredObject>>,
    pub removed: Option<Arc<StoredObject>>,
    pub warnings: Vec<String>,
}

const GENERATE_NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const GENERATE_NAME_ATTEMPTS: usize = 8;

/// Kinds whose metadata.generation tracks spec changes.
fn tracks_generation(rt: &ResourceType) -> bool {
    !rt.builtin
        || matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("", "pods")
                | ("batch", _)
                | ("apps", _)
                | ("policy", "poddisruptionbudgets")
                | ("networking.k8s.io", "networkpolicies")
                | ("apiextensions.k8s.io", "customresourcedefinitions")
        )
}

fn random_suffix() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..5)
        .map(|_| GENERATE_NAME_ALPHABET[rng.random_range(0..GENERATE_NAME_ALPHABET.len())] as char)
        .collect()
}

/// A random (version 4) UUID from the thread's generator: `Uuid::new_v4` asks the kernel for
/// its bytes, a system call on every create.
fn new_uid() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string()
}

/// Everything of an object but metadata and status: what bumps generation when it changes.
fn spec_part(obj: &Value) -> Vec<(&String, &Value)> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status" | "kind" | "apiVersion"))
                .collect()
        })
        .unwrap_or_default()
}

/// `spec_part(a) == spec_part(b)`: the same members in the same order, equal.
fn same_spec_part(a: &Value, b: &Value) -> bool {
    let (a, b) = (spec_part(a), spec_part(b));
    a.len() == b.len() && a.iter().zip(&b).all(|((ka, va), (kb, vb))| ka == kb && crate::json::equal(va, vb))
}

impl ApiServer {
    /// Turns a value into a commit-ready object: resourceVersion placeholder, selector fields.
    pub(super) fn prepare(&self, target: &Target, mut obj: Value) -> Result<Prepared, ApiError> {
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(RV_PLACEHOLDER));
        let storage_rt = if target.view == View::EventsV1 {
            self.registry.read().find("", "v1", "events").unwrap_or_else(|| target.rt.clone())
        } else {
            target.rt.clone()
        };
        let fields = storage_rt
            .field_selectors
            .iter()
            .filter_map(|&f| {
                crate::selector::field_value_ref(&storage_rt.group, &storage_rt.plural, &obj, f)
                    .map(|v| (f, Box::from(&*v)))
            })
            .collect();
        let owners = meta::owner_uids(&obj);
        // Sized for a pod with its managedFields, so the buffer seldom grows while writing (from
        // serde_json's 128 bytes it would reallocate five times); it is copied when committed.
        let mut json = Vec::with_capacity(4096);
        serde_json::to_writer(&mut json, &obj).map_err(|e| ApiError::internal(e.to_string()))?;
        // Written: the object is dropped after this, so its labels are moved, not copied.
        let labels = meta::take_labels(&mut obj);
        let namespace = meta::str_field(&obj, "namespace").unwrap_or("");
        let uid = meta::str_field(&obj, "uid").unwrap_or("");
        Prepared::new(namespace, meta::name(&obj), uid, labels, fields, owners, json)
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    /// Converts a request body to the stored form and checks its type against the endpoint.
    fn incoming(&self, target: &Target, mut obj: Value) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the object provided is not a JSON object"));
        }
        let api_version = target.rt.api_version();
        match obj.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => obj["apiVersion"] = json!(api_version),
            Some(v) if v != api_version => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({api_version})"
                )));
            }
            Some(_) => {}
        }
        match obj.get("kind").and_then(Value::as_str) {
            None | Some("") => obj["kind"] = json!(target.rt.kind),
            Some(k) if k != target.rt.kind => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    target.rt.kind
                )));
            }
            Some(_) => {}
        }
        Ok(match target.view {
            View::Native => obj,
            View::EventsV1 => events::from_events_v1(&obj),
        })
    }

    fn check_namespace(&self, target: &Target, namespace: &str, obj: &mut Value) -> Result<(), ApiError> {
        if !target.rt.namespaced {
            meta_mut(obj).remove("namespace");
            return Ok(());
        }
        match meta::str_field(obj, "namespace") {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {}
        }
        meta_mut(obj).insert("namespace".into(), json!(namespace));
        Ok(())
    }

    /// POST: creates the object in `namespace` (empty for cluster-scoped resources).
    pub fn create(
        &self,
        target: &Target,
        namespace: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mut obj = self.incoming(target, body)?;
        self.check_namespace(target, namespace, &mut obj)?;
        let rt = target.rt.clone();
        let name = meta::name(&obj).to_string();
        let generate_name = meta::str_field(&obj, "generateName").unwrap_or("").to_string();
        if meta::str_field(&obj, "resourceVersion").is_some_and(|v| !v.is_empty()) {
            return Err(ApiError::internal("resourceVersion should not be set on objects to be created"));
        }
        if rt.namespaced {
            match self.namespace_state(namespace) {
                None => return Err(ApiError::namespace_not_found(namespace)),
                Some(true) => {
                    let mut e = ApiError::forbidden(
                        &rt,
                        &name,
                        &format!(
                            "unable to create new content in namespace {namespace} because it is being terminated"
                        ),
                    );
                    // Upstream's NamespaceLifecycle admission marks the cause, which controllers test.
                    if let Some(d) = e.details.as_mut() {
                        d["causes"] = json!([{
                            "reason": "NamespaceTerminating",
                            "message": format!("namespace {namespace} is being terminated"),
                            "field": "metadata.namespace"
                        }]);
                    }
                    return Err(e);
                }
                Some(false) => {}
            }
        }
        {
            let m = meta_mut(&mut obj);
            m.insert("uid".into(), json!(new_uid()));
            m.insert("creationTimestamp".into(), json!(meta::now_seconds()));
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
            if tracks_generation(&rt) {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        }
        if rt.is("", "namespaces") {
            obj["spec"] = json!({ "finalizers": ["kubernetes"] });
            obj["status"] = json!({ "phase": "Active" });
        }
        let api_version = rt.api_version();
        let display = if name.is_empty() { generate_name.clone() } else { name.clone() };
        if name.is_empty() && generate_name.is_empty() {
            let err =
                crate::field_error::FieldError::required("metadata.name", "name or generateName is required");
            return Err(ApiError::invalid(&rt, "", &[err]));
        }
        admission::decode_create(&api_version, &rt.kind, &mut obj)
            .map_err(|errs| ApiError::invalid(&rt, &display, &errs))?;
        if let Some(manager) = opts.manager.as_deref() {
            let kind = SchemaKind::for_kind(&api_version, &rt.kind);
            let part = part_of(&rt, Subresource::Main);
            let who = patch::Identity {
                manager,
                api_version: &api_version,
                subresource: "",
                now: &meta::now_seconds(),
            };
            patch::track_update(None, &mut obj, kind.as_ref(), part, &who);
        }
        admission::admit_decoded_create(&api_version, &rt.kind, &mut obj)
            .map_err(|errs| ApiError::invalid(&rt, &display, &errs))?;
        let attempts = if name.is_empty() { GENERATE_NAME_ATTEMPTS } else { 1 };
        for attempt in 0..attempts {
            let mut candidate = if attempt + 1 == attempts { std::mem::take(&mut obj) } else { obj.clone() };
            let final_name = if name.is_empty() {
                let base: String = generate_name.chars().take(58).collect();
                format!("{base}{}", random_suffix())
            } else {
                name.clone()
            };
            meta_mut(&mut candidate).insert("name".into(), json!(final_name));
            if rt.is("", "namespaces") {
                super::namespace::canonicalize(&mut candidate);
            }
            // A namespace without quotas pays one range lookup for a charged kind.
            let quotas = if self.quota_charged(target.rid) { self.quotas_in(namespace) } else { Vec::new() };
            let quota_guard = (!quotas.is_empty()).then(|| self.quota_lock.lock());
            if !quotas.is_empty() {
                self.admit_quota(target, namespace, &final_name, &candidate, &quotas)?;
            }
            if opts.dry_run {
                let prepared = self.prepare(target, candidate)?;
                return Ok(Arc::new(dry_run_object(target, prepared, self.store.current_rv())));
            }
            let prepared = self.prepare(target, candidate)?;
            let created = self.store.create(target.rid, prepared);
            drop(quota_guard);
            match created {
                Ok(stored) => {
                    self.after_write(target, None, &stored);
                    return Ok(stored);
                }
                Err(StoreError::AlreadyExists) if attempt + 1 < attempts => continue,
                Err(StoreError::AlreadyExists) => return Err(ApiError::already_exists(&rt, &final_name)),
                Err(e) => return Err(ApiError::internal(e.to_string())),
            }
        }
        Err(ApiError::internal("name generation exhausted"))
    }

    /// PUT on the main resource or its status.
    pub fn update(
        &self,
        target: &Target,
        namespace: &str,
        name: &str,
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mut obj = self.incoming(target, body)?;
        self.check_namespace(target, namespace, &mut obj)?;
        let body_name = meta::name(&obj).to_string();
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let requested_rv = match meta::str_field(&obj, "resourceVersion") {
            None | Some("") => None,
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {v:?}: must be an integer"))
            })?),
        };
        loop {
            let current = self.get(target, namespace, name)?;
            if let Some(rv) = requested_rv
                && rv != current.rv
            {
                return Err(ApiError::stale(&target.rt, name));
            }
            // A write with a resourceVersion is tried once, so it needs no copy for a retry.
            let attempt = if requested_rv.is_some() { std::mem::take(&mut obj) } else { obj.clone() };
            match self.replace(
                target,
                &current,
                current.value(),
                attempt,
                sub,
                opts,
                ManagedFieldsSent::InObject,
            ) {
                Err(Retry::Conflict) if requested_rv.is_none() => continue,
                Err(Retry::Conflict) => return Err(ApiError::stale(&target.rt, name)),
                Err(Retry::Fail(e)) => return Err(e),
                Ok(stored) => return Ok(stored),
            }
        }
    }

    /// PATCH: applies the patch to the stored object (in the target's view) and writes it like
    /// an update. Returns whether an apply patch created the object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        target: &Target,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Patched, ApiError> {
        // A merge patch whose duplicate keys are looked for is decoded once, noting whether it
        // repeats a key; its issues need decoding again only then.
        let mut repeats_a_key = None;
        let patch_value: Option<Value> = match patch_type {
            PatchType::Json => None,
            PatchType::Apply => Some(parse_yaml_or_json(body)?),
            PatchType::Merge if opts.field_validation != FieldValidation::Ignore => {
                let (value, duplicate) =
                    patch::parse_merge_patch_noting_duplicates(body).map_err(patch_error)?;
                repeats_a_key = Some(duplicate);
                Some(value)
            }
            PatchType::Merge => Some(patch::parse_merge_patch(body).map_err(patch_error)?),
            PatchType::StrategicMerge => Some(patch::parse_strategic_merge_patch(body).map_err(patch_error)?),
        };
        let schema = SchemaKind::for_kind(&target.rt.api_version(), &target.rt.kind);
        if patch_type == PatchType::StrategicMerge && schema.is_none() {
            return Err(ApiError::unsupported_media_type("application/strategic-merge-patch+json"));
        }
        if patch_type == PatchType::Apply
            && opts.field_manager.is_some()
            && let Some(applied @ Value::Object(_)) = &patch_value
        {
            decode::check_applied(&target.rt, applied)?;
        }
        let apply_options = patch::ApplyOptions { force: opts.force, part: part_of(&target.rt, sub) };
        // An apply records its own entry; the write after it is not an Update of anyone.
        let untracked = WriteOptions { manager: None, ..opts.clone() };
        let write_opts = if patch_type == PatchType::Apply { &untracked } else { opts };
        let patch_issues = match (patch_type, opts.field_validation) {
            (_, FieldValidation::Ignore) | (PatchType::Apply, _) => Vec::new(),
            _ if repeats_a_key == Some(false) => Vec::new(),
            (PatchType::Json, _) => decode::patch_body_issues(body, true),
            _ => decode::patch_body_issues(body, false),
        };
        // Whether the patched object needs walking for what the typed decode drops.
        let walk_result = !matches!(patch_type, PatchType::Merge | PatchType::StrategicMerge)
            || !patch_value.as_ref().is_some_and(|p| decode::patch_leaves_nothing_to_drop(&target.rt, p));
        // A tracked merge patch that is written as it is (no walk, no issue whose Strict answer
        // quotes the result) and says nothing of managedFields leaves the live ones out of the
        // copy it is applied to; the update moves them over (`ManagedFieldsSent::Live`).
        let leave_managed_fields = patch_type == PatchType::Merge
            && opts.manager.is_some()
            && !walk_result
            && patch_issues.is_empty()
            && target.view == View::Native
            && patch_value
                .as_ref()
                .and_then(|p| p.get("metadata"))
                .is_none_or(|m| m.get("managedFields").is_none());
        loop {
            let current = match self.store.get(target.rid, namespace, name) {
                Some(c) => c,
                None if patch_type == PatchType::Apply && sub == Subresource::Main => {
                    let applied = patch_value.clone().unwrap_or(Value::Null);
                    let manager = opts.field_manager.clone().unwrap_or_default();
                    let mut obj = patch::apply_server_side(
                        None,
                        &applied,
                        schema.as_ref(),
                        &manager,
                        &meta::now_seconds(),
                        apply_options,
                    )
                    .map_err(patch_error)?;
                    if meta::name(&obj).is_empty() {
                        meta_mut(&mut obj).insert("name".into(), json!(name));
                    }
                    drop_what_go_omits(&mut obj);
                    let object = self.create(target, namespace, obj, &untracked)?;
                    return Ok(Patched { object, created: true, warnings: Vec::new() });
                }
                None => return Err(ApiError::not_found(&target.rt, name)),
            };
            let mut live = self.view_value(target, &current);
            let mut managed_fields = ManagedFieldsSent::InObject;
            let patched = match patch_type {
                PatchType::Json => patch::apply_json_patch(&live, body),
                PatchType::Merge if leave_managed_fields => {
                    let p = patch_value.as_ref().unwrap_or(&Value::Null);
                    let (patched, left_out) = patch::apply_merge_patch_leaving_managed_fields(&mut live, p);
                    if left_out {
                        managed_fields = ManagedFieldsSent::Live;
                    }
                    Ok(patched)
                }
                PatchType::Merge => {
                    Ok(patch::apply_merge_patch(&live, patch_value.as_ref().unwrap_or(&Value::Null)))
                }
                PatchType::StrategicMerge => match &schema {
                    Some(s) => patch::apply_strategic_merge_patch(
                        &live,
                        patch_value.as_ref().unwrap_or(&Value::Null),
                        s,
                    ),
                    None => {
                        return Err(ApiError::unsupported_media_type(
                            "application/strategic-merge-patch+json",
                        ));
                    }
                },
                PatchType::Apply => {
                    let manager = opts.field_manager.clone().unwrap_or_default();
                    patch::apply_server_side(
                        Some(&live),
                        patch_value.as_ref().unwrap_or(&Value::Null),
                        schema.as_ref(),
                        &manager,
                        &meta::now_seconds(),
                        apply_options,
                    )
                    .map(|mut obj| {
                        drop_what_go_omits(&mut obj);
                        obj
                    })
                }
            }
            .map_err(patch_error)?;
            if !patched.is_object() {
                return Err(patched_not_an_object(&patched, name));
            }
            let mut patched = patched;
            let warnings = if patch_type == PatchType::Apply {
                Vec::new()
            } else {
                let smp = patch_value.as_ref().filter(|_| patch_type == PatchType::StrategicMerge);
                decode::check_patched(
                    &target.rt,
                    &mut patched,
                    patch_issues.clone(),
                    |original| match smp {
                        Some(p) => patch::go_format(p),
                        None => decode::sorted_json(original),
                    },
                    opts.field_validation,
                    walk_result,
                )?
            };
            // A patch conflicts only if it names a resourceVersion itself.
            let requested_rv = meta::str_field(&patched, "resourceVersion").map(str::to_string);
            let live_rv = current.rv.to_string();
            if let Some(rv) = &requested_rv
                && *rv != live_rv
            {
                return Err(ApiError::stale(&target.rt, name));
            }
            meta_mut(&mut patched).insert("resourceVersion".into(), json!(live_rv));
            let obj = self.incoming(target, patched)?;
            let old = match target.view {
                View::Native => live,
                View::EventsV1 => current.value(),
            };
            match self.replace(target, &current, old, obj, sub, write_opts, managed_fields) {
                // Written meanwhile: apply the patch again to the new object, as kube-apiserver's
                // patcher does. The result keeps the version the patch names, if any (then stale
                // above), else takes the new one: a patch without a version never gets 409.
                Err(Retry::Conflict) => continue,
                Err(Retry::Fail(e)) => return Err(e),
                Ok(object) => return Ok(Patched { object, created: false, warnings }),
            }
        }
    }

    /// Read-modify-write for in-process controllers (garbage collector, kubelet, scheduler):
    /// `change` edits the object in the stored form and says whether to write.
    pub fn update_with(
        &self,
        target: &Target,
        namespace: &str,
        name: &str,
        sub: Subresource,
        mut change: impl FnMut(&mut Value) -> Result<bool, ApiError>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        loop {
            let current = self.get(target, namespace, name)?;
            let old = current.value();
            let mut obj = old.clone();
            if !change(&mut obj)? {
                return Ok(current);
            }
            match self.replace(
                target,
                &current,
                old,
                obj,
                sub,
                &WriteOptions::default(),
                ManagedFieldsSent::InObject,
            ) {
                Err(Retry::Conflict) => continue,
                Err(Retry::Fail(e)) => return Err(e),
                Ok(stored) => return Ok(stored),
            }
        }
    }

    /// Writes `obj` over `current` (parsed: `old`) with upstream's update rules. Both are in the
    /// stored form.
    #[allow(clippy::too_many_arguments)]
    fn replace(
        &self,
        target: &Target,
        current: &Arc<StoredObject>,
        mut old: Value,
        mut obj: Value,
        sub: Subresource,
        opts: &WriteOptions,
        managed_fields: ManagedFieldsSent,
    ) -> Result<Arc<StoredObject>, Retry> {
        let rt = target.rt.clone();
        let name = current.name.to_string();
        // What a write may not change.
        {
            let old_meta = meta::meta(&old);
            let m = meta_mut(&mut obj);
            for key in
                ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"]
            {
                match old_meta.and_then(|o| o.get(key)) {
                    Some(v) => m.insert(key.into(), v.clone()),
                    None => m.remove(key),
                };
            }
            m.insert("name".into(), json!(&*current.name));
            if rt.namespaced {
                m.insert("namespace".into(), json!(&*current.namespace));
            }
        }
        if rt.has_status {
            match sub {
                Subresource::Main => copy_key(&old, &mut obj, "status"),
                Subresource::Status => {
                    for key in spec_part(&old).into_iter().map(|(k, _)| k.clone()).collect::<Vec<_>>() {
                        copy_key(&old, &mut obj, &key);
                    }
                    let obj_keys: Vec<String> = spec_part(&obj).into_iter().map(|(k, _)| k.clone()).collect();
                    for key in obj_keys {
                        if old.get(&key).is_none() {
                            obj.as_object_mut().map(|m| m.remove(&key));
                        }
                    }
                    if rt.is("", "pods") {
                        let owners = meta::meta(&old).and_then(|m| m.get("ownerReferences")).cloned();
                        let m = meta_mut(&mut obj);
                        match owners {
                            Some(o) => m.insert("ownerReferences".into(), o),
                            None => m.remove("ownerReferences"),
                        };
                    }
                }
            }
        }
        if meta::is_deleting(&old) {
            let before = meta::finalizers(&old);
            let added: Vec<String> =
                meta::finalizers(&obj).into_iter().filter(|f| !before.contains(f)).collect();
            if !added.is_empty() {
                let list: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
                let err = crate::field_error::FieldError::forbidden(
                    "metadata.finalizers",
                    &format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        list.join(", ")
                    ),
                );
                return Err(Retry::Fail(ApiError::invalid(&rt, &name, &[err])));
            }
        }
        if tracks_generation(&rt) && sub == Subresource::Main && !same_spec_part(&old, &obj) {
            let generation =
                meta::meta(&old).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
            meta_mut(&mut obj).insert("generation".into(), json!(generation + 1));
        }
        let api_version = rt.api_version();
        let admitted = match sub {
            Subresource::Main => admission::admit_update(&api_version, &rt.kind, &old, &mut obj),
            Subresource::Status => admission::admit_status_update(&api_version, &rt.kind, &old, &mut obj),
        };
        admitted.map_err(|errs| Retry::Fail(ApiError::invalid(&rt, &name, &errs)))?;
        if rt.is("", "namespaces") {
            super::namespace::canonicalize(&mut obj);
        }
        // Whether managedFields tracking found a changed field: the objects differ then.
        let changed = match opts.manager.as_deref() {
            Some(manager) => {
                let kind = SchemaKind::for_kind(&api_version, &rt.kind);
                let subresource = if sub == Subresource::Status { "status" } else { "" };
                let now = meta::now_seconds();
                let who = patch::Identity { manager, api_version: &api_version, subresource, now: &now };
                let (kind, part) = (kind.as_ref(), part_of(&rt, sub));
                match managed_fields {
                    ManagedFieldsSent::InObject => {
                        patch::track_update(Some(&old), &mut obj, kind, part, &who)
                    }
                    // Leaves `old` without managedFields when it answers true.
                    ManagedFieldsSent::Live => {
                        patch::track_update_moving_live(&mut old, &mut obj, kind, part, &who)
                    }
                }
            }
            None => {
                if managed_fields == ManagedFieldsSent::Live {
                    patch::put_back_live_managed_fields(&old, &mut obj);
                }
                false
            }
        };
        // A write that changes nothing makes no new version (key order does not count).
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(current.rv.to_string()));
        if !changed && crate::json::equal(&obj, &old) {
            return Ok(current.clone());
        }
        // Deletion completes once the last finalizer is gone and no grace period is pending.
        // A namespace also waits for its spec.finalizers (its storage's ShouldDeleteDuringUpdate).
        let deletion_completes = meta::is_deleting(&obj)
            && meta::finalizers(&obj).is_empty()
            && meta::deletion_grace(&obj).unwrap_or(0) == 0
            && !(rt.is("", "namespaces")
                && obj.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty()));
        let prepared = self.prepare(target, obj).map_err(Retry::Fail)?;
        if opts.dry_run {
            return Ok(Arc::new(dry_run_object(target, prepared, current.rv)));
        }
        let stored = match self.store.update(target.rid, prepared, Expect::Version(current.rv)) {
            Ok(s) => s,
            Err(StoreError::Conflict { .. }) => return Err(Retry::Conflict),
            Err(StoreError::NotFound) => return Err(Retry::Fail(ApiError::not_found(&rt, &name))),
            Err(e) => return Err(Retry::Fail(ApiError::internal(e.to_string()))),
        };
        if Arc::ptr_eq(&stored, current) {
            return Ok(stored);
        }
        if deletion_completes {
            if let Ok(removed) =
                self.store.remove(target.rid, &stored.namespace, &stored.name, Expect::Version(stored.rv))
            {
                self.after_remove(target, &removed);
            }
            return Ok(stored);
        }
        self.after_write(target, Some(&old), &stored);
        Ok(stored)
    }

    /// DELETE.
    pub fn delete(
        &self,
        target: &Target,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let rt = target.rt.clone();
        let mut warnings = Vec::new();
        loop {
            let current = self.get(target, namespace, name)?;
            if let Some(uid) = &opts.precondition_uid
                && **uid != *current.uid
            {
                return Err(ApiError::conflict(
                    &rt,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        current.uid
                    ),
                ));
            }
            if let Some(rv) = &opts.precondition_rv
                && *rv != current.rv.to_string()
            {
                return Err(ApiError::conflict(
                    &rt,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        current.rv
                    ),
                ));
            }
            let mut obj = current.value();
            let propagation = match opts.propagation {
                Some(p) => p,
                None if rt.is("batch", "jobs") => {
                    warnings.push(
                        "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"
                            .to_string(),
                    );
                    Propagation::Orphan
                }
                None => Propagation::Background,
            };
            if rt.is("", "namespaces") {
                if meta::is_deleting(&obj) {
                    return Ok(Deleted { object: Some(current), removed: None, warnings });
                }
                let m = meta_mut(&mut obj);
                m.insert("deletionTimestamp".into(), json!(meta::now_seconds()));
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
                obj["status"] = json!({ "phase": "Terminating" });
                if opts.dry_run {
                    return Ok(Deleted { object: Some(current), removed: None, warnings });
                }
                let prepared = self.prepare(target, obj)?;
                match self.store.update(target.rid, prepared, Expect::Version(current.rv)) {
                    Ok(stored) => {
                        self.notify(GcWork::NamespaceTerminating { name: stored.name.clone() });
                        return Ok(Deleted { object: Some(stored), removed: None, warnings });
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(ApiError::internal(e.to_string())),
                }
            }
            let grace = self.grace_period(target, &obj, opts.grace_period_seconds);
            let mut finalizers = meta::finalizers(&obj);
            let deleting = meta::is_deleting(&obj);
            match propagation {
                Propagation::Foreground if !finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) => {
                    finalizers.retain(|f| f != ORPHAN_FINALIZER);
                    finalizers.push(FOREGROUND_FINALIZER.into());
                }
                Propagation::Orphan if !finalizers.iter().any(|f| f == ORPHAN_FINALIZER) => {
                    finalizers.retain(|f| f != FOREGROUND_FINALIZER);
                    finalizers.push(ORPHAN_FINALIZER.into());
                }
                _ => {}
            }
            // Foreground and orphan finalizers only matter if there are dependents to handle;
            // upstream adds them anyway and lets the collector drop them.
            if finalizers.is_empty() && grace == 0 {
                if opts.dry_run {
                    return Ok(Deleted { object: None, removed: Some(current), warnings });
                }
                match self.store.remove(target.rid, namespace, name, Expect::Version(current.rv)) {
                    Ok(removed) => {
                        self.after_remove(target, &removed);
                        return Ok(Deleted { object: None, removed: Some(removed), warnings });
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(StoreError::NotFound) => return Err(ApiError::not_found(&rt, name)),
                    Err(e) => return Err(ApiError::internal(e.to_string())),
                }
            }
            let existing_grace = meta::deletion_grace(&obj);
            {
                let now = jiff::Timestamp::now();
                let m = meta_mut(&mut obj);
                // A second DELETE may only shorten a pending grace period.
                let shorten = existing_grace.is_none_or(|g| grace < g);
                if !deleting || shorten {
                    let at = now + jiff::SignedDuration::from_secs(grace);
                    m.insert("deletionTimestamp".into(), json!(meta::timestamp_seconds(at)));
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                }
            }
            meta::set_finalizers(&mut obj, &finalizers);
            if opts.dry_run {
                return Ok(Deleted { object: Some(current), removed: None, warnings });
            }
            let prepared = self.prepare(target, obj.clone())?;
            match self.store.update(target.rid, prepared, Expect::Version(current.rv)) {
                Ok(stored) => {
                    if finalizers.iter().any(|f| f == FOREGROUND_FINALIZER || f == ORPHAN_FINALIZER) {
                        self.notify(GcWork::Finalizing { uid: stored.uid.clone() });
                    }
                    if finalizers.is_empty()
                        && meta::deletion_grace(&obj).unwrap_or(0) == 0
                        && let Ok(removed) =
                            self.store.remove(target.rid, namespace, name, Expect::Version(stored.rv))
                    {
                        self.after_remove(target, &removed);
                        return Ok(Deleted { object: None, removed: Some(removed), warnings });
                    }
                    return Ok(Deleted { object: Some(stored), removed: None, warnings });
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&rt, name)),
                Err(e) => return Err(ApiError::internal(e.to_string())),
            }
        }
    }

    /// The grace period a DELETE gets: only pods have one, and only while scheduled and running.
    fn grace_period(&self, target: &Target, obj: &Value, requested: Option<i64>) -> i64 {
        if !target.rt.is("", "pods") {
            return 0;
        }
        let scheduled = obj.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        let phase = obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        if !scheduled || phase == "Succeeded" || phase == "Failed" {
            return 0;
        }
        let default =
            obj.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(30);
        requested.unwrap_or(default).max(0)
    }

    fn after_write(&self, target: &Target, _old: Option<&Value>, stored: &Arc<StoredObject>) {
        if self.quota_ids.concerns(target.rid) {
            self.sync_quota_status(&stored.namespace);
        }
        if target.rid == self.crds {
            let crd = stored.value();
            self.sync_crd(&crd, true);
            if crate::cluster::crd_status::establish(&mut crd.clone(), "") {
                self.notify(GcWork::EstablishCrd { name: stored.name.clone() });
            }
        }
    }

    fn after_remove(&self, target: &Target, removed: &Arc<StoredObject>) {
        if self.quota_ids.concerns(target.rid) && target.rid != self.quota_ids.quotas {
            self.sync_quota_status(&removed.namespace);
        }
        if target.rid == self.crds {
            self.sync_crd(&removed.value(), false);
        }
        self.notify(GcWork::Removed { uid: removed.uid.clone(), owners: removed.owner_uids.to_vec() });
    }

    /// Serves (or stops serving) the resource a CustomResourceDefinition defines.
    fn sync_crd(&self, crd: &Value, present: bool) {
        let Some(spec) = crd.get("spec") else { return };
        let group = spec.get("group").and_then(Value::as_str).unwrap_or("").to_string();
        let names = spec.get("names").cloned().unwrap_or(Value::Null);
        let plural = names.get("plural").and_then(Value::as_str).unwrap_or("").to_string();
        if group.is_empty() || plural.is_empty() {
            return;
        }
        let mut registry = self.registry.write();
        if !present {
            *registry = registry.without(&group, &plural);
            return;
        }
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let kind = names.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        let singular = names
            .get("singular")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase());
        let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
        let versions = spec.get("versions").and_then(Value::as_array).cloned().unwrap_or_default();
        let types = versions
            .iter()
            .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
            .filter_map(|v| {
                let version = v.get("name")?.as_str()?.to_string();
                Some(crate::resources::ResourceType {
                    group: group.clone(),
                    version,
                    plural: plural.clone(),
                    singular: singular.clone(),
                    kind: kind.clone(),
                    namespaced,
                    short_names: strings(names.get("shortNames")),
                    categories: strings(names.get("categories")),
                    has_status: v.pointer("/subresources/status").is_some(),
                    builtin: false,
                    field_selectors: &[],
                })
            })
            .collect();
        *registry = registry.without(&group, &plural).with(types);
    }
}

enum Retry {
    Conflict,
    Fail(ApiError),
}

fn copy_key(from: &Value, to: &mut Value, key: &str) {
    let Some(to) = to.as_object_mut() else { return };
    match from.get(key) {
        Some(v) => to.insert(key.to_string(), v.clone()),
        None => to.remove(key),
    };
}

/// The Status a failed patch gets: the patch module knows upstream's code, reason and message.
fn patch_error(e: patch::PatchError) -> ApiError {
    let mut err = ApiError::bad_request(e.message());
    err.code = e.http_status();
    err.reason = e.reason();
    if let patch::PatchError::Conflicts(conflicts) = &e {
        // errors.NewApplyConflict: one cause per conflicting field.
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(manager, path)| {
                json!({"reason": "FieldManagerConflict", "message": format!("conflict with {manager}"), "field": path})
            })
            .collect();
        err.details = Some(Box::new(json!({ "causes": causes })));
    }
    err
}

/// What Go's encoder omits from an applied object (null members, empty maps and optional
/// lists), as the apiserver's typed round trip drops them.
fn drop_what_go_omits(obj: &mut Value) {
    let _ = crate::fields::prune_unknown(obj, crate::fields::Order::Sorted);
}

/// The Status for a JSON or merge patch whose result is not an object. The apiserver decodes the
/// patched document into the typed object (handlers/patch.go `applyPatchToCurrentObject`): `null`
/// decodes to an object without a name (`checkName`: 400), anything else fails the codec's
/// apiVersion/kind probe (`SimpleMetaFactory.Interpret`), reported as a 422 on the field `patch`.
fn patched_not_an_object(patched: &Value, name: &str) -> ApiError {
    if patched.is_null() {
        return ApiError::bad_request(format!(
            "the name of the object ({name} based on URL) was undeterminable: name must be provided"
        ));
    }
    let kind = match patched {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        _ => "array",
    };
    let detail = format!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal {kind} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
    );
    let text = serde_json::to_string(patched).unwrap_or_default();
    ApiError::invalid_unnamed(&[crate::field_error::FieldError::invalid("patch", &json!(text), &detail)])
}

/// Parses a YAML or JSON body.
pub fn parse_yaml_or_json(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    serde_yaml::from_slice::<Value>(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

fn dry_run_object(target: &Target, prepared: Prepared, rv: u64) -> StoredObject {
    materialize(target.rid, prepared, rv)
}
