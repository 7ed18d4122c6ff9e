//! robfig/cron v3.0.1 `ParseStandard` (parser.go), with its exact error texts, plus the pieces of
//! Go it leans on: `time.ParseDuration`, `strconv.Atoi`, `time.LoadLocation`.
//!
//! `ParseStandard` = `NewParser(Minute | Hour | Dom | Month | Dow | Descriptor)`: exactly five
//! fields (the seconds field is fixed at 0), descriptors allowed, an optional `TZ=`/`CRON_TZ=`
//! prefix naming the location.

const STAR_BIT: u64 = 1 << 63;

#[derive(Clone, Copy)]
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const MINUTES: Bounds = Bounds { min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { min: 0, max: 23, names: &[] };
const DOM: Bounds = Bounds { min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[("sun", 0), ("mon", 1), ("tue", 2), ("wed", 3), ("thu", 4), ("fri", 5), ("sat", 6)],
};

/// A parsed standard schedule: robfig's `SpecSchedule` (bit sets, bit 63 = the star bit) or
/// `ConstantDelaySchedule` (`@every`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CronSchedule {
    Spec {
        minute: u64,
        hour: u64,
        dom: u64,
        month: u64,
        dow: u64,
        /// The `TZ=`/`CRON_TZ=` location, if the spec named one (`""` and `UTC` mean UTC,
        /// `Local` the process's zone).
        location: Option<String>,
    },
    /// `@every d`: the delay in whole seconds (at least 1, sub-second part dropped).
    Every { seconds: u64 },
}

/// `cron.ParseStandard(spec)`: `Err` carries robfig's error text verbatim.
pub fn parse_standard(spec: &str) -> Result<(), String> {
    parse(spec).map(|_| ())
}

/// Like [`parse_standard`], returning the schedule.
pub fn parse(spec: &str) -> Result<CronSchedule, String> {
    if spec.is_empty() {
        return Err("empty spec string".to_string());
    }
    let mut spec = spec;
    let mut location = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').unwrap_or(2);
        let Some(space) = spec.find(' ') else {
            // Upstream slices spec[eq+1:-1] and panics (the apiserver answers 500).
            return Err("runtime error: slice bounds out of range [:-1]".to_string());
        };
        let name = &spec[eq + 1..space];
        if let Err(e) = load_location(name) {
            return Err(format!("provided bad location {name}: {e}"));
        }
        location = Some(name.to_string());
        spec = go_trim_space(&spec[space..]);
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec, location);
    }
    let fields: Vec<&str> = spec.split(char::is_whitespace).filter(|f| !f.is_empty()).collect();
    if fields.len() != 5 {
        return Err(format!("expected exactly 5 fields, found {}: [{}]", fields.len(), fields.join(" ")));
    }
    Ok(CronSchedule::Spec {
        minute: get_field(fields[0], MINUTES)?,
        hour: get_field(fields[1], HOURS)?,
        dom: get_field(fields[2], DOM)?,
        month: get_field(fields[3], MONTHS)?,
        dow: get_field(fields[4], DOW)?,
        location,
    })
}

fn go_trim_space(s: &str) -> &str {
    s.trim_matches(char::is_whitespace)
}

fn get_field(field: &str, r: Bounds) -> Result<u64, String> {
    let mut bits = 0;
    for expr in field.split(',').filter(|e| !e.is_empty()) {
        bits |= get_range(expr, r)?;
    }
    Ok(bits)
}

fn get_range(expr: &str, r: Bounds) -> Result<u64, String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single_digit = low_and_high.len() == 1;
    let (start, mut end, mut extra);
    if low_and_high[0] == "*" || low_and_high[0] == "?" {
        start = r.min;
        end = r.max;
        extra = STAR_BIT;
    } else {
        start = parse_int_or_name(low_and_high[0], r.names)?;
        end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(low_and_high[1], r.names)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        extra = 0;
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step[1])?;
            if single_digit {
                end = r.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < r.min {
        return Err(format!("beginning of range ({start}) below minimum ({}): {expr}", r.min));
    }
    if end > r.max {
        return Err(format!("end of range ({end}) above maximum ({}): {expr}", r.max));
    }
    if start > end {
        return Err(format!("beginning of range ({start}) beyond end of range ({end}): {expr}"));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(get_bits(start, end, step) | extra)
}

fn get_bits(min: u64, max: u64, step: u64) -> u64 {
    let mut bits = 0;
    let mut i = min;
    while i <= max {
        bits |= 1 << i;
        match i.checked_add(step) {
            Some(n) => i = n,
            None => break,
        }
    }
    bits
}

fn parse_int_or_name(expr: &str, names: &[(&str, u64)]) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    if let Some((_, n)) = names.iter().find(|(name, _)| *name == lower) {
        return Ok(*n);
    }
    must_parse_int(expr)
}

fn must_parse_int(expr: &str) -> Result<u64, String> {
    let num = go_atoi(expr).map_err(|e| format!("failed to parse int from {expr}: {e}"))?;
    if num < 0 {
        return Err(format!("negative number ({num}) not allowed: {expr}"));
    }
    Ok(num as u64)
}

/// Go's `strconv.Atoi` (64-bit `int`), with its error text.
pub(crate) fn go_atoi(s: &str) -> Result<i64, String> {
    let syntax = || format!("strconv.Atoi: parsing {}: invalid syntax", go_strconv_quote(s));
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
    i64::try_from(v).map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", go_strconv_quote(s)))
}

/// `strconv.Quote`.
fn go_strconv_quote(s: &str) -> String {
    super::common::go_quote(s)
}

fn parse_descriptor(descriptor: &str, location: Option<String>) -> Result<CronSchedule, String> {
    let all = |b: Bounds| get_bits(b.min, b.max, 1) | STAR_BIT;
    let spec = |minute, hour, dom, month, dow| CronSchedule::Spec { minute, hour, dom, month, dow, location };
    match descriptor {
        "@yearly" | "@annually" => Ok(spec(1, 1, 1 << 1, 1 << 1, all(DOW))),
        "@monthly" => Ok(spec(1, 1, 1 << 1, all(MONTHS), all(DOW))),
        "@weekly" => Ok(spec(1, 1, all(DOM), all(MONTHS), 1)),
        "@daily" | "@midnight" => Ok(spec(1, 1, all(DOM), all(MONTHS), all(DOW))),
        "@hourly" => Ok(spec(1, all(HOURS), all(DOM), all(MONTHS), all(DOW))),
        _ => match descriptor.strip_prefix("@every ") {
            Some(d) => {
                let nanos = go_parse_duration(d)
                    .map_err(|e| format!("failed to parse duration {descriptor}: {e}"))?;
                let secs = if nanos < 1_000_000_000 { 1 } else { (nanos / 1_000_000_000) as u64 };
                Ok(CronSchedule::Every { seconds: secs })
            }
            None => Err(format!("unrecognized descriptor: {descriptor}")),
        },
    }
}

/// `time.ParseDuration`: nanoseconds, or Go's error text.
pub(crate) fn go_parse_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", go_time_quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.chars().next()
        && (c == '-' || c == '+')
    {
        neg = c == '-';
        s = &s[1..];
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const LIMIT: u64 = 1 << 63;
    let mut d: u64 = 0;
    while !s.is_empty() {
        let first = s.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        // leadingInt
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut v: u64 = 0;
        for b in s[..digits].bytes() {
            if v > LIMIT / 10 {
                return Err(invalid());
            }
            v = v * 10 + u64::from(b - b'0');
            if v > LIMIT {
                return Err(invalid());
            }
        }
        let pre = digits > 0;
        s = &s[digits..];
        // leadingFraction
        let mut f: u64 = 0;
        let mut scale = 1f64;
        let mut post = false;
        if s.as_bytes().first() == Some(&b'.') {
            s = &s[1..];
            let n = s.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for b in s[..n].bytes() {
                if overflow {
                    continue;
                }
                if f > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(b - b'0');
                if y > LIMIT {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = n > 0;
            s = &s[n..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s.bytes().take_while(|&b| !(b == b'.' || b.is_ascii_digit())).count();
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", go_time_quote(orig)));
        }
        let u = &s[..unit_len];
        s = &s[unit_len..];
        let unit: u64 = match u {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    go_time_quote(u),
                    go_time_quote(orig)
                ));
            }
        };
        if v > LIMIT / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return Err(invalid());
            }
        }
        d += v;
        if d > LIMIT {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((d as i128).wrapping_neg() as i64);
    }
    if d > LIMIT - 1 {
        return Err(invalid());
    }
    Ok(d as i64)
}

/// The `quote` of Go's time package: bytes outside printable ASCII as `\xNN`.
fn go_time_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if (c as u32) >= 0x80 || c < ' ' {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// `time.LoadLocation` against jiff's time zone database: names are case-sensitive as on
/// the zoneinfo file system Go reads.
pub(crate) fn load_location(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "UTC" || name == "Local" {
        return Ok(());
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err("time: invalid location name".to_string());
    }
    match jiff::tz::TimeZone::get(name) {
        Ok(tz) if tz.iana_name() == Some(name) => Ok(()),
        _ => Err(format!("unknown time zone {name}")),
    }
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
    #[test]
    fn parsed_bits() {
        let CronSchedule::Spec { minute, hour, dom, month, dow, location } =
            parse("5 * * * *").expect("valid")
        else {
            panic!("not a spec")
        };
        assert_eq!(minute, 1 << 5);
        assert_eq!(hour, get_bits(0, 23, 1) | STAR_BIT);
        assert_eq!(dom, get_bits(1, 31, 1) | STAR_BIT);
        assert_eq!(month, get_bits(1, 12, 1) | STAR_BIT);
        assert_eq!(dow, get_bits(0, 6, 1) | STAR_BIT);
        assert_eq!(location, None);
        // "*/2" clears the star bit, "*/1" keeps it; "5/15" means 5-59/15.
        let CronSchedule::Spec { minute, hour, .. } = parse("*/2 */1 * * *").expect("valid") else {
            panic!()
        };
        assert_eq!(minute, get_bits(0, 59, 2));
        assert_eq!(hour, get_bits(0, 23, 1) | STAR_BIT);
        let CronSchedule::Spec { minute, .. } = parse("5/15 * * * *").expect("valid") else { panic!() };
        assert_eq!(minute, (1 << 5) | (1 << 20) | (1 << 35) | (1 << 50));
        assert_eq!(parse("@every 1500ms"), Ok(CronSchedule::Every { seconds: 1 }));
        assert_eq!(parse("@every 10ms"), Ok(CronSchedule::Every { seconds: 1 }));
        assert_eq!(parse("@every 2h"), Ok(CronSchedule::Every { seconds: 7200 }));
    }

    // Go time_test.go TestParseDuration / TestParseDurationErrors (a sample).
    #[test]
    fn go_durations() {
        assert_eq!(go_parse_duration("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(go_parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(go_parse_duration(".5s"), Ok(500_000_000));
        assert_eq!(go_parse_duration("0"), Ok(0));
        assert_eq!(go_parse_duration("-1s"), Ok(-1_000_000_000));
        assert_eq!(go_parse_duration("1µs"), Ok(1_000));
        assert_eq!(go_parse_duration(""), Err("time: invalid duration \"\"".into()));
        assert_eq!(go_parse_duration("."), Err("time: invalid duration \".\"".into()));
        assert_eq!(go_parse_duration("3000000h"), Err("time: invalid duration \"3000000h\"".into()));
        assert_eq!(
            go_parse_duration("1é"),
            Err("time: unknown unit \"\\xc3\\xa9\" in duration \"1\\xc3\\xa9\"".into())
        );
    }

    #[test]
    fn locations() {
        assert_eq!(load_location("America/New_York"), Ok(()));
        assert_eq!(load_location("america/new_york"), Err("unknown time zone america/new_york".into()));
        assert_eq!(load_location("a..b"), Err("time: invalid location name".into()));
        assert_eq!(load_location("Local"), Ok(()));
    }
}
