//! `orderedIntervals` of indexed_job_utils.go: the `completedIndexes`/`failedIndexes` format
//! ("1,3-5,7": pairs written "a,b", runs of three or more "a-b").

use std::fmt;

/// A closed range of completion indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub first: i64,
    pub last: i64,
}

/// Intervals in increasing order (as long as they were built from ordered input, like upstream).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderedIntervals(pub Vec<Interval>);

/// Go's `strconv.Atoi` on a 64-bit platform: optional sign, decimal digits, no spaces.
pub(super) fn atoi(s: &str) -> Option<i64> {
    s.parse::<i64>().ok()
}

impl OrderedIntervals {
    /// `parseIndexesFromString`: corrupted intervals are skipped, parsing stops at the first interval
    /// starting at or beyond `completions`, and a last index beyond it is clipped.
    pub fn parse(s: &str, completions: i64) -> Self {
        let mut result: Vec<Interval> = Vec::new();
        if s.is_empty() {
            return Self(result);
        }
        for interval in s.split(',') {
            let mut limits = interval.split('-');
            let Some(first) = limits.next().and_then(atoi) else { continue };
            if first >= completions {
                break;
            }
            let last = match limits.next() {
                Some(l) => match atoi(l) {
                    Some(l) => l.min(completions - 1),
                    None => continue,
                },
                None => first,
            };
            match result.last_mut() {
                Some(prev) if prev.last == first - 1 => prev.last = last,
                _ => result.push(Interval { first, last }),
            }
        }
        Self(result)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `withOrderedIndexes`: adds indexes given in increasing order.
    pub fn with_ordered_indexes(&self, new_indexes: &[i64]) -> Self {
        let other: Vec<Interval> = new_indexes.iter().map(|&i| Interval { first: i, last: i }).collect();
        self.merge(&Self(other))
    }

    /// `merge`: union of two ordered lists, coalescing adjacent intervals.
    pub fn merge(&self, other: &Self) -> Self {
        let (a, b) = (&self.0, &other.0);
        let mut result: Vec<Interval> = Vec::with_capacity(a.len() + b.len());
        let mut push = |iv: Interval| match result.last_mut() {
            Some(last) if iv.first <= last.last.saturating_add(1) => {
                if last.last < iv.last {
                    last.last = iv.last;
                }
            }
            _ => result.push(iv),
        };
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i].first < b[j].first {
                push(a[i]);
                i += 1;
            } else {
                push(b[j]);
                j += 1;
            }
        }
        a[i..].iter().for_each(|&iv| push(iv));
        b[j..].iter().for_each(|&iv| push(iv));
        Self(result)
    }

    /// `total`: number of indexes covered.
    pub fn total(&self) -> i64 {
        self.0
            .iter()
            .map(|iv| iv.last.saturating_sub(iv.first).saturating_add(1))
            .fold(0, i64::saturating_add)
    }

    /// `has`: binary search.
    pub fn has(&self, ix: i64) -> bool {
        let pos = self.0.partition_point(|iv| iv.last < ix);
        self.0.get(pos).is_some_and(|iv| iv.first <= ix)
    }
}

impl fmt::Display for OrderedIntervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, iv) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", iv.first)?;
            if iv.last > iv.first {
                let sep = if iv.last == iv.first + 1 { "," } else { "-" };
                write!(f, "{sep}{}", iv.last)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;

    fn iv(list: &[(i64, i64)]) -> OrderedIntervals {
        OrderedIntervals(list.iter().map(|&(first, last)| Interval { first, last }).collect())
    }

    /// UPSTREAM.md §1 Job 9 ("2,4,5,7-9") and TestControllerSyncJob "indexed job some running and
    /// completed pods" (expectedCompletedIdxs "2,4,5,7-9").
    #[test]
    fn string_format_writes_pairs_with_comma_and_runs_with_dash() {
        let cases: &[(&[(i64, i64)], &str)] = &[
            (&[], ""),
            (&[(0, 0)], "0"),
            (&[(0, 2)], "0-2"),
            (&[(2, 2), (4, 5), (7, 9)], "2,4,5,7-9"),
            (&[(0, 1)], "0,1"),
            (&[(1, 1), (3, 3)], "1,3"),
            (&[(0, 4), (6, 6)], "0-4,6"),
            (&[(0, 499)], "0-499"),
        ];
        for (list, want) in cases {
            assert_eq!(iv(list).to_string(), *want, "{list:?}");
        }
    }

    /// TestCalculateSucceededIndexes status-side rows: "prev interval out of range",
    /// "prev interval partially out of range", "corrupted interval", plus the parse rules.
    #[test]
    fn parse_matches_parse_indexes_from_string() {
        let cases: &[(&str, i64, &[(i64, i64)])] = &[
            ("0-5,8-10", 8, &[(0, 5)]),
            ("0-5,8-10", 10, &[(0, 5), (8, 9)]),
            ("0,1-foo,bar", 4, &[(0, 0)]),
            ("0,4,5,10-12", 13, &[(0, 0), (4, 5), (10, 12)]),
            ("3,4,6", 9, &[(3, 4), (6, 6)]),
            ("2,7,8", 9, &[(2, 2), (7, 8)]),
            ("", 5, &[]),
            ("-1,2", 5, &[(2, 2)]),
            ("+3", 5, &[(3, 3)]),
            ("1, 2", 5, &[(1, 1)]),
            ("99999999999999999999,1", 5, &[(1, 1)]),
        ];
        for (s, completions, want) in cases {
            assert_eq!(OrderedIntervals::parse(s, *completions), iv(want), "{s:?} / {completions}");
        }
    }

    /// TestIntervalsHaveIndex.
    #[test]
    fn has_matches_test_intervals_have_index() {
        let cases: &[(&str, &[(i64, i64)], i64, bool)] = &[
            ("empty", &[], 4, false),
            ("before all", &[(2, 4), (5, 7)], 1, false),
            ("after all", &[(2, 4), (6, 8)], 9, false),
            ("in between", &[(2, 4), (6, 8)], 5, false),
            ("in first", &[(2, 4), (6, 8)], 2, true),
            ("in second", &[(2, 4), (6, 8)], 8, true),
        ];
        for (name, list, ix, want) in cases {
            assert_eq!(iv(list).has(*ix), *want, "{name}");
        }
    }

    /// TestCalculateSucceededIndexes merge rows: "prev and new separate", "prev between new",
    /// "new between prev", "new within prev".
    #[test]
    fn with_ordered_indexes_merges_like_upstream() {
        let cases: &[(&str, i64, &[i64], &[(i64, i64)])] = &[
            ("0,4,5,10-12", 13, &[2, 7, 8], &[(0, 0), (2, 2), (4, 5), (7, 8), (10, 12)]),
            ("3,4,6", 9, &[2, 7, 8], &[(2, 4), (6, 8)]),
            ("2,7,8", 9, &[3, 4, 6], &[(2, 4), (6, 8)]),
            ("2-7", 10, &[0, 3, 5, 9], &[(0, 0), (2, 7), (9, 9)]),
            ("", 10, &[1, 1, 2], &[(1, 2)]),
        ];
        for (prev, completions, new, want) in cases {
            let got = OrderedIntervals::parse(prev, *completions).with_ordered_indexes(new);
            assert_eq!(got, iv(want), "{prev} + {new:?}");
        }
        assert_eq!(iv(&[(0, 2), (4, 7)]).total(), 7);
    }
}
