//! CronJob schedule and time zone checks for validation, by the very parser the CronJob
//! controller uses (`batchfleet-cron`, robfig/cron v3's `ParseStandard`), so the sim accepts and
//! rejects exactly the schedules a real apiserver does, with the same error texts.

/// `cron.ParseStandard(spec)`, keeping only the error text.
pub fn parse_standard(spec: &str) -> Result<(), String> {
    batchfleet_cron::Schedule::parse_standard(spec).map(|_| ()).map_err(|e| e.to_string())
}

/// `time.LoadLocation(name)`, keeping only the error text.
pub(crate) fn load_location(name: &str) -> Result<(), String> {
    batchfleet_cron::load_location(name).map(|_| ())
}

/// Go's `strconv.Atoi` (64-bit `int`), with its error text.
pub(crate) fn go_atoi(s: &str) -> Result<i64, String> {
    let syntax = || format!("strconv.Atoi: parsing {}: invalid syntax", batchfleet_cron::go_strconv_quote(s));
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    let mut v: i128 = 0;
    for b in digits.bytes() {
        v = v * 10 + i128::from(b - b'0');
        if v > i128::from(i64::MAX) + 1 {
            break;
        }
    }
    let v = if neg { -v } else { v };
    i64::try_from(v).map_err(|_| {
        format!("strconv.Atoi: parsing {}: value out of range", batchfleet_cron::go_strconv_quote(s))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // robfig/cron v3 parser_test.go TestRange (5-field subset), TestField, TestAll, TestBits,
    // TestParseScheduleErrors, TestStandardSpecSchedule, TestNoDescriptorParser.
    #[test]
    fn parse_errors_match_robfig() {
        let cases: &[(&str, &str)] = &[
            ("", "empty spec string"),
            ("* 5 j * *", "failed to parse int from j: strconv.Atoi: parsing \"j\": invalid syntax"),
            ("@every Xm", "failed to parse duration @every Xm: time: invalid duration \"Xm\""),
            ("@unrecognized", "unrecognized descriptor: @unrecognized"),
            ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
            ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
            ("TZ=bad * * * * *", "provided bad location bad: unknown time zone bad"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* 24 * * *", "end of range (24) above maximum (23): 24"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("* * * 13 *", "end of range (13) above maximum (12): 13"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            ("5-3 * * * *", "beginning of range (5) beyond end of range (3): 5-3"),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("*/2/3 * * * *", "too many slashes: */2/3"),
            ("*/0 * * * *", "step of range should be a positive number: */0"),
            ("*/-1 * * * *", "negative number (-1) not allowed: -1"),
            ("-1 * * * *", "failed to parse int from : strconv.Atoi: parsing \"\": invalid syntax"),
            (
                "99999999999999999999 * * * *",
                "failed to parse int from 99999999999999999999: strconv.Atoi: parsing \"99999999999999999999\": value out of range",
            ),
            ("* * * * * ?", "expected exactly 5 fields, found 6: [* * * * * ?]"),
            ("@every 1", "failed to parse duration @every 1: time: missing unit in duration \"1\""),
            ("@every 1d", "failed to parse duration @every 1d: time: unknown unit \"d\" in duration \"1d\""),
            ("@daily ", "unrecognized descriptor: @daily "),
            ("TZ=UTC", "runtime error: slice bounds out of range [:-1]"),
        ];
        for (spec, want) in cases {
            assert_eq!(parse_standard(spec), Err(want.to_string()), "{spec:?}");
        }
    }

    #[test]
    fn parse_accepts_robfig_valid_specs() {
        for spec in [
            "0 * * * *",
            "*/5 * * * ?",
            "30 6-16/4 * * 1-5",
            "30 10,11,12 * * 1-5",
            "0 0 1 JAN-jun MON",
            "0 0 * * sun,SAT",
            "5/15 * * * *",
            "0 0 ? * *",
            "*-5 * * * *",
            "1,,2 * * * *",
            "@yearly",
            "@annually",
            "@monthly",
            "@weekly",
            "@daily",
            "@midnight",
            "@hourly",
            "@every 1h30m",
            "@every 500ms",
            "@every -5s",
            "TZ=America/New_York 0 5 * * *",
            "CRON_TZ=UTC @hourly",
            "TZ= 0 5 * * *",
            "59 23 31 2 *",
        ] {
            assert_eq!(parse_standard(spec), Ok(()), "{spec:?}");
        }
    }

    // parser_test.go TestStandardSpecSchedule / TestParseSchedule (bit sets and star bit).

    // Go time_test.go TestParseDuration / TestParseDurationErrors (a sample).

    #[test]
    fn locations() {
        assert_eq!(load_location("America/New_York"), Ok(()));
        assert_eq!(load_location("america/new_york"), Err("unknown time zone america/new_york".into()));
        assert_eq!(load_location("a..b"), Err("time: invalid location name".into()));
        assert_eq!(load_location("Local"), Ok(()));
    }
}
