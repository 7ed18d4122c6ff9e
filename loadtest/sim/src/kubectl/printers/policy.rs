//! policy/v1 PodDisruptionBudget (`printPodDisruptionBudget`).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{AGE, Col, NAME, Obj, Row, age, col};

pub(super) const PDB_COLUMNS: &[Col] = &[
    NAME,
    col("Min Available", "string", "The minimum number of pods that must be available."),
    col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
    col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
    AGE,
];

/// `IntOrString.String()`, or `N/A` when unset.
fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "N/A".to_string(),
    }
}

pub(super) fn pdb(o: Obj, now: Timestamp) -> Row {
    Row::cells(vec![
        json!(o.name()),
        json!(int_or_string(o.at(&["spec", "minAvailable"]))),
        json!(int_or_string(o.at(&["spec", "maxUnavailable"]))),
        json!(o.int(&["status", "disruptionsAllowed"])),
        json!(age(o, now)),
    ])
}
