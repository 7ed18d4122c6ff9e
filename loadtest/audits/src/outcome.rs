//! One audit's or goal's result, as a report lists it.

use serde::Serialize;

/// `{name, target, measured, passed}`, with what violated it kept for the report's details. An
/// audit that could not be made from what the run had (the audit log, the fleet's logs) is
/// `skipped`, with the reason: `passed` false, so that nothing reads it as passed, and
/// `skipped` set, so that the run does not fail on it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Outcome {
    pub name: String,
    pub target: String,
    pub measured: String,
    pub passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The violations, one line each (the first few are enough to look into a failure).
    #[serde(skip)]
    pub violations: Vec<String>,
}

/// How many violations an outcome keeps: enough to diagnose, bounded for huge runs.
const KEPT_VIOLATIONS: usize = 50;

impl Outcome {
    /// Passed when `violations` is empty; `measured` counts them and what was checked.
    pub fn from_violations(
        name: &str,
        target: &str,
        checked: usize,
        checked_what: &str,
        violations: Vec<String>,
    ) -> Self {
        let measured = format!("{} violations in {checked} {checked_what}", violations.len());
        let passed = violations.is_empty();
        let violations = violations.into_iter().take(KEPT_VIOLATIONS).collect();
        Self { name: name.into(), target: target.into(), measured, passed, skipped: None, violations }
    }

    /// An audit not made, and why.
    pub fn skipped(name: &str, target: &str, reason: &str) -> Self {
        Self {
            name: name.into(),
            target: target.into(),
            measured: format!("skipped: {reason}"),
            passed: false,
            skipped: Some(reason.into()),
            violations: Vec::new(),
        }
    }

    /// Whether the run may pass with this: passed, or skipped for a stated reason.
    pub fn not_failed(&self) -> bool {
        self.passed || self.skipped.is_some()
    }
}
