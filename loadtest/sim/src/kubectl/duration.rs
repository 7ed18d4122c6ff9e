//! Human-readable ages, a port of apimachinery `pkg/util/duration/duration.go`.

use jiff::{SignedDuration, Timestamp};

const NS_PER_SEC: i128 = 1_000_000_000;
const NS_PER_MIN: i128 = 60 * NS_PER_SEC;
const NS_PER_HOUR: i128 = 60 * NS_PER_MIN;

/// `HumanDuration`: ~2-3 significant figures ("5s", "3m10s", "70m", "2d1h", "2y1d").
pub fn human_duration(d: SignedDuration) -> String {
    human_nanos(d.as_nanos())
}

/// `ShortHumanDuration`: a single unit ("59s", "1m", "23h", "364d", "2y").
pub fn short_human_duration(d: SignedDuration) -> String {
    let d = d.as_nanos();
    // Go: int(d.Seconds()) truncates toward zero, as does integer division here.
    let seconds = d / NS_PER_SEC;
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = d / NS_PER_MIN;
    if minutes < 60 {
        return format!("{minutes}m");
    }
    let hours = d / NS_PER_HOUR;
    if hours < 24 {
        format!("{hours}h")
    } else if hours < 24 * 365 {
        format!("{}d", hours / 24)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

fn human_nanos(d: i128) -> String {
    // Allow deviation no more than 2 seconds (excluded) to tolerate machine time inconsistency.
    let seconds = d / NS_PER_SEC;
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d / NS_PER_MIN;
    if minutes < 10 {
        let s = (d / NS_PER_SEC) % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d / NS_PER_HOUR;
    if hours < 8 {
        let m = (d / NS_PER_MIN) % 60;
        if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) }
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) }
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// `translateTimestampSince`: the age of `ts` at `now`, `<unknown>` for a zero timestamp.
pub(crate) fn since(ts: Option<Timestamp>, now: Timestamp) -> String {
    match ts {
        Some(ts) => human_nanos(now.as_nanosecond() - ts.as_nanosecond()),
        None => "<unknown>".into(),
    }
}

/// `HumanDuration(end.Sub(start))`.
pub(crate) fn between(start: Timestamp, end: Timestamp) -> String {
    human_nanos(end.as_nanosecond() - start.as_nanosecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i128 = 1_000_000;
    const S: i128 = NS_PER_SEC;
    const M: i128 = NS_PER_MIN;
    const H: i128 = NS_PER_HOUR;
    const D: i128 = 24 * H;
    const Y: i128 = 365 * D;

    fn dur(ns: i128) -> SignedDuration {
        SignedDuration::from_nanos_i128(ns)
    }

    /// duration_test.go TestHumanDuration and TestHumanDurationBoundaries.
    #[test]
    fn human_duration_matches_apimachinery() {
        let cases: &[(i128, &str)] = &[
            (S, "1s"),
            (70 * S, "70s"),
            (190 * S, "3m10s"),
            (70 * M, "70m"),
            (47 * H, "47h"),
            (49 * H, "2d1h"),
            ((8 * 24 + 2) * H, "8d"),
            (367 * D, "367d"),
            (2 * Y + 25 * H, "2y1d"),
            (8 * Y + 2 * H, "8y"),
            // boundaries
            (-2 * S, "<invalid>"),
            (-2 * S + 1, "0s"),
            (0, "0s"),
            (S - MS, "0s"),
            (2 * M - MS, "119s"),
            (2 * M, "2m"),
            (2 * M + S, "2m1s"),
            (10 * M - MS, "9m59s"),
            (10 * M, "10m"),
            (10 * M + S, "10m"),
            (3 * H - MS, "179m"),
            (3 * H, "3h"),
            (3 * H + M, "3h1m"),
            (8 * H - MS, "7h59m"),
            (8 * H, "8h"),
            (8 * H + 59 * M, "8h"),
            (2 * D - MS, "47h"),
            (2 * D, "2d"),
            (2 * D + H, "2d1h"),
            (8 * D - MS, "7d23h"),
            (8 * D, "8d"),
            (8 * D + 23 * H, "8d"),
            (2 * Y - MS, "729d"),
            (2 * Y, "2y"),
            (2 * Y + 23 * H, "2y"),
            (2 * Y + 23 * H + 59 * M, "2y"),
            (2 * Y + 24 * H - MS, "2y"),
            (2 * Y + 24 * H, "2y1d"),
            (3 * Y, "3y"),
            (4 * Y, "4y"),
            (5 * Y, "5y"),
            (6 * Y, "6y"),
            (7 * Y, "7y"),
            (8 * Y - MS, "7y364d"),
            (8 * Y, "8y"),
            (8 * Y + 364 * D, "8y"),
            (9 * Y, "9y"),
        ];
        for &(ns, want) in cases {
            assert_eq!(human_duration(dur(ns)), want, "HumanDuration({ns}ns)");
        }
    }

    /// duration_test.go TestShortHumanDurationBoundaries.
    #[test]
    fn short_human_duration_matches_apimachinery() {
        let cases: &[(i128, &str)] = &[
            (-2 * S, "<invalid>"),
            (-2 * S + 1, "0s"),
            (0, "0s"),
            (S - MS, "0s"),
            (S, "1s"),
            (2 * S - MS, "1s"),
            (M - MS, "59s"),
            (M, "1m"),
            (2 * M - MS, "1m"),
            (H - MS, "59m"),
            (H, "1h"),
            (2 * H - MS, "1h"),
            (D - MS, "23h"),
            (D, "1d"),
            (2 * D - MS, "1d"),
            (Y - MS, "364d"),
            (Y, "1y"),
            (2 * Y - MS, "1y"),
            (2 * Y, "2y"),
        ];
        for &(ns, want) in cases {
            assert_eq!(short_human_duration(dur(ns)), want, "ShortHumanDuration({ns}ns)");
        }
    }

    #[test]
    fn since_handles_missing_and_future_timestamps() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let cases: &[(Option<&str>, &str)] = &[
            (None, "<unknown>"),
            (Some("2026-01-01T00:05:00Z"), "5m"),
            (Some("2026-01-01T00:09:55Z"), "5s"),
            (Some("2026-01-01T00:10:01.9Z"), "0s"),
            (Some("2026-01-01T00:10:02Z"), "<invalid>"),
        ];
        for &(ts, want) in cases {
            let ts = ts.map(|t| t.parse().unwrap());
            assert_eq!(since(ts, now), want, "{ts:?}");
        }
    }
}
