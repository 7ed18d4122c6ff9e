//! The leading coordinator's own figures of a span of time, from two scrapes of its `/metrics`:
//! how its moves ended, its hand-over gaps (REVOKED received → ACTIVATED received: the old
//! owner's last write to the new owner's first possible one) and the seconds its shards had no
//! acting owner. The leader's view beside the audit log's, which sees only writes.

use std::collections::BTreeMap;

use serde::Serialize;

/// One scrape: every sample's value by its series as the text format writes it
/// (`name{label="value"}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape(BTreeMap<String, f64>);

impl Scrape {
    /// The samples of Prometheus's text format; comments and malformed lines are skipped.
    pub fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| {
                    let (series, value) = l.rsplit_once(' ')?;
                    let value = match value {
                        "+Inf" => f64::INFINITY,
                        v => v.parse().ok()?,
                    };
                    Some((series.trim().to_string(), value))
                })
                .collect(),
        )
    }

    fn value(&self, series: &str) -> f64 {
        self.0.get(series).copied().unwrap_or(0.0)
    }

    /// A histogram's cumulative buckets by upper bound, ascending.
    fn buckets(&self, histogram: &str) -> Vec<(f64, f64)> {
        let prefix = format!("{histogram}_bucket{{le=\"");
        let mut out: Vec<(f64, f64)> = self
            .0
            .iter()
            .filter_map(|(series, count)| {
                let le = series.strip_prefix(&prefix)?.strip_suffix("\"}")?;
                let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
                Some((le, *count))
            })
            .collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }
}

const MOVES: &str = "fleet_shard_moves_total";
const GAP: &str = "fleet_shard_handover_gap_seconds";
const UNOWNED: &str = "fleet_shard_unowned_seconds_total";

/// The leader's figures between two scrapes.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LeaderFigures {
    /// `coordinator-<i>`, the leader both times.
    pub coordinator: String,
    /// Moves by how they ended: `done` (the hand-over), `unowned` (the old owner's lease expired
    /// plus the margin first), `cancelled`.
    pub moves: BTreeMap<String, u64>,
    pub gaps: u64,
    pub gap_mean_seconds: f64,
    /// The upper bound of the histogram bucket that holds the p99 (`None`: beyond the last).
    pub gap_p99_at_most_seconds: Option<f64>,
    pub unowned_seconds: f64,
}

impl LeaderFigures {
    pub fn between(coordinator: String, before: &Scrape, after: &Scrape) -> Self {
        let moves = ["done", "unowned", "cancelled"]
            .into_iter()
            .map(|result| {
                let series = format!("{MOVES}{{result=\"{result}\"}}");
                (result.to_string(), (after.value(&series) - before.value(&series)).max(0.0) as u64)
            })
            .collect();
        let delta = |series: &str| (after.value(series) - before.value(series)).max(0.0);
        let gaps = delta(&format!("{GAP}_count")) as u64;
        let earlier: BTreeMap<u64, f64> =
            before.buckets(GAP).into_iter().map(|(le, n)| (le.to_bits(), n)).collect();
        let wanted = (gaps as f64 * 0.99).ceil();
        let gap_p99_at_most_seconds = match gaps {
            0 => Some(0.0),
            _ => after
                .buckets(GAP)
                .into_iter()
                .find(|(le, n)| n - earlier.get(&le.to_bits()).copied().unwrap_or(0.0) >= wanted)
                .map(|(le, _)| le)
                .filter(|le| le.is_finite()),
        };
        Self {
            coordinator,
            moves,
            gaps,
            gap_mean_seconds: if gaps > 0 { delta(&format!("{GAP}_sum")) / gaps as f64 } else { 0.0 },
            gap_p99_at_most_seconds,
            unowned_seconds: delta(UNOWNED),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(done: u64, unowned: u64, buckets: [u64; 3], sum: f64, unowned_seconds: f64) -> Scrape {
        let count = buckets[2];
        Scrape::parse(&format!(
            "# HELP fleet_shard_moves_total Shard moves.\n\
             # TYPE fleet_shard_moves_total counter\n\
             fleet_shard_moves_total{{result=\"done\"}} {done}\n\
             fleet_shard_moves_total{{result=\"unowned\"}} {unowned}\n\
             fleet_shard_handover_gap_seconds_bucket{{le=\"0.1\"}} {}\n\
             fleet_shard_handover_gap_seconds_bucket{{le=\"0.25\"}} {}\n\
             fleet_shard_handover_gap_seconds_bucket{{le=\"+Inf\"}} {}\n\
             fleet_shard_handover_gap_seconds_sum {sum}\n\
             fleet_shard_handover_gap_seconds_count {count}\n\
             fleet_shard_unowned_seconds_total {unowned_seconds}\n",
            buckets[0], buckets[1], buckets[2]
        ))
    }

    #[test]
    fn figures_are_the_differences_and_the_p99_the_bucket_that_holds_it() {
        let before = scrape(10, 0, [10, 10, 10], 0.5, 1.0);
        // 100 gaps more: 99 within 100 ms, one within 250 ms.
        let after = scrape(110, 0, [109, 110, 110], 3.5, 4.0);
        let f = LeaderFigures::between("coordinator-0".into(), &before, &after);
        assert_eq!(f.moves["done"], 100);
        assert_eq!(f.moves["unowned"], 0);
        assert_eq!(f.gaps, 100);
        assert!((f.gap_mean_seconds - 0.03).abs() < 1e-9, "{f:?}");
        assert_eq!(f.gap_p99_at_most_seconds, Some(0.1));
        assert!((f.unowned_seconds - 3.0).abs() < 1e-9);
        // Two slow ones of 100 push the p99 into the next bucket; one past the last, beyond it.
        let slower = scrape(110, 2, [108, 110, 110], 3.5, 4.0);
        assert_eq!(LeaderFigures::between("c".into(), &before, &slower).gap_p99_at_most_seconds, Some(0.25));
        let slowest = scrape(110, 2, [108, 108, 110], 3.5, 4.0);
        let f = LeaderFigures::between("c".into(), &before, &slowest);
        assert_eq!(f.gap_p99_at_most_seconds, None);
        assert_eq!(f.moves["unowned"], 2);
    }
}
