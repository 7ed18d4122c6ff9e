//! robfig/cron v3.0.1 `parser.go` as used through `cron.ParseStandard`
//! (`NewParser(Minute | Hour | Dom | Month | Dow | Descriptor)`), with robfig's exact error texts,
//! plus the pieces of Go it leans on: `strings.Fields`, `strings.ToLower`, `strconv.Atoi`,
//! `time.ParseDuration` and `time.LoadLocation`.
//!
//! The texts and the order of the checks follow parser.go line by line; the syntax-only validator
//! in `loadtest/sim/src/admission/cron_syntax.rs` was the starting point (its `Atoi` differs from
//! Go's on long inputs that mix digits and junk, which this port fixes: see [`go_atoi`]).

use jiff::tz::TimeZone;

use super::every::ConstantDelay;
use super::spec::SpecSchedule;
use super::{Kind, Location, ParseError, Schedule};

/// `starBit`: set when a field contained `*` or `?` (and no step > 1).
pub(crate) const STAR_BIT: u64 = 1 << 63;

/// robfig's `bounds`.
#[derive(Clone, Copy)]
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const SECONDS: Bounds = Bounds { min: 0, max: 59, names: &[] };
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

fn err(msg: impl Into<String>) -> ParseError {
    ParseError(msg.into())
}

/// `cron.ParseStandard(spec)`.
pub(super) fn parse_standard(spec: &str) -> Result<Schedule, ParseError> {
    if spec.is_empty() {
        return Err(err("empty spec string"));
    }
    let mut spec = spec;
    // `var loc = time.Local`: `None` means "the location of the time handed to Next".
    let mut location: Option<Location> = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // i := strings.Index(spec, " "); eq := strings.Index(spec, "=")
        let eq = spec.find('=').unwrap_or(2);
        let Some(i) = spec.find(' ') else {
            // Upstream slices spec[eq+1:-1] and panics (the controller's worker recovers it).
            return Err(err("runtime error: slice bounds out of range [:-1]"));
        };
        let name = &spec[eq + 1..i];
        location = load_location(name)
            .map_err(|e| err(format!("provided bad location {name}: {e}")))?
            .map(|tz| Location { name: name.to_string(), tz });
        spec = go_trim_space(&spec[i..]);
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec, location);
    }
    let fields = go_fields(spec);
    if fields.len() != 5 {
        return Err(err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        )));
    }
    // normalizeFields: the seconds field defaults to "0".
    let spec = SpecSchedule {
        second: get_field("0", SECONDS)?,
        minute: get_field(fields[0], MINUTES)?,
        hour: get_field(fields[1], HOURS)?,
        dom: get_field(fields[2], DOM)?,
        month: get_field(fields[3], MONTHS)?,
        dow: get_field(fields[4], DOW)?,
    };
    Ok(Schedule { kind: Kind::Spec { spec, location } })
}

/// `strings.Fields`: split on Unicode white space (Go's `unicode.IsSpace` and Rust's
/// `char::is_whitespace` agree on the White_Space property).
fn go_fields(s: &str) -> Vec<&str> {
    s.split(char::is_whitespace).filter(|f| !f.is_empty()).collect()
}

/// `strings.TrimSpace`.
fn go_trim_space(s: &str) -> &str {
    s.trim_matches(char::is_whitespace)
}

/// `getField`: a comma-separated list of ranges (`strings.FieldsFunc` drops empty ones).
fn get_field(field: &str, r: Bounds) -> Result<u64, ParseError> {
    let mut bits = 0;
    for expr in field.split(',').filter(|e| !e.is_empty()) {
        bits |= get_range(expr, r)?;
    }
    Ok(bits)
}

/// `getRange`: `number | number "-" number [ "/" number ]`, `*` and `?`.
fn get_range(expr: &str, r: Bounds) -> Result<u64, ParseError> {
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
            _ => return Err(err(format!("too many hyphens: {expr}"))),
        };
        extra = 0;
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step[1])?;
            // Special handling: "N/step" means "N-max/step".
            if single_digit {
                end = r.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(err(format!("too many slashes: {expr}"))),
    };
    if start < r.min {
        return Err(err(format!("beginning of range ({start}) below minimum ({}): {expr}", r.min)));
    }
    if end > r.max {
        return Err(err(format!("end of range ({end}) above maximum ({}): {expr}", r.max)));
    }
    if start > end {
        return Err(err(format!("beginning of range ({start}) beyond end of range ({end}): {expr}")));
    }
    if step == 0 {
        return Err(err(format!("step of range should be a positive number: {expr}")));
    }
    Ok(get_bits(start, end, step) | extra)
}

/// `getBits`: bits `[min, max]` every `step` (all callers have `max <= 59`).
pub(crate) fn get_bits(min: u64, max: u64, step: u64) -> u64 {
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

/// `all`: every bit of the bounds plus the star bit.
fn all(r: Bounds) -> u64 {
    get_bits(r.min, r.max, 1) | STAR_BIT
}

fn parse_int_or_name(expr: &str, names: &[(&str, u64)]) -> Result<u64, ParseError> {
    if !names.is_empty() {
        let lower = go_to_lower(expr);
        if let Some((_, n)) = names.iter().find(|(name, _)| *name == lower) {
            return Ok(*n);
        }
    }
    must_parse_int(expr)
}

/// `strings.ToLower`: Go maps rune by rune with `unicode.ToLower`, so U+0130 becomes a plain `i`
/// (Rust's full mapping gives `i` + U+0307).
fn go_to_lower(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{130}' => 'i',
            c => c.to_lowercase().next().unwrap_or(c),
        })
        .collect()
}

fn must_parse_int(expr: &str) -> Result<u64, ParseError> {
    let num = go_atoi(expr).map_err(|e| err(format!("failed to parse int from {expr}: {e}")))?;
    if num < 0 {
        return Err(err(format!("negative number ({num}) not allowed: {expr}")));
    }
    Ok(num.unsigned_abs())
}

/// Go's `strconv.Atoi` on a 64-bit platform, with its error text. Strings shorter than 19 bytes
/// take Atoi's fast path (any non-digit is a syntax error); longer ones go through `ParseInt`,
/// which reports "value out of range" as soon as the digits overflow, before it would have seen
/// a later invalid byte.
pub(crate) fn go_atoi(s: &str) -> Result<i64, String> {
    let syntax = || format!("strconv.Atoi: parsing {}: invalid syntax", go_strconv_quote(s));
    let range = || format!("strconv.Atoi: parsing {}: value out of range", go_strconv_quote(s));
    let b = s.as_bytes();
    if !b.is_empty() && b.len() < 19 {
        let (neg, digits) = match b[0] {
            b'-' => (true, &b[1..]),
            b'+' => (false, &b[1..]),
            _ => (false, b),
        };
        if digits.is_empty() {
            return Err(syntax());
        }
        let mut n: i64 = 0;
        for &c in digits {
            if !c.is_ascii_digit() {
                return Err(syntax());
            }
            n = n * 10 + i64::from(c - b'0');
        }
        return Ok(if neg { -n } else { n });
    }
    // ParseInt(s, 10, 0) → ParseUint.
    if b.is_empty() {
        return Err(syntax());
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() {
        return Err(syntax());
    }
    const CUTOFF: u64 = u64::MAX / 10 + 1;
    let mut n: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(syntax());
        }
        if n >= CUTOFF {
            return Err(range());
        }
        n *= 10;
        match n.checked_add(u64::from(c - b'0')) {
            Some(n1) => n = n1,
            None => return Err(range()),
        }
    }
    const CUT: u64 = 1 << 63;
    if !neg && n >= CUT {
        return Err(range());
    }
    if neg && n > CUT {
        return Err(range());
    }
    Ok(if neg { (n as i64).wrapping_neg() } else { n as i64 })
}

/// `strconv.Quote`. Non-printable runes are escaped as Go does; Go's `IsPrint` is approximated by
/// Rust's control, format, private-use, separator and noncharacter classes (unassigned code points,
/// which Go also escapes, are printed as they are).
pub fn go_strconv_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if !go_is_print(c) => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn go_is_print(c: char) -> bool {
    let u = c as u32;
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let format = matches!(u,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x890..=0x891 | 0x8E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F);
    let private = matches!(u, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD);
    let nonchar = (u & 0xFFFE) == 0xFFFE || (0xFDD0..=0xFDEF).contains(&u);
    !(format || private || nonchar)
}

/// `parseDescriptor`.
fn parse_descriptor(descriptor: &str, location: Option<Location>) -> Result<Schedule, ParseError> {
    let spec = |minute, hour, dom, month, dow| SpecSchedule { second: 1, minute, hour, dom, month, dow };
    let spec = match descriptor {
        "@yearly" | "@annually" => spec(1, 1, 1 << 1, 1 << 1, all(DOW)),
        "@monthly" => spec(1, 1, 1 << 1, all(MONTHS), all(DOW)),
        "@weekly" => spec(1, 1, all(DOM), all(MONTHS), 1),
        "@daily" | "@midnight" => spec(1, 1, all(DOM), all(MONTHS), all(DOW)),
        "@hourly" => spec(1, all(HOURS), all(DOM), all(MONTHS), all(DOW)),
        _ => {
            return match descriptor.strip_prefix("@every ") {
                Some(d) => {
                    let nanos = go_parse_duration(d)
                        .map_err(|e| err(format!("failed to parse duration {descriptor}: {e}")))?;
                    // An @every schedule carries no location (ConstantDelaySchedule).
                    Ok(Schedule { kind: Kind::Every(ConstantDelay::every(nanos)) })
                }
                None => Err(err(format!("unrecognized descriptor: {descriptor}"))),
            };
        }
    };
    Ok(Schedule { kind: Kind::Spec { spec, location } })
}

/// `time.ParseDuration`: nanoseconds, or Go's error text.
pub(crate) fn go_parse_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", go_time_quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.bytes().next()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
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
        return Ok((d as i64).wrapping_neg());
    }
    if d > LIMIT - 1 {
        return Err(invalid());
    }
    Ok(d as i64)
}

/// The `quote` of Go's time package: bytes of non-ASCII and control runes as `\xNN`.
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

/// `time.LoadLocation` against jiff's bundled time zone database. `Ok(None)` is `time.Local`
/// ("Local"); `""` and `"UTC"` are UTC. Names are case-sensitive, as on the zoneinfo file
/// system and in Go's embedded tzdata.
pub fn load_location(name: &str) -> Result<Option<TimeZone>, String> {
    if name.is_empty() || name == "UTC" {
        return Ok(Some(TimeZone::UTC));
    }
    if name == "Local" {
        return Ok(None);
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err("time: invalid location name".to_string());
    }
    match TimeZone::get(name) {
        Ok(tz) if tz.iana_name() == Some(name) => Ok(Some(tz)),
        _ => Err(format!("unknown time zone {name}")),
    }
}
