//! The garbage collector and namespace controller: dependents of deleted owners (background,
//! foreground with blockOwnerDeletion, orphan) and the cascade of a terminating namespace, with
//! the deleter's status conditions.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::apiserver::meta::{self, meta_mut};
use crate::apiserver::{
    ApiError, ApiServer, DeleteOptions, FOREGROUND_FINALIZER, GcWork, ORPHAN_FINALIZER, Propagation,
    Subresource,
};
use crate::cluster::namespace_conditions::{self, Remaining};
use crate::store::{Expect, StoredObject};

/// Runs until the work channel closes.
pub async fn run(api: Arc<ApiServer>, mut work: mpsc::UnboundedReceiver<GcWork>) {
    while let Some(item) = work.recv().await {
        match item {
            GcWork::Removed { uid, owners } => {
                for dependent in api.store().dependents(&uid) {
                    log(collect_dependent(&api, &dependent));
                }
                for owner in owners {
                    if let Some(o) = api.store().get_by_uid(&owner) {
                        log(finish_foreground(&api, &o));
                    }
                }
            }
            GcWork::Finalizing { uid } => {
                if let Some(owner) = api.store().get_by_uid(&uid) {
                    log(process_finalizing_owner(&api, &owner));
                }
            }
            GcWork::NamespaceTerminating { name } => {
                tokio::spawn(terminate_namespace(api.clone(), name.to_string()));
            }
            GcWork::EstablishCrd { name } => {
                let crds = api.builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions");
                let now = meta::timestamp_seconds(jiff::Timestamp::now());
                let written = api.update_with(&crds, "", &name, Subresource::Status, |crd| {
                    Ok(crate::cluster::crd_status::establish(crd, &now))
                });
                log(written.map(|_| ()));
            }
        }
    }
}

fn log(result: Result<(), ApiError>) {
    if let Err(e) = result
        && e.code != 404
        && e.code != 409
    {
        tracing::warn!(error = %e, "garbage collection step failed");
    }
}

/// A dependent whose owner is gone: deleted when no owner remains, else the dead reference is
/// dropped.
fn collect_dependent(api: &ApiServer, dependent: &StoredObject) -> Result<(), ApiError> {
    let Some(target) = api.target_for(dependent.resource) else { return Ok(()) };
    let live: Vec<&str> =
        dependent.owner_uids.iter().filter(|u| api.store().get_by_uid(u).is_some()).map(|u| &**u).collect();
    if live.is_empty() {
        let opts = DeleteOptions {
            propagation: Some(Propagation::Background),
            precondition_uid: Some(dependent.uid.to_string()),
            ..Default::default()
        };
        api.delete(&target, &dependent.namespace, &dependent.name, &opts)?;
        return Ok(());
    }
    api.update_with(&target, &dependent.namespace, &dependent.name, Subresource::Main, |obj| {
        Ok(retain_owner_refs(obj, |uid| live.contains(&uid)))
    })?;
    Ok(())
}

/// Keeps only the owner references whose uid passes `keep`; says whether anything changed.
fn retain_owner_refs(obj: &mut Value, keep: impl Fn(&str) -> bool) -> bool {
    let refs = meta::owner_references(obj);
    let kept: Vec<Value> =
        refs.iter().filter(|r| keep(r.get("uid").and_then(Value::as_str).unwrap_or(""))).cloned().collect();
    if kept.len() == refs.len() {
        return false;
    }
    let m = meta_mut(obj);
    if kept.is_empty() {
        m.remove("ownerReferences");
    } else {
        m.insert("ownerReferences".into(), Value::Array(kept));
    }
    true
}

fn process_finalizing_owner(api: &ApiServer, owner: &StoredObject) -> Result<(), ApiError> {
    let finalizers = meta::finalizers(&owner.value());
    let dependents = api.store().dependents(&owner.uid);
    if finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
        for d in &dependents {
            if let Some(target) = api.target_for(d.resource) {
                let owner_uid = owner.uid.to_string();
                match api.update_with(&target, &d.namespace, &d.name, Subresource::Main, |obj| {
                    Ok(retain_owner_refs(obj, |uid| uid != owner_uid))
                }) {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        return remove_finalizer(api, owner, ORPHAN_FINALIZER);
    }
    if finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
        for d in &dependents {
            if meta::is_deleting(&d.value()) {
                continue;
            }
            if let Some(target) = api.target_for(d.resource) {
                let opts = DeleteOptions {
                    propagation: Some(Propagation::Foreground),
                    precondition_uid: Some(d.uid.to_string()),
                    ..Default::default()
                };
                match api.delete(&target, &d.namespace, &d.name, &opts) {
                    Ok(_) => {}
                    Err(e) if e.code == 404 || e.code == 409 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        return finish_foreground(api, owner);
    }
    Ok(())
}

/// Drops the foregroundDeletion finalizer once no dependent with blockOwnerDeletion remains.
fn finish_foreground(api: &ApiServer, owner: &StoredObject) -> Result<(), ApiError> {
    let value = owner.value();
    if !meta::is_deleting(&value) || !meta::finalizers(&value).iter().any(|f| f == FOREGROUND_FINALIZER) {
        return Ok(());
    }
    let blocking = api.store().dependents(&owner.uid).iter().any(|d| {
        meta::owner_references(&d.value()).iter().any(|r| {
            r.get("uid").and_then(Value::as_str) == Some(&*owner.uid)
                && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
        })
    });
    if blocking {
        return Ok(());
    }
    remove_finalizer(api, owner, FOREGROUND_FINALIZER)
}

fn remove_finalizer(api: &ApiServer, owner: &StoredObject, finalizer: &str) -> Result<(), ApiError> {
    let Some(target) = api.target_for(owner.resource) else { return Ok(()) };
    api.update_with(&target, &owner.namespace, &owner.name, Subresource::Main, |obj| {
        let mut f = meta::finalizers(obj);
        let before = f.len();
        f.retain(|x| x != finalizer);
        meta::set_finalizers(obj, &f);
        Ok(f.len() != before)
    })?;
    Ok(())
}

/// Deletes everything in the namespace, reporting what remains in the namespace's conditions
/// after each pass, waits until it is empty, then removes the namespace.
async fn terminate_namespace(api: Arc<ApiServer>, name: String) {
    let cluster_scoped = api.cluster_scoped();
    loop {
        let remaining = api.store().objects_in_namespace(&name, &cluster_scoped);
        if remaining.is_empty() {
            break;
        }
        let mut delete_errors = Vec::new();
        for o in remaining {
            if meta::is_deleting(&o.value()) {
                continue;
            }
            if let Some(target) = api.target_for(o.resource) {
                let opts = DeleteOptions { propagation: Some(Propagation::Background), ..Default::default() };
                match api.delete(&target, &o.namespace, &o.name, &opts) {
                    Ok(_) => {}
                    Err(e) if e.code == 404 || e.code == 409 => {}
                    Err(e) => delete_errors.push(e.message),
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if api.store().get(api.namespaces, "", &name).is_none() {
            return;
        }
        report_remaining(&api, &name, &cluster_scoped, delete_errors);
    }
    report_remaining(&api, &name, &cluster_scoped, Vec::new());
    let target = api.builtin("", "v1", "namespaces");
    if let Some(ns) = api.store().get(api.namespaces, "", &name) {
        let mut obj = ns.value();
        obj["spec"]["finalizers"] = Value::Array(vec![]);
        let _ = api.update_with(&target, "", &name, Subresource::Main, |o| {
            let had = o.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
            if had {
                o["spec"]["finalizers"] = Value::Array(vec![]);
            }
            Ok(had)
        });
        if meta::finalizers(&obj).is_empty() {
            let _ = api.store().remove(api.namespaces, "", &name, Expect::Any);
        }
    }
}

/// Writes the deleter's conditions for what is left in a terminating namespace.
fn report_remaining(
    api: &ApiServer,
    name: &str,
    cluster_scoped: &std::collections::HashSet<crate::store::ResourceId>,
    delete_errors: Vec<String>,
) {
    let mut remaining = Remaining { delete_errors, ..Default::default() };
    let mut resources = std::collections::HashMap::new();
    for o in api.store().objects_in_namespace(name, cluster_scoped) {
        let resource = resources.entry(o.resource).or_insert_with(|| api.target_for(o.resource));
        if let Some(t) = resource {
            remaining.add(&t.rt.plural, &t.rt.group, &meta::finalizers(&o.value()));
        }
    }
    let now = meta::now_seconds();
    let target = api.builtin("", "v1", "namespaces");
    log(api
        .update_with(&target, "", name, Subresource::Status, |ns| {
            Ok(namespace_conditions::update(&mut ns["status"], &remaining, &now))
        })
        .map(|_| ()));
}
