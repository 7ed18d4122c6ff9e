//! `labelSelector`: a port of apimachinery `pkg/labels/selector.go` (`Parse`, its lexer and
//! parser, `NewRequirement`, `Requirement.Matches`, `Requirement.String`) with the validation
//! texts of `pkg/api/validate/content` (`IsLabelKey`, `IsLabelValue`), from `admission::names`.
//!
//! Grammar: comma-separated ANDs of `key`, `!key`, `key=v`, `key==v`, `key!=v`,
//! `key in (v1,v2)`, `key notin (v1,v2)`, `key>N`, `key<N`.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use crate::admission::names::{label_key_errors, label_value_errors};

use super::SelectorError;
use crate::go_fmt::go_quote;

/// A requirement's operator (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOp {
    /// `key in (…)`
    In,
    /// `key notin (…)`
    NotIn,
    /// `key=v`
    Equals,
    /// `key==v`
    DoubleEquals,
    /// `key!=v`
    NotEquals,
    /// `key>N`
    GreaterThan,
    /// `key<N`
    LessThan,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
}

/// One parsed requirement. `values` are sorted and unique, as `sets.String.List()` leaves them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    key: String,
    op: LabelOp,
    values: Vec<String>,
    /// The integer of a `>`/`<` requirement, parsed once.
    bound: i64,
}

impl LabelRequirement {
    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn op(&self) -> LabelOp {
        self.op
    }

    /// The values (sorted, unique).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// `Requirement.Matches`. A label that is not a JSON string counts as present with a value
    /// no requirement can equal.
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let found = labels.and_then(|m| m.get(self.key.as_str())).map(Value::as_str);
        match self.op {
            LabelOp::In | LabelOp::Equals | LabelOp::DoubleEquals => match found {
                Some(Some(v)) => self.has_value(v),
                _ => false,
            },
            LabelOp::NotIn | LabelOp::NotEquals => match found {
                None => true,
                Some(Some(v)) => !self.has_value(v),
                Some(None) => true,
            },
            LabelOp::Exists => found.is_some(),
            LabelOp::DoesNotExist => found.is_none(),
            LabelOp::GreaterThan | LabelOp::LessThan => {
                let Some(Some(v)) = found else { return false };
                let Ok(n) = v.parse::<i64>() else { return false };
                if self.op == LabelOp::GreaterThan { n > self.bound } else { n < self.bound }
            }
        }
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }
}

impl fmt::Display for LabelRequirement {
    /// `Requirement.String`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op == LabelOp::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.op {
            LabelOp::Equals => "=",
            LabelOp::DoubleEquals => "==",
            LabelOp::NotEquals => "!=",
            LabelOp::In => " in ",
            LabelOp::NotIn => " notin ",
            LabelOp::GreaterThan => ">",
            LabelOp::LessThan => "<",
            LabelOp::Exists | LabelOp::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let set = matches!(self.op, LabelOp::In | LabelOp::NotIn);
        if set {
            f.write_str("(")?;
        }
        f.write_str(&self.values.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed `labelSelector`: the AND of its requirements, sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// `labels.Parse`. The error text is the apiserver's 400 message.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut p = Parser { items: scan(s), position: 0 };
        let mut reqs = p.parse().map_err(SelectorError::Label)?;
        // sort.Sort(ByKey(items)): a stable sort gives the same String() for distinct keys.
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { reqs })
    }

    /// True when the selector does not restrict anything (`Selector.Empty`).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.reqs
    }

    /// `Selector.Matches` against an object's `metadata.labels` (absent labels = `None`).
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.reqs.iter().all(|r| r.matches(labels))
    }

    /// `Selector.RequiresExactMatch`: the value `label` must have, if the selector pins it.
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.reqs.iter().find(|r| r.key == label)?;
        match r.op {
            LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::In if r.values.len() == 1 => {
                Some(&r.values[0])
            }
            _ => None,
        }
    }
}

impl fmt::Display for LabelSelector {
    /// `internalSelector.String`: requirements joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer (selector.go `Lexer`)

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// `string2token`, without the keywords (they are only looked up for identifiers).
fn special_token(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(ch: u8) -> bool {
    matches!(ch, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// Like Go's `read`: 0 at the end of input (and for a NUL byte, which Go cannot tell apart).
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
            buffer.push(ch);
        }
        let s = String::from_utf8_lossy(&buffer).into_owned();
        match s.as_str() {
            "in" => (Token::In, s),
            "notin" => (Token::NotIn, s),
            _ => (Token::Identifier, s),
        }
    }

    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut last: Option<(Token, usize)> = None;
        let mut buffer = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) {
                buffer.push(ch);
                if let Some(tok) = special_token(&buffer) {
                    last = Some((tok, buffer.len()));
                } else if last.is_some() {
                    self.unread();
                    break;
                }
            } else {
                self.unread();
                break;
            }
        }
        match last {
            Some((tok, len)) => (tok, String::from_utf8_lossy(&buffer[..len]).into_owned()),
            None => (
                Token::Error,
                format!("error expected: keyword found '{}'", String::from_utf8_lossy(&buffer)),
            ),
        }
    }

    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(ch) { self.scan_special_symbol() } else { self.scan_id_or_keyword() }
    }
}

/// `Parser.scan`: every token up to and including the end of string.
fn scan(s: &str) -> Vec<(Token, String)> {
    let mut l = Lexer { s: s.as_bytes(), pos: 0 };
    let mut items = Vec::new();
    loop {
        let (tok, lit) = l.lex();
        items.push((tok, lit));
        if tok == Token::EndOfString {
            return items;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parser (selector.go `Parser`)

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

/// `strings.Join(binaryOperators, ", ")`.
const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    fn lookahead(&self, ctx: Ctx) -> (Token, String) {
        let (tok, lit) =
            self.items.get(self.position).cloned().unwrap_or((Token::EndOfString, String::new()));
        (Self::in_context(tok, ctx), lit)
    }

    fn consume(&mut self, ctx: Ctx) -> (Token, String) {
        let item = self.lookahead(ctx);
        self.position += 1;
        item
    }

    fn in_context(tok: Token, ctx: Ctx) -> Token {
        match (ctx, tok) {
            (Ctx::Values, Token::In | Token::NotIn) => Token::Identifier,
            _ => tok,
        }
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Ctx::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r =
                        self.parse_requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Ctx::Values);
                    match t {
                        Token::EndOfString => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Ctx::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!("found '{l2}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(reqs),
                _ => {
                    return Err(format!("found '{lit}', expected: !, identifier, or 'end of string'"));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (LabelOp::Exists | LabelOp::DoesNotExist)) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            LabelOp::In | LabelOp::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, op, values.into_iter().collect())
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<LabelOp>), String> {
        let mut op = None;
        let (mut tok, mut literal) = self.consume(Ctx::Values);
        if tok == Token::DoesNotExist {
            op = Some(LabelOp::DoesNotExist);
            (tok, literal) = self.consume(Ctx::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let errs = label_key_errors(&literal);
        if !errs.is_empty() {
            return Err(invalid("<nil>", &literal, &errs.join("; ")));
        }
        let (t, _) = self.lookahead(Ctx::Values);
        if (t == Token::EndOfString || t == Token::Comma) && op != Some(LabelOp::DoesNotExist) {
            op = Some(LabelOp::Exists);
        }
        Ok((literal, op))
    }

    fn parse_operator(&mut self) -> Result<LabelOp, String> {
        let (tok, lit) = self.consume(Ctx::KeyAndOperator);
        Ok(match tok {
            Token::In => LabelOp::In,
            Token::Equals => LabelOp::Equals,
            Token::DoubleEquals => LabelOp::DoubleEquals,
            Token::GreaterThan => LabelOp::GreaterThan,
            Token::LessThan => LabelOp::LessThan,
            Token::NotIn => LabelOp::NotIn,
            Token::NotEquals => LabelOp::NotEquals,
            _ => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        })
    }

    fn parse_values(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, lit) = self.consume(Ctx::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Ctx::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let s = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Ctx::Values);
                if tok != Token::ClosedPar {
                    // Upstream reports the literal looked at before the list, not the one found.
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Token::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut s = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Ctx::Values);
            match tok {
                Token::Identifier => {
                    s.insert(lit);
                    let (tok2, lit2) = self.lookahead(Ctx::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if s.is_empty() {
                        s.insert(String::new());
                    }
                    let (tok2, _) = self.lookahead(Ctx::Values);
                    if tok2 == Token::ClosedPar {
                        s.insert(String::new());
                        return Ok(s);
                    }
                    if tok2 == Token::Comma {
                        s.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, _) = self.lookahead(Ctx::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (tok, lit) = self.consume(Ctx::Values);
        if tok == Token::Identifier {
            return Ok(BTreeSet::from([lit]));
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

/// `NewRequirement` for the shapes the parser produces (values non-empty for set and exact
/// operators, empty for exists), returning the aggregated `field.ErrorList` text on error.
fn new_requirement(key: String, op: LabelOp, values: Vec<String>) -> Result<LabelRequirement, String> {
    let mut errs: Vec<String> = Vec::new();
    let key_errs = label_key_errors(&key);
    if !key_errs.is_empty() {
        errs.push(invalid("key", &key, &key_errs.join("; ")));
    }
    let mut bound = 0;
    match op {
        LabelOp::In | LabelOp::NotIn if values.is_empty() => {
            errs.push(
                "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
                    .into(),
            );
        }
        LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::NotEquals if values.len() != 1 => {
            errs.push(format!(
                "values: Invalid value: {}: exact-match compatibility requires one single value",
                go_string_slice(&values)
            ));
        }
        LabelOp::Exists | LabelOp::DoesNotExist if !values.is_empty() => {
            errs.push(format!(
                "values: Invalid value: {}: values set must be empty for exists and does not exist",
                go_string_slice(&values)
            ));
        }
        LabelOp::GreaterThan | LabelOp::LessThan => {
            if values.len() != 1 {
                errs.push(format!(
                    "values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                    go_string_slice(&values)
                ));
            }
            for (i, v) in values.iter().enumerate() {
                match v.parse::<i64>() {
                    Ok(n) => bound = n,
                    Err(_) => errs.push(invalid(
                        &format!("values[{i}]"),
                        v,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )),
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let v_errs = label_value_errors(v);
        if !v_errs.is_empty() {
            errs.push(invalid(&format!("values[{i}][{key}]"), v, &v_errs.join("; ")));
        }
    }
    if errs.is_empty() {
        return Ok(LabelRequirement { key, op, values, bound });
    }
    Err(aggregate(errs))
}

/// `field.ErrorList.ToAggregate().Error()`: duplicates dropped, one error bare, more in `[…]`.
fn aggregate(errs: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 { seen.remove(0) } else { format!("[{}]", seen.join(", ")) }
}

/// `field.Invalid(path, value, detail).Error()` for a string value.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// `%#v` of a `[]string`.
fn go_string_slice(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect()
    }

    fn req(key: &str, op: LabelOp, vals: &[&str]) -> LabelRequirement {
        let mut v: Vec<String> = vals.iter().map(|s| s.to_string()).collect();
        v.sort();
        v.dedup();
        new_requirement(key.to_string(), op, v).unwrap()
    }

    fn sel(reqs: Vec<LabelRequirement>) -> LabelSelector {
        LabelSelector { reqs }
    }

    /// labels/selector_test.go TestSelectorParse.
    #[test]
    fn selector_parse() {
        let good = ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"];
        for t in good {
            let s = LabelSelector::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
            assert_eq!(s.to_string(), t.replace(' ', ""), "restring of {t}");
        }
        let bad = ["x=a||y=b", "x==a==b", "!x=a", "x<a"];
        for t in bad {
            assert!(LabelSelector::parse(t).is_err(), "{t} should fail");
        }
    }

    /// labels/selector_test.go TestDeterministicParse.
    #[test]
    fn deterministic_parse() {
        let s1 = LabelSelector::parse("x=a,a=x").unwrap();
        let s2 = LabelSelector::parse("a=x,x=a").unwrap();
        assert_eq!(s1.to_string(), s2.to_string());
    }

    /// labels/selector_test.go TestSelectorMatches + TestEverything.
    #[test]
    fn selector_matches() {
        let labelset = set(&[("foo", "bar"), ("baz", "blah")]);
        let cases: &[(&str, Map<String, Value>, bool)] = &[
            ("", set(&[("x", "y")]), true),
            ("x=y", set(&[("x", "y")]), true),
            ("x=y,z=w", set(&[("x", "y"), ("z", "w")]), true),
            ("x!=y,z!=w", set(&[("x", "z"), ("z", "a")]), true),
            ("notin=in", set(&[("notin", "in")]), true),
            ("x", set(&[("x", "z")]), true),
            ("!x", set(&[("y", "z")]), true),
            ("x>1", set(&[("x", "2")]), true),
            ("x<1", set(&[("x", "0")]), true),
            ("x=z", set(&[]), false),
            ("x=y", set(&[("x", "z")]), false),
            ("x=y,z=w", set(&[("x", "w"), ("z", "w")]), false),
            ("x!=y,z!=w", set(&[("x", "z"), ("z", "w")]), false),
            ("x", set(&[("y", "z")]), false),
            ("!x", set(&[("x", "z")]), false),
            ("x>1", set(&[("x", "0")]), false),
            ("x<1", set(&[("x", "2")]), false),
            ("foo=bar", labelset.clone(), true),
            ("baz=blah", labelset.clone(), true),
            ("foo=bar,baz=blah", labelset.clone(), true),
            ("foo=blah", labelset.clone(), false),
            ("baz=bar", labelset.clone(), false),
            ("foo=bar,foobar=bar,baz=blah", labelset.clone(), false),
        ];
        for (s, labels, want) in cases {
            let sel = LabelSelector::parse(s).unwrap();
            assert_eq!(sel.matches(Some(labels)), *want, "{s} vs {labels:?}");
        }
        // Absent metadata.labels behaves as the empty set.
        assert!(LabelSelector::parse("").unwrap().matches(None));
        assert!(LabelSelector::parse("!x,y notin (a)").unwrap().matches(None));
        assert!(!LabelSelector::parse("x").unwrap().matches(None));
        assert!(LabelSelector::parse("").unwrap().is_empty());
    }

    /// labels/selector_test.go TestLexer.
    #[test]
    fn lexer() {
        let cases = [
            ("", Token::EndOfString),
            (",", Token::Comma),
            ("notin", Token::NotIn),
            ("in", Token::In),
            ("=", Token::Equals),
            ("==", Token::DoubleEquals),
            (">", Token::GreaterThan),
            ("<", Token::LessThan),
            ("!", Token::DoesNotExist),
            ("!=", Token::NotEquals),
            ("(", Token::OpenPar),
            (")", Token::ClosedPar),
            ("~", Token::Identifier),
            ("||", Token::Identifier),
        ];
        for (s, want) in cases {
            let (tok, lit) = Lexer { s: s.as_bytes(), pos: 0 }.lex();
            assert_eq!(tok, want, "token of {s:?}");
            assert_eq!(lit, s, "literal of {s:?}");
        }
    }

    /// labels/selector_test.go TestLexerSequence and TestParserLookahead (which adds the
    /// trailing end-of-string token).
    #[test]
    fn lexer_sequence() {
        use Token::*;
        let cases: &[(&str, &[Token])] = &[
            ("key in ( value )", &[Identifier, In, OpenPar, Identifier, ClosedPar]),
            ("key notin ( value )", &[Identifier, NotIn, OpenPar, Identifier, ClosedPar]),
            (
                "key in ( value1, value2 )",
                &[Identifier, In, OpenPar, Identifier, Comma, Identifier, ClosedPar],
            ),
            ("key", &[Identifier]),
            ("!key", &[DoesNotExist, Identifier]),
            ("()", &[OpenPar, ClosedPar]),
            ("", &[]),
            ("x in (),y", &[Identifier, In, OpenPar, ClosedPar, Comma, Identifier]),
            ("== != (), = notin", &[DoubleEquals, NotEquals, OpenPar, ClosedPar, Comma, Equals, NotIn]),
            ("key>2", &[Identifier, GreaterThan, Identifier]),
            ("key<1", &[Identifier, LessThan, Identifier]),
        ];
        for (s, want) in cases {
            let mut got: Vec<Token> = scan(s).into_iter().map(|(t, _)| t).collect();
            assert_eq!(got.pop(), Some(EndOfString));
            assert_eq!(&got, want, "{s}");
        }
    }

    /// labels/selector_test.go TestRequirementConstructor (the cases the parser can produce,
    /// plus the empty-set and wrong-arity cases).
    #[test]
    fn requirement_constructor() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let cases: Vec<(String, LabelOp, Vec<String>, bool)> = vec![
            ("x".into(), LabelOp::In, s(&[]), false),
            ("x".into(), LabelOp::NotIn, s(&[]), false),
            ("x".into(), LabelOp::In, s(&["foo"]), true),
            ("x".into(), LabelOp::NotIn, s(&["foo"]), true),
            ("x".into(), LabelOp::Exists, s(&[]), true),
            ("x".into(), LabelOp::DoesNotExist, s(&[]), true),
            ("1foo".into(), LabelOp::In, s(&["bar"]), true),
            ("1234".into(), LabelOp::In, s(&["bar"]), true),
            ("y".into(), LabelOp::GreaterThan, s(&["1"]), true),
            ("z".into(), LabelOp::LessThan, s(&["6"]), true),
            ("foo".into(), LabelOp::GreaterThan, s(&["bar"]), false),
            ("barz".into(), LabelOp::LessThan, s(&["blah"]), false),
            ("a".repeat(254), LabelOp::Exists, s(&[]), false),
            ("x".into(), LabelOp::Equals, s(&["a", "b"]), false),
            ("x".into(), LabelOp::Exists, s(&["a"]), false),
        ];
        for (key, op, vals, ok) in cases {
            assert_eq!(new_requirement(key.clone(), op, vals.clone()).is_ok(), ok, "{key} {op:?} {vals:?}");
        }
    }

    /// labels/selector_test.go TestToString.
    #[test]
    fn to_string() {
        let cases = [
            (
                vec![
                    req("x", LabelOp::In, &["abc", "def"]),
                    req("y", LabelOp::NotIn, &["jkl"]),
                    req("z", LabelOp::Exists, &[]),
                ],
                "x in (abc,def),y notin (jkl),z",
            ),
            (
                vec![
                    req("x", LabelOp::NotIn, &["abc", "def"]),
                    req("y", LabelOp::NotEquals, &["jkl"]),
                    req("z", LabelOp::DoesNotExist, &[]),
                ],
                "x notin (abc,def),y!=jkl,!z",
            ),
            (
                vec![
                    req("x", LabelOp::NotIn, &["abc"]),
                    req("y", LabelOp::In, &["jkl", "mno"]),
                    req("z", LabelOp::NotIn, &[""]),
                ],
                "x notin (abc),y in (jkl,mno),z notin ()",
            ),
            (
                vec![
                    req("x", LabelOp::Equals, &["abc"]),
                    req("y", LabelOp::DoubleEquals, &["jkl"]),
                    req("z", LabelOp::NotEquals, &["a"]),
                    req("z", LabelOp::Exists, &[]),
                ],
                "x=abc,y==jkl,z!=a,z",
            ),
            (
                vec![
                    req("x", LabelOp::GreaterThan, &["2"]),
                    req("y", LabelOp::LessThan, &["8"]),
                    req("z", LabelOp::Exists, &[]),
                ],
                "x>2,y<8,z",
            ),
        ];
        for (reqs, want) in cases {
            assert_eq!(sel(reqs).to_string(), want);
        }
    }

    /// labels/selector_test.go TestRequirementSelectorMatching.
    #[test]
    fn requirement_selector_matching() {
        let cases = [
            (
                set(&[("x", "foo"), ("y", "baz")]),
                vec![req("x", LabelOp::In, &["foo"]), req("y", LabelOp::NotIn, &["alpha"])],
                true,
            ),
            (
                set(&[("x", "foo"), ("y", "baz")]),
                vec![req("x", LabelOp::In, &["foo"]), req("y", LabelOp::In, &["alpha"])],
                false,
            ),
            (set(&[("y", "")]), vec![req("x", LabelOp::NotIn, &[""]), req("y", LabelOp::Exists, &[])], true),
            (
                set(&[("y", "")]),
                vec![req("x", LabelOp::DoesNotExist, &[]), req("y", LabelOp::Exists, &[])],
                true,
            ),
            (
                set(&[("y", "")]),
                vec![req("x", LabelOp::NotIn, &[""]), req("y", LabelOp::DoesNotExist, &[])],
                false,
            ),
            (set(&[("y", "baz")]), vec![req("x", LabelOp::In, &[""])], false),
            (set(&[("z", "2")]), vec![req("z", LabelOp::GreaterThan, &["1"])], true),
            (set(&[("z", "v2")]), vec![req("z", LabelOp::GreaterThan, &["1"])], false),
        ];
        for (labels, reqs, want) in cases {
            let s = sel(reqs);
            assert_eq!(s.matches(Some(&labels)), want, "{s} vs {labels:?}");
        }
    }

    /// labels/selector_test.go TestSetSelectorParser.
    #[test]
    fn set_selector_parser() {
        type Case = (&'static str, Option<Vec<LabelRequirement>>, bool);
        let cases: Vec<Case> = vec![
            ("", Some(vec![]), true),
            ("\rx", Some(vec![req("x", LabelOp::Exists, &[])]), true),
            (
                "this-is-a-dns.domain.com/key-with-dash",
                Some(vec![req("this-is-a-dns.domain.com/key-with-dash", LabelOp::Exists, &[])]),
                true,
            ),
            (
                "this-is-another-dns.domain.com/key-with-dash in (so,what)",
                Some(vec![req("this-is-another-dns.domain.com/key-with-dash", LabelOp::In, &["so", "what"])]),
                true,
            ),
            (
                "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
                Some(vec![req("0.1.2.domain/99", LabelOp::NotIn, &["10.10.100.1", "tick.tack.clock"])]),
                true,
            ),
            ("foo  in\t (abc)", Some(vec![req("foo", LabelOp::In, &["abc"])]), true),
            ("x notin\n (abc)", Some(vec![req("x", LabelOp::NotIn, &["abc"])]), true),
            ("x  notin\t\t\t(abc,def)", Some(vec![req("x", LabelOp::NotIn, &["abc", "def"])]), true),
            ("x in (abc,def)", Some(vec![req("x", LabelOp::In, &["abc", "def"])]), true),
            ("x in (abc,)", Some(vec![req("x", LabelOp::In, &["abc", ""])]), true),
            ("x in ()", Some(vec![req("x", LabelOp::In, &[""])]), true),
            (
                // Upstream's table writes "(abc,def)" here but expects the "" that ",," yields.
                "x notin (abc,,def),bar,z in (),w",
                Some(vec![
                    req("bar", LabelOp::Exists, &[]),
                    req("w", LabelOp::Exists, &[]),
                    req("x", LabelOp::NotIn, &["abc", "", "def"]),
                    req("z", LabelOp::In, &[""]),
                ]),
                true,
            ),
            ("x,y in (a)", None, true),
            ("x=a", Some(vec![req("x", LabelOp::Equals, &["a"])]), true),
            ("x>1", Some(vec![req("x", LabelOp::GreaterThan, &["1"])]), true),
            ("x<7", Some(vec![req("x", LabelOp::LessThan, &["7"])]), true),
            (
                "x=a,y!=b",
                Some(vec![req("x", LabelOp::Equals, &["a"]), req("y", LabelOp::NotEquals, &["b"])]),
                true,
            ),
            (
                "x=a,y!=b,z in (h,i,j)",
                Some(vec![
                    req("x", LabelOp::Equals, &["a"]),
                    req("y", LabelOp::NotEquals, &["b"]),
                    req("z", LabelOp::In, &["h", "i", "j"]),
                ]),
                true,
            ),
            ("x=a||y=b", None, false),
            ("x,y", None, true),
            (",x,y", None, false),
            ("x nott in (y)", None, false),
            ("x notin ( )", Some(vec![req("x", LabelOp::NotIn, &[""])]), true),
            ("x notin (, a)", Some(vec![req("x", LabelOp::NotIn, &["", "a"])]), true),
            ("a in (xyz),", None, false),
            ("a in (xyz)b notin ()", None, false),
            ("a ", Some(vec![req("a", LabelOp::Exists, &[])]), true),
            (
                "a in (x,y,notin, z,in)",
                Some(vec![req("a", LabelOp::In, &["in", "notin", "x", "y", "z"])]),
                true,
            ),
            ("a in (xyz abc)", None, false),
            ("a notin(", None, false),
            ("a (", None, false),
            ("(", None, false),
        ];
        for (input, want, valid) in cases {
            match LabelSelector::parse(input) {
                Ok(s) => {
                    assert!(valid, "{input:?} should fail, got {s}");
                    if let Some(w) = want {
                        assert_eq!(s.reqs, w, "{input:?}");
                    }
                }
                Err(e) => assert!(!valid, "{input:?}: {e}"),
            }
        }
    }

    /// The apiserver's 400 texts. Each `want` is a message seen from a real apiserver or
    /// pinned by an upstream test (authorizer/request tests, kubectl bug reports).
    #[test]
    fn error_texts() {
        let name_part = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let value_msg = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        let prefix_msg = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let cases: Vec<(&str, String)> = vec![
            ("app:monolith", format!("unable to parse requirement: <nil>: Invalid value: \"app:monolith\": {name_part}")),
            ("*bar", format!("unable to parse requirement: <nil>: Invalid value: \"*bar\": {name_part}")),
            (
                "app.kubernetes_io/name=x",
                format!("unable to parse requirement: <nil>: Invalid value: \"app.kubernetes_io/name\": {prefix_msg}"),
            ),
            ("a b", format!("unable to parse requirement: found 'b', expected: {BINARY_OPERATORS}")),
            ("x=a,", "found '', expected: identifier after ','".into()),
            ("x=a b", "found 'b', expected: ',' or 'end of string'".into()),
            ("=x", "found '=', expected: !, identifier, or 'end of string'".into()),
            ("!", "unable to parse requirement: found '', expected: identifier".into()),
            ("x in a", "unable to parse requirement: found 'a' expected: '('".into()),
            ("x in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'".into()),
            ("x in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier".into()),
            ("x in (a,=)", "unable to parse requirement: found '=', expected: ',', or identifier".into()),
            ("x==(", "unable to parse requirement: found '(', expected: identifier".into()),
            ("x=a$", format!("unable to parse requirement: values[0][x]: Invalid value: \"a$\": {value_msg}")),
            (
                "x<a",
                "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer".into(),
            ),
            (
                "k/",
                format!("unable to parse requirement: <nil>: Invalid value: \"k/\": name part must be non-empty; {name_part}"),
            ),
        ];
        for (input, want) in cases {
            let got = LabelSelector::parse(input).expect_err(input).to_string();
            assert_eq!(got, want, "{input:?}");
        }
        let long = "a".repeat(64);
        let got = LabelSelector::parse(&format!("x={long}$")).unwrap_err().to_string();
        assert_eq!(
            got,
            format!(
                "unable to parse requirement: values[0][x]: Invalid value: \"{long}$\": must be no more than 63 bytes; {value_msg}"
            )
        );
        let got = LabelSelector::parse("x in (b$,a$)").unwrap_err().to_string();
        assert_eq!(
            got,
            format!(
                "unable to parse requirement: [values[0][x]: Invalid value: \"a$\": {value_msg}, values[1][x]: Invalid value: \"b$\": {value_msg}]"
            )
        );
        let got = LabelSelector::parse("a/b/c").unwrap_err().to_string();
        assert!(got.starts_with("unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must consist of"), "{got}");
        assert!(
            got.ends_with("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
            "{got}"
        );
    }

    #[test]
    fn requires_exact_match() {
        let s = LabelSelector::parse("a=1,b in (2),c in (3,4),d!=5").unwrap();
        assert_eq!(s.requires_exact_match("a"), Some("1"));
        assert_eq!(s.requires_exact_match("b"), Some("2"));
        assert_eq!(s.requires_exact_match("c"), None);
        assert_eq!(s.requires_exact_match("d"), None);
        assert_eq!(s.requires_exact_match("e"), None);
    }

    #[test]
    fn non_string_label_values() {
        let labels = json!({"x": 1}).as_object().cloned().unwrap();
        assert!(LabelSelector::parse("x").unwrap().matches(Some(&labels)));
        assert!(!LabelSelector::parse("x=1").unwrap().matches(Some(&labels)));
        assert!(LabelSelector::parse("x!=1").unwrap().matches(Some(&labels)));
        assert!(!LabelSelector::parse("x>0").unwrap().matches(Some(&labels)));
    }

    /// Never panic, whatever the bytes: every prefix of a set of nasty strings parses or fails.
    #[test]
    fn never_panics() {
        let nasty = [
            "a in (b,c),!d,e notin (,),f>1,g<2,h==i,j!=k",
            "((((",
            "))))",
            ",,,,",
            "!!!!",
            "!=!=",
            "=!=",
            "<>",
            "a\0b",
            "\0",
            "a=\0",
            "ü=é",
            "a in (ü)",
            "x in (a,",
            "x in (",
            "x notin",
            "!x y",
            "a=b=c",
            "k=\\",
            "\t\r\n",
        ];
        for n in nasty {
            for end in 0..=n.len() {
                if n.is_char_boundary(end) {
                    let _ = LabelSelector::parse(&n[..end]);
                }
            }
        }
        // NUL ends the input where a token starts (and ends an identifier), as Go's lexer reads it.
        assert_eq!(LabelSelector::parse("a=b \0garbage").unwrap().to_string(), "a=b");
        assert!(LabelSelector::parse("a=b\0 garbage").is_err());
    }
}
