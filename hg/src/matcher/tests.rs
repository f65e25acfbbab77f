//! Command-line patterns against hg 6.3.2's own `match.match`, pattern by pattern and path
//! by path, and paths shown as `util.pathto` shows them.

use super::*;
use std::io::Write;
use std::process::{Command, Stdio};

use crate::oracle::PYTHON;

fn oracle_available() -> bool {
    crate::oracle::available(Some("mercurial.match"))
}

/// The paths every pattern is tried on.
const PATHS: &[&str] = &[
    "a",
    "a.c",
    "b.c",
    "d",
    "dx",
    "d/f",
    "d/f.c",
    "d/sub/g",
    "d/sub/g.c",
    "d/sub/deep/h",
    "dd/u",
    "e/d/f",
    "x y",
    "x y/z",
    "[a]",
    "a*b",
    "-n",
    "é",
    "d.c/x",
];

/// Pieces the random patterns are made of.
const PIECES: &[&str] = &[
    "d", "dx", "sub", "*", "**", "?", "f", "g.c", "*.c", "[a-d]", "{f,g}", ".", "..", "x y",
    "[!d]*", "deep", "e", "\\*", "a*b", "é", "",
];

const KINDS: &[&str] = &[
    "",
    "glob:",
    "path:",
    "relpath:",
    "relglob:",
    "rootglob:",
    "rootfilesin:",
    "re:",
    "relre:",
];

/// A small deterministic generator (xorshift), so that a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

fn random_pattern(rng: &mut Rng) -> String {
    let kind = rng.pick(KINDS);
    let n = 1 + rng.next() % 3;
    let mut parts = Vec::new();
    for _ in 0..n {
        parts.push(rng.pick(PIECES).to_string());
    }
    let body = parts.join("/");
    let body = if kind.ends_with("re:") {
        // Regular expressions made of the same pieces, with some anchors.
        match rng.next() % 4 {
            0 => format!("{}$", regex_of(&body)),
            1 => format!("^{}", regex_of(&body)),
            _ => regex_of(&body),
        }
    } else {
        body
    };
    format!("{kind}{body}")
}

fn regex_of(s: &str) -> String {
    s.replace('.', "\\.")
        .replace("**", ".*")
        .replace('*', "[^/]*")
        .replace('?', ".")
        .replace('{', "(")
        .replace('}', ")")
        .replace(',', "|")
}

#[test]
fn patterns_match_what_hg_matches() {
    if !oracle_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    std::fs::create_dir_all(root_path.join("d/sub")).unwrap();
    let seed: u64 = std::env::var("REVFS_MATCH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234);
    let mut rng = Rng(seed);
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    for i in 0..400 {
        let cwd = if i % 3 == 0 { "d" } else { "" };
        let n = 1 + rng.next() % 2;
        let pats = (0..n).map(|_| random_pattern(&mut rng)).collect();
        cases.push((cwd.to_string(), pats));
    }
    // hg's answers: for each case, either `abort <message>` or the explicit files, then
    // one 0/1 per path.
    let script = r#"
import sys
from mercurial import match, error
root = sys.argv[1].encode()
paths = [p.encode() for p in sys.argv[2].split('\n')]
out = []
for line in sys.stdin.buffer.read().split(b'\n'):
    if not line:
        continue
    cwd, *pats = line.split(b'\0')
    try:
        m = match.match(root, cwd, pats, default=b'relpath')
        r = b'files ' + b'\0'.join(m.files()) + b' ' + (b'1' if m.always() else b'0') + (b'1' if m.anypats() else b'0') + b' '
        r += b''.join(b'1' if m(p) else b'0' for p in paths)
    except error.Abort as e:
        r = b'abort ' + e.message
    out.append(r)
sys.stdout.buffer.write(b'\n'.join(out) + b'\n')
"#;
    let input: Vec<u8> = cases
        .iter()
        .map(|(cwd, pats)| {
            let mut l = cwd.clone();
            for p in pats {
                l.push('\0');
                l.push_str(p);
            }
            l.push('\n');
            l
        })
        .collect::<String>()
        .into_bytes();
    let mut child = Command::new(PYTHON)
        .arg("-c")
        .arg(script)
        .arg(&root_path)
        .arg(PATHS.join("\n"))
        .env("HGRCPATH", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "python oracle failed");
    let answers: Vec<&[u8]> = out.stdout.split(|&b| b == b'\n').collect();
    let mut failures = Vec::new();
    let mut skipped = 0;
    for ((cwd, pats), want) in cases.iter().zip(answers) {
        let ctx = PathContext::with_cwd(&root_path, &root_path.join(cwd));
        let raw: Vec<&[u8]> = pats.iter().map(|p| p.as_bytes()).collect();
        let got: Vec<u8> = match Matcher::with_default(&ctx, &raw, b"relpath") {
            Ok(m) => {
                let mut r = b"files ".to_vec();
                r.extend_from_slice(&m.files().join(&b'\0'));
                r.extend_from_slice(if m.is_always() { b" 1" } else { b" 0" });
                r.extend_from_slice(if m.anypats() { b"1 " } else { b"0 " });
                for p in PATHS {
                    r.push(if m.matches(p.as_bytes()) { b'1' } else { b'0' });
                }
                r
            }
            Err(MatchError::Unsupported(_)) => {
                skipped += 1;
                continue;
            }
            Err(e) => format!("abort {e}").into_bytes(),
        };
        if got != want {
            failures.push(format!(
                "cwd={cwd:?} pats={pats:?}\n  hg:    {}\n  revfs: {}",
                String::from_utf8_lossy(want),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert!(
        skipped * 10 < cases.len(),
        "{skipped} of {} cases unsupported",
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures[..failures.len().min(15)].join("\n")
    );
}

#[test]
fn paths_are_shown_from_the_current_directory() {
    assert_eq!(pathto(b"/r", b"", b"d/f"), b"d/f");
    assert_eq!(pathto(b"/r", b"d", b"d/f"), b"f");
    assert_eq!(pathto(b"/r", b"d/sub", b"dx"), b"../../dx");
    assert_eq!(pathto(b"/tmp/hgx", b"/tmp/outside", b"d/f"), b"../hgx/d/f");
    assert_eq!(pathto(b"/r", b"d", b"d"), b".");
}

#[test]
fn pattern_kinds_like_hg() {
    assert!(is_pattern("glob:*.c"));
    assert!(!is_pattern("foo:bar"));
    assert!(!is_pattern("plain"));
}

#[test]
fn finddirs_lists_every_ancestor_and_the_root() {
    let v: Vec<&[u8]> = finddirs(b"a/b/c").collect();
    assert_eq!(v, vec![&b"a/b"[..], b"a", b""]);
    let v: Vec<&[u8]> = finddirs(b"a").collect();
    assert_eq!(v, vec![&b""[..]]);
    assert_eq!(finddirs(b"").count(), 1);
}
