//! Per-kind column definitions and cells, ported from kubernetes `pkg/printers/internalversion/
//! printers.go`. The apiserver prints with `Wide: true`, so every row carries the priority-1 cells.

mod apps;
mod batch;
mod corev1;
mod event;
mod pod;
mod policy;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Obj;
use super::duration::since;
use crate::resources::ResourceType;

/// A `TableColumnDefinition`.
pub(crate) struct Col {
    pub name: &'static str,
    /// The OpenAPI type: `string`, `integer`, `boolean`, `date`, ...
    pub kind: &'static str,
    pub format: &'static str,
    pub description: &'static str,
    /// 0 normally, 1 for `-o wide` columns.
    pub priority: i32,
}

const fn col(name: &'static str, kind: &'static str, description: &'static str) -> Col {
    Col { name, kind, format: "", description, priority: 0 }
}

const fn wide(name: &'static str, kind: &'static str, description: &'static str) -> Col {
    Col { name, kind, format: "", description, priority: 1 }
}

/// A printed row: cells in column order and the row `conditions` (printPod sets them).
pub(crate) struct Row {
    pub cells: Vec<Value>,
    pub conditions: Option<Value>,
}

impl Row {
    fn cells(cells: Vec<Value>) -> Self {
        Self { cells, conditions: None }
    }
}

// metav1.ObjectMeta SwaggerDoc.
pub(crate) const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(crate) const CREATED_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const CONTAINERS_DOC: &str = "Names of each container in the template.";
const IMAGES_DOC: &str = "Images referenced by each container in the template.";
const CRD_AGE_DOC: &str =
    "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp";

const NAME: Col = Col { name: "Name", kind: "string", format: "name", description: NAME_DOC, priority: 0 };
const AGE: Col = col("Age", "string", CREATED_DOC);
const CONTAINERS: Col = wide("Containers", "string", CONTAINERS_DOC);
const IMAGES: Col = wide("Images", "string", IMAGES_DOC);

/// Built-in kinds the sim serves without a dedicated printer here get Name and Age.
const DEFAULT_COLUMNS: &[Col] = &[NAME, AGE];
/// Custom resources: the apiextensions table convertor with the default `Age` printer column.
const CUSTOM_RESOURCE_COLUMNS: &[Col] = &[NAME, col("Age", "date", CRD_AGE_DOC)];

#[derive(Clone, Copy)]
enum Printer {
    Pod,
    Job,
    CronJob,
    Node,
    Namespace,
    CoreEvent,
    EventsV1Event,
    Lease,
    ConfigMap,
    ResourceQuota,
    Secret,
    ServiceAccount,
    Deployment,
    StatefulSet,
    ReplicaSet,
    DaemonSet,
    PodDisruptionBudget,
    Default,
    CustomResource,
}

fn printer(rt: &ResourceType) -> Printer {
    if !rt.builtin {
        return Printer::CustomResource;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => Printer::Pod,
        ("", "nodes") => Printer::Node,
        ("", "namespaces") => Printer::Namespace,
        ("", "events") => Printer::CoreEvent,
        ("", "configmaps") => Printer::ConfigMap,
        ("", "resourcequotas") => Printer::ResourceQuota,
        ("", "secrets") => Printer::Secret,
        ("", "serviceaccounts") => Printer::ServiceAccount,
        ("batch", "jobs") => Printer::Job,
        ("batch", "cronjobs") => Printer::CronJob,
        ("events.k8s.io", "events") => Printer::EventsV1Event,
        ("coordination.k8s.io", "leases") => Printer::Lease,
        ("apps", "deployments") => Printer::Deployment,
        ("apps", "statefulsets") => Printer::StatefulSet,
        ("apps", "replicasets") => Printer::ReplicaSet,
        ("apps", "daemonsets") => Printer::DaemonSet,
        ("policy", "poddisruptionbudgets") => Printer::PodDisruptionBudget,
        _ => Printer::Default,
    }
}

pub(crate) fn columns(rt: &ResourceType) -> &'static [Col] {
    match printer(rt) {
        Printer::Pod => pod::COLUMNS,
        Printer::Job => batch::JOB_COLUMNS,
        Printer::CronJob => batch::CRONJOB_COLUMNS,
        Printer::Node => corev1::NODE_COLUMNS,
        Printer::Namespace => corev1::NAMESPACE_COLUMNS,
        Printer::CoreEvent | Printer::EventsV1Event => event::COLUMNS,
        Printer::Lease => corev1::LEASE_COLUMNS,
        Printer::ConfigMap => corev1::CONFIGMAP_COLUMNS,
        Printer::ResourceQuota => corev1::RESOURCEQUOTA_COLUMNS,
        Printer::Secret => corev1::SECRET_COLUMNS,
        Printer::ServiceAccount => corev1::SERVICEACCOUNT_COLUMNS,
        Printer::Deployment => apps::DEPLOYMENT_COLUMNS,
        Printer::StatefulSet => apps::STATEFULSET_COLUMNS,
        Printer::ReplicaSet => apps::REPLICASET_COLUMNS,
        Printer::DaemonSet => apps::DAEMONSET_COLUMNS,
        Printer::PodDisruptionBudget => policy::PDB_COLUMNS,
        Printer::Default => DEFAULT_COLUMNS,
        Printer::CustomResource => CUSTOM_RESOURCE_COLUMNS,
    }
}

pub(crate) fn row(rt: &ResourceType, obj: &Value, now: Timestamp) -> Row {
    let o = Obj(obj);
    match printer(rt) {
        Printer::Pod => pod::row(o, now),
        Printer::Job => batch::job(o, now),
        Printer::CronJob => batch::cronjob(o, now),
        Printer::Node => corev1::node(o, now),
        Printer::Namespace => corev1::namespace(o, now),
        Printer::CoreEvent | Printer::EventsV1Event => event::row(&event::Event::of(o, rt), now),
        Printer::Lease => corev1::lease(o, now),
        Printer::ConfigMap => corev1::configmap(o, now),
        Printer::ResourceQuota => corev1::resourcequota(o, now),
        Printer::Secret => corev1::secret(o, now),
        Printer::ServiceAccount => corev1::serviceaccount(o, now),
        Printer::Deployment => apps::deployment(o, now),
        Printer::StatefulSet => apps::statefulset(o, now),
        Printer::ReplicaSet => apps::replicaset(o, now),
        Printer::DaemonSet => apps::daemonset(o, now),
        Printer::PodDisruptionBudget => policy::pdb(o, now),
        Printer::Default => Row::cells(vec![json!(o.name()), json!(age(o, now))]),
        Printer::CustomResource => Row::cells(vec![json!(o.name()), custom_resource_age(o, now)]),
    }
}

/// `translateTimestampSince(obj.CreationTimestamp)`.
fn age(o: Obj, now: Timestamp) -> String {
    since(o.time(&["metadata", "creationTimestamp"]), now)
}

/// apiextensions `cellForJSONValue` for a `date` column: null when absent, `<invalid>` when
/// unparsable, else `ConvertToHumanReadableDateType`.
fn custom_resource_age(o: Obj, now: Timestamp) -> Value {
    match o.at(&["metadata", "creationTimestamp"]).and_then(Value::as_str) {
        None => Value::Null,
        Some(s) => match s.parse::<Timestamp>() {
            Ok(ts) => json!(since(Some(ts), now)),
            Err(_) => json!("<invalid>"),
        },
    }
}

/// `layoutContainerCells`: container names and images, comma-separated.
fn containers(pod_spec: Obj) -> (String, String) {
    let list = pod_spec.list(&["containers"]);
    let names: Vec<&str> = list.iter().map(|c| Obj(c).str(&["name"])).collect();
    let images: Vec<&str> = list.iter().map(|c| Obj(c).str(&["image"])).collect();
    (names.join(","), images.join(","))
}

/// `labels.FormatLabels`: `k=v` sorted by key, `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let Some(map) = map.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "<none>".into();
    };
    let mut pairs: Vec<(&str, String)> = map
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
        .collect();
    pairs.sort();
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// `metav1.LabelSelectorAsSelector(sel).String()`: a nil selector selects nothing and an empty
/// one everything, both printing as `""`. `Err` for an invalid selector.
fn selector_string(sel: Option<&Value>) -> Result<String, ()> {
    let Some(sel) = sel else { return Ok(String::new()) };
    let sel = Obj(sel);
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = sel.at(&["matchLabels"]) {
        for (k, v) in labels.as_object().ok_or(())? {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().ok_or(())?)));
        }
    }
    for expr in sel.list(&["matchExpressions"]) {
        let e = Obj(expr);
        let key = e.str(&["key"]);
        let mut values: Vec<&str> =
            e.list(&["values"]).iter().map(|v| v.as_str().ok_or(())).collect::<Result<_, _>>()?;
        let printed = match e.str(&["operator"]) {
            op @ ("In" | "NotIn") => {
                if values.is_empty() {
                    return Err(());
                }
                values.sort_unstable();
                format!("{key} {} ({})", if op == "In" { "in" } else { "notin" }, values.join(","))
            }
            "Exists" if values.is_empty() => key.to_string(),
            "DoesNotExist" if values.is_empty() => format!("!{key}"),
            _ => return Err(()),
        };
        reqs.push((key.to_string(), printed));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs.into_iter().map(|(_, s)| s).collect::<Vec<_>>().join(","))
}

/// `metav1.FormatLabelSelector`: `<none>` when it prints empty, `<error>` when invalid.
fn format_label_selector(sel: Option<&Value>) -> String {
    match selector_string(sel) {
        Ok(s) if s.is_empty() => "<none>".into(),
        Ok(s) => s,
        Err(()) => "<error>".into(),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use jiff::{SignedDuration, Timestamp};
    use serde_json::Value;

    use crate::resources::{Registry, ResourceType};

    pub fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    /// `now` shifted by `secs` (negative: in the past), RFC 3339.
    pub fn at(secs: i64) -> String {
        (now() + SignedDuration::from_secs(secs)).to_string()
    }

    /// 1.9s in the future, as upstream's `time.Now().Add(1.9e9)`: prints as `0s`.
    pub fn soon() -> String {
        (now() + SignedDuration::from_millis(1900)).to_string()
    }

    pub fn rt(group: &str, plural: &str) -> ResourceType {
        let reg = Registry::default();
        let found = reg.all().iter().find(|t| t.group == group && t.plural == plural).map(|t| (**t).clone());
        found.unwrap_or_else(|| panic!("{group}/{plural} not in the registry"))
    }

    pub fn cells(group: &str, plural: &str, obj: &Value) -> Vec<Value> {
        super::row(&rt(group, plural), obj, now()).cells
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    #[test]
    fn formats_label_selectors_like_metav1() {
        let cases: &[(Value, &str)] = &[
            (Value::Null, "<none>"),
            (json!({}), "<none>"),
            (json!({"matchLabels": {"job-label": "job-label-value"}}), "job-label=job-label-value"),
            (json!({"matchLabels": {"b": "2", "a": "1"}}), "a=1,b=2"),
            (
                json!({"matchLabels": {"z": "1"}, "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                    {"key": "tier", "operator": "NotIn", "values": ["x"]},
                    {"key": "a", "operator": "Exists"},
                    {"key": "gone", "operator": "DoesNotExist"}]}),
                "a,env in (dev,prod),!gone,tier notin (x),z=1",
            ),
            (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}), "<error>"),
            (json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}), "<error>"),
            (json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}), "<error>"),
            (json!({"matchLabels": {"a": 1}}), "<error>"),
        ];
        for (sel, want) in cases {
            let sel = if sel.is_null() { None } else { Some(sel) };
            assert_eq!(format_label_selector(sel), *want, "{sel:?}");
        }
    }

    #[test]
    fn default_and_custom_resource_tables() {
        // Kinds without a ported printer: Name and Age.
        let svc = serde_json::json!({"metadata": {"name": "web", "creationTimestamp": at(-3600)}});
        assert_eq!(cells("", "services", &svc), vec![json!("web"), json!("60m")]);
        assert_eq!(columns(&rt("", "services")).len(), 2);

        // Custom resources: the apiextensions convertor's default Age column is a `date`.
        let mut crd_type = rt("", "services");
        crd_type.builtin = false;
        crd_type.group = "example.com".into();
        let cols = columns(&crd_type);
        assert_eq!((cols[1].name, cols[1].kind), ("Age", "date"));
        let cases: &[(Value, Value)] = &[
            (json!({"metadata": {"name": "a", "creationTimestamp": at(-10)}}), json!(["a", "10s"])),
            (json!({"metadata": {"name": "b", "creationTimestamp": "junk"}}), json!(["b", "<invalid>"])),
            (json!({"metadata": {"name": "c"}}), json!(["c", null])),
        ];
        for (obj, want) in cases {
            assert_eq!(Value::Array(row(&crd_type, obj, now()).cells), *want);
        }
    }
}
