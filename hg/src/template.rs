//! A subset of hg's template language for `log -T`: literal text with `\n`-style escapes,
//! and `{keyword|filter|...}` expressions over a changeset. Unknown keywords render empty,
//! as in hg; unknown filters are an error.

/// Why a template cannot be used (hg's messages).
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("parse error: unterminated template expansion in {0:?}")]
    Unterminated(String),
    #[error("unsupported template expression {{{0}}} (keywords and filters only)")]
    Unsupported(String),
    #[error("unknown function '{0}'")]
    UnknownFunction(String),
}

/// The values a template can show about one changeset.
pub struct Fields<'a> {
    pub rev: i32,
    pub node: String,
    pub desc: &'a [u8],
    pub author: &'a [u8],
    pub branch: &'a [u8],
    pub tags: Vec<&'a [u8]>,
    pub bookmarks: Vec<&'a [u8]>,
    pub phase: &'static str,
    pub files: Vec<&'a [u8]>,
    pub time: i64,
    pub tz: i32,
    pub parents: [(i32, String); 2],
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

const FILTERS: &[&str] = &[
    "short",
    "firstline",
    "strip",
    "hgdate",
    "isodate",
    "shortdate",
    "user",
    "email",
    "person",
    "upper",
    "lower",
];

fn unescape(text: &str, out: &mut Vec<u8>) {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.next() {
            Some('n') => out.push(b'\n'),
            Some('t') => out.push(b'\t'),
            Some('r') => out.push(b'\r'),
            Some('\\') => out.push(b'\\'),
            Some('"') => out.push(b'"'),
            Some('\'') => out.push(b'\''),
            Some('0') => out.push(0),
            Some('x') => {
                // \xHH, as Python's escape decoding does; hg rejects a malformed one.
                let hex: String = chars.clone().take(2).collect();
                match u8::from_str_radix(&hex, 16) {
                    Ok(b) if hex.len() == 2 => {
                        out.push(b);
                        chars.nth(1);
                    }
                    _ => out.extend_from_slice(b"\\x"),
                }
            }
            Some(other) => {
                out.push(b'\\');
                let mut buf = [0u8; 4];
                out.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
            }
            None => out.push(b'\\'),
        }
    }
}

impl Template {
    pub fn parse(spec: &str) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut rest = spec;
        while let Some(open) = rest.find('{') {
            let mut text = Vec::new();
            unescape(&rest[..open], &mut text);
            pieces.push(Piece::Text(text));
            let Some(close) = rest[open..].find('}') else {
                return Err(TemplateError::Unterminated(spec.to_owned()));
            };
            let expr = rest[open + 1..open + close].trim();
            let mut parts = expr.split('|').map(str::trim);
            let keyword = parts.next().unwrap_or_default().to_owned();
            if keyword.is_empty()
                || !keyword
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(TemplateError::Unsupported(expr.to_owned()));
            }
            let filters: Vec<String> = parts.map(str::to_owned).collect();
            if let Some(f) = filters.iter().find(|f| !FILTERS.contains(&f.as_str())) {
                return Err(TemplateError::UnknownFunction(f.clone()));
            }
            pieces.push(Piece::Expr { keyword, filters });
            rest = &rest[open + close + 1..];
        }
        let mut text = Vec::new();
        unescape(rest, &mut text);
        pieces.push(Piece::Text(text));
        Ok(Template { pieces })
    }

    /// Renders the template for one changeset.
    pub fn render(&self, f: &Fields, out: &mut Vec<u8>) {
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.extend_from_slice(t),
                Piece::Expr { keyword, filters } => {
                    let mut value = keyword_value(keyword, f);
                    for filter in filters {
                        value = apply(filter, &value, keyword, f);
                    }
                    out.extend_from_slice(&value);
                }
            }
        }
    }
}

fn join(items: &[&[u8]]) -> Vec<u8> {
    items.join(&b' ')
}

fn keyword_value(keyword: &str, f: &Fields) -> Vec<u8> {
    match keyword {
        "rev" => f.rev.to_string().into_bytes(),
        "node" => f.node.clone().into_bytes(),
        "desc" => f.desc.to_vec(),
        "author" => f.author.to_vec(),
        "branch" => f.branch.to_vec(),
        "tags" => join(&f.tags),
        "bookmarks" => join(&f.bookmarks),
        "phase" => f.phase.as_bytes().to_vec(),
        "files" => join(&f.files),
        "date" => format!("{}.0{}", f.time, f.tz).into_bytes(),
        "p1rev" => f.parents[0].0.to_string().into_bytes(),
        "p2rev" => f.parents[1].0.to_string().into_bytes(),
        "p1node" => f.parents[0].1.clone().into_bytes(),
        "p2node" => f.parents[1].1.clone().into_bytes(),
        _ => Vec::new(),
    }
}

/// The address inside `Name <addr>`, or the whole text.
fn email_of(author: &[u8]) -> &[u8] {
    let start = author.iter().position(|&b| b == b'<').map_or(0, |i| i + 1);
    let rest = &author[start..];
    let end = rest.iter().position(|&b| b == b'>').unwrap_or(rest.len());
    &rest[..end]
}

fn apply(filter: &str, value: &[u8], keyword: &str, f: &Fields) -> Vec<u8> {
    let is_date = keyword == "date";
    match filter {
        "short" if keyword.ends_with("node") => value[..value.len().min(12)].to_vec(),
        "short" => value.to_vec(),
        "firstline" => value
            .split(|&b| b == b'\n')
            .next()
            .unwrap_or_default()
            .to_vec(),
        "strip" => value.trim_ascii().to_vec(),
        "hgdate" if is_date => format!("{} {}", f.time, f.tz).into_bytes(),
        "isodate" if is_date => format!(
            "{} {}",
            crate::date::local_time(f.time, f.tz, "%Y-%m-%d %H:%M"),
            crate::date::tz_suffix(f.tz)
        )
        .into_bytes(),
        "shortdate" if is_date => crate::date::local_time(f.time, f.tz, "%Y-%m-%d").into_bytes(),
        "email" => email_of(value).to_vec(),
        "user" => {
            let e = email_of(value);
            e[..e.iter().position(|&b| b == b'@').unwrap_or(e.len())].to_vec()
        }
        "person" => match value.iter().position(|&b| b == b'<') {
            Some(i) if i > 0 => value[..i].trim_ascii().trim_ascii_matches(b'"').to_vec(),
            _ => {
                let e = email_of(value);
                e[..e.iter().position(|&b| b == b'@').unwrap_or(e.len())].to_vec()
            }
        },
        // Unicode case mapping on UTF-8 text, ASCII otherwise (hg's encoding.upper/lower).
        "upper" => match std::str::from_utf8(value) {
            Ok(s) => s.to_uppercase().into_bytes(),
            Err(_) => value.to_ascii_uppercase(),
        },
        "lower" => match std::str::from_utf8(value) {
            Ok(s) => s.to_lowercase().into_bytes(),
            Err(_) => value.to_ascii_lowercase(),
        },
        _ => value.to_vec(),
    }
}

trait TrimQuotes {
    fn trim_ascii_matches(&self, c: u8) -> &[u8];
}

impl TrimQuotes for [u8] {
    fn trim_ascii_matches(&self, c: u8) -> &[u8] {
        let s = self.strip_prefix(&[c]).unwrap_or(self);
        s.strip_suffix(&[c]).unwrap_or(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_unknown_keywords_render_like_hg() {
        let t = Template::parse("{rev}\\t{nope}\\x{rev|short}\\n").unwrap();
        let f = Fields {
            rev: 3,
            node: "ab".repeat(20),
            desc: b"first\nsecond",
            author: b"Bob Builder <bob@example.org>",
            branch: b"default",
            tags: vec![],
            bookmarks: vec![],
            phase: "draft",
            files: vec![],
            time: 0,
            tz: 0,
            parents: [(-1, "0".repeat(40)), (-1, "0".repeat(40))],
        };
        let mut out = Vec::new();
        t.render(&f, &mut out);
        assert_eq!(out, b"3\t\\x3\n");
        assert!(Template::parse("{rev|bogus}").is_err());
    }
}
