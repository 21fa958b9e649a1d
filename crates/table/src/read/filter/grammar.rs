//! The text form of one filter (`--where`, Python's `filter`): a hand-written lexer and
//! recursive-descent parser of one predicate.
//!
//! ```text
//! predicate  := field ws* ( cmp ws* value
//!                         | IN ws* list | NOT ws+ IN ws* list
//!                         | IS ws+ NULL | IS ws+ NOT ws+ NULL ) ws*
//! cmp        := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//! field      := segment ( "." segment )*
//! segment    := bare-name | '"' ... '"' | '`' ... '`'       (a doubled quote is one quote)
//! value      := quoted | bare-rest                           (bare-rest: the rest, trimmed)
//! list       := "(" item ( "," item )* ")" | item ( "," item )*
//! item       := quoted | bare-item                           (bare-item: up to , ( or ), trimmed)
//! quoted     := "'" ... "'" | '"' ... '"'                    (a doubled quote is one quote)
//! ```
//!
//! Keywords (`IN`, `NOT`, `IS`, `NULL`) are case-insensitive. A bare name is a run of
//! characters other than blanks, `.`, quotes, parentheses, `,` and the operator characters
//! `= < > !`. A bare comparison value is the rest of the text (so `city=san francisco` compares
//! with `san francisco`) and may not start with an operator character or a quote, nor hold the
//! word `AND`, `OR`, `&&` or `||` after its first (two predicates typed as one). Every error
//! is [`TableError::InvalidInput`] quoting the text, giving the 1-based character position of
//! the offending character and a caret line under it.

use super::spec::{FilterOp, PartitionFilter};
use crate::error::{Result, TableError};

/// The operator characters: a run of them is one operator token.
const OPERATOR_CHARS: [char; 4] = ['=', '<', '>', '!'];

/// What an operator token may be, listed in errors.
const EXPECTED_OPERATOR: &str = "an operator (=, ==, !=, <>, <, <=, >, >=, IN, NOT IN, IS NULL, \
                                 IS NOT NULL)";

impl PartitionFilter {
    /// Parses one predicate: `FIELD OP VALUE` (OP one of `=`, `==`, `!=`, `<>`, `<`, `<=`,
    /// `>`, `>=`), `FIELD [NOT] IN (V1, V2, ...)` (parentheses optional) or
    /// `FIELD IS [NOT] NULL`; keywords in any case. FIELD is a column name or a dot path into
    /// struct columns (`rider.rating`), each part optionally in double quotes or backquotes
    /// (`"my col"`); a VALUE is single- or double-quoted (the quotes removed, a doubled quote
    /// standing for one: `'O''Brien'`) or bare (a comparison's bare value is the rest of the
    /// text, trimmed; a bare `IN` value runs up to `,` or `)`, trimmed). Values stay text: the
    /// reader converts them to the column's type. Any other text is
    /// [`TableError::InvalidInput`](crate::error::TableError::InvalidInput) quoting it and
    /// giving the 1-based character position of the offending character, with a caret line.
    pub fn parse(text: &str) -> Result<Self> {
        parse(text)
    }
}

/// Parses `text` as one predicate (see the module documentation).
fn parse(text: &str) -> Result<PartitionFilter> {
    let mut p = Parser {
        text,
        chars: text.chars().collect(),
        pos: 0,
    };
    p.predicate()
}

struct Parser<'a> {
    text: &'a str,
    chars: Vec<char>,
    /// Index into `chars` of the next character.
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.chars.len()
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    /// The error `what` at character index `at` (0-based; the length for the end of text).
    fn error(&self, at: usize, what: &str) -> TableError {
        let shown: String = self
            .chars
            .iter()
            .map(|c| if c.is_control() { ' ' } else { *c })
            .collect();
        let caret = " ".repeat(at);
        TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!(
                "filter {:?}: {what} at character {}\n    {shown}\n    {caret}^",
                self.text,
                at + 1
            ),
        }
    }

    /// The text from character `from` up to (not including) `to`.
    fn slice(&self, from: usize, to: usize) -> String {
        self.chars
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .collect()
    }

    fn predicate(&mut self) -> Result<PartitionFilter> {
        self.skip_blanks();
        if self.at_end() {
            return Err(self.error(self.pos, "empty filter: expected a field name"));
        }
        let field = self.field()?;
        self.skip_blanks();
        let Some(c) = self.peek() else {
            return Err(self.error(self.pos, &format!("expected {EXPECTED_OPERATOR}")));
        };
        if OPERATOR_CHARS.contains(&c) {
            let op = self.comparison()?;
            let value = self.value()?;
            return Ok(PartitionFilter::new(field, op, value));
        }
        let start = self.pos;
        let word = self.word();
        let filter = match word.to_ascii_uppercase().as_str() {
            "IN" => PartitionFilter::is_in(field, self.list()?),
            "NOT" => {
                self.skip_blanks();
                let at = self.pos;
                if !self.word().eq_ignore_ascii_case("IN") {
                    return Err(self.error(at, "expected IN after NOT"));
                }
                PartitionFilter {
                    field,
                    op: FilterOp::NotIn,
                    values: self.list()?,
                }
            }
            "IS" => {
                self.skip_blanks();
                let at = self.pos;
                match self.word().to_ascii_uppercase().as_str() {
                    "NULL" => PartitionFilter::is_null(field),
                    "NOT" => {
                        self.skip_blanks();
                        let at = self.pos;
                        if !self.word().eq_ignore_ascii_case("NULL") {
                            return Err(self.error(at, "expected NULL after IS NOT"));
                        }
                        PartitionFilter::is_not_null(field)
                    }
                    _ => return Err(self.error(at, "expected NULL or NOT NULL after IS")),
                }
            }
            _ => {
                let hint = if word.is_empty() {
                    ""
                } else {
                    " (quote a field name holding blanks: \"my col\")"
                };
                return Err(self.error(start, &format!("expected {EXPECTED_OPERATOR}{hint}")));
            }
        };
        self.end()?;
        Ok(filter)
    }

    /// Nothing but blanks is left.
    fn end(&mut self) -> Result<()> {
        self.skip_blanks();
        if self.at_end() {
            return Ok(());
        }
        let rest: String = self.chars.iter().skip(self.pos).take(4).collect();
        let what = match rest.split_whitespace().next().map(str::to_ascii_uppercase) {
            Some(w) if matches!(w.as_str(), "AND" | "OR" | "&&" | "||") => joined_predicates(&w),
            _ => "unexpected text after the predicate".to_string(),
        };
        Err(self.error(self.pos, &what))
    }

    /// A run of ASCII letters (possibly empty).
    fn word(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        // A keyword ends at a non-name character: `INx` is no keyword.
        if self.peek().is_some_and(is_name_char) {
            while self.peek().is_some_and(is_name_char) {
                self.pos += 1;
            }
        }
        self.slice(start, self.pos)
    }

    /// `segment ("." segment)*`, the segments joined by `.`.
    fn field(&mut self) -> Result<String> {
        let mut segments = Vec::new();
        loop {
            let start = self.pos;
            let segment = match self.peek() {
                Some(q @ ('"' | '`')) => {
                    let s = self.quoted(q)?;
                    if s.is_empty() {
                        return Err(self.error(start, "empty field name"));
                    }
                    s
                }
                _ => {
                    while self.peek().is_some_and(is_name_char) {
                        self.pos += 1;
                    }
                    if self.pos == start {
                        let what = match segments.is_empty() {
                            true => "expected a field name",
                            false => "expected a field name after '.'",
                        };
                        return Err(self.error(start, what));
                    }
                    self.slice(start, self.pos)
                }
            };
            segments.push(segment);
            if self.peek() == Some('.') {
                self.pos += 1;
            } else {
                return Ok(segments.join("."));
            }
        }
    }

    /// The text of the quoted string starting at the current character (the quote `q`),
    /// a doubled `q` standing for one.
    fn quoted(&mut self, q: char) -> Result<String> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error(start, "unterminated quote")),
                Some(c) if c == q => {
                    self.pos += 1;
                    if self.peek() == Some(q) {
                        out.push(q);
                        self.pos += 1;
                    } else {
                        return Ok(out);
                    }
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// A comparison operator token.
    fn comparison(&mut self) -> Result<FilterOp> {
        let start = self.pos;
        while self.peek().is_some_and(|c| OPERATOR_CHARS.contains(&c)) {
            self.pos += 1;
        }
        let token = self.slice(start, self.pos);
        Ok(match token.as_str() {
            "=" | "==" => FilterOp::Eq,
            "!=" | "<>" => FilterOp::Ne,
            "<" => FilterOp::Lt,
            "<=" => FilterOp::Le,
            ">" => FilterOp::Gt,
            ">=" => FilterOp::Ge,
            _ => {
                return Err(self.error(
                    start,
                    &format!("unknown operator {token:?} (expected {EXPECTED_OPERATOR})"),
                ))
            }
        })
    }

    /// The value of a comparison: a quoted string, or the rest of the text trimmed.
    fn value(&mut self) -> Result<String> {
        self.skip_blanks();
        match self.peek() {
            None => Err(self.error(self.pos, "expected a value")),
            Some(q @ ('\'' | '"')) => {
                let v = self.quoted(q)?;
                self.end()?;
                Ok(v)
            }
            Some(c) if OPERATOR_CHARS.contains(&c) => Err(self.error(
                self.pos,
                &format!("unexpected {c:?}: expected a value (quote a value starting with it)"),
            )),
            Some(_) => {
                if let Some((at, word)) = self.joining_word(self.pos) {
                    return Err(self.error(at, &joined_predicates(&word)));
                }
                let v = self.slice(self.pos, self.chars.len());
                self.pos = self.chars.len();
                Ok(v.trim_end().to_string())
            }
        }
    }

    /// The first word after the first from `from` on that joins predicates (`AND`, `OR`, `&&`,
    /// `||`, any case) and its position: a bare value holding one is far likelier two
    /// predicates typed into one `--where` than a value (which can be quoted).
    fn joining_word(&self, from: usize) -> Option<(usize, String)> {
        let mut at = from;
        let mut first = true;
        while at < self.chars.len() {
            while self.chars.get(at).is_some_and(|c| c.is_whitespace()) {
                at += 1;
            }
            let start = at;
            while self.chars.get(at).is_some_and(|c| !c.is_whitespace()) {
                at += 1;
            }
            let word: String = self.slice(start, at).to_ascii_uppercase();
            if !first && matches!(word.as_str(), "AND" | "OR" | "&&" | "||") {
                return Some((start, word));
            }
            first = false;
        }
        None
    }

    /// The values of `IN` / `NOT IN`: `(v1, v2, ...)` or `v1, v2, ...`, then the end of text.
    fn list(&mut self) -> Result<Vec<String>> {
        self.skip_blanks();
        let parenthesized = self.peek() == Some('(');
        if parenthesized {
            self.pos += 1;
        }
        let mut values = Vec::new();
        loop {
            self.skip_blanks();
            let start = self.pos;
            let value = match self.peek() {
                None | Some(',' | '(' | ')') => {
                    let what = match (values.is_empty(), parenthesized) {
                        (true, false) => "expected a value or '(' after IN",
                        _ => "expected a value",
                    };
                    return Err(self.error(start, what));
                }
                Some(q @ ('\'' | '"')) => self.quoted(q)?,
                Some(_) => {
                    while self.peek().is_some_and(|c| !matches!(c, ',' | '(' | ')')) {
                        self.pos += 1;
                    }
                    self.slice(start, self.pos).trim_end().to_string()
                }
            };
            values.push(value);
            self.skip_blanks();
            match (self.peek(), parenthesized) {
                (Some(','), _) => self.pos += 1,
                (Some(')'), true) => {
                    self.pos += 1;
                    break;
                }
                (None, false) => break,
                (None, true) => return Err(self.error(self.pos, "missing ')'")),
                (Some(_), true) => return Err(self.error(self.pos, "expected ',' or ')'")),
                (Some(_), false) => return Err(self.error(self.pos, "expected ','")),
            }
        }
        self.end()?;
        Ok(values)
    }
}

/// The error for `word` (`AND`, `OR`, `&&` or `||`, upper case) after a predicate.
fn joined_predicates(word: &str) -> String {
    match word {
        "AND" | "&&" => format!(
            "unexpected {word} after the predicate (each predicate takes a --where of its own, \
             all must hold; a value holding {word} must be quoted)"
        ),
        _ => format!(
            "unexpected {word} after the predicate (a --where holds one predicate, FIELD IN \
             (...) matches any of several values; a value holding {word} must be quoted)"
        ),
    }
}

/// Whether `c` may be part of a bare field name.
fn is_name_char(c: char) -> bool {
    !c.is_whitespace()
        && !OPERATOR_CHARS.contains(&c)
        && !matches!(c, '.' | '\'' | '"' | '`' | '(' | ')' | ',')
}
