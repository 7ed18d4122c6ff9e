//! `resource.Quantity.String()`: the canonical form kube-apiserver prints quantities in, in
//! validation messages and warnings ("1000m" → "1", "0.5Gi" → "512Mi", "0.5" → "500m").
//! Exact integer arithmetic; anything that does not parse or overflows is printed as written.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// The canonical string of `text`, or `text` itself when it is not a quantity the sim parses.
pub(crate) fn canonical(text: &str) -> String {
    canonicalize(text.trim()).unwrap_or_else(|| text.to_string())
}

fn canonicalize(s: &str) -> Option<String> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let digits: String = format!("{int_part}{frac_part}");
    let mut mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    let mut exponent = -i32::try_from(frac_part.len()).ok()?;
    let (format, binary_power, decimal_power) = match suffix {
        "" => (Format::DecimalSi, 0, 0),
        "n" => (Format::DecimalSi, 0, -9),
        "u" => (Format::DecimalSi, 0, -6),
        "m" => (Format::DecimalSi, 0, -3),
        "k" => (Format::DecimalSi, 0, 3),
        "M" => (Format::DecimalSi, 0, 6),
        "G" => (Format::DecimalSi, 0, 9),
        "T" => (Format::DecimalSi, 0, 12),
        "P" => (Format::DecimalSi, 0, 15),
        "E" => (Format::DecimalSi, 0, 18),
        "Ki" => (Format::BinarySi, 1, 0),
        "Mi" => (Format::BinarySi, 2, 0),
        "Gi" => (Format::BinarySi, 3, 0),
        "Ti" => (Format::BinarySi, 4, 0),
        "Pi" => (Format::BinarySi, 5, 0),
        "Ei" => (Format::BinarySi, 6, 0),
        e if e.len() > 1 && e.starts_with(['e', 'E']) => (Format::DecimalExponent, 0, e[1..].parse().ok()?),
        _ => return None,
    };
    for _ in 0..binary_power {
        mantissa = mantissa.checked_mul(1024)?;
    }
    exponent = exponent.checked_add(decimal_power)?;
    if mantissa == 0 {
        return Some("0".to_string());
    }
    // Parsing rounds anything finer than nano up to the next nano.
    while exponent < -9 {
        let rem = mantissa % 10;
        mantissa = mantissa / 10 + i128::from(rem != 0);
        exponent += 1;
    }
    let sign = if negative { "-" } else { "" };
    let mut format = format;
    if format == Format::BinarySi {
        let value = integer_value(mantissa, exponent);
        match value {
            Some(v) if v.abs() >= 1024 => {
                let mut v = v;
                let mut power = 0;
                while power < 6 && v % 1024 == 0 {
                    v /= 1024;
                    power += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
                return Some(format!("{sign}{v}{suffix}"));
            }
            _ => format = Format::DecimalSi,
        }
    }
    // AsCanonicalBytes: an integer mantissa and an exponent that is a multiple of 3.
    while exponent.rem_euclid(3) != 0 {
        mantissa = mantissa.checked_mul(10)?;
        exponent -= 1;
    }
    while mantissa % 1000 == 0 {
        mantissa /= 1000;
        exponent += 3;
    }
    let suffix = match (format, exponent) {
        (_, 0) => String::new(),
        (Format::DecimalSi, -9) => "n".into(),
        (Format::DecimalSi, -6) => "u".into(),
        (Format::DecimalSi, -3) => "m".into(),
        (Format::DecimalSi, 3) => "k".into(),
        (Format::DecimalSi, 6) => "M".into(),
        (Format::DecimalSi, 9) => "G".into(),
        (Format::DecimalSi, 12) => "T".into(),
        (Format::DecimalSi, 15) => "P".into(),
        (Format::DecimalSi, 18) => "E".into(),
        (_, e) => format!("e{e}"),
    };
    Some(format!("{sign}{mantissa}{suffix}"))
}

/// `mantissa × 10^exponent` when it is an integer.
fn integer_value(mantissa: i128, exponent: i32) -> Option<i128> {
    let mut v = mantissa;
    if exponent >= 0 {
        for _ in 0..exponent {
            v = v.checked_mul(10)?;
        }
        return Some(v);
    }
    for _ in 0..(-exponent) {
        if v % 10 != 0 {
            return None;
        }
        v /= 10;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// apimachinery resource/quantity_test.go (TestQuantityParse's canonical outputs,
    /// TestQuantityString) for the forms users write in pod resources.
    #[test]
    fn canonical_strings() {
        for (input, want) in [
            ("0", "0"),
            ("0Mi", "0"),
            ("1", "1"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            (".5", "500m"),
            ("100m", "100m"),
            ("1.5", "1500m"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("2G", "2G"),
            ("2000M", "2G"),
            ("1Gi", "1Gi"),
            ("2048Mi", "2Gi"),
            ("0.5Gi", "512Mi"),
            ("1.5Gi", "1536Mi"),
            ("1.5Ki", "1536"),
            ("0.5Ki", "512"),
            ("100Mi", "100Mi"),
            ("1e3", "1e3"),
            ("1E6", "1e6"),
            ("-1", "-1"),
            ("-100m", "-100m"),
            ("1n", "1n"),
            ("0.1n", "1n"),
            ("bogus", "bogus"),
        ] {
            assert_eq!(canonical(input), want, "{input}");
        }
    }
}
