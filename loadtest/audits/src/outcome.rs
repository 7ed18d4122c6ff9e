//! One audit's or goal's result, as a report lists it.

use serde::Serialize;

/// `{name, target, measured, passed}`, with what violated it kept for the report's details.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Outcome {
    pub name: String,
    pub target: String,
    pub measured: String,
    pub passed: bool,
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
        Self { name: name.into(), target: target.into(), measured, passed, violations }
    }
}
