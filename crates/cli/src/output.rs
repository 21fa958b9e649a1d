//! Human tables and `--json` output.

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;

use crate::error::{CliError, CliResult};

/// Writes `text` and a newline to stdout. A closed pipe (`arbor ... | head`) is not an error
/// (see [`crate::stdio::out`]).
pub fn print_text(text: &str) -> CliResult<()> {
    crate::stdio::out(text)
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> CliResult<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Output(e.to_string()))?;
    print_text(&text)
}

/// Prints rows as a table with a header on stdout, at most [`terminal_width`] wide where it
/// can be (see [`wrapped_table`]).
pub fn print_table(header: &[&str], rows: Vec<Vec<String>>) -> CliResult<()> {
    print_text(&wrapped_table(header, &rows, terminal_width()))
}

/// The narrowest an id or instant column is squeezed to (its values shortened in the middle)
/// before the other columns are squeezed below it.
pub const MIN_ID_WIDTH: usize = 16;

/// Renders rows as a table (in the style of [`fit_table`]) at most `width` characters wide
/// where it can be: each column gets its values' width when they fit; else the space is shared
/// and a column's values are wrapped between words, and a word wider than its column (an id,
/// an instant time, a file name) is shortened in the middle (`2026120517…19461`), never
/// broken over lines. Columns are squeezed to [`MIN_ID_WIDTH`] (or their header's longest
/// word) first, further only when the width leaves no other way (then headers wrap).
pub fn wrapped_table(header: &[&str], rows: &[Vec<String>], width: usize) -> String {
    let n = header.len();
    let cell = |r: &Vec<String>, i: usize| r.get(i).map_or("", String::as_str).to_string();
    let columns: Vec<Vec<String>> = (0..n)
        .map(|i| rows.iter().map(|r| cell(r, i)).collect())
        .collect();
    let heads: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    // Per column: the widest line and the widest word (values and header), and the header's
    // widest word.
    let per_column = |of: fn(&str) -> usize| -> Vec<usize> {
        columns
            .iter()
            .zip(&heads)
            .map(|(c, h)| c.iter().map(|t| of(t)).max().unwrap_or(0).max(of(h)).max(1))
            .collect()
    };
    let line_w = per_column(widest_line);
    let word_w = per_column(widest_word);
    let head_w: Vec<usize> = heads.iter().map(|h| widest_word(h)).collect();
    // A line is `│`, then per column ` value ` and a separator: 1 + sum(width + 3).
    let room = width.saturating_sub(1 + 3 * n);
    let floors = |cap: usize, keep_header: bool| -> Vec<usize> {
        (0..n)
            .map(|i| {
                let line = line_w.get(i).copied().unwrap_or(1);
                let head = if keep_header {
                    head_w.get(i).copied().unwrap_or(0)
                } else {
                    0
                };
                line.min(cap.max(head)).max(1)
            })
            .collect()
    };
    let mut widths = (MIN_COLUMN_WIDTH..=MIN_ID_WIDTH)
        .rev()
        .map(|cap| floors(cap, true))
        .chain((1..MIN_COLUMN_WIDTH).rev().map(|cap| floors(cap, false)))
        .find(|w| w.iter().sum::<usize>() <= room)
        .unwrap_or_else(|| floors(1, false));
    // Share what is left, one character at a time to the narrowest column short of its
    // target: first so that no word is shortened, then so that no line wraps.
    let mut left = room.saturating_sub(widths.iter().sum());
    for target in [&word_w, &line_w] {
        while left > 0 {
            let next = widths
                .iter()
                .enumerate()
                .filter(|(i, w)| target.get(*i).is_some_and(|t| *w < t))
                .min_by_key(|(_, w)| **w)
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            if let Some(w) = widths.get_mut(i) {
                *w += 1;
            }
            left -= 1;
        }
    }
    let wrap_all = |texts: &[String], shorten: bool| -> Vec<String> {
        texts
            .iter()
            .zip(&widths)
            .map(|(t, w)| wrap_cell(t, *w, shorten))
            .collect()
    };
    let mut table = Table::new();
    table
        .load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(wrap_all(&heads, false));
    for r in rows {
        let cells: Vec<String> = (0..n).map(|i| cell(r, i)).collect();
        table.add_row(wrap_all(&cells, true));
    }
    table.to_string()
}

/// The display width of the widest line of `text`.
fn widest_line(text: &str) -> usize {
    text.lines().map(char_len).max().unwrap_or(0)
}

/// The display width of the widest word of `text`.
fn widest_word(text: &str) -> usize {
    text.split_whitespace().map(char_len).max().unwrap_or(0)
}

/// `text` wrapped between words to lines of at most `width` columns; a word wider than that is
/// shortened in the middle ([`elide_middle`]) when `shorten`, else broken into pieces (headers).
fn wrap_cell(text: &str, width: usize, shorten: bool) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if char_len(line) <= width {
            out.push(line.to_string());
            continue;
        }
        let mut current = String::new();
        for word in line.split_whitespace() {
            let pieces = if shorten {
                vec![elide_middle(word, width)]
            } else {
                split_width(word, width)
            };
            for piece in pieces {
                if current.is_empty() {
                    current = piece;
                } else if char_len(&current) + 1 + char_len(&piece) <= width {
                    current.push(' ');
                    current.push_str(&piece);
                } else {
                    out.push(std::mem::replace(&mut current, piece));
                }
            }
        }
        out.push(current);
    }
    out.join("\n")
}

/// `word` in pieces of at most `width` columns.
fn split_width(word: &str, width: usize) -> Vec<String> {
    let mut pieces = vec![String::new()];
    let mut used = 0;
    for c in word.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > width && used > 0 {
            pieces.push(String::new());
            used = 0;
        }
        if let Some(p) = pieces.last_mut() {
            p.push(c);
        }
        used += w;
    }
    pieces
}

/// `s` shortened to `width` columns by replacing its middle with `…` (two thirds of the room
/// kept from the start, one third from the end: `2026120517…19461`), when it is wider.
pub fn elide_middle(s: &str, width: usize) -> String {
    if char_len(s) <= width {
        return s.to_string();
    }
    let room = width.saturating_sub(1);
    let tail_room = room / 3;
    let head_room = room - tail_room;
    let take = |chars: &mut dyn Iterator<Item = char>, room: usize| -> Vec<char> {
        let mut used = 0;
        let mut out = Vec::new();
        for c in chars {
            let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if used + w > room {
                break;
            }
            used += w;
            out.push(c);
        }
        out
    };
    let head = take(&mut s.chars(), head_room);
    let mut tail = take(&mut s.chars().rev(), tail_room);
    tail.reverse();
    let mut out: String = head.into_iter().collect();
    out.push('…');
    out.extend(tail);
    out
}

/// The width tables are fitted to when stdout is not a terminal and `COLUMNS` is not set.
pub const DEFAULT_WIDTH: usize = 120;

/// The narrowest width a column is squeezed to (values cut with `…`) before columns are left
/// out instead.
pub const MIN_COLUMN_WIDTH: usize = 8;

/// The output width: `COLUMNS` when it is a positive number, else the terminal's width when
/// stdout is a terminal, else [`DEFAULT_WIDTH`].
pub fn terminal_width() -> usize {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        if let Some(w) = Table::new().width() {
            return usize::from(w);
        }
    }
    DEFAULT_WIDTH
}

/// What [`fit_table`] had to leave out to fit the width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fit {
    /// Columns shown (the first ones, in order).
    pub shown_columns: usize,
    /// Columns in the input.
    pub total_columns: usize,
    /// Cells whose value was cut (ending in `…`).
    pub cut_cells: usize,
}

/// The display width of `s` in terminal columns (wide East Asian characters count 2).
fn char_len(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// `s` cut to `width` columns when it is wider: a single word (an id, an instant time) in the
/// middle ([`elide_middle`]), text with spaces at the end (the last column `…`).
fn cut(s: &str, width: usize) -> (String, bool) {
    if char_len(s) <= width {
        return (s.to_string(), false);
    }
    if !s.contains(char::is_whitespace) {
        return (elide_middle(s, width), true);
    }
    let room = width.saturating_sub(1);
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    (out, true)
}

/// Control characters (newlines, tabs) shown as escapes, so that a row stays on one line.
fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| match c {
            '\n' => "\\n".to_string(),
            '\r' => "\\r".to_string(),
            '\t' => "\\t".to_string(),
            c if c.is_control() => format!("\\u{{{:x}}}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

/// Renders rows as a table at most `width` characters wide (for `width >= 20`): every row on
/// one line; each column gets its values' width when they fit, else the space is shared (no
/// column narrower than [`MIN_COLUMN_WIDTH`] or its widest value) and longer values are cut
/// with `…` (a single word, such as an id, in the middle: see [`elide_middle`]); columns that do not fit at that width are left out from the right. Headers are
/// never cut. The result says what was left out.
pub fn fit_table(header: &[&str], rows: &[Vec<String>], width: usize) -> (String, Fit) {
    let width = width.max(20);
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| one_line(c)).collect())
        .collect();
    // Natural width of each column (header and values), capped at the line.
    let line = width.saturating_sub(4).max(1);
    let natural: Vec<usize> = header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| char_len(c))
                .chain(std::iter::once(char_len(h)))
                .max()
                .unwrap_or(0)
                .min(line)
        })
        .collect();
    let floor = |i: usize| -> usize {
        let n = natural.get(i).copied().unwrap_or(0);
        let h = header.get(i).map_or(0, |h| char_len(h));
        n.min(MIN_COLUMN_WIDTH).max(h.min(line))
    };
    // A line is `│` then, per column, ` value ` and one separator (the last one is the right
    // border): 1 + sum(width + 3). An elided table ends with a "…" column (4).
    let mut shown = 0;
    let mut used = 1;
    for i in 0..header.len() {
        let need = floor(i) + 3;
        let reserve = if i + 1 < header.len() { 4 } else { 0 };
        if used + need + reserve > width && shown > 0 {
            break;
        }
        used += need;
        shown += 1;
    }
    let elided = shown < header.len();
    if elided {
        used += 4;
    }
    let mut widths: Vec<usize> = (0..shown).map(floor).collect();
    // Share what is left: one character at a time to the narrowest column still short of its
    // natural width.
    let mut left = width.saturating_sub(used);
    while left > 0 {
        let next = widths
            .iter()
            .enumerate()
            .filter(|(i, w)| natural.get(*i).is_some_and(|n| *w < n))
            .min_by_key(|(_, w)| **w)
            .map(|(i, _)| i);
        let Some(i) = next else { break };
        if let Some(w) = widths.get_mut(i) {
            *w += 1;
        }
        left -= 1;
    }
    let mut fit = Fit {
        shown_columns: shown,
        total_columns: header.len(),
        cut_cells: 0,
    };
    let mut table = Table::new();
    let mut head: Vec<String> = header.iter().take(shown).map(|h| h.to_string()).collect();
    if elided {
        head.push("…".to_string());
    }
    table
        .load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(head);
    for r in &rows {
        let mut cells: Vec<String> = Vec::with_capacity(shown + 1);
        for (i, w) in widths.iter().enumerate() {
            let (c, was_cut) = cut(r.get(i).map_or("", String::as_str), *w);
            fit.cut_cells += usize::from(was_cut);
            cells.push(c);
        }
        if elided {
            cells.push("…".to_string());
        }
        table.add_row(cells);
    }
    (table.to_string(), fit)
}

/// Renders rows as a table without any width limit: every column, every value whole (a value
/// with line breaks spans several lines), in the style of [`fit_table`]. Drawn here rather than
/// by comfy-table, whose widths stop at 65535 characters.
pub fn wide_table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let lines_of = |r: &[String]| -> Vec<Vec<String>> {
        let cells: Vec<Vec<String>> = (0..header.len())
            .map(|i| {
                r.get(i)
                    .map_or("", String::as_str)
                    .lines()
                    .map(str::to_string)
                    .collect()
            })
            .collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(0).max(1);
        (0..height)
            .map(|l| {
                cells
                    .iter()
                    .map(|c| c.get(l).cloned().unwrap_or_default())
                    .collect()
            })
            .collect()
    };
    let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let body: Vec<Vec<Vec<String>>> = rows.iter().map(|r| lines_of(r)).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            body.iter()
                .flatten()
                .filter_map(|l| l.get(i))
                .chain(head.get(i))
                .map(|c| char_len(c))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let inner: usize = widths
        .iter()
        .map(|w| w + 3)
        .sum::<usize>()
        .saturating_sub(1);
    let mut out = String::new();
    let rule = |out: &mut String, left: char, fill: char, right: char| {
        out.push(left);
        out.extend(std::iter::repeat_n(fill, inner));
        out.push(right);
        out.push('\n');
    };
    let line = |out: &mut String, cells: &[String]| {
        out.push('│');
        for (i, w) in widths.iter().enumerate() {
            let c = cells.get(i).map_or("", String::as_str);
            out.push(' ');
            out.push_str(c);
            out.extend(std::iter::repeat_n(' ', w.saturating_sub(char_len(c)) + 1));
            out.push(if i + 1 == widths.len() { '│' } else { ' ' });
        }
        out.push('\n');
    };
    rule(&mut out, '┌', '─', '┐');
    line(&mut out, &head);
    rule(&mut out, '╞', '═', '╡');
    for row in &body {
        for l in row {
            line(&mut out, l);
        }
    }
    rule(&mut out, '└', '─', '┘');
    out.pop();
    out
}

/// `n` bytes for people: `512 B`, `1.5 KiB`, `3.2 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS.get(unit).copied().unwrap_or("B"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    fn max_line(s: &str) -> usize {
        s.lines().map(char_len).max().unwrap_or(0)
    }

    #[test]
    fn test_fit_table_small_table_is_whole_and_exact() {
        let rows = vec![vec!["a".to_string(), "1.5".to_string()]];
        let (text, fit) = fit_table(&["id", "fare"], &rows, 100);
        assert_eq!(
            fit,
            Fit {
                shown_columns: 2,
                total_columns: 2,
                cut_cells: 0
            }
        );
        assert!(text.contains("fare") && text.contains("1.5"), "{text}");
    }

    #[test]
    fn test_fit_table_long_value_cut_to_width() {
        let rows = vec![vec!["k".to_string(), "x".repeat(100_000)]];
        let (text, fit) = fit_table(&["id", "blob"], &rows, 80);
        assert!(max_line(&text) <= 80, "{text}");
        assert_eq!(fit.cut_cells, 1);
        assert!(text.contains('…'));
        assert!(text.len() < 1000);
    }

    #[test]
    fn test_fit_table_many_columns_elided_not_squashed() {
        let header: Vec<String> = (0..30).map(|i| format!("column_{i:02}")).collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let rows = vec![(0..30)
            .map(|i| format!("value-{i}-abcdefgh"))
            .collect::<Vec<_>>()];
        let (text, fit) = fit_table(&header, &rows, 100);
        assert!(max_line(&text) <= 100, "{text}");
        assert!(fit.shown_columns >= 5 && fit.shown_columns < 30, "{fit:?}");
        // Every shown header is whole, on one line.
        let first = text.lines().nth(1).unwrap();
        for h in header.iter().take(fit.shown_columns) {
            assert!(first.contains(h), "{h} in {first}");
        }
        assert_eq!(
            text.lines().count(),
            5,
            "top, header, rule, one row, bottom: {text}"
        );
    }

    #[test]
    fn test_wide_table_matches_fitted_style_and_keeps_long_values() {
        let rows = vec![vec!["a".to_string(), "1.5".to_string()]];
        let (fitted, _) = fit_table(&["id", "fare"], &rows, 100);
        assert_eq!(wide_table(&["id", "fare"], rows), fitted);
        let big = "z".repeat(70_000);
        let text = wide_table(&["v"], vec![vec![big.clone()], vec!["x\ny".to_string()]]);
        assert!(text.contains(&big));
        assert_eq!(text.lines().count(), 7, "two lines for x\\ny");
    }

    #[test]
    fn test_fit_table_wide_characters_count_two_columns() {
        let rows = vec![vec!["東京".repeat(50)]];
        let (text, fit) = fit_table(&["city"], &rows, 40);
        assert_eq!(fit.cut_cells, 1);
        assert!(text.lines().all(|l| char_len(l) <= 40), "{text}");
    }

    #[test]
    fn test_elide_middle_keeps_both_ends() {
        assert_eq!(elide_middle("20261205171234519461", 16), "2026120517…19461");
        assert_eq!(elide_middle("short", 16), "short");
        assert!(char_len(&elide_middle(&"東".repeat(20), 9)) <= 9);
        assert_eq!(elide_middle("abcdef", 1), "…");
    }

    #[test]
    fn test_wrapped_table_never_breaks_a_word() {
        let id = "12ebbbe8-f205-4cb7-b54f-f2a614b9d99c-0".to_string();
        let instant = "20261205180355835".to_string();
        let rows = vec![vec![
            "nyc".to_string(),
            id.clone(),
            instant.clone(),
            "a comment with several words".to_string(),
        ]];
        let header = ["PARTITION", "FILE ID", "BASE INSTANT", "COMMENT"];
        let wide = wrapped_table(&header, &rows, 200);
        assert!(wide.contains(&id) && wide.contains(&instant), "{wide}");
        assert_eq!(wide.lines().count(), 5, "{wide}");
        for width in [40, 60, 80] {
            let text = wrapped_table(&header, &rows, width);
            assert!(max_line(&text) <= width, "{width}: {text}");
            let words: Vec<&str> = text
                .lines()
                .flat_map(str::split_whitespace)
                .filter(|w| w.len() > 3)
                .collect();
            for w in words {
                if w.contains('…') {
                    let (head, tail) = w.split_once('…').unwrap();
                    let mut values = rows[0].iter().flat_map(|v| v.split_whitespace());
                    assert!(
                        values.any(|v| v.starts_with(head) && v.ends_with(tail)),
                        "{width}: {w} is not the middle of a value: {text}"
                    );
                } else if w.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                    assert!(
                        w == id || w == instant || w == "0",
                        "{width}: {w} is a piece of a value: {text}"
                    );
                }
            }
        }
        // At 60 the instant column keeps at least 16 characters.
        let text = wrapped_table(&header, &rows, 60);
        assert!(text.contains(&instant) || text.contains("…"), "{text}");
    }

    #[test]
    fn test_wrapped_table_prose_wraps_between_words() {
        let rows = vec![vec!["one two three four five six seven".to_string()]];
        let text = wrapped_table(&["NOTE"], &rows, 20);
        assert!(max_line(&text) <= 20, "{text}");
        assert!(!text.contains('…'), "{text}");
        for w in ["one", "three", "seven"] {
            assert!(text.contains(w), "{w}: {text}");
        }
    }

    #[test]
    fn test_one_line_escapes_newlines() {
        assert_eq!(one_line("a\nb\tc"), "a\\nb\\tc");
        let rows = vec![vec!["a\nb".to_string()]];
        let (text, _) = fit_table(&["v"], &rows, 40);
        assert!(text.contains("a\\nb"), "{text}");
    }
}
