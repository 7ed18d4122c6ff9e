//! `matchPodFailurePolicy` (pod_failure_policy.go): the first matching rule decides.

use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum PfpAction {
    FailJob,
    FailIndex,
    Ignore,
    Count,
}

impl PfpAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PfpAction::FailJob => "FailJob",
            PfpAction::FailIndex => "FailIndex",
            PfpAction::Ignore => "Ignore",
            PfpAction::Count => "Count",
        }
    }
}

/// The result of matching a pod against the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PfpMatch {
    /// Set when a `FailJob` rule matched: the Job failure message.
    pub fail_job_message: Option<String>,
    /// Whether the failure counts towards `backoffLimit` (false only for `Ignore`).
    pub count_failed: bool,
    pub action: Option<PfpAction>,
}

impl Default for PfpMatch {
    fn default() -> Self {
        Self { fail_job_message: None, count_failed: true, action: None }
    }
}

pub(super) fn match_pod_failure_policy(policy: Option<&PodFailurePolicy>, pod: &Pod) -> PfpMatch {
    let Some(policy) = policy else { return PfpMatch::default() };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let status = pod.status.as_ref();
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = if let Some(req) = &rule.on_exit_codes {
            let statuses = status.and_then(|s| s.container_statuses.as_deref()).unwrap_or(&[]);
            let inits = status.and_then(|s| s.init_container_statuses.as_deref()).unwrap_or(&[]);
            matching_container(statuses, req)
                .or_else(|| matching_container(inits, req))
                .map(|(container, code)| Matched::ExitCode(container, code))
        } else if let Some(patterns) = &rule.on_pod_conditions {
            let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
            matching_condition(conditions, patterns).map(Matched::Condition)
        } else {
            None
        };
        let Some(matched) = matched else { continue };
        // An unknown action makes upstream's switch fall through to the next rule.
        let (count_failed, action) = match rule.action.as_str() {
            "Ignore" => (false, PfpAction::Ignore),
            "FailIndex" => (true, PfpAction::FailIndex),
            "Count" => (true, PfpAction::Count),
            "FailJob" => (true, PfpAction::FailJob),
            _ => continue,
        };
        let fail_job_message = (action == PfpAction::FailJob).then(|| match matched {
            Matched::ExitCode(container, code) => format!(
                "Container {container} for pod {namespace}/{name} failed with exit code {code} \
                 matching FailJob rule at index {index}"
            ),
            Matched::Condition(cond_type) => {
                format!(
                    "Pod {namespace}/{name} has condition {cond_type} matching FailJob rule at index {index}"
                )
            }
        });
        return PfpMatch { fail_job_message, count_failed, action: Some(action) };
    }
    PfpMatch::default()
}

enum Matched<'a> {
    ExitCode(&'a str, i32),
    Condition(&'a str),
}

/// `getMatchingContainerFromList`: the first terminated container with a non-zero exit code matching.
fn matching_container<'a>(
    list: &'a [ContainerStatus],
    req: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<(&'a str, i32)> {
    list.iter().find_map(|cs| {
        let terminated = cs.state.as_ref()?.terminated.as_ref()?;
        if req.container_name.as_deref().is_some_and(|n| n != cs.name) || terminated.exit_code == 0 {
            return None;
        }
        exit_code_matches(terminated.exit_code, req).then_some((cs.name.as_str(), terminated.exit_code))
    })
}

fn exit_code_matches(code: i32, req: &PodFailurePolicyOnExitCodesRequirement) -> bool {
    match req.operator.as_str() {
        "In" => req.values.contains(&code),
        "NotIn" => !req.values.contains(&code),
        _ => false,
    }
}

/// `matchOnPodConditions`: pod conditions in order, each against every pattern (status defaults True).
fn matching_condition<'a>(
    conditions: &'a [PodCondition],
    patterns: &[k8s_openapi::api::batch::v1::PodFailurePolicyOnPodConditionsPattern],
) -> Option<&'a str> {
    conditions.iter().find_map(|c| {
        patterns
            .iter()
            .any(|p| p.type_ == c.type_ && p.status.as_deref().unwrap_or("True") == c.status)
            .then_some(c.type_.as_str())
    })
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;
    use crate::job::core::testutil::{mk_pod, pfp_exit_codes, pfp_pod_conditions};

    /// TestMatchPodFailurePolicy rows (pod default/mypod), plus UPSTREAM.md §2's policy
    /// [Ignore In(1,2,3), FailJob In(5,6,7)] with exit 5.
    #[test]
    fn match_pod_failure_policy_matches_upstream_table() {
        let failed = |exits: &[(&str, i32)]| {
            let mut b = mk_pod("mypod").phase("Failed");
            for (name, code) in exits {
                b = b.container_exit(name, *code);
            }
            b.build()
        };
        let cases: Vec<(&str, PodFailurePolicy, Pod, Option<&str>, bool, Option<PfpAction>)> = vec![
            (
                "unknown action for rule matching by exit codes - skip rule with unknown action",
                pfp_exit_codes(&[("UnknownAction", "In", &[1, 2]), ("FailJob", "In", &[2, 3])]),
                failed(&[("main-container", 2)]),
                Some(
                    "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 1",
                ),
                true,
                Some(PfpAction::FailJob),
            ),
            (
                "unknown operator - rule with unknown action is skipped for onExitCodes",
                pfp_exit_codes(&[("Ignore", "UnknownOperator", &[1, 2]), ("FailJob", "In", &[2, 3])]),
                failed(&[("main-container", 2)]),
                Some(
                    "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 1",
                ),
                true,
                Some(PfpAction::FailJob),
            ),
            (
                "ignore rule matched for exit codes",
                pfp_exit_codes(&[("Ignore", "In", &[1, 2, 3])]),
                failed(&[("", 2)]),
                None,
                false,
                Some(PfpAction::Ignore),
            ),
            (
                "FailJob rule matched for exit codes",
                pfp_exit_codes(&[("FailJob", "In", &[1, 2, 3])]),
                failed(&[("main-container", 2)]),
                Some(
                    "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 0",
                ),
                true,
                Some(PfpAction::FailJob),
            ),
            (
                "successful containers are skipped by the rules",
                pfp_exit_codes(&[("FailJob", "NotIn", &[111])]),
                mk_pod("mypod")
                    .phase("Failed")
                    .init_container_exit("init-container", 0)
                    .container_exit("main-container", 111)
                    .container_exit("suppport-container", 0)
                    .build(),
                None,
                true,
                None,
            ),
            (
                "FailIndex rule matched for exit codes; JobBackoffLimitPerIndex enabled",
                pfp_exit_codes(&[("FailIndex", "In", &[1, 2, 3])]),
                failed(&[("", 2)]),
                None,
                true,
                Some(PfpAction::FailIndex),
            ),
            (
                "pod failure policy with NotIn operator and value 0",
                pfp_exit_codes(&[("FailJob", "NotIn", &[0])]),
                failed(&[("main-container", 1), ("suppport-container", 0)]),
                Some(
                    "Container main-container for pod default/mypod failed with exit code 1 matching FailJob rule at index 0",
                ),
                true,
                Some(PfpAction::FailJob),
            ),
            (
                "second jobfail rule matched for exit codes",
                pfp_exit_codes(&[("Count", "In", &[1, 2, 3]), ("FailJob", "In", &[4, 5, 6])]),
                failed(&[("main-container", 6)]),
                Some(
                    "Container main-container for pod default/mypod failed with exit code 6 matching FailJob rule at index 1",
                ),
                true,
                Some(PfpAction::FailJob),
            ),
            (
                "count rule matched for exit codes",
                pfp_exit_codes(&[("Count", "In", &[1, 2, 3])]),
                mk_pod("mypod").phase("Failed").container_running("foo").container_exit("bar", 2).build(),
                None,
                true,
                Some(PfpAction::Count),
            ),
            (
                "ignore rule matched for pod conditions",
                pfp_pod_conditions(&[("Ignore", "DisruptionTarget", "True")]),
                mk_pod("mypod").phase("Failed").condition("DisruptionTarget", "True").build(),
                None,
                false,
                Some(PfpAction::Ignore),
            ),
            (
                "ignore rule matches by the status=False",
                pfp_pod_conditions(&[("Ignore", "DisruptionTarget", "False")]),
                mk_pod("mypod").phase("Failed").condition("DisruptionTarget", "False").build(),
                None,
                false,
                Some(PfpAction::Ignore),
            ),
            (
                "FailJob rule matched for pod conditions",
                pfp_pod_conditions(&[("FailJob", "DisruptionTarget", "True")]),
                mk_pod("mypod").phase("Failed").condition("DisruptionTarget", "True").build(),
                Some("Pod default/mypod has condition DisruptionTarget matching FailJob rule at index 0"),
                true,
                Some(PfpAction::FailJob),
            ),
            (
                "no match on exit codes for a running container",
                pfp_exit_codes(&[("FailJob", "In", &[5])]),
                mk_pod("mypod").phase("Failed").container_running("main").build(),
                None,
                true,
                None,
            ),
            (
                "UPSTREAM.md §2: [Ignore In(1,2,3), FailJob In(5,6,7)], exit 5",
                pfp_exit_codes(&[("Ignore", "In", &[1, 2, 3]), ("FailJob", "In", &[5, 6, 7])]),
                failed(&[("main-container", 5)]),
                Some(
                    "Container main-container for pod default/mypod failed with exit code 5 matching FailJob rule at index 1",
                ),
                true,
                Some(PfpAction::FailJob),
            ),
        ];
        for (name, policy, pod, msg, count, action) in cases {
            let got = match_pod_failure_policy(Some(&policy), &pod);
            assert_eq!(got.fail_job_message.as_deref(), msg, "{name}");
            assert_eq!(got.count_failed, count, "{name}");
            assert_eq!(got.action, action, "{name}");
        }
        let none = match_pod_failure_policy(None, &failed(&[("x", 2)]));
        assert_eq!(none, PfpMatch::default(), "no policy rules");
    }

    #[test]
    fn container_name_restriction_and_init_containers() {
        // TestSyncJobWithJobPodFailurePolicy "default handling for pod failure if the container matching
        // the exit codes does not match the containerName restriction".
        let mut policy = pfp_exit_codes(&[("Ignore", "In", &[1, 2, 3]), ("FailJob", "In", &[5, 6, 7])]);
        for r in &mut policy.rules {
            r.on_exit_codes.as_mut().unwrap().container_name = Some("main-container".into());
        }
        let pod = mk_pod("mypod-0")
            .phase("Failed")
            .container_exit("monitoring-container", 5)
            .container_exit("main-container", 42)
            .build();
        assert_eq!(match_pod_failure_policy(Some(&policy), &pod), PfpMatch::default());
        // "fail job based on OnExitCodes for InitContainer": containers are scanned before init containers,
        // and the main container's 143 matches nothing.
        let policy = pfp_exit_codes(&[("Ignore", "In", &[1, 2, 3]), ("FailJob", "In", &[5, 6, 7])]);
        let pod = mk_pod("mypod-0")
            .phase("Failed")
            .init_container_exit("init-container", 5)
            .container_exit("main-container", 143)
            .build();
        assert_eq!(
            match_pod_failure_policy(Some(&policy), &pod).fail_job_message.as_deref(),
            Some(
                "Container init-container for pod default/mypod-0 failed with exit code 5 matching FailJob rule at index 1"
            )
        );
    }
}
