//! Rendering of values as Go's fmt prints them, for error texts that must match upstream's.

/// Go's `strconv.Quote` (what `%q` prints for a string), shared with the cron parser.
pub use batchfleet_cron::go_strconv_quote as go_quote;

#[cfg(test)]
mod tests {
    use super::*;

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
