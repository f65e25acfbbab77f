//! Changelog entries: the manifest node, user, date and timezone, extras, files and
//! description of one changeset, parsed from its text.

use crate::error::{Result, StoreError};
use crate::node::Node;
use std::collections::BTreeMap;

/// One parsed changeset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Changeset {
    pub manifest: Node,
    pub user: Vec<u8>,
    /// Seconds since the epoch (UTC).
    pub time: i64,
    /// Offset in seconds **west** of UTC, as hg stores it.
    pub tz: i32,
    pub extra: BTreeMap<Vec<u8>, Vec<u8>>,
    pub files: Vec<Vec<u8>>,
    pub description: Vec<u8>,
}

fn unescape_extra(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut it = s.iter();
    while let Some(&c) = it.next() {
        if c != b'\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b'0') => out.push(0),
            Some(b'\\') => out.push(b'\\'),
            Some(&other) => out.extend_from_slice(&[b'\\', other]),
            None => out.push(b'\\'),
        }
    }
    out
}

impl Changeset {
    /// Parses a changelog text. `node` is only used in error messages.
    pub fn parse(text: &[u8], node: &Node) -> Result<Changeset> {
        if text.is_empty() {
            return Ok(Changeset {
                extra: BTreeMap::new(),
                ..Default::default()
            });
        }
        let bad = |reason: &str| StoreError::Malformed {
            what: "changeset",
            node: node.to_hex(),
            reason: reason.to_owned(),
        };
        let split = text
            .windows(2)
            .position(|w| w == b"\n\n")
            .ok_or_else(|| bad("no blank line before the description"))?;
        let description = text[split + 2..].to_vec();
        let mut lines = text[..split].split(|&b| b == b'\n');
        let manifest = lines
            .next()
            .and_then(Node::from_hex)
            .ok_or_else(|| bad("bad manifest node"))?;
        let user = lines.next().ok_or_else(|| bad("no user line"))?.to_vec();
        let date = lines.next().ok_or_else(|| bad("no date line"))?;
        let mut parts = date.splitn(3, |&b| b == b' ');
        let time_field =
            std::str::from_utf8(parts.next().unwrap_or_default()).map_err(|_| bad("bad date"))?;
        let time = match time_field.parse::<i64>() {
            Ok(t) => t,
            Err(_) => time_field.parse::<f64>().map_err(|_| bad("bad date"))? as i64,
        };
        let tz = parts
            .next()
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| t.parse::<i32>().ok())
            .unwrap_or(0);
        let mut extra = BTreeMap::new();
        if let Some(raw) = parts.next() {
            for item in raw.split(|&b| b == 0) {
                let item = unescape_extra(item);
                if let Some(colon) = item.iter().position(|&b| b == b':') {
                    extra.insert(item[..colon].to_vec(), item[colon + 1..].to_vec());
                }
            }
        }
        let files = lines.map(<[u8]>::to_vec).collect();
        Ok(Changeset {
            manifest,
            user,
            time,
            tz,
            extra,
            files,
            description,
        })
    }

    /// The branch name: the `branch` extra, or `default`.
    pub fn branch(&self) -> &[u8] {
        self.extra
            .get(&b"branch"[..])
            .map(Vec::as_slice)
            .unwrap_or(b"default")
    }

    /// True when the changeset closes its branch head.
    pub fn closes_branch(&self) -> bool {
        self.extra.contains_key(&b"close"[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MF: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn a_full_changeset_text_parses() {
        let text = format!("{MF}\nAlice <a@x>\n1700000300 -3600 branch:feature\0close:1\na.txt\nb/c.txt\n\nline one\nline two");
        let cs = Changeset::parse(text.as_bytes(), &Node::NULL).unwrap();
        assert_eq!(cs.manifest.to_hex(), MF);
        assert_eq!(cs.user, b"Alice <a@x>");
        assert_eq!((cs.time, cs.tz), (1700000300, -3600));
        assert_eq!(cs.branch(), b"feature");
        assert!(cs.closes_branch());
        assert_eq!(cs.files, vec![b"a.txt".to_vec(), b"b/c.txt".to_vec()]);
        assert_eq!(cs.description, b"line one\nline two");
    }

    #[test]
    fn a_merge_without_files_and_escaped_extras_parse() {
        let text = format!("{MF}\nu\n1 0 branch:x\\ny\\\\z\n\nmerge");
        let cs = Changeset::parse(text.as_bytes(), &Node::NULL).unwrap();
        assert!(cs.files.is_empty());
        assert_eq!(cs.branch(), b"x\ny\\z");
        assert_eq!(cs.description, b"merge");
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Changeset::parse(b"nonsense", &Node::NULL).is_err());
        assert!(Changeset::parse(b"zz\nu\n1 0\n\nd", &Node::NULL).is_err());
    }
}
