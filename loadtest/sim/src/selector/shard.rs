//! `shardSelector` (KEP-5866, server-side sharded list and watch; alpha in 1.36 behind the
//! `ShardedListAndWatch` gate).
//!
//! What upstream does, and this reproduces:
//! - The parameter is a CEL expression, parsed (never evaluated) by
//!   `apiserver/pkg/sharding/parser.go`: its root must be `shardRange(path, 'start', 'end')`
//!   or a chain of `||` over such calls; any other function, operator or expression kind is
//!   rejected with that file's error texts (reproduced verbatim below).
//! - `path` is `object.metadata.uid` or `object.metadata.namespace`, the same for every range.
//! - `start`/`end` are CEL string literals: `0x` + exactly 16 lowercase hex digits, or the
//!   special `'0x10000000000000000'` (2^64) as an exclusive end; `start < end`.
//! - An object matches when the 64-bit FNV-1a hash of the field's UTF-8 bytes lies in
//!   `[start, end)` of any range (`apimachinery/pkg/sharding`).
//! - The list response echoes the applied selector in `metadata.shardInfo.selector`;
//!   `Selector.String()` renders it as `shardRange(<path>, '<start>', '<end>')` joined by
//!   ` || ` in request order, which is [`ShardSelector::canonical`].
//!
//! Where this parser differs: CEL *syntax* errors (`CEL parse error: …`) come from cel-go's
//! ANTLR parser upstream; here they are produced by a hand-written parser for the CEL
//! expression grammar and their wording after `CEL parse error: Syntax error: ` is an
//! approximation. The structural and range errors are upstream's exact texts.

use std::fmt;

use super::SelectorError;
use super::cel;
use crate::go_fmt::go_quote;

pub use batchfleet_shards::fnv1a64;

/// The field a shard selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardKey {
    /// `object.metadata.namespace`
    Namespace,
    /// `object.metadata.uid`
    Uid,
}

impl ShardKey {
    /// The CEL path as written in the selector.
    pub fn path(self) -> &'static str {
        match self {
            ShardKey::Namespace => "object.metadata.namespace",
            ShardKey::Uid => "object.metadata.uid",
        }
    }
}

/// One `[start, end)` range of the 2^64 hash space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardRange {
    start: u64,
    /// Inclusive last hash (`end - 1`), so that `end = 2^64` fits.
    last: u64,
}

impl ShardRange {
    /// `[start, end)`; `None` unless `start < end <= 2^64`.
    pub fn new(start: u64, end: u128) -> Option<Self> {
        if u128::from(start) < end && end <= 1u128 << 64 {
            Some(Self { start, last: (end - 1) as u64 })
        } else {
            None
        }
    }

    /// Inclusive lower bound.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Exclusive upper bound (up to 2^64).
    pub fn end(&self) -> u128 {
        u128::from(self.last) + 1
    }

    /// Whether `hash` lies in the range.
    pub fn contains(&self, hash: u64) -> bool {
        self.start <= hash && hash <= self.last
    }

    /// The range's hex bounds as upstream writes them: `0x` + 16 digits, `0x1` + 16 zeros for 2^64.
    fn bounds(&self) -> (String, String) {
        let end = if self.last == u64::MAX {
            "0x10000000000000000".to_string()
        } else {
            format!("0x{:016x}", self.last + 1)
        };
        (format!("0x{:016x}", self.start), end)
    }
}

/// A parsed `shardSelector`: the union of its ranges over one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSelector {
    key: ShardKey,
    /// As written, for the echo.
    ranges: Vec<ShardRange>,
    /// Sorted and merged, for matching by binary search.
    merged: Vec<ShardRange>,
}

impl ShardSelector {
    /// Parse a `shardSelector` as kube-apiserver does; the error is upstream's text.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        parse(s).map_err(SelectorError::Shard)
    }

    /// Build a selector from ranges directly (for the worker side and tests).
    pub fn from_ranges(key: ShardKey, ranges: Vec<ShardRange>) -> Self {
        let mut merged = ranges.clone();
        merged.sort_by_key(|r| r.start);
        let mut out: Vec<ShardRange> = Vec::with_capacity(merged.len());
        for r in merged {
            match out.last_mut() {
                Some(prev) if u128::from(r.start) <= u128::from(prev.last) + 1 => {
                    prev.last = prev.last.max(r.last);
                }
                _ => out.push(r),
            }
        }
        Self { key, ranges, merged: out }
    }

    /// The hashed field.
    pub fn key(&self) -> ShardKey {
        self.key
    }

    /// The ranges, in request order.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// Whether an object with this namespace and uid belongs to the selected shards.
    /// (Cluster-scoped objects have the namespace `""`.)
    pub fn matches(&self, namespace: &str, uid: &str) -> bool {
        let field = match self.key {
            ShardKey::Namespace => namespace,
            ShardKey::Uid => uid,
        };
        self.matches_hash(fnv1a64(field.as_bytes()))
    }

    /// [`matches`](Self::matches) with the hashes precomputed (once per object, not per watcher).
    pub fn matches_hashes(&self, namespace_hash: u64, uid_hash: u64) -> bool {
        self.matches_hash(match self.key {
            ShardKey::Namespace => namespace_hash,
            ShardKey::Uid => uid_hash,
        })
    }

    /// Whether the hash of the selector's key field lies in one of the ranges.
    pub fn matches_hash(&self, hash: u64) -> bool {
        let i = self.merged.partition_point(|r| r.last < hash);
        self.merged.get(i).is_some_and(|r| r.contains(hash))
    }

    /// The echo for `metadata.shardInfo.selector`: upstream's `Selector.String()`.
    pub fn canonical(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            let (start, end) = r.bounds();
            write!(f, "shardRange({}, '{start}', '{end}')", self.key.path())?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// apiserver/pkg/sharding/parser.go

fn parse(expr: &str) -> Result<ShardSelector, String> {
    let expr = expr.trim();
    if expr.is_empty() {
        return Err("empty shard selector is not allowed; omit the parameter for unfiltered lists".into());
    }
    let ast = cel::parse(expr).map_err(|e| format!("CEL parse error: {e}"))?;
    let mut reqs = Vec::new();
    walk_expr(&ast, &mut reqs)?;
    let Some(&(key0, _)) = reqs.first() else {
        return Err("unexpected expression kind 0; expected shardRange() call or || operator".into());
    };
    for &(key, _) in &reqs[1..] {
        if key != key0 {
            return Err(format!(
                "all shard ranges must use the same field, got {} and {}",
                go_quote(key0.path()),
                go_quote(key.path())
            ));
        }
    }
    Ok(ShardSelector::from_ranges(key0, reqs.into_iter().map(|(_, r)| r).collect()))
}

fn walk_expr(e: &cel::Expr, out: &mut Vec<(ShardKey, ShardRange)>) -> Result<(), String> {
    match e {
        cel::Expr::Call { func, args } if func == "_||_" => {
            if args.len() != 2 {
                return Err("|| operator requires exactly 2 arguments".into());
            }
            walk_expr(&args[0], out)?;
            walk_expr(&args[1], out)
        }
        cel::Expr::Call { func, args } if func == "shardRange" => {
            out.push(parse_shard_range_call(args)?);
            Ok(())
        }
        cel::Expr::Call { func, .. } => {
            Err(format!("unsupported function {}; only shardRange() and || are allowed", go_quote(func)))
        }
        other => Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            other.kind()
        )),
    }
}

fn parse_shard_range_call(args: &[cel::Expr]) -> Result<(ShardKey, ShardRange), String> {
    if args.len() != 3 {
        return Err(format!("shardRange() requires exactly 3 arguments, got {}", args.len()));
    }
    let path = extract_field_path(&args[0]).map_err(|e| format!("shardRange() first argument: {e}"))?;
    let key = match path.as_str() {
        "object.metadata.uid" => ShardKey::Uid,
        "object.metadata.namespace" => ShardKey::Namespace,
        _ => {
            return Err(format!(
                "unsupported field path {}; supported: object.metadata.uid, object.metadata.namespace",
                go_quote(&path)
            ));
        }
    };
    let start = extract_hex_literal(&args[1], "hexStart")?;
    let end = extract_hex_literal(&args[2], "hexEnd")?;
    // HexLess: both are 16 digits, or 17 for 2^64, so length then lexical order is numeric order.
    let less = if start.len() != end.len() { start.len() < end.len() } else { start < end };
    if !less {
        return Err(format!("shard range start {start} must be less than end {end}"));
    }
    let value = |s: &str| u128::from_str_radix(&s[2..], 16).unwrap_or(0);
    let range = ShardRange::new(value(&start) as u64, value(&end))
        .ok_or_else(|| format!("shard range start {start} must be less than end {end}"))?;
    Ok((key, range))
}

fn extract_field_path(e: &cel::Expr) -> Result<String, String> {
    match e {
        cel::Expr::Ident(name) | cel::Expr::Select(Ok(name)) => Ok(name.clone()),
        cel::Expr::Select(Err(kind)) => {
            Err(format!("expected field path (e.g. object.metadata.uid), got expression kind {kind}"))
        }
        other => Err(format!(
            "expected field path (e.g. object.metadata.uid), got expression kind {}",
            other.kind()
        )),
    }
}

fn extract_hex_literal(e: &cel::Expr, name: &str) -> Result<String, String> {
    let cel::Expr::Literal(lit) = e else {
        return Err(format!(
            "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
            e.kind()
        ));
    };
    let s = match lit {
        cel::Literal::String(s) => s,
        other => return Err(format!("{name} must be a string literal, got {}", other.go_type())),
    };
    let Some(hex) = s.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {}", go_quote(s)));
    };
    if hex.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if hex.len() > 17 {
        return Err(format!("{name}: hex value too long ({} chars, max 17): {}", hex.len(), go_quote(hex)));
    }
    if let Some(c) = hex.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(format!("{name}: invalid hex character {} in {}", go_quote(&c.to_string()), go_quote(s)));
    }
    if hex.len() == 17 {
        if s != "0x10000000000000000" {
            return Err(format!(
                "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {}",
                go_quote(s)
            ));
        }
    } else if hex.len() != 16 {
        let padded = format!("0x{}{hex}", "0".repeat(16 - hex.len()));
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {} (did you mean {}?)",
            go_quote(s),
            go_quote(&padded)
        ));
    }
    Ok(s.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "object.metadata.uid";

    fn reqs(s: &ShardSelector) -> Vec<(String, String, String)> {
        s.ranges()
            .iter()
            .map(|r| {
                let (a, b) = r.bounds();
                (s.key().path().to_string(), a, b)
            })
            .collect()
    }

    /// FNV-1a 64 known vectors (Go hash/fnv tests, the FNV reference test suite).
    #[test]
    fn fnv1a64_vectors() {
        let cases: &[(&[u8], u64)] = &[
            (b"", 0xcbf29ce484222325),
            (b"a", 0xaf63dc4c8601ec8c),
            (b"ab", 0x089c4407b545986a),
            (b"abc", 0xe71fa2190541574b),
            (b"foobar", 0x85944171f73967e8),
        ];
        for (input, want) in cases {
            assert_eq!(fnv1a64(input), *want, "{:?}", String::from_utf8_lossy(input));
        }
    }

    /// apiserver/pkg/sharding/parser_test.go TestParse (all cases).
    #[test]
    fn upstream_parse_cases() {
        type Want<'a> = &'a [(&'a str, &'a str, &'a str)];
        let ok: &[(&str, Want)] = &[
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
                &[(UID, "0x0000000000000000", "0x8000000000000000")],
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
                &[(UID, "0x0000000000000000", "0x10000000000000000")],
            ),
            (
                "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
                &[("object.metadata.namespace", "0x00000000000000aa", "0x00000000000000ff")],
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
                &[
                    (UID, "0x0000000000000000", "0x8000000000000000"),
                    (UID, "0x8000000000000000", "0x10000000000000000"),
                ],
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000005') || shardRange(object.metadata.uid, '0x0000000000000005', '0x000000000000000a') || shardRange(object.metadata.uid, '0x000000000000000a', '0x000000000000000f')",
                &[
                    (UID, "0x0000000000000000", "0x0000000000000005"),
                    (UID, "0x0000000000000005", "0x000000000000000a"),
                    (UID, "0x000000000000000a", "0x000000000000000f"),
                ],
            ),
            (
                "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')",
                &[(UID, "0x0000000000000000", "0x8000000000000000")],
            ),
            (
                "  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  ",
                &[(UID, "0x0000000000000000", "0x8000000000000000")],
            ),
        ];
        for (input, want) in ok {
            let s = ShardSelector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            let want: Vec<_> =
                want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
            assert_eq!(reqs(&s), want, "{input}");
        }
        let bad = [
            "",
            "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '8000000000000000')",
            "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
            "shardRange(object.metadata.name, '0x00', '0x80')",
            "shardRange(object.metadata.labels, '0x00', '0x80')",
            "invalidFunc(object.metadata.uid, '0x00', '0x80')",
            "shardRange(object.metadata.uid, '0x000000000000000000', '0x80')",
            "shardRange(object.metadata.uid, '0x0g', '0x80')",
            "shardRange(object.metadata.uid, '0x0', '0x8') && shardRange(object.metadata.uid, '0x8', '0xf')",
            "shardRange(object.metadata.uid, 0, 8)",
            "object.metadata.uid > '0x0'",
            "shardRange(object.metadata.uid, '0x0')",
            "shardRange(object.metadata.uid, hex(0), '0x8')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0xff')",
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0xffffffffffffffff', '0x0000000000000000')",
        ];
        for input in bad {
            assert!(ShardSelector::parse(input).is_err(), "{input} should fail");
        }
    }

    /// apiserver/pkg/sharding/parser_test.go TestParseRoundTrip: the echo is the input.
    #[test]
    fn round_trip() {
        let cases = [
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
        ];
        for input in cases {
            let s = ShardSelector::parse(input).unwrap();
            assert_eq!(s.canonical(), input);
            assert_eq!(ShardSelector::parse(&s.canonical()).unwrap(), s);
        }
        // Whitespace, parentheses, double quotes and comments normalise away.
        let messy = " ( shardRange( object . metadata . namespace ,\"0x0000000000000000\", '''0x4000000000000000''' ) ) \n|| shardRange(object.metadata.namespace, r'0xc000000000000000', '0x10000000000000000') // tail";
        assert_eq!(
            ShardSelector::parse(messy).unwrap().canonical(),
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"
        );
    }

    /// parser.go's error texts.
    #[test]
    fn error_texts() {
        let cases = [
            ("   ", "empty shard selector is not allowed; omit the parameter for unfiltered lists"),
            (
                "invalidFunc(object.metadata.uid, '0x00', '0x80')",
                "unsupported function \"invalidFunc\"; only shardRange() and || are allowed",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x8') && shardRange(object.metadata.uid, '0x8', '0xf')",
                "unsupported function \"_&&_\"; only shardRange() and || are allowed",
            ),
            (
                "object.metadata.uid > '0x0'",
                "unsupported function \"_>_\"; only shardRange() and || are allowed",
            ),
            (
                "object.metadata.uid",
                "unexpected expression kind 7; expected shardRange() call or || operator",
            ),
            ("'0x00'", "unexpected expression kind 5; expected shardRange() call or || operator"),
            ("shardRange(object.metadata.uid, '0x0')", "shardRange() requires exactly 3 arguments, got 2"),
            (
                "shardRange('x', '0x0000000000000000', '0x8000000000000000')",
                "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 5",
            ),
            (
                "shardRange(object.metadata.name, '0x00', '0x80')",
                "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
            ),
            ("shardRange(object.metadata.uid, 0, 8)", "hexStart must be a string literal, got int64"),
            (
                "shardRange(object.metadata.uid, hex(0), '0x8')",
                "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
            ),
            (
                "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
                "hexStart must have '0x' prefix, got \"0000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
                "hexStart: hex value is required after '0x'",
            ),
            (
                "shardRange(object.metadata.uid, '0x000000000000000000', '0x80')",
                "hexStart: hex value too long (18 chars, max 17): \"000000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0g', '0x80')",
                "hexStart: invalid hex character \"g\" in \"0x0g\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000A')",
                "hexEnd: invalid hex character \"A\" in \"0x8000000000000000A\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
                "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x20000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
                "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
            ),
            (
                "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
                "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
            ),
            (
                "shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')",
                "shard range start 0x10000000000000000 must be less than end 0x10000000000000000",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
                "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || true",
                "unexpected expression kind 5; expected shardRange() call or || operator",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(ShardSelector::parse(input).unwrap_err().to_string(), want, "{input}");
        }
        for syntax in ["shardRange(", "shardRange(object.metadata.uid, '0x0", "a ||", "a # b", "if", "(((a)"]
        {
            let e = ShardSelector::parse(syntax).unwrap_err().to_string();
            assert!(e.starts_with("CEL parse error: Syntax error: "), "{syntax}: {e}");
        }
    }

    fn split(parts: u128) -> Vec<ShardSelector> {
        (0..parts)
            .map(|i| {
                let start = (i << 64) / parts;
                let end = ((i + 1) << 64) / parts;
                let text = format!(
                    "shardRange(object.metadata.namespace, '0x{:016x}', '{}')",
                    start,
                    if end == 1 << 64 { "0x10000000000000000".to_string() } else { format!("0x{end:016x}") }
                );
                ShardSelector::parse(&text).unwrap()
            })
            .collect()
    }

    /// DESIGN.md "Shard model": S equal ranges `[i·2^64/S, (i+1)·2^64/S)` cover the key space,
    /// so every namespace is matched by exactly one shard's selector; likewise for uneven cuts,
    /// including cuts placed exactly on a namespace's hash.
    #[test]
    fn disjoint_ranges_cover_every_namespace_exactly_once() {
        let names: Vec<String> = (0..4000)
            .map(|i| match i % 4 {
                0 => format!("ns-{i}"),
                1 => format!("team-{}-prod", i * 7919),
                2 => format!("{i:x}"),
                _ => format!("é-{i}-ü"),
            })
            .chain(["", "default", "kube-system", "kube-node-lease"].map(String::from))
            .collect();
        for parts in [1u128, 2, 3, 7, 16, 256] {
            let shards = split(parts);
            for n in &names {
                let hits = shards.iter().filter(|s| s.matches(n, "uid-ignored")).count();
                assert_eq!(hits, 1, "{n:?} with {parts} shards");
                let h = fnv1a64(n.as_bytes());
                let via_hash = shards.iter().filter(|s| s.matches_hashes(h, 0)).count();
                assert_eq!(via_hash, 1);
            }
        }
        // Uneven cuts at the names' own hashes (boundaries are inclusive-start, exclusive-end).
        let mut cuts: Vec<u64> = names.iter().step_by(97).map(|n| fnv1a64(n.as_bytes())).collect();
        cuts.push(0);
        cuts.sort_unstable();
        cuts.dedup();
        let mut bounds: Vec<u128> = cuts.iter().map(|&c| u128::from(c)).collect();
        bounds.push(1 << 64);
        let shards: Vec<ShardSelector> = bounds
            .windows(2)
            .map(|w| {
                ShardSelector::from_ranges(
                    ShardKey::Namespace,
                    vec![ShardRange::new(w[0] as u64, w[1]).unwrap()],
                )
            })
            .collect();
        for n in &names {
            assert_eq!(shards.iter().filter(|s| s.matches(n, "")).count(), 1, "{n:?}");
        }
        // One worker's union of non-adjacent ranges, written with ||, matches its shards' names.
        let quarters = split(4);
        let union =
            ShardSelector::parse(&format!("{} || {}", quarters[0].canonical(), quarters[2].canonical()))
                .unwrap();
        for n in &names {
            assert_eq!(union.matches(n, ""), quarters[0].matches(n, "") || quarters[2].matches(n, ""));
        }
    }

    #[test]
    fn uid_key_hashes_the_uid() {
        let uid = "6f1c0f4e-9a2b-4c1d-8e3f-0a1b2c3d4e5f";
        let h = fnv1a64(uid.as_bytes());
        let own =
            ShardSelector::from_ranges(ShardKey::Uid, vec![ShardRange::new(h, u128::from(h) + 1).unwrap()]);
        assert!(own.matches("any-namespace", uid));
        assert!(!own.matches("any-namespace", "other"));
        assert!(own.matches_hashes(0, h));
        assert_eq!(own.key(), ShardKey::Uid);
    }

    #[test]
    fn boundaries() {
        let top = ShardSelector::parse(
            "shardRange(object.metadata.uid, '0xffffffffffffffff', '0x10000000000000000')",
        )
        .unwrap();
        assert!(top.matches_hash(u64::MAX));
        assert!(!top.matches_hash(u64::MAX - 1));
        let low = ShardSelector::parse(
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')",
        )
        .unwrap();
        assert!(low.matches_hash(0));
        assert!(!low.matches_hash(1));
        assert_eq!(ShardRange::new(5, 5), None);
        assert_eq!(ShardRange::new(0, (1 << 64) + 1), None);
        assert_eq!(ShardRange::new(0, 1 << 64).map(|r| r.end()), Some(1 << 64));
    }

    #[test]
    fn never_panics() {
        let nasty = [
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '\\x41\\u00e9\\U0001F600\\101', \"0x1\")",
            "a.b.c[d]{e: f}.g(h, [i, j,], {k: l,}) ? m : -n - -1.5e3 * !!o % p in q",
            "r'\\' + b'x' + '''a\nb''' + \"\\q\" + '\\u12' + 'é",
            "Foo.Bar{x: 1, y: 2u}",
            "((((((((((",
            "0x",
            "..",
        ];
        for n in nasty {
            for end in 0..=n.len() {
                if n.is_char_boundary(end) {
                    let _ = ShardSelector::parse(&n[..end]);
                }
            }
        }
        let deep = format!("{}shardRange{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(ShardSelector::parse(&deep).unwrap_err().to_string().contains("recursion limit"));
        let long_or =
            vec!["shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')"; 2000]
                .join(" || ");
        assert!(ShardSelector::parse(&long_or).is_ok());
    }
}
