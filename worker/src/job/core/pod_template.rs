//! The pod a Job creates (`GetPodFromTemplate` + manageJob's template edits) and the finalizer patch.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::indexed::pod_generate_name_with_index;
use super::{
    JOB_COMPLETION_INDEX_ANNOTATION, JOB_INDEX_FAILURE_COUNT_ANNOTATION,
    JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION, JOB_TRACKING_FINALIZER,
};

const COMPLETION_INDEX_ENV_NAME: &str = "JOB_COMPLETION_INDEX";

/// `{"metadata":{"$deleteFromPrimitiveList/finalizers":["batch.kubernetes.io/job-tracking"]}}`, a
/// strategic-merge patch (`removeTrackingFinalizerPatch`).
pub fn remove_tracking_finalizer_patch() -> serde_json::Value {
    serde_json::json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}})
}

/// `metav1.NewControllerRef(job, batch/v1 Job)`.
fn controller_ref(job: &Job) -> OwnerReference {
    OwnerReference {
        api_version: "batch/v1".to_string(),
        kind: "Job".to_string(),
        name: job.metadata.name.clone().unwrap_or_default(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// `getPodsPrefix`: `<name>-` if that is a valid generateName prefix, else the name.
fn pods_prefix(name: &str) -> String {
    let prefix = format!("{name}-");
    if is_dns1123_subdomain(&format!("{prefix}a")) { prefix } else { name.to_string() }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    s.len() <= 253 && s.split('.').all(label_ok)
}

/// `addCompletionIndexEnvVariable`: `JOB_COMPLETION_INDEX` from the index label, unless already set.
fn add_completion_index_env(container: &mut Container) {
    let env = container.env.get_or_insert_with(Vec::new);
    if env.iter().any(|e| e.name == COMPLETION_INDEX_ENV_NAME) {
        return;
    }
    env.push(EnvVar {
        name: COMPLETION_INDEX_ENV_NAME.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.labels['{JOB_COMPLETION_INDEX_ANNOTATION}']"),
            }),
            ..Default::default()
        }),
    });
}

/// The pod manageJob creates: template labels, annotations and finalizers (plus the tracking
/// finalizer), `generateName` `<job>-` (Indexed: `<job>-<i>-`), the controller ownerReference with
/// `blockOwnerDeletion`, and the template spec. For an Indexed Job: the completion-index annotation and
/// label, `JOB_COMPLETION_INDEX` on every container lacking it, hostname `<job>-<i>`, and with
/// `backoffLimitPerIndex` the failure-count annotations `(counted, ignored)`.
pub fn pod_from_template(
    job: &Job,
    completion_index: Option<i64>,
    failure_counts: Option<(i32, i32)>,
) -> Pod {
    let name = job.metadata.name.as_deref().unwrap_or("");
    let mut template: PodTemplateSpec = job.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let meta = template.metadata.take().unwrap_or_default();
    let mut spec = template.spec.take().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let mut finalizers = meta.finalizers.unwrap_or_default();
    if !finalizers.iter().any(|f| f == JOB_TRACKING_FINALIZER) {
        finalizers.push(JOB_TRACKING_FINALIZER.to_string());
    }
    let mut generate_name = pods_prefix(name);
    if let Some(ix) = completion_index {
        spec.init_containers.iter_mut().flatten().for_each(add_completion_index_env);
        spec.containers.iter_mut().for_each(add_completion_index_env);
        annotations.insert(JOB_COMPLETION_INDEX_ANNOTATION.to_string(), ix.to_string());
        labels.insert(JOB_COMPLETION_INDEX_ANNOTATION.to_string(), ix.to_string());
        spec.hostname = Some(format!("{name}-{ix}"));
        generate_name = pod_generate_name_with_index(name, ix);
        if let Some((counted, ignored)) = failure_counts {
            annotations.insert(JOB_INDEX_FAILURE_COUNT_ANNOTATION.to_string(), counted.to_string());
            if ignored > 0 {
                annotations
                    .insert(JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.to_string(), ignored.to_string());
            }
        }
    }
    let non_empty = |m: BTreeMap<String, String>| (!m.is_empty()).then_some(m);
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: job.metadata.namespace.clone(),
            labels: non_empty(labels),
            annotations: non_empty(annotations),
            finalizers: Some(finalizers),
            owner_references: Some(vec![controller_ref(job)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;
    use crate::job::core::testutil::mk_job;

    /// TestControllerSyncJob's checks on created pods (controllerRef fields; checkIndexedJobPods:
    /// hostname, generateName, label, env) and UPSTREAM.md §1 Job 3 and 9.
    #[test]
    fn indexed_pod_carries_index_everywhere() {
        let mut job = mk_job("foobar", 2, 5, 6).indexed().build();
        let spec = job.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
        spec.init_containers = Some(vec![Container { name: "init".into(), ..Default::default() }]);
        spec.containers.push(Container {
            name: "preset".into(),
            env: Some(vec![EnvVar {
                name: "JOB_COMPLETION_INDEX".into(),
                value: Some("x".into()),
                value_from: None,
            }]),
            ..Default::default()
        });
        let pod = pod_from_template(&job, Some(3), None);
        let meta = &pod.metadata;
        assert_eq!(meta.generate_name.as_deref(), Some("foobar-3-"));
        assert_eq!(meta.namespace.as_deref(), Some("default"));
        assert_eq!(meta.annotations.as_ref().unwrap()[JOB_COMPLETION_INDEX_ANNOTATION], "3");
        assert_eq!(meta.labels.as_ref().unwrap()[JOB_COMPLETION_INDEX_ANNOTATION], "3");
        assert_eq!(meta.labels.as_ref().unwrap()["foo"], "bar");
        assert_eq!(meta.finalizers.as_deref(), Some(&[JOB_TRACKING_FINALIZER.to_string()][..]));
        let owner = &meta.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str()),
            ("batch/v1", "Job", "foobar")
        );
        assert_eq!(owner.uid, job.metadata.uid.clone().unwrap());
        assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("foobar-3"));
        let want_env = EnvVar {
            name: "JOB_COMPLETION_INDEX".into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: None,
                    field_path: "metadata.labels['batch.kubernetes.io/job-completion-index']".into(),
                }),
                ..Default::default()
            }),
        };
        assert_eq!(spec.init_containers.as_ref().unwrap()[0].env.as_deref(), Some(&[want_env.clone()][..]));
        assert_eq!(spec.containers[0].env.as_deref(), Some(&[want_env][..]));
        assert_eq!(
            spec.containers[1].env.as_ref().unwrap().len(),
            1,
            "an existing JOB_COMPLETION_INDEX is kept"
        );
        assert!(pod.status.is_none());
    }

    /// TestControllerSyncJob NonIndexed rows: "Fake pod control doesn't add generate name", no hostname.
    #[test]
    fn non_indexed_pod_has_job_prefix_and_no_hostname() {
        let job = mk_job("foobar", 2, 5, 6).build();
        let pod = pod_from_template(&job, None, None);
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("foobar-"));
        assert!(pod.spec.as_ref().unwrap().hostname.is_none());
        assert!(pod.metadata.annotations.is_none());
    }

    /// UPSTREAM.md §1 Job 10: failure counts ride on the replacement pod.
    #[test]
    fn failure_count_annotations() {
        let job = mk_job("j", 1, 2, 6).indexed().backoff_limit_per_index(2).build();
        let a = pod_from_template(&job, Some(0), Some((0, 0))).metadata.annotations.unwrap();
        assert_eq!(a[JOB_INDEX_FAILURE_COUNT_ANNOTATION], "0");
        assert!(!a.contains_key(JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION));
        let a = pod_from_template(&job, Some(1), Some((3, 1))).metadata.annotations.unwrap();
        assert_eq!(a[JOB_INDEX_FAILURE_COUNT_ANNOTATION], "3");
        assert_eq!(a[JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION], "1");
    }

    #[test]
    fn patch_is_upstreams() {
        assert_eq!(
            remove_tracking_finalizer_patch().to_string(),
            r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["batch.kubernetes.io/job-tracking"]}}"#
        );
        assert_eq!(pods_prefix("a.b"), "a.b-");
        assert_eq!(pods_prefix(&"x".repeat(260)), "x".repeat(260));
        let _ = pod_from_template(&Job::default(), Some(0), Some((1, 1)));
    }
}
