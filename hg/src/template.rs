//! The part of hg's template language (Mercurial 6.3.2, `log -T`) that revfs implements
//! exactly: literal text with Python's escapes (`\n`, `\t`, `\x41`, `\101`; `\{` is a
//! literal brace), and `{keyword|filter|...}` expressions over a changeset.
//!
//! Values have hg's types: strings, integers, dates and lists; a filter takes the value's
//! text (a list's items joined with spaces, a date as `1000.0-3600`), except the date
//! filters, which take only dates, and `count`. Keywords hg does not know render empty, as
//! in hg; hg's other keywords and filters, and the rest of its language (functions, `%`,
//! quoted strings, `if`...), stop the command with an abort that says so.

use std::collections::BTreeMap;

/// Why a template cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// Valid hg, not implemented here.
    #[error("{0} (use hg instead)")]
    Unsupported(String),
    /// hg's parse error for a filter it does not know.
    #[error("unknown function '{0}'")]
    UnknownFunction(String),
}

impl TemplateError {
    /// The complete text hg prints on standard error.
    pub fn hg_message(&self) -> String {
        match self {
            TemplateError::Unsupported(_) => format!("abort: {self}\n"),
            TemplateError::UnknownFunction(_) => format!("hg: parse error: {self}\n"),
        }
    }
}

/// The values a template can show about one changeset. The costly ones are computed only
/// when the template uses them (see [`Template::uses`]).
#[derive(Default)]
pub struct Fields<'a> {
    pub rev: i32,
    /// The number of revisions in the repository (for `negrev`).
    pub repo_len: i32,
    pub node: String,
    pub desc: &'a [u8],
    pub author: &'a [u8],
    pub branch: &'a [u8],
    pub tags: Vec<&'a [u8]>,
    pub bookmarks: Vec<&'a [u8]>,
    pub phase: &'static str,
    pub phase_index: i32,
    pub files: Vec<&'a [u8]>,
    pub time: i64,
    pub tz: i32,
    pub parents: [(i32, String); 2],
    pub extras: Option<&'a BTreeMap<Vec<u8>, Vec<u8>>>,
    /// `file_adds`, `file_dels`, `file_mods`.
    pub file_adds: Vec<Vec<u8>>,
    pub file_dels: Vec<Vec<u8>>,
    pub file_mods: Vec<Vec<u8>>,
    /// (destination, source).
    pub file_copies: Vec<(Vec<u8>, Vec<u8>)>,
    /// The manifest's revision and hex node.
    pub manifest: (i64, String),
    pub graphnode: &'static str,
}

/// A keyword's value, with hg's type.
enum Value {
    Str(Vec<u8>),
    Int(i64),
    Date(i64, i32),
    List(Vec<Vec<u8>>),
    /// Nothing (`negrev` of the null revision).
    None,
}

impl Value {
    /// hg's `stringify`.
    fn text(self) -> Vec<u8> {
        match self {
            Value::Str(s) => s,
            Value::Int(i) => i.to_string().into_bytes(),
            Value::Date(t, tz) => format!("{t}.0{tz}").into_bytes(),
            Value::List(items) => items.join(&b' '),
            Value::None => Vec::new(),
        }
    }
}

enum Piece {
    Text(Vec<u8>),
    Expr {
        keyword: String,
        filters: Vec<String>,
    },
}

/// A parsed template.
pub struct Template {
    pieces: Vec<Piece>,
}

/// The keywords revfs shows (every other name renders empty, as in hg, but hg's own).
#[cfg_attr(not(test), allow(dead_code))]
const KEYWORDS: &[&str] = &[
    "author",
    "bookmarks",
    "branch",
    "date",
    "desc",
    "extras",
    "file_adds",
    "file_copies",
    "file_dels",
    "file_mods",
    "files",
    "graphnode",
    "manifest",
    "negrev",
    "node",
    "p1node",
    "p1rev",
    "p2node",
    "p2rev",
    "phase",
    "phaseidx",
    "rev",
    "tags",
    "user",
];

/// hg 6.3.2's other keywords (`templatekw.keywords`) and the template resources, which
/// revfs does not show.
const HG_KEYWORDS: &[&str] = &[
    "_fast_rank",
    "activebookmark",
    "bisect",
    "branches",
    "changessincelatesttag",
    "children",
    "currentbookmark",
    "diffstat",
    "envvars",
    "file_copies_switch",
    "graphwidth",
    "index",
    "instabilities",
    "latesttag",
    "latesttagdistance",
    "namespaces",
    "obsfate",
    "obsolete",
    "onelinesummary",
    "p1",
    "p2",
    "parents",
    "path",
    "peerurls",
    "predecessors",
    "reporoot",
    "size",
    "status",
    "subrepos",
    "successorssets",
    "succsandmarkers",
    "termwidth",
    "verbosity",
    "whyunstable",
];

/// The filters revfs applies.
const FILTERS: &[&str] = &[
    "count",
    "email",
    "firstline",
    "hgdate",
    "isodate",
    "lower",
    "person",
    "short",
    "shortdate",
    "stringify",
    "strip",
    "upper",
    "user",
];

/// hg 6.3.2's other filters and functions (`templatefilters.filters`,
/// `templatefuncs.funcs`).
const HG_FUNCTIONS: &[&str] = &[
    "addbreaks",
    "age",
    "basename",
    "cbor",
    "commondir",
    "config",
    "configbool",
    "configint",
    "date",
    "dict",
    "diff",
    "dirname",
    "domain",
    "emailuser",
    "escape",
    "extdata",
    "files",
    "fill",
    "fill68",
    "fill76",
    "filter",
    "formatnode",
    "get",
    "hex",
    "if",
    "ifcontains",
    "ifeq",
    "indent",
    "isodatesec",
    "join",
    "json",
    "label",
    "latesttag",
    "localdate",
    "mailmap",
    "max",
    "min",
    "mod",
    "nonempty",
    "obfuscate",
    "obsfatedate",
    "obsfateoperations",
    "obsfateusers",
    "obsfateverb",
    "pad",
    "permissions",
    "relpath",
    "reverse",
    "revescape",
    "revset",
    "rfc3339date",
    "rfc822date",
    "rstdoc",
    "search",
    "separate",
    "shortbisect",
    "shortest",
    "slashpath",
    "splitlines",
    "startswith",
    "stringescape",
    "stripdir",
    "sub",
    "subsetparents",
    "tabindent",
    "urlescape",
    "utf8",
    "word",
    "xmlescape",
];

/// Python's `codecs.escape_decode` of a template's literal text (hg's `unescapestr`).
fn unescape(text: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = text.get(i) else {
            out.push(b'\\');
            break;
        };
        i += 1;
        match e {
            b'\n' => {}
            b'\\' => out.push(b'\\'),
            b'\'' => out.push(b'\''),
            b'"' => out.push(b'"'),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match text.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push((v & 0xff) as u8);
            }
            b'x' => {
                let hex = text.get(i..i + 2).and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    // Python rejects it; so does hg. Left to hg.
                    None => {
                        out.extend_from_slice(b"\\x");
                    }
                }
            }
            other => {
                out.push(b'\\');
                out.push(other);
            }
        }
    }
}

fn unsupported(what: &str) -> TemplateError {
    TemplateError::Unsupported(format!("template {what} is not supported by revfs"))
}

impl Template {
    pub fn parse(spec: &str) -> Result<Template, TemplateError> {
        let bytes = spec.as_bytes();
        let mut pieces = Vec::new();
        let mut text_start = 0;
        let mut i = 0;
        let mut literal = Vec::new();
        while i < bytes.len() {
            match bytes[i] {
                // `\{` is a literal brace; other escapes are decoded with the text.
                b'\\' if bytes.get(i + 1) == Some(&b'{') => {
                    unescape(&bytes[text_start..i], &mut literal);
                    literal.push(b'{');
                    i += 2;
                    text_start = i;
                }
                b'\\' => i += 2,
                b'{' => {
                    unescape(&bytes[text_start..i], &mut literal);
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    let Some(close) = spec[i..].find('}') else {
                        return Err(unsupported("with an unterminated '{'"));
                    };
                    let expr = spec[i + 1..i + close].trim();
                    pieces.push(parse_expr(expr)?);
                    i += close + 1;
                    text_start = i;
                }
                _ => i += 1,
            }
        }
        unescape(&bytes[text_start.min(bytes.len())..], &mut literal);
        pieces.push(Piece::Text(literal));
        Ok(Template { pieces })
    }

    /// Whether the template shows `keyword`.
    pub fn uses(&self, keyword: &str) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Expr { keyword: k, .. } if k == keyword))
    }

    /// Renders the template for one changeset.
    pub fn render(&self, f: &Fields, out: &mut Vec<u8>) {
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.extend_from_slice(t),
                Piece::Expr { keyword, filters } => {
                    let mut value = keyword_value(keyword, f);
                    for filter in filters {
                        value = apply(filter, value);
                    }
                    out.extend_from_slice(&value.text());
                }
            }
        }
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// One `{...}`: a keyword and filters, each checked against what revfs and hg know.
fn parse_expr(expr: &str) -> Result<Piece, TemplateError> {
    let mut parts = expr.split('|').map(str::trim);
    let keyword = parts.next().unwrap_or_default().to_owned();
    if !is_name(&keyword) {
        return Err(unsupported(&format!("expression {{{expr}}}")));
    }
    if HG_KEYWORDS.contains(&keyword.as_str()) {
        return Err(unsupported(&format!("keyword '{keyword}'")));
    }
    let filters: Vec<String> = parts.map(str::to_owned).collect();
    for f in &filters {
        if !is_name(f) {
            return Err(unsupported(&format!("expression {{{expr}}}")));
        }
        if HG_FUNCTIONS.contains(&f.as_str()) {
            return Err(unsupported(&format!("filter '{f}'")));
        }
        if !FILTERS.contains(&f.as_str()) {
            return Err(TemplateError::UnknownFunction(f.clone()));
        }
    }
    // The date filters take dates only (hg's errors for the others are left to hg), and
    // `count` lists and text.
    let mut kind = kind_of(&keyword);
    for f in &filters {
        kind = match (f.as_str(), kind) {
            ("hgdate" | "isodate" | "shortdate", Kind::Date) => Kind::Str,
            ("hgdate" | "isodate" | "shortdate", _) => {
                return Err(unsupported(&format!("filter '{f}' of keyword '{keyword}'")))
            }
            ("count", Kind::List | Kind::Str) => Kind::Int,
            ("count", _) => {
                return Err(unsupported(&format!("filter '{f}' of keyword '{keyword}'")))
            }
            _ => Kind::Str,
        };
    }
    Ok(Piece::Expr { keyword, filters })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Int,
    Date,
    List,
}

fn kind_of(keyword: &str) -> Kind {
    match keyword {
        "rev" | "p1rev" | "p2rev" | "phaseidx" | "negrev" => Kind::Int,
        "date" => Kind::Date,
        "tags" | "bookmarks" | "files" | "file_adds" | "file_dels" | "file_mods"
        | "file_copies" | "extras" => Kind::List,
        _ => Kind::Str,
    }
}

fn list(items: &[&[u8]]) -> Value {
    Value::List(items.iter().map(|i| i.to_vec()).collect())
}

fn keyword_value(keyword: &str, f: &Fields) -> Value {
    match keyword {
        "rev" => Value::Int(f.rev.into()),
        "node" => Value::Str(f.node.clone().into_bytes()),
        "desc" => Value::Str(f.desc.to_vec()),
        "author" | "user" => Value::Str(f.author.to_vec()),
        "branch" => Value::Str(f.branch.to_vec()),
        "tags" => list(&f.tags),
        "bookmarks" => list(&f.bookmarks),
        "phase" => Value::Str(f.phase.as_bytes().to_vec()),
        "phaseidx" => Value::Int(f.phase_index.into()),
        "negrev" if f.rev >= 0 => Value::Int(i64::from(f.rev) - i64::from(f.repo_len)),
        "negrev" => Value::None,
        "files" => list(&f.files),
        "file_adds" => Value::List(f.file_adds.clone()),
        "file_dels" => Value::List(f.file_dels.clone()),
        "file_mods" => Value::List(f.file_mods.clone()),
        "file_copies" => Value::List(
            f.file_copies
                .iter()
                .map(|(d, s)| [d.as_slice(), b" (", s, b")"].concat())
                .collect(),
        ),
        "extras" => {
            // hg's changelog reads a missing branch as `default`.
            let mut extras = f.extras.cloned().unwrap_or_default();
            extras
                .entry(b"branch".to_vec())
                .or_insert_with(|| b"default".to_vec());
            Value::List(
                extras
                    .iter()
                    .map(|(k, v)| [k.as_slice(), b"=", &escapestr(v)].concat())
                    .collect(),
            )
        }
        "manifest" => Value::Str(
            format!(
                "{}:{}",
                f.manifest.0,
                &f.manifest.1[..f.manifest.1.len().min(12)]
            )
            .into_bytes(),
        ),
        "graphnode" => Value::Str(f.graphnode.as_bytes().to_vec()),
        "date" => Value::Date(f.time, f.tz),
        "p1rev" => Value::Int(f.parents[0].0.into()),
        "p2rev" => Value::Int(f.parents[1].0.into()),
        "p1node" => Value::Str(f.parents[0].1.clone().into_bytes()),
        "p2node" => Value::Str(f.parents[1].1.clone().into_bytes()),
        _ => Value::Str(Vec::new()),
    }
}

/// Python's `codecs.escape_encode` (hg's `stringutil.escapestr`).
pub fn escapestr(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\'' => out.extend_from_slice(b"\\'"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out
}

/// hg's `stringutil.email`.
fn email(author: &[u8]) -> &[u8] {
    let Some(f) = author.iter().position(|&b| b == b'<') else {
        return author;
    };
    let rest = &author[f + 1..];
    let end = rest.iter().position(|&b| b == b'>').unwrap_or(rest.len());
    &rest[..end]
}

fn find(s: &[u8], c: u8) -> Option<usize> {
    s.iter().position(|&b| b == c)
}

/// hg's `stringutil.shortuser`.
fn shortuser(user: &[u8]) -> &[u8] {
    let mut u = user;
    if let Some(f) = find(u, b'@') {
        u = &u[..f];
    }
    if let Some(f) = find(u, b'<') {
        u = &u[f + 1..];
    }
    if let Some(f) = find(u, b' ') {
        u = &u[..f];
    }
    if let Some(f) = find(u, b'.') {
        u = &u[..f];
    }
    u
}

/// hg's `stringutil.person`.
fn person(author: &[u8]) -> Vec<u8> {
    if find(author, b'@').is_none() {
        return author.to_vec();
    }
    if let Some(f) = find(author, b'<') {
        let s = &author[..f];
        let start = s
            .iter()
            .position(|&b| b != b' ' && b != b'"')
            .unwrap_or(s.len());
        let end = s
            .iter()
            .rposition(|&b| b != b' ' && b != b'"')
            .map_or(start, |e| e + 1);
        let s = &s[start..end.max(start)];
        let mut out = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            if s[i] == b'\\' && s.get(i + 1) == Some(&b'"') {
                out.push(b'"');
                i += 2;
            } else {
                out.push(s[i]);
                i += 1;
            }
        }
        return out;
    }
    let f = find(author, b'@').unwrap_or(author.len());
    author[..f]
        .iter()
        .map(|&b| if b == b'.' { b' ' } else { b })
        .collect()
}

/// Python's `bytes.strip()`: ASCII whitespace, vertical tab included.
fn py_strip(s: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = s.iter().position(|b| !ws(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !ws(b)).map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// Python's `bytes.splitlines()[0]`.
fn firstline(s: &[u8]) -> &[u8] {
    let end = s
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .unwrap_or(s.len());
    &s[..end]
}

fn apply(filter: &str, value: Value) -> Value {
    match (filter, value) {
        ("hgdate", Value::Date(t, tz)) => Value::Str(format!("{t} {tz}").into_bytes()),
        ("isodate", Value::Date(t, tz)) => Value::Str(
            format!(
                "{} {}",
                crate::date::local_time(t, tz, "%Y-%m-%d %H:%M"),
                crate::date::tz_suffix(tz)
            )
            .into_bytes(),
        ),
        ("shortdate", Value::Date(t, tz)) => {
            Value::Str(crate::date::local_time(t, tz, "%Y-%m-%d").into_bytes())
        }
        ("count", Value::List(items)) => Value::Int(items.len() as i64),
        ("count", Value::Str(s)) => Value::Int(s.len() as i64),
        (filter, value) => {
            let text = value.text();
            Value::Str(match filter {
                "short" => text[..text.len().min(12)].to_vec(),
                "firstline" => firstline(&text).to_vec(),
                "strip" => py_strip(&text).to_vec(),
                "email" => email(&text).to_vec(),
                "user" => shortuser(&text).to_vec(),
                "person" => person(&text),
                // Unicode case mapping on UTF-8 text, ASCII otherwise (hg's
                // encoding.upper/lower).
                "upper" => match std::str::from_utf8(&text) {
                    Ok(s) => s.to_uppercase().into_bytes(),
                    Err(_) => text.to_ascii_uppercase(),
                },
                "lower" => match std::str::from_utf8(&text) {
                    Ok(s) => s.to_lowercase().into_bytes(),
                    Err(_) => text.to_ascii_lowercase(),
                },
                _ => text,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Fields<'static> {
        Fields {
            rev: 3,
            repo_len: 5,
            node: "ab".repeat(20),
            desc: b"first\nsecond",
            author: b"Bob Builder <bob.b@example.org>",
            branch: b"default",
            phase: "draft",
            phase_index: 1,
            time: 1000,
            tz: -3600,
            parents: [(-1, "0".repeat(40)), (-1, "0".repeat(40))],
            manifest: (2, "cd".repeat(20)),
            graphnode: "o",
            ..Fields::default()
        }
    }

    #[test]
    fn escapes_and_unknown_keywords_render_like_hg() {
        let t = Template::parse("{rev}\\t{nope}\\x41\\101\\{x}{rev|short}\\n").unwrap();
        let mut out = Vec::new();
        t.render(&fields(), &mut out);
        assert_eq!(out, b"3\tAA{x}3\n");
    }

    #[test]
    fn filters_take_the_values_text_as_hg_does() {
        let cases: &[(&str, &str)] = &[
            ("{date}", "1000.0-3600"),
            ("{date|short}", "1000.0-3600"),
            ("{date|user}", "1000"),
            ("{author|user}", "bob"),
            ("{author|person}", "Bob Builder"),
            ("{author|short}", "Bob Builder "),
            ("{negrev}", "-2"),
            ("{manifest}", "2:cdcdcdcdcdcd"),
            ("{manifest|short}", "2:cdcdcdcdcd"),
            ("{desc|firstline|upper}", "FIRST"),
        ];
        for (spec, want) in cases {
            let mut out = Vec::new();
            Template::parse(spec).unwrap().render(&fields(), &mut out);
            assert_eq!(String::from_utf8_lossy(&out), *want, "{spec}");
        }
    }

    #[test]
    fn what_revfs_lacks_aborts_and_unknown_filters_are_hgs_error() {
        for spec in [
            "{diffstat}",
            "{rev|json}",
            "{join(files, ',')}",
            "{rev|hgdate}",
            "{x",
        ] {
            let e = Template::parse(spec).err().expect(spec);
            assert!(
                e.hg_message().ends_with("(use hg instead)\n"),
                "{spec}: {e}"
            );
        }
        let e = Template::parse("{rev|bogus}").err().unwrap();
        assert_eq!(
            e.hg_message(),
            "hg: parse error: unknown function 'bogus'\n"
        );
    }

    /// Every keyword, filter and function of the installed hg is known here: shown, or
    /// refused with an abort (none renders empty for want of an implementation).
    #[test]
    fn the_lists_cover_hgs_keywords_filters_and_functions() {
        if !crate::oracle::available(Some("mercurial.templatekw")) {
            return;
        }
        let out = std::process::Command::new(crate::oracle::PYTHON)
            .args([
                "-c",
                "from mercurial import templatekw, templatefilters, templatefuncs\n\
                 print(' '.join(k.decode() for k in templatekw.keywords))\n\
                 print(' '.join(k.decode() for k in list(templatefilters.filters) + list(templatefuncs.funcs)))",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        for k in lines.next().unwrap().split(' ') {
            assert!(
                KEYWORDS.contains(&k) || HG_KEYWORDS.contains(&k),
                "keyword {k}"
            );
        }
        for f in lines.next().unwrap().split(' ') {
            assert!(
                FILTERS.contains(&f) || HG_FUNCTIONS.contains(&f),
                "filter {f}"
            );
        }
    }
}
