//! Indexed Jobs (indexed_job_utils.go): completion indexes of pods, succeeded/failed index sets, the
//! lowest pending indexes, duplicate-index removal, and the per-index failure counts.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use super::JOB_COMPLETION_INDEX_ANNOTATION;
use super::failure_policy::PfpAction;
use super::intervals::{OrderedIntervals, atoi};
use super::view::{JobView, PodFacts};

/// `names.MaxGeneratedNameLength`.
const MAX_GENERATED_NAME_LENGTH: usize = 58;

/// `getCompletionIndex`: the annotation as a non-negative integer, else unknown.
pub(super) fn completion_index(pod: &Pod) -> Option<i64> {
    let value = pod.metadata.annotations.as_ref()?.get(JOB_COMPLETION_INDEX_ANNOTATION)?;
    atoi(value).filter(|&i| i >= 0)
}

/// `parseInt32` of the failure-count annotations: invalid, negative or too large values read as 0.
pub(super) fn parse_failure_count(value: &str) -> i32 {
    atoi(value).and_then(|v| i32::try_from(v).ok()).filter(|&v| v >= 0).unwrap_or(0)
}

/// An index that counts for the Job: known and below `completions`.
fn in_range(ix: Option<i64>, completions: i64) -> Option<i64> {
    ix.filter(|&i| i < completions)
}

/// Sorted, de-duplicated indexes.
fn sorted_set(mut v: Vec<i64>) -> Vec<i64> {
    v.sort_unstable();
    v.dedup();
    v
}

/// `calculateSucceededIndexes`: (indexes from `status.completedIndexes`, those plus the indexes of
/// succeeded pods that still have the finalizer).
pub(super) fn calculate_succeeded_indexes(
    completed_indexes: &str,
    completions: i64,
    pods: &[PodFacts],
) -> (OrderedIntervals, OrderedIntervals) {
    let prev = OrderedIntervals::parse(completed_indexes, completions);
    let new: Vec<i64> = pods
        .iter()
        .filter(|p| p.phase == super::view::Phase::Succeeded && p.has_finalizer)
        .filter_map(|p| in_range(p.index, completions))
        .collect();
    let all = prev.with_ordered_indexes(&sorted_set(new));
    (prev, all)
}

/// `isIndexFailed`: a failed pod whose index must not be retried (FailIndex, or its counted failures
/// reached `backoffLimitPerIndex`).
fn is_index_failed(view: &JobView<'_>, p: &PodFacts) -> bool {
    if !p.failed {
        return false;
    }
    if view.pod_failure_policy.is_some() {
        if p.pfp.action == Some(PfpAction::FailIndex) {
            return true;
        }
        if !p.pfp.count_failed {
            return false;
        }
    }
    p.failure_count >= view.backoff_limit_per_index.unwrap_or(i32::MAX)
}

/// `calculateFailedIndexes`: `status.failedIndexes` plus the newly failed indexes.
pub(super) fn calculate_failed_indexes(
    view: &JobView<'_>,
    failed_indexes: Option<&str>,
    pods: &[PodFacts],
) -> OrderedIntervals {
    let completions = view.index_bound();
    let prev = OrderedIntervals::parse(failed_indexes.unwrap_or(""), completions);
    let new: Vec<i64> = pods
        .iter()
        .filter(|p| p.has_finalizer && is_index_failed(view, p))
        .filter_map(|p| in_range(p.index, completions))
        .collect();
    prev.with_ordered_indexes(&sorted_set(new))
}

/// `firstPendingIndexes`: up to `count` indexes below `completions` that are neither active,
/// succeeded, failed nor (with podReplacementPolicy=Failed) held by a terminating pod.
pub(super) fn first_pending_indexes(
    active: &[i64],
    terminating: Option<&[i64]>,
    succeeded: &OrderedIntervals,
    failed: Option<&OrderedIntervals>,
    count: usize,
    completions: i64,
) -> Vec<i64> {
    if count == 0 {
        return Vec::new();
    }
    let mut non_pending = succeeded.with_ordered_indexes(&sorted_set(active.to_vec()));
    if let Some(terminating) = terminating {
        non_pending = non_pending.with_ordered_indexes(&sorted_set(terminating.to_vec()));
    }
    if let Some(failed) = failed {
        non_pending = non_pending.merge(failed);
    }
    let mut result = Vec::with_capacity(count.min(usize::try_from(completions.max(0)).unwrap_or(0)));
    let mut candidate = 0i64;
    for iv in &non_pending.0 {
        while candidate < completions && result.len() < count && candidate < iv.first {
            result.push(candidate);
            candidate += 1;
        }
        if candidate < iv.last.saturating_add(1) {
            candidate = iv.last.saturating_add(1);
        }
    }
    while candidate < completions && result.len() < count {
        result.push(candidate);
        candidate += 1;
    }
    result
}

/// `appendDuplicatedIndexPodsForRemoval` over active pods (positions into `facts`): pods without an
/// index or with an index >= `completions` go to `rm`; of pods sharing an index all but the last in
/// `order` (ActivePods order) go to `rm`. Returns (rm, left).
pub(super) fn duplicated_index_pods_for_removal(
    mut pods: Vec<usize>,
    facts: &[PodFacts],
    completions: i64,
    order: &dyn Fn(usize, usize) -> std::cmp::Ordering,
) -> (Vec<usize>, Vec<usize>) {
    let ix = |p: usize| facts[p].index.unwrap_or(-1);
    pods.sort_by_key(|&p| ix(p));
    let mut rm = Vec::new();
    let mut left = Vec::new();
    let mut group_start = 0;
    let mut end = pods.len();
    for (i, &p) in pods.iter().enumerate() {
        if ix(p) >= completions {
            end = i;
            break;
        }
        if i > 0 && ix(p) != ix(pods[group_start]) {
            split_group(&pods[group_start..i], ix(pods[group_start]), order, &mut rm, &mut left);
            group_start = i;
        }
    }
    if group_start < end {
        split_group(&pods[group_start..end], ix(pods[group_start]), order, &mut rm, &mut left);
    }
    rm.extend_from_slice(&pods[end..]);
    (rm, left)
}

/// `appendPodsWithSameIndexForRemovalAndRemaining`.
fn split_group(
    group: &[usize],
    ix: i64,
    order: &dyn Fn(usize, usize) -> std::cmp::Ordering,
    rm: &mut Vec<usize>,
    left: &mut Vec<usize>,
) {
    if ix < 0 {
        rm.extend_from_slice(group);
        return;
    }
    if let [only] = group {
        left.push(*only);
        return;
    }
    let mut sorted = group.to_vec();
    sorted.sort_by(|&a, &b| order(a, b));
    if let Some((keep, rest)) = sorted.split_last() {
        rm.extend_from_slice(rest);
        left.push(*keep);
    }
}

/// `getPodsWithDelayedDeletionPerIndex`: per index, the last failed pod whose finalizer must stay
/// until its replacement (carrying the failure counts) exists.
pub(super) fn pods_with_delayed_deletion_per_index(
    facts: &[PodFacts],
    completions: i64,
    succeeded: &OrderedIntervals,
    failed: &OrderedIntervals,
) -> HashMap<i64, usize> {
    let active = sorted_set(facts.iter().filter(|p| p.active()).filter_map(|p| p.index).collect());
    let mut result: HashMap<i64, usize> = HashMap::new();
    for (pos, p) in facts.iter().enumerate() {
        if !p.tracked() || !p.failed {
            continue;
        }
        let Some(ix) = in_range(p.index, completions) else { continue };
        if succeeded.has(ix) || failed.has(ix) || active.binary_search(&ix).is_ok() {
            continue;
        }
        match result.get(&ix) {
            Some(&last) => {
                let last = &facts[last];
                if last.absolute_failure_count() <= p.absolute_failure_count()
                    && p.finish_time >= last.finish_time
                {
                    result.insert(ix, pos);
                }
            }
            None => {
                result.insert(ix, pos);
            }
        }
    }
    result
}

/// `getNewIndexFailureCounts`: (failure count, ignored failure count) for the pod replacing
/// `replaced` (none: first pod of the index).
pub(super) fn new_index_failure_counts(view: &JobView<'_>, replaced: Option<&PodFacts>) -> (i32, i32) {
    let Some(p) = replaced else { return (0, 0) };
    let (mut counted, mut ignored) = (p.failure_count, p.ignored_failure_count);
    if view.pod_failure_policy.is_some() && !p.pfp.count_failed {
        ignored = ignored.saturating_add(1);
    } else {
        counted = counted.saturating_add(1);
    }
    (counted, ignored)
}

/// `podGenerateNameWithIndex`: `<job>-<index>-`, with the job name cut to fit 58 characters.
pub(super) fn pod_generate_name_with_index(job_name: &str, index: i64) -> String {
    let suffix = format!("-{index}-");
    let prefix = format!("{job_name}{suffix}");
    if prefix.len() <= MAX_GENERATED_NAME_LENGTH {
        return prefix;
    }
    let mut cut = MAX_GENERATED_NAME_LENGTH.saturating_sub(suffix.len()).min(job_name.len());
    while !job_name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &job_name[..cut])
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;
    use crate::job::core::intervals::Interval;
    use crate::job::core::ordering::active_pods_key;
    use crate::job::core::testutil::{facts_of, mk_job, mk_pod};

    fn iv(list: &[(i64, i64)]) -> OrderedIntervals {
        OrderedIntervals(list.iter().map(|&(first, last)| Interval { first, last }).collect())
    }

    /// TestCalculateSucceededIndexes pod rows ("one index", "two separate", "two intervals",
    /// "one index and one interval", "out of range").
    #[test]
    fn calculate_succeeded_indexes_matches_upstream() {
        let job = mk_job("job", 1, 10, 6).indexed().build();
        let cases: Vec<(&str, Vec<(&str, &str)>, i64, &[(i64, i64)])> = vec![
            ("one index", vec![("1", "Succeeded")], 2, &[(1, 1)]),
            (
                "two separate",
                vec![
                    ("2", "Failed"),
                    ("5", "Succeeded"),
                    ("5", "Succeeded"),
                    ("10", "Failed"),
                    ("10", "Succeeded"),
                ],
                11,
                &[(5, 5), (10, 10)],
            ),
            (
                "two intervals",
                vec![
                    ("0", "Running"),
                    ("1", "Pending"),
                    ("2", "Succeeded"),
                    ("3", "Succeeded"),
                    ("5", "Succeeded"),
                    ("6", "Succeeded"),
                    ("7", "Succeeded"),
                ],
                8,
                &[(2, 3), (5, 7)],
            ),
            (
                "one index and one interval",
                vec![
                    ("0", "Succeeded"),
                    ("1", "Failed"),
                    ("2", "Succeeded"),
                    ("3", "Succeeded"),
                    ("4", "Succeeded"),
                    ("5", "Succeeded"),
                    ("-", "Succeeded"),
                    ("-2", "Succeeded"),
                ],
                6,
                &[(0, 0), (2, 5)],
            ),
            (
                "out of range",
                vec![
                    ("0", "Succeeded"),
                    ("1", "Succeeded"),
                    ("2", "Succeeded"),
                    ("3", "Failed"),
                    ("4", "Succeeded"),
                    ("5", "Succeeded"),
                    ("-", "Succeeded"),
                    ("-2", "Succeeded"),
                ],
                5,
                &[(0, 2), (4, 4)],
            ),
        ];
        for (name, pods, completions, want) in cases {
            let pods: Vec<Pod> = pods
                .iter()
                .enumerate()
                .map(|(i, (ix, ph))| mk_pod(&format!("p{i}")).maybe_index(ix).phase(ph).finalizer().build())
                .collect();
            let facts = facts_of(&job, &pods);
            let (_, got) = calculate_succeeded_indexes("", completions, &facts);
            assert_eq!(got, iv(want), "{name}");
        }
    }

    /// TestCalculateFailedIndexes and TestIsIndexFailed.
    #[test]
    fn calculate_failed_indexes_matches_upstream() {
        let job = |bl: i32| mk_job("job", 2, 2, 6).indexed().backoff_limit_per_index(bl).build();
        let pod = |ix: &str, count: &str| mk_pod(ix).index(ix).failure_count(count).phase("Failed");
        let cases: Vec<(&str, i32, Option<&str>, Vec<Pod>, &[(i64, i64)])> = vec![
            (
                "one new index failed",
                1,
                None,
                vec![pod("0", "0").finalizer().build(), pod("1", "1").finalizer().build()],
                &[(1, 1)],
            ),
            ("pod without finalizer is ignored", 0, None, vec![pod("0", "0").build()], &[]),
            ("pod outside completions is ignored", 0, None, vec![pod("3", "0").build()], &[]),
            ("extend the failed indexes", 0, Some("0"), vec![pod("1", "0").finalizer().build()], &[(0, 1)]),
            ("prev failed indexes empty", 0, Some(""), vec![pod("1", "0").finalizer().build()], &[(1, 1)]),
            (
                "prev failed indexes outside the completions",
                0,
                Some("9"),
                vec![pod("1", "0").finalizer().build()],
                &[(1, 1)],
            ),
        ];
        for (name, bl, prev, pods, want) in cases {
            let job = job(bl);
            let facts = facts_of(&job, &pods);
            let view = JobView::new(&job);
            assert_eq!(calculate_failed_indexes(&view, prev, &facts), iv(want), "{name}");
        }
    }

    /// TestFirstPendingIndexes, every row.
    #[test]
    fn first_pending_indexes_matches_test_first_pending_indexes() {
        let cases: Vec<(&str, usize, i64, &[i64], &[(i64, i64)], Option<&[(i64, i64)]>, &[i64])> = vec![
            ("cnt greater than completions", 5, 3, &[], &[], None, &[0, 1, 2]),
            ("cnt less than completions", 2, 5, &[], &[], None, &[0, 1]),
            ("first pods active", 3, 10, &[0, 1], &[], None, &[2, 3, 4]),
            ("last pods active or succeeded", 6, 6, &[6], &[(4, 5)], None, &[0, 1, 2, 3]),
            // "mixed": active {3,5,8, no index, -3}; unknown indexes are not active indexes.
            ("mixed", 5, 20, &[3, 5, 8], &[(2, 4), (9, 9)], None, &[0, 1, 6, 7, 10]),
            (
                "with failed indexes",
                5,
                20,
                &[3, 9],
                &[(1, 1), (5, 5), (9, 9)],
                Some(&[(2, 2), (6, 7)]),
                &[0, 4, 8, 10, 11],
            ),
        ];
        for (name, cnt, completions, active, succeeded, failed, want) in cases {
            let failed = failed.map(iv);
            let got = first_pending_indexes(active, None, &iv(succeeded), failed.as_ref(), cnt, completions);
            assert_eq!(got, *want, "{name}");
        }
    }

    /// TestAppendDuplicatedIndexPodsForRemoval, every row.
    #[test]
    fn duplicated_index_removal_matches_upstream() {
        let job = mk_job("job", 6, 6, 6).indexed().build();
        let cases: Vec<(&str, Vec<(&str, &str)>, Vec<(&str, &str)>, Vec<(&str, &str)>)> = vec![
            (
                "all unique",
                vec![("-", "Pending"), ("2", "Pending"), ("5", "Running"), ("6", "Running")],
                vec![("-", "Pending"), ("6", "Running")],
                vec![("2", "Pending"), ("5", "Running")],
            ),
            (
                "all with index",
                vec![
                    ("5", "Pending"),
                    ("0", "Running"),
                    ("3", "Pending"),
                    ("0", "Running"),
                    ("3", "Running"),
                    ("0", "Pending"),
                    ("6", "Running"),
                    ("6", "Pending"),
                ],
                vec![
                    ("0", "Pending"),
                    ("0", "Running"),
                    ("3", "Pending"),
                    ("6", "Running"),
                    ("6", "Pending"),
                ],
                vec![("0", "Running"), ("3", "Running"), ("5", "Pending")],
            ),
            (
                "mixed",
                vec![
                    ("-", "Pending"),
                    ("invalid", "Running"),
                    ("-2", "Running"),
                    ("0", "Pending"),
                    ("1", "Pending"),
                    ("1", "Pending"),
                    ("1", "Running"),
                ],
                vec![
                    ("-", "Pending"),
                    ("invalid", "Running"),
                    ("-2", "Running"),
                    ("1", "Pending"),
                    ("1", "Pending"),
                ],
                vec![("0", "Pending"), ("1", "Running")],
            ),
        ];
        for (name, pods, want_rm, want_left) in cases {
            let built: Vec<Pod> = pods
                .iter()
                .enumerate()
                .map(|(i, (ix, ph))| mk_pod(&format!("p{i}")).maybe_index(ix).phase(ph).build())
                .collect();
            let facts = facts_of(&job, &built);
            let keys: Vec<_> = built.iter().map(active_pods_key).collect();
            let order = |a: usize, b: usize| keys[a].cmp(&keys[b]);
            let (rm, left) = duplicated_index_pods_for_removal((0..built.len()).collect(), &facts, 6, &order);
            let describe = |v: Vec<usize>| -> Vec<(&str, &str)> { v.into_iter().map(|i| pods[i]).collect() };
            assert_eq!(describe(rm), want_rm, "{name} rm");
            assert_eq!(describe(left), want_left, "{name} left");
        }
    }

    /// TestGetPodsWithDelayedDeletionPerIndex, every row.
    #[test]
    fn delayed_deletion_matches_upstream() {
        let now = crate::job::core::testutil::ts("2024-01-01T00:00:00Z");
        let secs = |n: i64| now.checked_sub(jiff::SignedDuration::from_secs(n)).unwrap();
        let p = |uid: &str, ix: &str, count: &str, phase: &str| {
            mk_pod(uid).uid(uid).index(ix).failure_count(count).phase(phase).finalizer()
        };
        let cases: Vec<(&str, i32, i32, Vec<Pod>, Vec<&str>, Vec<&str>)> = vec![
            (
                "failed pods are kept corresponding to non-failed indexes are kept",
                3,
                1,
                vec![
                    p("a", "0", "0", "Failed").build(),
                    p("b", "1", "1", "Failed").build(),
                    p("c", "2", "0", "Failed").build(),
                ],
                vec![],
                vec!["a", "c"],
            ),
            (
                "failed pod without finalizer; the pod's deletion is not delayed as it already started",
                2,
                0,
                vec![mk_pod("a").uid("a").index("0").failure_count("0").phase("Failed").build()],
                vec![],
                vec![],
            ),
            (
                "failed pod with expected finalizer removal; the pod's deletion is not delayed as it already started",
                2,
                0,
                vec![p("a", "0", "0", "Failed").build()],
                vec!["a"],
                vec![],
            ),
            (
                "failed pod with index outside of completions; the pod's deletion is not delayed",
                2,
                0,
                vec![p("a", "4", "0", "Failed").build()],
                vec![],
                vec![],
            ),
            (
                "failed pod for active index; the pod's deletion is not delayed as it is already replaced",
                2,
                1,
                vec![p("a1", "0", "0", "Failed").build(), p("a2", "0", "1", "Running").build()],
                vec![],
                vec![],
            ),
            (
                "failed pod for succeeded index; the pod's deletion is not delayed as it is already replaced",
                2,
                1,
                vec![p("a1", "0", "0", "Failed").build(), p("a2", "0", "1", "Succeeded").build()],
                vec![],
                vec![],
            ),
            (
                "multiple failed pods for index with different failure count; only the pod with highest failure count is kept",
                2,
                4,
                vec![
                    p("a1", "0", "0", "Failed").build(),
                    p("a3", "0", "2", "Failed").build(),
                    p("a2", "0", "1", "Failed").build(),
                ],
                vec![],
                vec!["a3"],
            ),
            (
                "multiple failed pods for index with different finish times; only the last failed pod is kept",
                2,
                4,
                vec![
                    p("a1", "0", "1", "Failed").deleted_at(secs(1), None).build(),
                    p("a3", "0", "1", "Failed").deleted_at(now, None).build(),
                    p("a2", "0", "1", "Failed").deleted_at(secs(2), None).build(),
                ],
                vec![],
                vec!["a3"],
            ),
        ];
        for (name, completions, bl, pods, expected_rm, want) in cases {
            let job = mk_job("job", 1, completions, 6).indexed().backoff_limit_per_index(bl).build();
            let rm: std::collections::HashSet<String> = expected_rm.iter().map(|s| s.to_string()).collect();
            let view = JobView::new(&job);
            let facts = super::super::view::pod_facts(&view, &super::super::testutil::arcs(&pods), &rm);
            let failed = calculate_failed_indexes(&view, None, &facts);
            let (_, succeeded) = calculate_succeeded_indexes("", i64::from(completions), &facts);
            let got =
                pods_with_delayed_deletion_per_index(&facts, i64::from(completions), &succeeded, &failed);
            let mut uids: Vec<&str> = got.values().map(|&i| facts[i].uid()).collect();
            uids.sort_unstable();
            assert_eq!(uids, want, "{name}");
        }
    }

    /// TestGetNewIndexFailureCountValue and TestGetIndexFailureCount.
    #[test]
    fn failure_counts_match_upstream() {
        let plain = mk_job("job", 1, 1, 6).indexed().build();
        let ignore = mk_job("job", 1, 1, 6)
            .indexed()
            .pod_failure_policy(crate::job::core::testutil::pfp_pod_conditions(&[(
                "Ignore",
                "DisruptionTarget",
                "True",
            )]))
            .build();
        let replaced = |job, count: &str, disrupted: bool| {
            let mut b = mk_pod("a").index("0").failure_count(count).phase("Failed").finalizer();
            if disrupted {
                b = b.condition("DisruptionTarget", "True");
            }
            facts_of(job, &[b.build()]).remove(0)
        };
        assert_eq!(new_index_failure_counts(&JobView::new(&plain), None), (0, 0), "first pod created");
        let f = replaced(&plain, "0", false);
        assert_eq!(new_index_failure_counts(&JobView::new(&plain), Some(&f)), (1, 0), "replaced with 0");
        let f = replaced(&plain, "3", false);
        assert_eq!(new_index_failure_counts(&JobView::new(&plain), Some(&f)), (4, 0), "replaced with >0");
        let f = replaced(&ignore, "3", true);
        assert_eq!(
            new_index_failure_counts(&JobView::new(&ignore), Some(&f)),
            (3, 1),
            "matching the ignore rule"
        );

        let cases = [
            ("no annotation", "", 0),
            ("valid value", "2", 2),
            ("valid maxint32 value", "2147483647", i32::MAX),
            ("too large value", "2147483648", 0),
            ("negative value", "-1", 0),
            ("invalid int value", "xyz", 0),
        ];
        for (name, v, want) in cases {
            assert_eq!(parse_failure_count(v), want, "{name}");
        }
    }

    /// TestPodGenerateNameWithIndex, every row.
    #[test]
    fn generate_name_matches_test_pod_generate_name_with_index() {
        let cases = [
            ("short job name", "indexed-job", 1, "indexed-job-1-"),
            (
                "job name exceeds MaxGeneneratedNameLength",
                "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooo",
                1,
                "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
            ),
            (
                "job name with index suffix exceeds MaxGeneratedNameLength",
                "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhoo",
                1,
                "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
            ),
        ];
        for (name, job, ix, want) in cases {
            assert_eq!(pod_generate_name_with_index(job, ix), want, "{name}");
        }
        // Multi-byte garbage never panics.
        let long = "é".repeat(60);
        assert!(pod_generate_name_with_index(&long, 3).ends_with("-3-"));
    }

    #[test]
    fn completion_index_parses_like_atoi() {
        for (v, want) in
            [("0", Some(0)), ("12", Some(12)), ("+3", Some(3)), ("-1", None), ("x", None), ("", None)]
        {
            let pod = mk_pod("p").index(v).build();
            assert_eq!(completion_index(&pod), want, "{v:?}");
        }
        assert_eq!(completion_index(&Pod::default()), None);
    }
}
