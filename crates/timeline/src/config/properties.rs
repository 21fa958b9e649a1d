//! An ordered `java.util.Properties` text codec: comments, `=`/`:`/space separators, backslash
//! escapes, `\uXXXX`, line continuations; Java `Properties.store` escaping on output. Unknown
//! keys are kept and the order of keys is preserved on rewrite.

use std::fmt;

/// A syntax error in `java.util.Properties` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertiesSyntaxError {
    /// 1-based line where the offending logical line starts.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for PropertiesSyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for PropertiesSyntaxError {}

/// An ordered map of string properties with the `java.util.Properties` text format.
///
/// Keys are unique; [`Properties::set`] replaces the value of an existing key in place, so the
/// order in which keys first appeared is kept. [`Properties::parse`] of
/// [`Properties::render`]'s output gives back an equal map for any keys and values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    entries: Vec<(String, String)>,
}

impl Properties {
    /// An empty map.
    pub fn new() -> Self {
        Properties::default()
    }

    /// Parses `java.util.Properties` text as `Properties.load` does: `#`/`!` comment lines,
    /// `key=value`, `key:value` and `key value` separators, backslash escapes (`\t`, `\n`, `\r`,
    /// `\f`, `\uXXXX`, any other escaped character stands for itself) and line continuation by an
    /// odd number of trailing backslashes. A repeated key keeps its first position and its last
    /// value. Fails only for a malformed `\uXXXX` escape or an unpaired UTF-16 surrogate.
    pub fn parse(text: &str) -> std::result::Result<Properties, PropertiesSyntaxError> {
        let mut props = Properties::new();
        let mut logical = String::new();
        let mut start_line = 0usize;
        let mut continuing = false;
        for (idx, natural) in natural_lines(text).into_iter().enumerate() {
            let s = natural.trim_start_matches(is_properties_whitespace);
            if !continuing {
                if s.is_empty() || s.starts_with('#') || s.starts_with('!') {
                    continue;
                }
                logical.clear();
                start_line = idx + 1;
            }
            let trailing_backslashes = s.chars().rev().take_while(|&c| c == '\\').count();
            if trailing_backslashes % 2 == 1 {
                logical.push_str(s.strip_suffix('\\').unwrap_or(s));
                continuing = true;
            } else {
                logical.push_str(s);
                continuing = false;
                props.insert_logical_line(&logical, start_line)?;
            }
        }
        if continuing {
            props.insert_logical_line(&logical, start_line)?;
        }
        Ok(props)
    }

    fn insert_logical_line(
        &mut self,
        line: &str,
        line_no: usize,
    ) -> std::result::Result<(), PropertiesSyntaxError> {
        let (key, value) = split_key_value(line).map_err(|reason| PropertiesSyntaxError {
            line: line_no,
            reason,
        })?;
        self.set(key, value);
        Ok(())
    }

    /// Renders the map as `Properties.store` does: each comment as a `#` line, then one
    /// `key=value` line per entry in map order, escaping `\`, `=`, `:`, `#`, `!`, control
    /// characters and every character outside printable ASCII (as `\uXXXX`), all spaces in keys
    /// and a leading space in values. Comments must be single-line ASCII text.
    pub fn render(&self, comments: &[&str]) -> String {
        let mut out = String::new();
        for c in comments {
            out.push('#');
            out.push_str(c);
            out.push('\n');
        }
        for (k, v) in &self.entries {
            escape_into(k, true, &mut out);
            out.push('=');
            escape_into(v, false, &mut out);
            out.push('\n');
        }
        out
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// True if `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`: in place if the key exists, else appended at the end.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let pos = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(pos).1)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Whitespace as `java.util.Properties` understands it.
fn is_properties_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Splits text into natural lines terminated by `\n`, `\r` or `\r\n`.
fn natural_lines(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut i = 0usize;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\n' => {
                out.push(text.get(start..i).unwrap_or_default());
                i += 1;
                start = i;
            }
            b'\r' => {
                out.push(text.get(start..i).unwrap_or_default());
                i += if bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        out.push(text.get(start..).unwrap_or_default());
    }
    out
}

/// Splits one logical line into its unescaped key and value, as `Properties.load` does.
fn split_key_value(line: &str) -> std::result::Result<(String, String), String> {
    let chars: Vec<char> = line.chars().collect();
    let mut key_len = 0usize;
    let mut value_start = chars.len();
    let mut has_separator = false;
    let mut preceding_backslash = false;
    while let Some(&c) = chars.get(key_len) {
        if (c == '=' || c == ':') && !preceding_backslash {
            value_start = key_len + 1;
            has_separator = true;
            break;
        }
        if is_properties_whitespace(c) && !preceding_backslash {
            value_start = key_len + 1;
            break;
        }
        preceding_backslash = c == '\\' && !preceding_backslash;
        key_len += 1;
    }
    while let Some(&c) = chars.get(value_start) {
        if !is_properties_whitespace(c) {
            if !has_separator && (c == '=' || c == ':') {
                has_separator = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    let key = unescape(chars.get(..key_len).unwrap_or_default())?;
    let value = unescape(chars.get(value_start..).unwrap_or_default())?;
    Ok((key, value))
}

/// Resolves backslash escapes (`loadConvert`).
fn unescape(chars: &[char]) -> std::result::Result<String, String> {
    let mut units: Vec<u16> = Vec::with_capacity(chars.len());
    let mut buf = [0u16; 2];
    let mut it = chars.iter().copied();
    while let Some(c) = it.next() {
        let c = if c == '\\' {
            match it.next() {
                Some('u') => {
                    let mut unit: u16 = 0;
                    for _ in 0..4 {
                        let digit = it
                            .next()
                            .and_then(|h| h.to_digit(16))
                            .ok_or_else(|| "malformed \\uXXXX escape".to_string())?;
                        unit = unit * 16 + digit as u16;
                    }
                    units.push(unit);
                    continue;
                }
                Some('t') => '\t',
                Some('r') => '\r',
                Some('n') => '\n',
                Some('f') => '\x0c',
                Some(other) => other,
                None => break,
            }
        } else {
            c
        };
        units.extend_from_slice(c.encode_utf16(&mut buf));
    }
    String::from_utf16(&units).map_err(|_| "unpaired UTF-16 surrogate in \\u escape".to_string())
}

/// Escapes a key (`escape_space`) or value as `Properties.store` does (`saveConvert`).
fn escape_into(s: &str, escape_space: bool, out: &mut String) {
    let mut buf = [0u16; 2];
    for (i, c) in s.chars().enumerate() {
        match c {
            ' ' if i == 0 || escape_space => out.push_str("\\ "),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x0c' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c if !(' '..='~').contains(&c) => {
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
            c => out.push(c),
        }
    }
}
