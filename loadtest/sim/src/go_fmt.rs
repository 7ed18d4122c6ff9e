//! Rendering of values as Go's fmt prints them, for error texts that must match upstream's.

/// Go's `strconv.Quote` (what `%q` prints for a string): double quotes, `\"` and `\\`,
/// the C escapes, `\x` for other ASCII controls, `\u`/`\U` for non-printable runes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: graphic runes and the ASCII space.
fn go_is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32,
        0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x200b..=0x200f | 0x202a..=0x202e
        | 0x2060..=0x206f | 0xd800..=0xdfff | 0xe000..=0xf8ff | 0xfeff | 0xfff9..=0xfffb
        | 0xfffe | 0xffff | 0xf0000..=0x10ffff)
}

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
