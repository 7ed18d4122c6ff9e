//! The controllers that furnish every namespace: the serviceaccount controller's `default`
//! ServiceAccount and the root-ca-cert-publisher's `kube-root-ca.crt` ConfigMap, created when a
//! namespace appears and again when deleted, as kube-controller-manager does.

use std::sync::Arc;

use serde_json::json;

use crate::apiserver::{ApiError, ApiServer, Target, WriteOptions, meta};
use crate::store::{Change, ChangeKind, Interest, RecvError};

pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The sim serves plain HTTP and has no CA: the bundle is a stand-in that says so.
const ROOT_CA_PLACEHOLDER: &str = "-----BEGIN CERTIFICATE-----\n\
YmF0Y2hmbGVldC1zaW0gc2VydmVzIHBsYWluIEhUVFA7IHRoaXMgaXMgbm90IGEgQ0E=\n\
-----END CERTIFICATE-----\n";

struct Targets {
    namespaces: Target,
    service_accounts: Target,
    config_maps: Target,
}

impl Targets {
    fn of(api: &ApiServer) -> Self {
        Self {
            namespaces: api.builtin("", "v1", "namespaces"),
            service_accounts: api.builtin("", "v1", "serviceaccounts"),
            config_maps: api.builtin("", "v1", "configmaps"),
        }
    }
}

/// Creates whatever of the defaults `namespace` lacks (nothing while it terminates).
pub fn ensure(api: &ApiServer, namespace: &str) {
    ensure_with(api, &Targets::of(api), namespace);
}

fn ensure_with(api: &ApiServer, t: &Targets, namespace: &str) {
    let Some(ns) = api.store().get(t.namespaces.rid, "", namespace) else { return };
    if meta::is_deleting(&ns.value()) {
        return;
    }
    if api.store().get(t.service_accounts.rid, namespace, DEFAULT_SERVICE_ACCOUNT).is_none() {
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT_SERVICE_ACCOUNT}});
        log(api.create(&t.service_accounts, namespace, sa, &WriteOptions::default()).map(|_| ()));
    }
    if api.store().get(t.config_maps.rid, namespace, ROOT_CA_CONFIG_MAP).is_none() {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA_CONFIG_MAP, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
            "data": {"ca.crt": ROOT_CA_PLACEHOLDER},
        });
        log(api.create(&t.config_maps, namespace, cm, &WriteOptions::default()).map(|_| ()));
    }
}

fn log(result: Result<(), ApiError>) {
    // 409: created meanwhile; 403: the namespace began terminating; 404: it is gone.
    if let Err(e) = result
        && !matches!(e.code, 403 | 404 | 409)
    {
        tracing::warn!(error = %e, "namespace defaults not created");
    }
}

/// Runs until the store's change stream closes.
pub async fn run(api: Arc<ApiServer>) {
    let t = Targets::of(&api);
    let (namespaces, _, mut rx) = api.store().snapshot_and_watch(
        t.namespaces.rid,
        None,
        Interest::resources(&[t.namespaces.rid, t.service_accounts.rid, t.config_maps.rid]),
    );
    for ns in namespaces {
        ensure_with(&api, &t, &ns.name);
    }
    loop {
        match rx.recv().await {
            Ok(change) => on_change(&api, &t, &change),
            Err(RecvError::Lagged) => {
                let (all, _) = api.store().list(t.namespaces.rid, None);
                for ns in all {
                    ensure_with(&api, &t, &ns.name);
                }
            }
            Err(RecvError::Closed) => return,
        }
    }
}

fn on_change(api: &ApiServer, t: &Targets, change: &Change) {
    let o = &change.object;
    if o.resource == t.namespaces.rid && change.kind != ChangeKind::Deleted {
        ensure_with(api, t, &o.name);
    } else if change.kind == ChangeKind::Deleted
        && ((o.resource == t.service_accounts.rid && &*o.name == DEFAULT_SERVICE_ACCOUNT)
            || (o.resource == t.config_maps.rid && &*o.name == ROOT_CA_CONFIG_MAP))
    {
        ensure_with(api, t, &o.namespace);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placeholder_bundle_is_pem_shaped_and_says_what_it_is() {
        use base64::Engine;
        let body: String = ROOT_CA_PLACEHOLDER.lines().filter(|l| !l.starts_with("-----")).collect();
        let text = base64::engine::general_purpose::STANDARD.decode(body).expect("base64");
        assert_eq!(String::from_utf8(text).unwrap(), "batchfleet-sim serves plain HTTP; this is not a CA");
    }
}
