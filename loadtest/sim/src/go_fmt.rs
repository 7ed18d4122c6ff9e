//! Rendering of values as Go's fmt prints them, for error texts that must match upstream's.

/// Go's `strconv.Quote` (what `%q` prints for a string), shared with the cron parser.
pub use batchfleet_cron::go_strconv_quote as go_quote;

/// Go's `time.Duration.String()`: `0s`, `1.5µs`, `100ms`, `10s`, `1m20s`, `5m0s`, `1h0m0s`.
pub fn go_duration(d: std::time::Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    // Below a second Go picks the largest unit that keeps the integer part non-zero.
    let fraction = |value: u128, unit: u128| -> String {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            return whole.to_string();
        }
        let digits = unit.ilog10() as usize;
        let frac = format!("{rest:0digits$}");
        format!("{whole}.{}", frac.trim_end_matches('0'))
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", fraction(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", fraction(nanos, 1_000_000));
    }
    let total_seconds = nanos / 1_000_000_000;
    let sub = nanos % 1_000_000_000;
    let (hours, minutes, seconds) = (total_seconds / 3600, total_seconds / 60 % 60, total_seconds % 60);
    let seconds = fraction(seconds * 1_000_000_000 + sub, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// time.Duration.String cases from Go's time_test.go (durationTests).
    #[test]
    fn go_duration_matches_time_duration_string() {
        use std::time::Duration;
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1_100), "1.1µs"),
            (Duration::from_nanos(2_200_000), "2.2ms"),
            (Duration::from_millis(100), "100ms"),
            (Duration::from_millis(3_300), "3.3s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(80), "1m20s"),
            (Duration::from_secs(160), "2m40s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_millis(4 * 60_000 + 5_001), "4m5.001s"),
            (Duration::from_secs(5 * 3600 + 6 * 60 + 7) + Duration::from_millis(1), "5h6m7.001s"),
            (Duration::from_secs(8 * 3600) + Duration::from_nanos(1), "8h0m0.000000001s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn go_quote_matches_strconv_quote() {
        let cases: &[(&str, &str)] = &[
            ("", r#""""#),
            ("\u{7}\u{8}\u{c}\r\n\t\u{b}", r#""\a\b\f\r\n\t\v""#),
            ("\\", r#""\\""#),
            ("abc\u{ff}def", "\"abc\u{ff}def\""),
            ("\u{263a}", "\"\u{263a}\""),
            ("\u{10ffff}", r#""\U0010ffff""#),
            ("\u{4}", r#""\x04""#),
            ("\u{7f}", r#""\x7f""#),
            ("\u{a0}", r#""\u00a0""#),
            ("a\"b", r#""a\"b""#),
        ];
        for (input, want) in cases {
            assert_eq!(go_quote(input), *want, "input {input:?}");
        }
    }
}
