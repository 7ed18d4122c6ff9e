//! Request paths: discovery, OpenAPI, the admin endpoint, and resource paths
//! `/api/v1/[namespaces/{ns}/]{plural}[/{name}[/{subresource}]]` and the `/apis/{group}/{version}/…`
//! equivalent.

use percent_encoding::percent_decode_str;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    Health,
    Api,
    Apis,
    GroupVersion {
        group: String,
        version: String,
    },
    Group {
        group: String,
    },
    OpenApiV3Root,
    OpenApiV3 {
        group: String,
        version: String,
    },
    OpenApiV2,
    /// `kubectl auth can-i [--list]` and `kubectl auth whoami` (create-only, not stored).
    SelfSubjectAccessReview,
    SelfSubjectRulesReview,
    SelfSubjectReview,
    Admin(Vec<String>),
    Resource(ResourcePath),
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    /// Set for namespaced paths, including `/api/v1/namespaces/{ns}/pods`.
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse(path: &str) -> Route {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "readyz" | "livez", ..] => Route::Health,
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        ["api", "v1"] => Route::GroupVersion { group: String::new(), version: "v1".into() },
        ["apis", g] => Route::Group { group: g.to_string() },
        ["apis", g, v] => Route::GroupVersion { group: g.to_string(), version: v.to_string() },
        ["openapi", "v3"] => Route::OpenApiV3Root,
        ["openapi", "v3", "api", v] => Route::OpenApiV3 { group: String::new(), version: v.to_string() },
        ["openapi", "v3", "apis", g, v] => Route::OpenApiV3 { group: g.to_string(), version: v.to_string() },
        // kube-apiserver dropped `/swagger.json` (and the `/swagger-2.0.0.pb-v1` fallback client-go
        // no longer tries) in 1.14.
        ["openapi", "v2"] => Route::OpenApiV2,
        ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"] => Route::SelfSubjectAccessReview,
        ["apis", "authorization.k8s.io", "v1", "selfsubjectrulesreviews"] => Route::SelfSubjectRulesReview,
        ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"] => Route::SelfSubjectReview,
        ["_sim", rest @ ..] => Route::Admin(rest.iter().map(|x| x.to_string()).collect()),
        ["api", "v1", rest @ ..] => resource(String::new(), "v1".into(), rest),
        ["apis", g, v, rest @ ..] => resource(g.to_string(), v.to_string(), rest),
        _ => Route::NotFound,
    }
}

fn resource(group: String, version: String, rest: &[&str]) -> Route {
    let p = |namespace: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            group: group.clone(),
            version: version.clone(),
            namespace: namespace.map(str::to_string),
            plural: plural.to_string(),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
        })
    };
    match rest {
        // /api/v1/namespaces/{name}[/status|finalize] is the namespace object itself.
        ["namespaces", ns] if group.is_empty() => p(None, "namespaces", Some(ns), None),
        ["namespaces", ns, sub @ ("status" | "finalize")] if group.is_empty() => {
            p(None, "namespaces", Some(ns), Some(sub))
        }
        ["namespaces", ns, plural] => p(Some(ns), plural, None, None),
        ["namespaces", ns, plural, name] => p(Some(ns), plural, Some(name), None),
        ["namespaces", ns, plural, name, sub] => p(Some(ns), plural, Some(name), Some(sub)),
        [plural] => p(None, plural, None, None),
        [plural, name] => p(None, plural, Some(name), None),
        [plural, name, sub] => p(None, plural, Some(name), Some(sub)),
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(r: Route) -> ResourcePath {
        match r {
            Route::Resource(p) => p,
            other => panic!("not a resource path: {other:?}"),
        }
    }

    #[test]
    fn namespaced_and_cluster_paths() {
        let p = res(parse("/apis/batch/v1/namespaces/ns1/jobs/j/status"));
        assert_eq!(
            (p.group.as_str(), p.namespace.as_deref(), p.plural.as_str()),
            ("batch", Some("ns1"), "jobs")
        );
        assert_eq!((p.name.as_deref(), p.subresource.as_deref()), (Some("j"), Some("status")));
        let p = res(parse("/api/v1/pods"));
        assert_eq!((p.namespace, p.name), (None, None));
        let p = res(parse("/api/v1/namespaces/default"));
        assert_eq!(
            (p.plural.as_str(), p.name.as_deref(), p.namespace),
            ("namespaces", Some("default"), None)
        );
        let p = res(parse("/api/v1/namespaces/default/pods"));
        assert_eq!((p.plural.as_str(), p.namespace.as_deref()), ("pods", Some("default")));
        assert_eq!(parse("/apis/batch"), Route::Group { group: "batch".into() });
        assert_eq!(parse("/nope"), Route::NotFound);
    }
}
