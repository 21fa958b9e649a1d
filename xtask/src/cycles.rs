//! `cargo xtask cycles`: finds import cycles between the source files of each crate.
//!
//! For every crate (`crates/*/src` and `xtask/src`) it builds a graph with one node per source
//! file and an edge A -> B when code in A names an item of B through a `crate::`, `super::` or
//! `self::` path (in a `use` declaration, braces expanded, or inline in code such as
//! `crate::x::y(..)`). A path is resolved to the file of the longest module prefix it names
//! (`foo.rs` or `foo/mod.rs`); a name that a module re-exports (`pub use ...`) is followed to the
//! file that the re-export points at, so `use crate::Error` counts as a use of the file defining
//! `Error`, not of `lib.rs`. Re-exports themselves and relative paths (`child::f()` in a parent
//! module) are not edges: a parent naming or re-exporting its own child modules is the module
//! tree, not an import.
//!
//! Ignored on purpose: items under `#[cfg(test)]` (unit-test modules and the files they declare),
//! comments, string and character literals, and edges from a file to itself. Every strongly
//! connected set of two or more files is reported with its files, one cycle through them and the
//! line of every edge inside the set; the task exits 1 if any crate has one.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

/// Runs the checker over the workspace; `Err` when a cycle exists or a file cannot be read.
pub fn run(_args: &[String]) -> Result<(), String> {
    let root = crate::repo_root();
    let mut src_dirs: Vec<(String, PathBuf)> = Vec::new();
    let crates_dir = root.join("crates");
    let entries = fs::read_dir(&crates_dir)
        .map_err(|e| format!("cannot list {}: {e}", crates_dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", crates_dir.display()))?;
        let src = entry.path().join("src");
        if src.is_dir() {
            src_dirs.push((entry.file_name().to_string_lossy().into_owned(), src));
        }
    }
    src_dirs.push(("xtask".to_string(), root.join("xtask").join("src")));
    src_dirs.sort();
    let mut found = 0usize;
    let mut files_total = 0usize;
    for (name, src) in &src_dirs {
        let graph = CrateGraph::load(src)?;
        files_total += graph.files.len();
        for scc in graph.cycles() {
            found += 1;
            println!("{}", graph.describe(name, &scc));
        }
    }
    if found == 0 {
        println!(
            "cycles: none in {} crates ({files_total} files)",
            src_dirs.len()
        );
        Ok(())
    } else {
        Err(format!(
            "{found} import cycle(s) between files of one crate"
        ))
    }
}

/// One crate's files, their module paths, re-exports and file -> file edges.
struct CrateGraph {
    /// Path relative to `src`, for each file index.
    files: Vec<String>,
    /// Module path of each file (`[]` for `lib.rs`/`main.rs`).
    modules: BTreeMap<Vec<String>, usize>,
    /// `(module, name) -> absolute path` for every `pub use` of a module.
    reexports: BTreeMap<(Vec<String>, String), Vec<String>>,
    /// Modules with `pub use path::*`, and the absolute paths they glob.
    globs: BTreeMap<Vec<String>, Vec<Vec<String>>>,
    /// `(module, name)` of every item a module defines itself (fn, struct, enum, ...).
    defs: BTreeSet<(Vec<String>, String)>,
    /// Edge `from -> to` with the first line where `from` names `to`.
    edges: BTreeMap<(usize, usize), usize>,
}

/// A path found in a file: absolute module path of the segments and the line it starts on.
struct FoundPath {
    segments: Vec<String>,
    line: usize,
    /// The path is the target of a `pub use` (a re-export) in module `module`.
    reexport: bool,
    module: Vec<String>,
}

impl CrateGraph {
    fn load(src: &Path) -> Result<Self, String> {
        let mut rs = Vec::new();
        collect_rs(src, src, &mut rs)?;
        rs.sort();
        let mut graph = CrateGraph {
            files: Vec::new(),
            modules: BTreeMap::new(),
            reexports: BTreeMap::new(),
            globs: BTreeMap::new(),
            defs: BTreeSet::new(),
            edges: BTreeMap::new(),
        };
        let mut parsed = Vec::new();
        let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
        for rel in &rs {
            let Some(module) = module_of(rel) else {
                continue;
            };
            let text = fs::read_to_string(src.join(rel))
                .map_err(|e| format!("cannot read {}: {e}", src.join(rel).display()))?;
            let scan = scan_file(&text, &module);
            graph.defs.extend(scan.defs);
            for child in &scan.test_mods {
                let mut m = module.clone();
                m.push(child.clone());
                test_only.insert(m);
            }
            let idx = graph.files.len();
            graph.files.push(rel.clone());
            graph.modules.insert(module.clone(), idx);
            parsed.push((idx, module, scan.paths));
        }
        for (_, _, paths) in &parsed {
            for p in paths.iter().filter(|p| p.reexport) {
                match p.segments.last().map(String::as_str) {
                    Some("*") => {
                        let target = p
                            .segments
                            .get(..p.segments.len() - 1)
                            .unwrap_or_default()
                            .to_vec();
                        graph
                            .globs
                            .entry(p.module.clone())
                            .or_default()
                            .push(target);
                    }
                    Some(name) => {
                        graph
                            .reexports
                            .insert((p.module.clone(), name.to_string()), p.segments.clone());
                    }
                    None => {}
                }
            }
        }
        let excluded: BTreeSet<usize> = graph
            .modules
            .iter()
            .filter(|(m, _)| test_only.iter().any(|t| m.starts_with(t)))
            .map(|(_, i)| *i)
            .collect();
        for (idx, _, paths) in &parsed {
            if excluded.contains(idx) {
                continue;
            }
            for p in paths.iter().filter(|p| !p.reexport) {
                if let Some(to) = graph.resolve(&p.segments, 0) {
                    if to != *idx && !excluded.contains(&to) {
                        graph.edges.entry((*idx, to)).or_insert(p.line);
                    }
                }
            }
        }
        Ok(graph)
    }

    /// The file that defines what `segments` names, following re-exports (at most 16 hops).
    fn resolve(&self, segments: &[String], depth: usize) -> Option<usize> {
        // Longest module prefix that is a file.
        let prefix = |n: usize| segments.get(..n).unwrap_or_default();
        let mut n = segments.len();
        while n > 0 && !self.modules.contains_key(prefix(n)) {
            n -= 1;
        }
        let file = *self.modules.get(prefix(n))?;
        let Some(name) = segments.get(n) else {
            return Some(file);
        };
        if depth > 16 {
            return Some(file);
        }
        // The next segment is an item of module `segments[..n]`: its own or re-exported?
        let module = prefix(n).to_vec();
        if self.defs.contains(&(module.clone(), name.clone())) {
            return Some(file);
        }
        if let Some(target) = self.reexports.get(&(module.clone(), name.clone())) {
            let mut next = target.clone();
            next.extend_from_slice(segments.get(n + 1..).unwrap_or_default());
            if next != segments {
                return self.resolve(&next, depth + 1).or(Some(file));
            }
        }
        if let Some(globs) = self.globs.get(&module) {
            for g in globs {
                let mut next = g.clone();
                next.extend_from_slice(segments.get(n..).unwrap_or_default());
                let known = self.defs.contains(&(g.clone(), name.clone()))
                    || self.reexports.contains_key(&(g.clone(), name.clone()))
                    || self
                        .modules
                        .contains_key(next.get(..g.len() + 1).unwrap_or_default());
                if known {
                    if let Some(to) = self.resolve(&next, depth + 1) {
                        return Some(to);
                    }
                }
            }
        }
        Some(file)
    }

    /// Every strongly connected set of two or more files (Tarjan's algorithm).
    fn cycles(&self) -> Vec<Vec<usize>> {
        let mut adj: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &(a, b) in self.edges.keys() {
            adj.entry(a).or_default().push(b);
        }
        let mut tarjan = Tarjan {
            adj: &adj,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            on_stack: BTreeSet::new(),
            stack: Vec::new(),
            next: 0,
            out: Vec::new(),
        };
        for v in 0..self.files.len() {
            if !tarjan.index.contains_key(&v) {
                tarjan.visit(v);
            }
        }
        let mut out: Vec<Vec<usize>> = tarjan.out.into_iter().filter(|s| s.len() > 1).collect();
        for s in &mut out {
            s.sort();
        }
        out.sort();
        out
    }

    fn file(&self, i: usize) -> &str {
        self.files.get(i).map(String::as_str).unwrap_or("?")
    }

    /// The report of one cycle: its files, one cycle through them, each edge with its line.
    fn describe(&self, krate: &str, scc: &[usize]) -> String {
        let set: BTreeSet<usize> = scc.iter().copied().collect();
        let names = |ids: &[usize]| ids.iter().map(|&i| self.file(i)).collect::<Vec<_>>();
        let mut text = format!("cycle in {krate}: {}\n", names(scc).join(", "));
        if let Some(path) = scc.first().and_then(|&s| self.shortest_cycle(s, &set)) {
            text.push_str(&format!("  e.g. {}\n", names(&path).join(" -> ")));
        }
        for (&(a, b), &line) in &self.edges {
            if set.contains(&a) && set.contains(&b) {
                text.push_str(&format!(
                    "  {}:{line} uses {}\n",
                    self.file(a),
                    self.file(b)
                ));
            }
        }
        text.trim_end().to_string()
    }

    /// Shortest path `start -> .. -> start` inside `set` (breadth first).
    fn shortest_cycle(&self, start: usize, set: &BTreeSet<usize>) -> Option<Vec<usize>> {
        let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(v) = queue.pop_front() {
            for &(_, b) in self.edges.keys().filter(|(a, _)| *a == v) {
                if !set.contains(&b) {
                    continue;
                }
                if b == start {
                    // Walk back from v to start, then read it forwards.
                    let mut path = vec![start, v];
                    let mut cur = v;
                    while let Some(&p) = prev.get(&cur) {
                        path.push(p);
                        cur = p;
                    }
                    path.reverse();
                    path.dedup();
                    if path.last() != Some(&start) || path.len() == 1 {
                        path.push(start);
                    }
                    return Some(path);
                }
                if b != start && !prev.contains_key(&b) {
                    prev.insert(b, v);
                    queue.push_back(b);
                }
            }
        }
        None
    }
}

/// Tarjan's strongly connected components over file indices.
struct Tarjan<'a> {
    adj: &'a BTreeMap<usize, Vec<usize>>,
    index: BTreeMap<usize, usize>,
    low: BTreeMap<usize, usize>,
    on_stack: BTreeSet<usize>,
    stack: Vec<usize>,
    next: usize,
    out: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        let my = self.next;
        self.index.insert(v, my);
        self.low.insert(v, my);
        self.next += 1;
        self.stack.push(v);
        self.on_stack.insert(v);
        let mut low = my;
        let succ = self.adj.get(&v).cloned().unwrap_or_default();
        for w in succ {
            match self.index.get(&w).copied() {
                None => {
                    self.visit(w);
                    low = low.min(self.low.get(&w).copied().unwrap_or(low));
                }
                Some(iw) if self.on_stack.contains(&w) => low = low.min(iw),
                Some(_) => {}
            }
        }
        self.low.insert(v, low);
        if low == my {
            let mut scc = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack.remove(&w);
                scc.push(w);
                if w == v {
                    break;
                }
            }
            self.out.push(scc);
        }
    }
}

fn collect_rs(src: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if path.is_dir() {
            collect_rs(src, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            if let Ok(rel) = path.strip_prefix(src) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    Ok(())
}

/// Module path of a file relative to `src`: `lib.rs` -> `[]`, `a/mod.rs` and `a.rs` -> `[a]`,
/// `a/b.rs` -> `[a, b]`. `None` for files under `bin/` (other crates).
fn module_of(rel: &str) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?.to_string();
    if parts.is_empty() && (stem == "lib" || stem == "main") {
        return Some(Vec::new());
    }
    if stem != "mod" {
        parts.push(stem);
    }
    Some(parts)
}

/// What one file says: the paths it names and the child modules it declares under `#[cfg(test)]`.
struct Scan {
    paths: Vec<FoundPath>,
    defs: Vec<(Vec<String>, String)>,
    test_mods: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
    /// `::`
    Sep,
}

/// Splits code into identifiers and punctuation with line numbers, dropping comments,
/// string/char literals, numbers and whitespace.
fn lex(text: &str) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let at = |j: usize| chars.get(j).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = at(i);
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && at(i) != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if at(i) == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'r' || c == 'b') && starts_raw_or_byte_string(&chars, i)) {
            i = skip_string(&chars, i, &mut line);
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && at(i) != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (at(i).is_alphanumeric() || at(i) == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (at(i).is_alphanumeric() || at(i) == '_') {
                i += 1;
            }
            out.push((
                Tok::Ident(chars.get(start..i).unwrap_or_default().iter().collect()),
                line,
            ));
        } else if c.is_ascii_digit() {
            while i < chars.len() && (at(i).is_alphanumeric() || at(i) == '_') {
                i += 1;
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

fn starts_raw_or_byte_string(chars: &[char], i: usize) -> bool {
    let at = |j: usize| chars.get(j).copied().unwrap_or('\0');
    // Not the tail of an identifier such as `for"`.
    if i > 0 && (at(i - 1).is_alphanumeric() || at(i - 1) == '_') {
        return false;
    }
    let mut j = i;
    if at(j) == 'b' {
        j += 1;
    }
    if at(j) == 'r' {
        j += 1;
        while at(j) == '#' {
            j += 1;
        }
    }
    j > i && at(j) == '"'
}

/// Skips a (raw, byte) string literal starting at `i`; returns the index after it.
fn skip_string(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    let at = |j: usize| chars.get(j).copied().unwrap_or('\0');
    let mut raw = false;
    if at(i) == 'b' {
        i += 1;
    }
    if at(i) == 'r' {
        raw = true;
        i += 1;
    }
    let mut hashes = 0;
    while at(i) == '#' {
        hashes += 1;
        i += 1;
    }
    i += 1; // opening quote
    while i < chars.len() {
        let c = at(i);
        if c == '\n' {
            *line += 1;
        }
        if !raw && c == '\\' {
            if at(i + 1) == '\n' {
                *line += 1;
            }
            i += 2;
            continue;
        }
        if c == '"' && (0..hashes).all(|k| at(i + 1 + k) == '#') {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// Finds every `crate::`/`super::`/`self::` path of a file whose module path is `module`,
/// skipping `#[cfg(test)]` items.
fn scan_file(text: &str, module: &[String]) -> Scan {
    let toks = lex(text);
    let mut scan = Scan {
        paths: Vec::new(),
        defs: Vec::new(),
        test_mods: Vec::new(),
    };
    // Inline `mod name { .. }` blocks: (name, brace depth at which they close).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    // Inside a `use` declaration (until its `;`).
    let mut in_use = false;
    let ident = |j: usize| match toks.get(j) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let punct = |j: usize, c: char| matches!(toks.get(j), Some((Tok::Punct(p), _)) if *p == c);
    while i < toks.len() {
        if punct(i, '#') && is_cfg_test(&toks, i) {
            let (next, test_mod) = skip_item(&toks, i);
            if let Some(m) = test_mod {
                scan.test_mods.push(m);
            }
            i = next;
            continue;
        }
        let here: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        let Some((tok, _)) = toks.get(i) else {
            break;
        };
        match tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Punct(';') => in_use = false,
            Tok::Ident(w) if w == "mod" => {
                if let (Some(name), true) = (ident(i + 1), punct(i + 2, '{')) {
                    inline.push((name.to_string(), depth));
                }
            }
            Tok::Ident(w)
                if matches!(
                    w.as_str(),
                    "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                ) =>
            {
                if let Some(name) = ident(i + 1) {
                    scan.defs.push((here.clone(), name.to_string()));
                }
            }
            Tok::Ident(w) if w == "macro_rules" && punct(i + 1, '!') => {
                if let Some(name) = ident(i + 2) {
                    scan.defs.push((Vec::new(), name.to_string()));
                }
            }
            Tok::Ident(w) if w == "use" => {
                in_use = true;
                let in_pub_use = is_pub_before(&toks, i);
                // `use` paths: relative ones only count in a re-export (for resolution).
                let (trees, next) = parse_tree(&toks, i + 1);
                for (segs, line) in trees {
                    let anchored = segs
                        .first()
                        .is_some_and(|s| s == "crate" || s == "super" || s == "self");
                    if !anchored && !in_pub_use {
                        continue;
                    }
                    if let Some(abs) = absolute(&segs, &here, true) {
                        scan.paths.push(FoundPath {
                            segments: abs,
                            line,
                            reexport: in_pub_use,
                            module: here.clone(),
                        });
                    }
                }
                i = next;
                continue;
            }
            Tok::Ident(w)
                if (w == "crate" || w == "super" || w == "self")
                    && !in_use
                    && matches!(toks.get(i + 1), Some((Tok::Sep, _)))
                    && !matches!(toks.get(i.wrapping_sub(1)), Some((Tok::Sep, _))) =>
            {
                let (trees, next) = parse_tree(&toks, i);
                for (segs, line) in trees {
                    if let Some(abs) = absolute(&segs, &here, false) {
                        scan.paths.push(FoundPath {
                            segments: abs,
                            line,
                            reexport: false,
                            module: here.clone(),
                        });
                    }
                }
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

/// Whether the `use` at `i` is preceded by `pub` or `pub(..)`.
fn is_pub_before(toks: &[(Tok, usize)], i: usize) -> bool {
    match i.checked_sub(1).and_then(|j| toks.get(j)) {
        Some((Tok::Ident(w), _)) => w == "pub",
        Some((Tok::Punct(')'), _)) => {
            let open = toks
                .get(..i)
                .unwrap_or_default()
                .iter()
                .rposition(|t| t.0 == Tok::Punct('('));
            let before = open
                .and_then(|j| j.checked_sub(1))
                .and_then(|j| toks.get(j));
            before.is_some_and(|t| t.0 == Tok::Ident("pub".to_string()))
        }
        _ => false,
    }
}

/// Whether the attribute starting at `#` (index `i`) is `#[cfg(test)]`.
fn is_cfg_test(toks: &[(Tok, usize)], i: usize) -> bool {
    let want = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    want.iter()
        .enumerate()
        .all(|(k, t)| toks.get(i + k).map(|x| &x.0) == Some(t))
}

/// Skips the attribute at `i`, any further attributes, and the item they annotate. Returns the
/// index after the item and, for `mod name;`, the name of the test-only child module.
fn skip_item(toks: &[(Tok, usize)], mut i: usize) -> (usize, Option<String>) {
    // Attributes.
    while toks.get(i).map(|t| &t.0) == Some(&Tok::Punct('#')) {
        i += 1;
        if toks.get(i).map(|t| &t.0) == Some(&Tok::Punct('!')) {
            i += 1;
        }
        let mut d = 0;
        while let Some((t, _)) = toks.get(i) {
            match t {
                Tok::Punct('[') => d += 1,
                Tok::Punct(']') => {
                    d -= 1;
                    if d == 0 {
                        i += 1;
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    // `mod name;` declares a test-only file.
    let mut j = i;
    while let Some((Tok::Ident(w), _)) = toks.get(j) {
        if w == "mod" {
            if let (Some((Tok::Ident(name), _)), Some((Tok::Punct(';'), _))) =
                (toks.get(j + 1), toks.get(j + 2))
            {
                return (j + 3, Some(name.clone()));
            }
            break;
        }
        j += 1;
        if j > i + 4 {
            break;
        }
    }
    // The item ends at a `;` outside braces or at the `}` closing its first brace.
    let mut d = 0i32;
    while let Some((t, _)) = toks.get(i) {
        match t {
            Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => d += 1,
            Tok::Punct('}') | Tok::Punct(')') | Tok::Punct(']') => {
                d -= 1;
                if d == 0 && *t == Tok::Punct('}') {
                    return (i + 1, None);
                }
            }
            Tok::Punct(';') if d == 0 => return (i + 1, None),
            _ => {}
        }
        i += 1;
    }
    (i, None)
}

/// Parses a path or a `use` tree starting at `i`: `a::b::{c, d::{e, self}}` -> every leaf path.
/// Returns the leaves (segments, line) and the index after the tree.
fn parse_tree(toks: &[(Tok, usize)], mut i: usize) -> (Vec<(Vec<String>, usize)>, usize) {
    let mut prefix = Vec::new();
    let line = toks.get(i).map(|t| t.1).unwrap_or(0);
    if toks.get(i).map(|t| &t.0) == Some(&Tok::Sep) {
        i += 1; // leading `::`
    }
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(w)) => {
                prefix.push(w.clone());
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::Sep) {
                    i += 1;
                    continue;
                }
                // `as alias`
                if toks.get(i).map(|t| &t.0) == Some(&Tok::Ident("as".into())) {
                    i += 2;
                }
                return (vec![(prefix, line)], i);
            }
            Some(Tok::Punct('*')) => {
                prefix.push("*".into());
                return (vec![(prefix, line)], i + 1);
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                let mut leaves = Vec::new();
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => {
                            i += 1;
                            break;
                        }
                        Some(Tok::Punct(',')) => i += 1,
                        None => break,
                        _ => {
                            let (sub, next) = parse_tree(toks, i);
                            if next == i {
                                i += 1;
                                continue;
                            }
                            for (segs, l) in sub {
                                let mut full = prefix.clone();
                                full.extend(segs);
                                leaves.push((full, l));
                            }
                            i = next;
                        }
                    }
                }
                return (leaves, i);
            }
            _ => return (vec![(prefix, line)], i),
        }
    }
}

/// The absolute module path of `segs` seen from module `here`; `None` for paths outside the
/// crate. In `use` declarations (`in_use`) a path without `crate`/`super`/`self` is relative to
/// `here` (edition 2018) when it is kept at all: only re-exports need it, the caller filters.
fn absolute(segs: &[String], here: &[String], in_use: bool) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = segs;
    match segs.first().map(String::as_str) {
        Some("crate") => rest = segs.get(1..).unwrap_or_default(),
        Some("super") | Some("self") => {
            out = here.to_vec();
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        out.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = rest.get(1..).unwrap_or_default();
            }
        }
        Some(_) if in_use => {
            // A relative `use` (`use child::x`, `use std::..`): counted only as a re-export target
            // and only when it names a child module; std and external crates resolve to nothing.
            out = here.to_vec();
        }
        _ => return None,
    }
    for s in rest {
        if s != "self" {
            out.push(s.clone());
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str, module: &[&str]) -> Vec<Vec<String>> {
        let m: Vec<String> = module.iter().map(|s| s.to_string()).collect();
        scan_file(text, &m)
            .paths
            .into_iter()
            .map(|p| p.segments)
            .collect()
    }

    #[test]
    fn use_trees_expand_and_resolve_relative_to_the_module() {
        let found = paths(
            "use crate::{a::b, c::{d, self}};\nuse super::x::Y;\nfn f() { crate::z::w(); }",
            &["m", "n"],
        );
        let want: Vec<Vec<String>> = [
            vec!["a", "b"],
            vec!["c", "d"],
            vec!["c"],
            vec!["m", "x", "Y"],
            vec!["z", "w"],
        ]
        .iter()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .collect();
        assert_eq!(found, want);
    }

    #[test]
    fn comments_strings_and_test_modules_are_ignored() {
        let found = paths(
            "// use crate::a;\nconst S: &str = \"crate::b\";\n#[cfg(test)]\nmod tests { use crate::c; }\nuse crate::d;",
            &[],
        );
        assert_eq!(found, vec![vec!["d".to_string()]]);
    }

    #[test]
    fn a_two_file_cycle_is_found_and_a_chain_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        fs::write(
            src.join("lib.rs"),
            "mod a;\nmod b;\nmod c;\npub use a::A;\n",
        )
        .unwrap();
        fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
        fs::write(src.join("b.rs"), "use crate::A;\npub struct B;\n").unwrap();
        fs::write(src.join("c.rs"), "use crate::b::B;\n").unwrap();
        let graph = CrateGraph::load(src).unwrap();
        let cycles = graph.cycles();
        assert_eq!(cycles.len(), 1);
        let files: Vec<&str> = cycles[0].iter().map(|&i| graph.files[i].as_str()).collect();
        assert_eq!(files, vec!["a.rs", "b.rs"]);
        fs::write(src.join("b.rs"), "pub struct B;\n").unwrap();
        assert!(CrateGraph::load(src).unwrap().cycles().is_empty());
    }
}
