//! `fieldSelector`: a port of apimachinery `pkg/fields/selector.go` (`ParseSelector`,
//! `splitTerms`, `splitTerm`, `UnescapeValue`, `EscapeValue`, `String`).
//!
//! Grammar: comma-separated ANDs of `field=value`, `field==value`, `field!=value`. In a value,
//! `\,` `\=` `\\` stand for `,` `=` `\`; any other `\x`, a trailing `\`, or a bare `=` in a
//! value is an error. The field name is taken verbatim up to the first operator.

use std::borrow::Cow;
use std::fmt;

use super::SelectorError;

/// A term's operator. `=` and `==` are the same term upstream (`hasTerm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    /// `=` or `==`
    Equals,
    /// `!=`
    NotEquals,
}

/// One `field op value` term, value unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field label as the client wrote it (before any per-kind aliasing).
    pub field: String,
    /// The operator.
    pub op: FieldOp,
    /// The unescaped value.
    pub value: String,
}

/// A parsed `fieldSelector`: the AND of its terms, in upstream's order (terms sorted as
/// written), which is also the order the apiserver validates their field labels in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// `fields.ParseSelector`. The error text is the apiserver's 400 message.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut reqs = Vec::with_capacity(parts.len());
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(SelectorError::Field(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let value = unescape_value(rhs).map_err(SelectorError::Field)?.into_owned();
            reqs.push(FieldRequirement { field: lhs.to_string(), op, value });
        }
        Ok(Self { reqs })
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The terms, in evaluation order.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.reqs
    }

    /// The field labels the selector names, in the order the apiserver checks them.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.reqs.iter().map(|r| r.field.as_str())
    }

    /// `Selector.Matches`: `get` returns a field's value for the object; `None` (a field the
    /// kind does not set) reads as the empty string, as `fields.Set.Get` does.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.reqs.iter().all(|r| {
            let v = get(&r.field);
            let v = v.as_deref().unwrap_or("");
            (v == r.value) == (r.op == FieldOp::Equals)
        })
    }

    /// [`matches`](Self::matches) without an allocation per term when the values are borrowed
    /// from the object, e.g. with [`field_value_ref`](super::field_value_ref).
    pub fn matches_ref<'o>(&self, get: impl Fn(&str) -> Option<Cow<'o, str>>) -> bool {
        self.reqs.iter().all(|r| {
            let v = get(&r.field);
            let v = v.as_deref().unwrap_or("");
            (v == r.value) == (r.op == FieldOp::Equals)
        })
    }

    /// `Selector.RequiresExactMatch(field)`: the value of the first `=`/`==` term on `field`.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.reqs.iter().find(|r| r.op == FieldOp::Equals && r.field == field).map(|r| r.value.as_str())
    }

    /// The object name a `metadata.name=X` selector pins, as kubectl's `WatchSingle` (and
    /// `kubectl wait` / `delete --wait`) send it.
    pub fn single_name(&self) -> Option<&str> {
        self.requires_exact_match("metadata.name")
    }
}

impl fmt::Display for FieldSelector {
    /// `Selector.String`: terms joined by `,`, values re-escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if r.op == FieldOp::Equals { "=" } else { "!=" };
            write!(f, "{}{op}{}", r.field, escape_value(&r.value))?;
        }
        Ok(())
    }
}

/// `splitTerms`: split on commas not escaped by a backslash (the backslash stays in the term).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::with_capacity(1);
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// `splitTerm`: the first `!=`, `==` or `=` (tried in that order at each position) splits the
/// term; the right-hand side is returned still escaped.
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [("!=", FieldOp::NotEquals), ("==", FieldOp::Equals), ("=", FieldOp::Equals)] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, rhs));
            }
        }
    }
    None
}

/// `UnescapeValue`, with upstream's error texts (`UnescapedRune` prints the rune as a number).
fn unescape_value(s: &str) -> Result<Cow<'_, str>, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(Cow::Borrowed(s));
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => return Err(format!("invalid field selector: invalid escape sequence: \\{c}")),
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                return Err(format!("invalid field selector: unescaped character in value: {}", c as u32));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(Cow::Owned(out))
}

/// `EscapeValue`: prefix `\`, `,` and `=` with a backslash.
pub fn escape_value(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', ',', '=']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn fields(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn matches(sel: &str, set: &HashMap<String, String>) -> bool {
        FieldSelector::parse(sel).unwrap().matches(|f| set.get(f).cloned())
    }

    /// fields/selector_test.go TestSplitTerms.
    #[test]
    fn split_terms_cases() {
        let cases: &[(&str, &[&str])] = &[
            ("a", &["a"]),
            ("a=avalue", &["a=avalue"]),
            ("a=avalue,b=bvalue", &["a=avalue", "b=bvalue"]),
            ("a=avalue,b==bvalue,c!=cvalue", &["a=avalue", "b==bvalue", "c!=cvalue"]),
            ("", &[]),
            ("a=a,", &["a=a", ""]),
            (",a=a", &["", "a=a"]),
            (r"k=\,,k2=v2", &[r"k=\,", "k2=v2"]),
            (r"k=\\,k2=v2", &[r"k=\\", "k2=v2"]),
            (r"k=\\\,,k2=v2", &[r"k=\\\,", "k2=v2"]),
            (r"k=\a\b\", &[r"k=\a\b\"]),
            (r"k=\", &[r"k=\"]),
            ("함=수,목=록", &["함=수", "목=록"]),
        ];
        for (s, want) in cases {
            assert_eq!(split_terms(s), *want, "{s}");
        }
    }

    /// fields/selector_test.go TestSplitTerm.
    #[test]
    fn split_term_cases() {
        type Split<'a> = Option<(&'a str, FieldOp, &'a str)>;
        let cases: &[(&str, Split)] = &[
            ("a=value", Some(("a", FieldOp::Equals, "value"))),
            ("b==value", Some(("b", FieldOp::Equals, "value"))),
            ("c!=value", Some(("c", FieldOp::NotEquals, "value"))),
            ("", None),
            ("a", None),
            (r"k=\,", Some(("k", FieldOp::Equals, r"\,"))),
            (r"k=\=", Some(("k", FieldOp::Equals, r"\="))),
            (r"k=\\\a\b\=\,\", Some(("k", FieldOp::Equals, r"\\\a\b\=\,\"))),
            ("함=수", Some(("함", FieldOp::Equals, "수"))),
        ];
        for (term, want) in cases {
            assert_eq!(split_term(term), *want, "{term}");
        }
    }

    /// fields/selector_test.go TestEscapeValue.
    #[test]
    fn escape_value_cases() {
        let cases =
            [("", ""), ("a", "a"), ("=", r"\="), (",", r"\,"), (r"\", r"\\"), (r"\=\,\", r"\\\=\\\,\\")];
        for (raw, escaped) in cases {
            assert_eq!(escape_value(raw), escaped);
            assert_eq!(unescape_value(escaped).unwrap(), raw);
        }
        for bad in [r"\", r"\\\", r"\a"] {
            let e = unescape_value(bad).unwrap_err();
            assert!(e.contains("invalid escape sequence"), "{bad}: {e}");
        }
        assert_eq!(
            unescape_value(r"\a").unwrap_err(),
            r"invalid field selector: invalid escape sequence: \a"
        );
        assert_eq!(
            unescape_value("a=b").unwrap_err(),
            "invalid field selector: unescaped character in value: 61"
        );
    }

    /// fields/selector_test.go TestSelectorParse.
    #[test]
    fn selector_parse() {
        for good in ["x=a,y=b,z=c", "", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"] {
            let s = FieldSelector::parse(good).unwrap_or_else(|e| panic!("{good}: {e}"));
            assert_eq!(s.to_string(), good);
        }
        for bad in ["x=a||y=b", "x==a==b", "x=a,b", "x in (a)", "x in (a,b,c)", "x"] {
            assert!(FieldSelector::parse(bad).is_err(), "{bad}");
        }
    }

    /// The parse errors' texts (`parseSelector`, `UnescapeValue`).
    #[test]
    fn error_texts() {
        let cases = [
            ("x", "invalid selector: 'x'; can't understand 'x'"),
            ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
            ("x in (a)", "invalid selector: 'x in (a)'; can't understand 'x in (a)'"),
            ("x==a==b", "invalid field selector: unescaped character in value: 61"),
            (r"x=\q", r"invalid field selector: invalid escape sequence: \q"),
            (r"x=a\", r"invalid field selector: invalid escape sequence: \"),
        ];
        for (input, want) in cases {
            assert_eq!(FieldSelector::parse(input).unwrap_err().to_string(), want, "{input}");
        }
    }

    /// fields/selector_test.go TestDeterministicParse.
    #[test]
    fn deterministic_parse() {
        let s1 = FieldSelector::parse("x=a,a=x").unwrap();
        let s2 = FieldSelector::parse("a=x,x=a").unwrap();
        assert_eq!(s1.to_string(), s2.to_string());
        assert_eq!(s1.fields().collect::<Vec<_>>(), ["a", "x"]);
    }

    /// fields/selector_test.go TestSelectorMatches.
    #[test]
    fn selector_matches() {
        let fieldset = fields(&[("foo", "bar"), ("baz", "blah"), ("complex", r"=value\,\")]);
        let cases: &[(&str, HashMap<String, String>, bool)] = &[
            ("", fields(&[("x", "y")]), true),
            ("x=y", fields(&[("x", "y")]), true),
            ("x=y,z=w", fields(&[("x", "y"), ("z", "w")]), true),
            ("x!=y,z!=w", fields(&[("x", "z"), ("z", "a")]), true),
            ("notin=in", fields(&[("notin", "in")]), true),
            ("x=y", fields(&[("x", "z")]), false),
            ("x=y,z=w", fields(&[("x", "w"), ("z", "w")]), false),
            ("x!=y,z!=w", fields(&[("x", "z"), ("z", "w")]), false),
            ("foo=bar", fieldset.clone(), true),
            ("baz=blah", fieldset.clone(), true),
            ("foo=bar,baz=blah", fieldset.clone(), true),
            (r"foo=bar,baz=blah,complex=\=value\\\,\\", fieldset.clone(), true),
            ("foo=blah", fieldset.clone(), false),
            ("baz=bar", fieldset.clone(), false),
            ("foo=bar,foobar=bar,baz=blah", fieldset.clone(), false),
            // An absent field reads as "".
            ("missing=", fieldset.clone(), true),
            ("missing!=", fieldset.clone(), false),
        ];
        for (s, set, want) in cases {
            assert_eq!(matches(s, set), *want, "{s}");
            let sel = FieldSelector::parse(s).unwrap();
            assert_eq!(sel.matches_ref(|f| set.get(f).map(|v| Cow::Borrowed(v.as_str()))), *want, "{s}");
        }
    }

    /// fields/selector_test.go TestRequiresExactMatch (on parsed selectors) and kubectl's
    /// `WatchSingle` selector.
    #[test]
    fn requires_exact_match_and_single_name() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("", "test", None),
            ("a=b", "test", None),
            ("test=b", "test", Some("b")),
            ("test=", "test", Some("")),
            ("test!=b", "test", None),
            ("a=c,test=b", "test", Some("b")),
        ];
        for (s, field, want) in cases {
            assert_eq!(FieldSelector::parse(s).unwrap().requires_exact_match(field), *want, "{s}");
        }
        assert_eq!(FieldSelector::parse("metadata.name=web-0").unwrap().single_name(), Some("web-0"));
        assert_eq!(FieldSelector::parse("metadata.name==a\\,b").unwrap().single_name(), Some("a,b"));
        assert_eq!(FieldSelector::parse("metadata.name!=x").unwrap().single_name(), None);
        assert!(FieldSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn never_panics() {
        for n in [r"a=\,\=\\,b!=c==d,,=,!,\", "함=\\수,목!=록", "=", "!=", "==", "\u{0}=\u{0}"] {
            for end in 0..=n.len() {
                if n.is_char_boundary(end) {
                    let _ = FieldSelector::parse(&n[..end]).map(|s| s.to_string());
                }
            }
        }
    }
}
