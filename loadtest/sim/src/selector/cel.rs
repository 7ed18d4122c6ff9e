//! A parser for CEL's expression grammar (cel-spec `langdef.md`, cel-go `parser/gen/CEL.g4`),
//! building just enough of cel-go's AST (`common/ast`) for the `shardSelector` walk in
//! `shard.rs`. No macros are enabled, as upstream creates the parser with `Macros()` empty.
//!
//! A module of its own so `shard.rs` reads as upstream's `sharding/parser.go`. Whether a CEL crate
//! could replace it turns on its syntax-error texts, which clients see after kube-apiserver's
//! `CEL parse error: `; that comparison is not done yet.

use std::fmt;

/// cel-go `ast.ExprKind` values, printed as numbers by upstream's `%v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Call = 1,
    Ident = 3,
    List = 4,
    Literal = 5,
    Map = 6,
    Select = 7,
    Struct = 8,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", *self as u8)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    String(String),
    Bytes,
    Int,
    Uint,
    Double,
    Bool,
    Null,
}

impl Literal {
    /// `%T` of the Go value cel-go's literal holds.
    pub fn go_type(&self) -> &'static str {
        match self {
            Literal::String(_) => "string",
            Literal::Bytes => "[]uint8",
            Literal::Int => "int64",
            Literal::Uint => "uint64",
            Literal::Double => "float64",
            Literal::Bool => "bool",
            Literal::Null => "structpb.NullValue",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A global or receiver-style call; operators are calls (`_||_`, `_&&_`, `!_`, …).
    Call {
        func: String,
        args: Vec<Expr>,
    },
    Ident(String),
    /// `a.b.c`: the dotted path when the operand chain is identifiers, else the kind of the
    /// innermost operand that is not (all `extractFieldPath` needs, without deep nesting).
    Select(Result<String, Kind>),
    Literal(Literal),
    List,
    Map,
    Struct,
}

impl Expr {
    pub fn kind(&self) -> Kind {
        match self {
            Expr::Call { .. } => Kind::Call,
            Expr::Ident(_) => Kind::Ident,
            Expr::Select(_) => Kind::Select,
            Expr::Literal(_) => Kind::Literal,
            Expr::List => Kind::List,
            Expr::Map => Kind::Map,
            Expr::Struct => Kind::Struct,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Lit(Literal),
    Punct(&'static str),
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "'{s}'"),
            Tok::Lit(Literal::String(s)) => write!(f, "'{s}'"),
            Tok::Lit(l) => write!(f, "{}", l.go_type()),
            Tok::Punct(p) => write!(f, "'{p}'"),
            Tok::Eof => f.write_str("<EOF>"),
        }
    }
}

/// cel-go's default `MaxRecursionDepth`.
const MAX_DEPTH: usize = 250;

/// Reserved words may not name a variable or function, but may follow a `.`.
const RESERVED: [&str; 17] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

const PUNCTS: [&str; 24] = [
    "||", "&&", "==", "!=", "<=", ">=", "<", ">", "!", "+", "-", "*", "/", "%", "?", ":", ".", ",", "(", ")",
    "[", "]", "{", "}",
];

pub fn parse(src: &str) -> Result<Expr, String> {
    let toks = lex(src)?;
    let mut p = Parser { toks, pos: 0, depth: 0 };
    let e = p.expr()?;
    match p.peek() {
        Tok::Eof => Ok(e),
        t => Err(format!("Syntax error: extraneous input {t} expecting <EOF>")),
    }
}

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0c) {
            i += 1;
            continue;
        }
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        // String and bytes literals, with optional r/R and b/B prefixes.
        let mut j = i;
        let (mut raw, mut bytes) = (false, false);
        while j < b.len() && j < i + 2 {
            match b[j] {
                b'r' | b'R' if !raw => raw = true,
                b'b' | b'B' if !bytes => bytes = true,
                _ => break,
            }
            j += 1;
        }
        if j < b.len() && matches!(b[j], b'"' | b'\'') {
            let (s, next) = string_literal(src, j, raw)?;
            out.push(Tok::Lit(if bytes { Literal::Bytes } else { Literal::String(s) }));
            i = next;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let id = &src[start..i];
            out.push(match id {
                "true" | "false" => Tok::Lit(Literal::Bool),
                "null" => Tok::Lit(Literal::Null),
                "in" => Tok::Punct("in"),
                _ => Tok::Ident(id.to_string()),
            });
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let (lit, next) = number(b, i);
            out.push(Tok::Lit(lit));
            i = next;
            continue;
        }
        if let Some(p) = PUNCTS.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
            out.push(Tok::Punct(p));
            i += p.len();
            continue;
        }
        let ch = src[i..].chars().next().unwrap_or('?');
        return Err(format!("Syntax error: token recognition error at: '{ch}'"));
    }
    out.push(Tok::Eof);
    Ok(out)
}

fn number(b: &[u8], mut i: usize) -> (Literal, usize) {
    if b[i..].starts_with(b"0x") || b[i..].starts_with(b"0X") {
        i += 2;
        while i < b.len() && b[i].is_ascii_hexdigit() {
            i += 1;
        }
    } else {
        let mut float = false;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            float = true;
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
        if i < b.len() && matches!(b[i], b'e' | b'E') {
            let mut k = i + 1;
            if k < b.len() && matches!(b[k], b'+' | b'-') {
                k += 1;
            }
            if k < b.len() && b[k].is_ascii_digit() {
                float = true;
                i = k;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
        }
        if float {
            return (Literal::Double, i);
        }
    }
    if i < b.len() && matches!(b[i], b'u' | b'U') {
        return (Literal::Uint, i + 1);
    }
    (Literal::Int, i)
}

/// A quoted literal starting at the quote `q` (byte index); returns the decoded text and the
/// index after the closing quote.
fn string_literal(src: &str, q: usize, raw: bool) -> Result<(String, usize), String> {
    let quote = src.as_bytes()[q];
    let triple = src.as_bytes()[q..].starts_with(&[quote; 3]);
    let delim_len = if triple { 3 } else { 1 };
    let body = &src[q + delim_len..];
    let mut out = String::new();
    let mut chars = body.char_indices().peekable();
    while let Some((k, c)) = chars.next() {
        let closing =
            if triple { body.as_bytes()[k..].starts_with(&[quote; 3]) } else { c as u32 == u32::from(quote) };
        if closing {
            return Ok((out, q + delim_len + k + delim_len));
        }
        if !triple && (c == '\n' || c == '\r') {
            break;
        }
        if c != '\\' || raw {
            out.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else { break };
        let mut hex = |n: usize| -> Result<u32, String> {
            let mut v = 0u32;
            for _ in 0..n {
                let d = chars.next().and_then(|(_, h)| h.to_digit(16));
                v = v * 16 + d.ok_or_else(|| "Syntax error: invalid escape sequence".to_string())?;
            }
            Ok(v)
        };
        let decoded = match e {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\\' | '\'' | '"' | '`' | '?' => e,
            'x' | 'X' => char::from_u32(hex(2)?).unwrap_or('\u{fffd}'),
            'u' => char::from_u32(hex(4)?).ok_or("Syntax error: invalid unicode code point")?,
            'U' => char::from_u32(hex(8)?).ok_or("Syntax error: invalid unicode code point")?,
            '0'..='3' => {
                let mut v = e as u32 - '0' as u32;
                for _ in 0..2 {
                    let d = chars.next().and_then(|(_, o)| o.to_digit(8));
                    v = v * 8 + d.ok_or("Syntax error: invalid escape sequence")?;
                }
                char::from_u32(v).unwrap_or('\u{fffd}')
            }
            _ => return Err(format!("Syntax error: invalid escape sequence \\{e}")),
        };
        out.push(decoded);
    }
    Err(format!(
        "Syntax error: token recognition error at: '{}'",
        &src[q..].chars().take(16).collect::<String>()
    ))
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
}

/// An operator call. Only `_||_` keeps its operands: nothing below any other operator is
/// ever inspected, and dropping them keeps the tree shallow whatever the input.
fn call(func: &str) -> Expr {
    Expr::Call { func: func.to_string(), args: Vec::new() }
}

/// The root of an operator chain without `||`: the last operator of the lowest level.
fn reduce(mut operands: Vec<Expr>, ops: &[&'static str]) -> Expr {
    const LEVELS: [&[&str]; 4] = [
        &["_&&_"],
        &["_<=_", "_>=_", "_<_", "_>_", "_==_", "_!=_", "@in"],
        &["_+_", "_-_"],
        &["_*_", "_/_", "_%_"],
    ];
    for level in LEVELS {
        if let Some(op) = ops.iter().rev().find(|op| level.contains(op)) {
            return call(op);
        }
    }
    operands.remove(0)
}

/// cel-go balances `||` chains into a tree of depth log2(n); the in-order (request order)
/// of the operands is kept.
fn balance(mut ops: Vec<Expr>) -> Expr {
    if ops.len() == 1 {
        return ops.remove(0);
    }
    let right = ops.split_off(ops.len() / 2);
    Expr::Call { func: "_||_".to_string(), args: vec![balance(ops), balance(right)] }
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.pos).unwrap_or(&Tok::Eof)
    }

    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }

    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Tok::Punct(q) if *q == p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(format!("Syntax error: mismatched input {} expecting '{p}'", self.peek()))
        }
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("Syntax error: expression recursion limit exceeded: {MAX_DEPTH}"));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, String> {
        self.enter()?;
        let cond = self.binary()?;
        let e = if self.eat("?") {
            self.binary()?;
            self.expect(":")?;
            self.expr()?;
            call("_?_:_")
        } else {
            cond
        };
        self.depth -= 1;
        Ok(e)
    }

    /// `unary (op unary)*`, read iteratively, then reduced by precedence: `||` (balanced, the
    /// only operator whose operands are kept) < `&&` < relations < `+ -` < `* / %`; within a
    /// level the operators are left-associative, so the last one is the root.
    fn binary(&mut self) -> Result<Expr, String> {
        let mut operands = vec![self.unary()?];
        let mut ops: Vec<&'static str> = Vec::new();
        while let Tok::Punct(p) = *self.peek() {
            let op = match p {
                "||" => "_||_",
                "&&" => "_&&_",
                "<=" => "_<=_",
                ">=" => "_>=_",
                "<" => "_<_",
                ">" => "_>_",
                "==" => "_==_",
                "!=" => "_!=_",
                "in" => "@in",
                "+" => "_+_",
                "-" => "_-_",
                "*" => "_*_",
                "/" => "_/_",
                "%" => "_%_",
                _ => break,
            };
            self.bump();
            ops.push(op);
            operands.push(self.unary()?);
        }
        if ops.is_empty() {
            return Ok(operands.remove(0));
        }
        if ops.contains(&"_||_") {
            let mut segments = Vec::new();
            let mut current: Vec<Expr> = Vec::new();
            let mut current_ops: Vec<&'static str> = Vec::new();
            for (i, e) in operands.into_iter().enumerate() {
                current.push(e);
                match ops.get(i) {
                    Some(&"_||_") | None => {
                        segments.push(reduce(std::mem::take(&mut current), &current_ops));
                        current_ops.clear();
                    }
                    Some(op) => current_ops.push(op),
                }
            }
            return Ok(balance(segments));
        }
        Ok(reduce(operands, &ops))
    }

    fn unary(&mut self) -> Result<Expr, String> {
        Ok(if matches!(self.peek(), Tok::Punct("!")) {
            let mut n = 0;
            while self.eat("!") {
                n += 1;
            }
            let m = self.member()?;
            // cel-go drops an even number of negations.
            if n % 2 == 0 { m } else { call("!_") }
        } else if matches!(self.peek(), Tok::Punct("-")) {
            let mut n = 0;
            while self.eat("-") {
                n += 1;
            }
            let m = self.member()?;
            match m {
                Expr::Literal(Literal::Int | Literal::Double) if n == 1 => m,
                m if n % 2 == 0 => m,
                _ => call("-_"),
            }
        } else {
            self.member()?
        })
    }

    fn member(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let field = match self.bump() {
                    Tok::Ident(id) => id,
                    t => return Err(format!("Syntax error: mismatched input {t} expecting IDENTIFIER")),
                };
                if self.eat("(") {
                    // Receiver-style call: cel-go keeps the target apart from the args.
                    let args = self.args(")")?;
                    e = Expr::Call { func: field, args };
                } else {
                    e = Expr::Select(match e {
                        Expr::Ident(id) | Expr::Select(Ok(id)) => Ok(format!("{id}.{field}")),
                        Expr::Select(Err(kind)) => Err(kind),
                        other => Err(other.kind()),
                    });
                }
            } else if self.eat("[") {
                self.expr()?;
                self.expect("]")?;
                e = call("_[_]");
            } else if matches!(self.peek(), Tok::Punct("{")) && is_qualified_name(&e) {
                self.bump();
                self.inits("}", true)?;
                e = Expr::Struct;
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.bump() {
            // A leading dot names the root scope; cel-go keeps it in the identifier.
            Tok::Punct(".") => match self.bump() {
                Tok::Ident(id) => self.ident_or_call(id).map(|e| match e {
                    Expr::Ident(id) => Expr::Ident(format!(".{id}")),
                    other => other,
                }),
                t => Err(format!("Syntax error: mismatched input {t} expecting IDENTIFIER")),
            },
            Tok::Ident(id) => self.ident_or_call(id),
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Punct("[") => {
                self.args("]")?;
                Ok(Expr::List)
            }
            Tok::Punct("{") => {
                self.inits("}", false)?;
                Ok(Expr::Map)
            }
            Tok::Lit(l) => Ok(Expr::Literal(l)),
            t => Err(format!("Syntax error: mismatched input {t} expecting an expression")),
        }
    }

    fn ident_or_call(&mut self, id: String) -> Result<Expr, String> {
        if RESERVED.contains(&id.as_str()) {
            return Err(format!("Syntax error: reserved identifier: {id}"));
        }
        if self.eat("(") {
            let args = self.args(")")?;
            return Ok(Expr::Call { func: id, args });
        }
        Ok(Expr::Ident(id))
    }

    /// `expr, expr, …` up to `close`, a trailing comma allowed except after `(`.
    fn args(&mut self, close: &str) -> Result<Vec<Expr>, String> {
        let mut out = Vec::new();
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            out.push(self.expr()?);
            if self.eat(close) {
                return Ok(out);
            }
            self.expect(",")?;
            if close != ")" && self.eat(close) {
                return Ok(out);
            }
        }
    }

    /// `key: value, …` up to `close`; struct keys are field names, map keys expressions.
    fn inits(&mut self, close: &str, fields: bool) -> Result<(), String> {
        if self.eat(close) {
            return Ok(());
        }
        loop {
            if fields {
                match self.bump() {
                    Tok::Ident(_) => {}
                    t => return Err(format!("Syntax error: mismatched input {t} expecting IDENTIFIER")),
                }
            } else {
                self.expr()?;
            }
            self.expect(":")?;
            self.expr()?;
            if self.eat(close) {
                return Ok(());
            }
            self.expect(",")?;
            if self.eat(close) {
                return Ok(());
            }
        }
    }
}

fn is_qualified_name(e: &Expr) -> bool {
    matches!(e, Expr::Ident(_) | Expr::Select(Ok(_)))
}
