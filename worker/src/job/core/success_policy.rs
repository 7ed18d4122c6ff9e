//! `matchSuccessPolicy` (success_policy.go): rules in order; the first match wins.

use k8s_openapi::api::batch::v1::SuccessPolicy;

use super::intervals::OrderedIntervals;

/// Returns the `SuccessCriteriaMet` message ("Matched rules at index N") if a rule matches.
pub(super) fn match_success_policy(
    policy: Option<&SuccessPolicy>,
    completions: i64,
    succeeded: &OrderedIntervals,
) -> Option<String> {
    let policy = policy?;
    if succeeded.is_empty() {
        return None;
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = if let Some(indexes) = &rule.succeeded_indexes {
            let required = OrderedIntervals::parse(indexes, completions);
            // Unparsable or empty `succeededIndexes`: the rule is skipped.
            if required.is_empty() {
                continue;
            }
            match_succeeded_indexes_rule(&required, succeeded, rule.succeeded_count)
        } else {
            rule.succeeded_count.is_some_and(|count| succeeded.total() >= i64::from(count))
        };
        if matched {
            return Some(format!("Matched rules at index {index}"));
        }
    }
    None
}

/// `matchSucceededIndexesRule`: all required indexes succeeded, or at least `succeeded_count` of them.
fn match_succeeded_indexes_rule(
    rule: &OrderedIntervals,
    succeeded: &OrderedIntervals,
    count: Option<i32>,
) -> bool {
    let (rule, succ) = (&rule.0, &succeeded.0);
    let (mut contains, mut r, mut s) = (0i64, 0usize, 0usize);
    while r < rule.len() && s < succ.len() {
        let overlap = rule[r].last.min(succ[s].last) - rule[r].first.max(succ[s].first) + 1;
        if overlap > 0 {
            contains += overlap;
        }
        match succ[s].last.cmp(&rule[r].last) {
            std::cmp::Ordering::Less => s += 1,
            std::cmp::Ordering::Greater => r += 1,
            std::cmp::Ordering::Equal => {
                s += 1;
                r += 1;
            }
        }
    }
    contains == OrderedIntervals(rule.clone()).total() || count.is_some_and(|c| contains >= i64::from(c))
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;
    use crate::job::core::intervals::Interval;
    use k8s_openapi::api::batch::v1::SuccessPolicyRule;

    fn iv(list: &[(i64, i64)]) -> OrderedIntervals {
        OrderedIntervals(list.iter().map(|&(first, last)| Interval { first, last }).collect())
    }

    fn rules(list: &[(Option<&str>, Option<i32>)]) -> SuccessPolicy {
        SuccessPolicy {
            rules: list
                .iter()
                .map(|(i, c)| SuccessPolicyRule {
                    succeeded_indexes: i.map(str::to_string),
                    succeeded_count: *c,
                })
                .collect(),
        }
    }

    /// TestMatchSuccessPolicy (feature enabled rows; completions 10), and UPSTREAM.md §2's
    /// successPolicy table.
    #[test]
    fn match_success_policy_matches_upstream_table() {
        let cases: Vec<(&str, Option<SuccessPolicy>, &[(i64, i64)], Option<&str>)> = vec![
            ("successPolicy is null", None, &[(0, 0)], None),
            ("any rules are nothing", Some(rules(&[])), &[(0, 0)], None),
            (
                "rules.succeededIndexes is invalid format",
                Some(rules(&[(Some("invalid-form"), None)])),
                &[(0, 0)],
                None,
            ),
            (
                "succeededIndexes matched rules",
                Some(rules(&[(Some("0-2"), None)])),
                &[(0, 2), (4, 7)],
                Some("Matched rules at index 0"),
            ),
            ("succeededIndexes didn't match rules", Some(rules(&[(Some("3"), None)])), &[(0, 2)], None),
            (
                "rules.succeededCount matched",
                Some(rules(&[(None, Some(2))])),
                &[(0, 2)],
                Some("Matched rules at index 0"),
            ),
            ("rules.succeededCount didn't match", Some(rules(&[(None, Some(4))])), &[(0, 2)], None),
            (
                "multiple rules; met one of rules",
                Some(rules(&[(Some("9"), None), (Some("4,6"), None)])),
                &[(0, 2), (4, 7)],
                Some("Matched rules at index 1"),
            ),
            (
                "multiple rules; met all rules",
                Some(rules(&[(Some("0,1"), None), (Some("5"), None)])),
                &[(0, 2), (4, 7)],
                Some("Matched rules at index 0"),
            ),
            (
                "succeededIndexes and succeededCount; met",
                Some(rules(&[(Some("3-6"), Some(2))])),
                &[(0, 2), (4, 7)],
                Some("Matched rules at index 0"),
            ),
            (
                "succeededIndexes and succeededCount; didn't match",
                Some(rules(&[(Some("3-6"), Some(2))])),
                &[(0, 2), (6, 7)],
                None,
            ),
            ("succeededIndexes are nothing", Some(rules(&[(None, Some(4))])), &[], None),
            (
                "rules is proper subset of succeededIndexes",
                Some(rules(&[(Some("2-4,6-8"), None)])),
                &[(1, 5), (6, 9)],
                Some("Matched rules at index 0"),
            ),
            (
                "rules equals succeededIndexes",
                Some(rules(&[(Some("2-4,6-9"), None)])),
                &[(2, 4), (6, 9)],
                Some("Matched rules at index 0"),
            ),
            (
                "rules is subset of succeededIndexes",
                Some(rules(&[(Some("2-4,8-12"), None)])),
                &[(2, 5), (7, 15)],
                Some("Matched rules at index 0"),
            ),
            ("rules is an empty set", Some(rules(&[(Some(""), None)])), &[(1, 3)], None),
            ("succeededIndexes is an empty set", Some(rules(&[(Some(""), None)])), &[], None),
            (
                "all elements of rules aren't included",
                Some(rules(&[(Some("10-12,14-16"), None)])),
                &[(1, 3), (5, 7)],
                None,
            ),
            (
                "rules overlaps succeededIndexes at first",
                Some(rules(&[(Some("1-3,5-7"), None)])),
                &[(2, 4), (6, 8)],
                None,
            ),
            (
                "rules overlaps succeededIndexes at first, with count",
                Some(rules(&[(Some("1-3,5-7"), Some(4))])),
                &[(2, 4), (6, 8)],
                Some("Matched rules at index 0"),
            ),
            (
                "rules overlaps succeededIndexes at last",
                Some(rules(&[(Some("2-4,6-9"), None)])),
                &[(1, 3), (5, 7)],
                None,
            ),
            (
                "rules overlaps succeededIndexes at last, with count",
                Some(rules(&[(Some("2-4,6-9"), Some(4))])),
                &[(1, 3), (5, 7)],
                Some("Matched rules at index 0"),
            ),
            (
                "rules completely overlaps succeededIndexes",
                Some(rules(&[(Some("0-4,6-9"), None)])),
                &[(1, 3), (7, 8)],
                None,
            ),
            (
                "rules completely overlaps succeededIndexes, with count",
                Some(rules(&[(Some("0-4,6-9"), Some(5))])),
                &[(1, 3), (7, 8)],
                Some("Matched rules at index 0"),
            ),
            (
                "rules overlaps multiple succeededIndexes at last",
                Some(rules(&[(Some("0-6,8-9"), None)])),
                &[(1, 3), (5, 9)],
                None,
            ),
            (
                "rules overlaps multiple succeededIndexes at last, with count",
                Some(rules(&[(Some("0-6,8-9"), Some(7))])),
                &[(1, 3), (5, 9)],
                Some("Matched rules at index 0"),
            ),
            (
                "rules overlaps at first, equals at last",
                Some(rules(&[(Some("0-5,7-9"), None)])),
                &[(1, 5), (7, 10)],
                None,
            ),
            (
                "rules overlaps at first, equals at last, with count",
                Some(rules(&[(Some("0-5,7-9"), Some(8))])),
                &[(1, 5), (7, 10)],
                Some("Matched rules at index 0"),
            ),
            (
                "the first rules overlaps succeededIndexes at first",
                Some(rules(&[(Some("0-3,6-9"), None)])),
                &[(1, 10)],
                None,
            ),
            (
                "the first rules overlaps succeededIndexes at first, with count",
                Some(rules(&[(Some("0-3,6-9"), Some(7))])),
                &[(1, 10)],
                Some("Matched rules at index 0"),
            ),
            // UPSTREAM.md §2: "3-6"/count 2 with {0-2, 4-7} → match; with {0-2, 6-7} → no match;
            // count 2 with {0-2} → match.
            (
                "UPSTREAM.md count 2 with 0-2",
                Some(rules(&[(None, Some(2))])),
                &[(0, 2)],
                Some("Matched rules at index 0"),
            ),
        ];
        for (name, policy, succeeded, want) in cases {
            assert_eq!(match_success_policy(policy.as_ref(), 10, &iv(succeeded)).as_deref(), want, "{name}");
        }
    }
}
