//! Diffs compared with hg's own, byte for byte.

use super::git::{git_blob_id, sha1};
use super::*;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::oracle::PYTHON;

fn oracle_available() -> bool {
    crate::oracle::available(Some("mercurial.mdiff"))
}

fn run_python(script: &str, input: Vec<u8>) -> Vec<u8> {
    let mut child = Command::new(PYTHON)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "python oracle failed");
    out.stdout
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{:02x}", b)).collect()
}

fn unhex(s: &[u8]) -> Vec<u8> {
    s.chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

/// splitmix64
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn pct(&mut self, p: usize) -> bool {
        self.below(100) < p
    }
}

const POOLS: &[&[&[u8]]] = &[
    &[b"a\n", b"b\n", b"c\n"],
    &[b"\n", b"x\n", b" \n", b"x\r\n", b"}\n", b"{\n"],
    &[
        b"alpha\n", b"beta\n", b"gamma\n", b"delta\n", b"eps\n", b"zeta\n", b"eta\n", b"theta\n",
        b"iota\n", b"kappa\n", b"\n", b"}\n",
    ],
    &[
        b"a\n",
        b"a\r\n",
        b"a",
        b"\xff\xfe\n",
        b"\x00\n",
        b"\r\n",
        b"\n",
    ],
    &[b"same\n"],
];

fn gen_lines(rng: &mut Rng, pool: &[&[u8]], n: usize, uniq: &mut usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            if rng.pct(8) {
                *uniq += 1;
                format!("unique {}\n", uniq).into_bytes()
            } else {
                pool[rng.below(pool.len())].to_vec()
            }
        })
        .collect()
}

fn mutate(
    rng: &mut Rng,
    lines: &[Vec<u8>],
    pool: &[&[u8]],
    ops: usize,
    maxrun: usize,
    uniq: &mut usize,
) -> Vec<Vec<u8>> {
    let mut v = lines.to_vec();
    for _ in 0..ops {
        let len = v.len();
        match rng.below(6) {
            0 if len > 0 => {
                let s = rng.below(len);
                let e = (s + 1 + rng.below(maxrun)).min(len);
                v.drain(s..e);
            }
            1 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(maxrun);
                let ins = gen_lines(rng, pool, n, uniq);
                v.splice(at..at, ins);
            }
            2 if len > 1 => {
                let s = rng.below(len);
                let e = (s + 1 + rng.below(maxrun)).min(len);
                let block: Vec<_> = v.drain(s..e).collect();
                let at = rng.below(v.len() + 1);
                v.splice(at..at, block);
            }
            3 if len > 0 => {
                let s = rng.below(len);
                let e = (s + 1 + rng.below(maxrun)).min(len);
                let block: Vec<_> = v[s..e].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, block);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                v[i] = pool[rng.below(pool.len())].to_vec();
            }
            _ => {
                let at = rng.below(len + 1);
                *uniq += 1;
                v.insert(at, format!("fresh {}\n", uniq).into_bytes());
            }
        }
    }
    v
}

fn finish(rng: &mut Rng, lines: &[Vec<u8>]) -> Vec<u8> {
    let mut t = lines.concat();
    if rng.pct(15) && t.last() == Some(&b'\n') {
        t.pop();
    } else if rng.pct(8) {
        t.extend_from_slice(b"tail");
    }
    t
}

/// Random pairs of texts with many equal lines and ties.
fn random_pairs(seed: u64, count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Rng(seed);
    let mut uniq = 0;
    let mut pairs = Vec::new();
    for _ in 0..count {
        let pool = POOLS[rng.below(POOLS.len())];
        let n = match rng.below(4) {
            0 => rng.below(4),
            1 | 2 => rng.below(25),
            _ => rng.below(120),
        };
        let a = gen_lines(&mut rng, pool, n, &mut uniq);
        let kind = rng.below(10);
        let b = if kind < 7 {
            let ops = rng.below(6);
            mutate(&mut rng, &a, pool, ops, 6, &mut uniq)
        } else if kind < 9 {
            let m = rng.below(n + 5);
            gen_lines(&mut rng, pool, m, &mut uniq)
        } else {
            match rng.below(3) {
                0 => Vec::new(),
                1 => a.clone(),
                _ => {
                    // Long identical runs around a small change.
                    let mut v = a.clone();
                    v.extend(vec![b"run\n".to_vec(); 40]);
                    v.push(b"changed\n".to_vec());
                    v
                }
            }
        };
        let (ta, tb) = (finish(&mut rng, &a), finish(&mut rng, &b));
        let ta = if rng.pct(3) { Vec::new() } else { ta };
        if rng.pct(50) {
            pairs.push((ta, tb));
        } else {
            pairs.push((tb, ta));
        }
    }
    pairs
}

/// Larger texts: popular lines (popularity threshold), and > 31000
/// lines (other threshold, 30000-line search window).
fn large_pairs(seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Rng(seed);
    let mut uniq = 0;
    let mut pairs = Vec::new();
    for case in 0..12 {
        let pool = POOLS[case % 4];
        let n = 1500 + rng.below(2500);
        let a = gen_lines(&mut rng, pool, n, &mut uniq);
        let ops = 5 + rng.below(20);
        let b = mutate(&mut rng, &a, pool, ops, 30, &mut uniq);
        pairs.push((finish(&mut rng, &a), finish(&mut rng, &b)));
    }
    for case in 0..3 {
        let n = 33000 + rng.below(4000);
        let a: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                if i % 3 == 0 {
                    POOLS[2][rng.below(POOLS[2].len())].to_vec()
                } else {
                    format!("line {}\n", i / (1 + case)).into_bytes()
                }
            })
            .collect();
        let b = mutate(&mut rng, &a, POOLS[2], 10, 50, &mut uniq);
        pairs.push((finish(&mut rng, &a), finish(&mut rng, &b)));
    }
    // The longest match lies before the last 30000 lines of the old
    // text: the search window decides which match is taken.
    let x: Vec<u8> = (0..5000)
        .flat_map(|i| format!("x{i}\n").into_bytes())
        .collect();
    let y: Vec<String> = (0..30000).map(|i| format!("y{i}\n")).collect();
    let y_edited: Vec<u8> = y
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i % 10 == 5 {
                format!("e{i}\n")
            } else {
                l.clone()
            }
        })
        .collect::<String>()
        .into_bytes();
    let y: Vec<u8> = y.concat().into_bytes();
    pairs.push(([&x[..], &y[..]].concat(), [&y_edited[..], &x[..]].concat()));
    // Only popular lines.
    let blank = b"\n".repeat(100_000);
    let mut blank2 = blank.clone();
    blank2.splice(50_000..50_000, b"x\n".iter().copied());
    pairs.push((blank, blank2));
    pairs
}

const BLOCKS_SCRIPT: &str = r#"
import sys, binascii
from mercurial import policy
bdiff = policy.importmod('bdiff')
assert bdiff.__name__ == 'mercurial.cext.bdiff', bdiff.__name__
out = []
for line in sys.stdin.buffer:
    x, y = line.strip().split(b',')
    r = bdiff.blocks(binascii.unhexlify(x), binascii.unhexlify(y))
    out.append(';'.join('%d %d %d %d' % t for t in r))
sys.stdout.write('\n'.join(out) + '\n')
"#;

#[test]
fn blocks_match_mercurial_bdiff() {
    if !oracle_available() {
        return;
    }
    let mut pairs = random_pairs(0x5EED_0001, 3000);
    pairs.extend(large_pairs(0x5EED_0002));
    let mut input = Vec::new();
    for (a, b) in &pairs {
        input.extend_from_slice(format!("{},{}\n", hex(a), hex(b)).as_bytes());
    }
    let out = run_python(BLOCKS_SCRIPT, input);
    let lines: Vec<&[u8]> = out.split(|&c| c == b'\n').collect();
    assert!(lines.len() > pairs.len());
    for (idx, (a, b)) in pairs.iter().enumerate() {
        let ours = blocks(a, b)
            .iter()
            .map(|t| format!("{} {} {} {}", t.0, t.1, t.2, t.3))
            .collect::<Vec<_>>()
            .join(";");
        assert_eq!(
            ours,
            String::from_utf8_lossy(lines[idx]),
            "pair {idx}: a={:?} b={:?}",
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b)
        );
    }
}

const UNIDIFF_SCRIPT: &str = r#"
import sys, binascii
from mercurial import mdiff
plain = mdiff.diffopts()
git = mdiff.diffopts(git=True)
out = []
for line in sys.stdin.buffer:
    x, y = line.strip().split(b',')
    a, b = binascii.unhexlify(x), binascii.unhexlify(y)
    for opts in (plain, git):
        hdr, hunks = mdiff.unidiff(a, b'Thu Jan 01 00:00:00 1970 +0000', b,
                                   b'Mon Feb 03 04:05:06 2020 -0130',
                                   b'old name', b'new', False, opts)
        text = b''.join(h + b'\n' for h in hdr)
        text += b''.join(b''.join(hl) for hr, hl in hunks)
        out.append(binascii.hexlify(text))
sys.stdout.buffer.write(b'\n'.join(out) + b'\n')
"#;

#[test]
fn unidiff_matches_mercurial_mdiff() {
    if !oracle_available() {
        return;
    }
    let pairs = random_pairs(0x5EED_0003, 3000);
    let mut input = Vec::new();
    for (a, b) in &pairs {
        input.extend_from_slice(format!("{},{}\n", hex(a), hex(b)).as_bytes());
    }
    let out = run_python(UNIDIFF_SCRIPT, input);
    let lines: Vec<&[u8]> = out.split(|&c| c == b'\n').collect();
    for (idx, (a, b)) in pairs.iter().enumerate() {
        for (k, git) in [false, true].into_iter().enumerate() {
            let (hdr, text) = unidiff(
                Some(a),
                "Thu Jan 01 00:00:00 1970 +0000",
                Some(b),
                "Mon Feb 03 04:05:06 2020 -0130",
                b"old name",
                b"new",
                git,
            );
            let mut ours = Vec::new();
            for h in hdr {
                ours.extend_from_slice(&h);
                ours.push(b'\n');
            }
            ours.extend_from_slice(&text);
            let theirs = unhex(lines[idx * 2 + k]);
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "pair {idx} git={git}: a={:?} b={:?}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
            assert_eq!(ours, theirs);
        }
    }
}

#[test]
fn datestr_matches_examples() {
    assert_eq!(hg_datestr(0, 0), "Thu Jan 01 00:00:00 1970 +0000");
    assert_eq!(hg_datestr(42, 0), "Thu Jan 01 00:00:42 1970 +0000");
    assert_eq!(hg_datestr(-42, 0), "Wed Dec 31 23:59:18 1969 +0000");
    assert_eq!(hg_datestr(0x7fff_ffff, 0), "Tue Jan 19 03:14:07 2038 +0000");
    assert_eq!(
        hg_datestr(-0x8000_0000, 0),
        "Fri Dec 13 20:45:52 1901 +0000"
    );
    assert_eq!(
        hg_datestr(1_500_000_000, -7200),
        "Fri Jul 14 04:40:00 2017 +0200"
    );
    assert_eq!(
        hg_datestr(1_600_000_000, 19800),
        "Sun Sep 13 06:56:40 2020 -0530"
    );
}

#[test]
fn sha1_known_values() {
    assert_eq!(git_blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    let digest: String = sha1(b"abc").iter().map(|b| format!("{:02x}", b)).collect();
    assert_eq!(digest, "a9993e364706816aba3e25717850c26c9cd0d89d");
}

#[test]
fn large_inputs_are_fast() {
    let mut rng = Rng(7);
    let a: Vec<Vec<u8>> = (0..100_000)
        .map(|i| format!("line {}\n", i % 60_000).into_bytes())
        .collect();
    let mut uniq = 0;
    let b = mutate(&mut rng, &a, POOLS[2], 300, 20, &mut uniq);
    let blank: Vec<u8> = b"\n".repeat(100_000);
    let mut blank2 = blank.clone();
    blank2.splice(50_000..50_000, b"x\n".iter().copied());
    let cases = [(a.concat(), b.concat()), (blank, blank2)];
    let limit = if cfg!(debug_assertions) { 10 } else { 1 };
    for (x, y) in &cases {
        let start = Instant::now();
        let bl = blocks(x, y);
        let old = DiffOptions::default();
        let side = |d: &'_ [u8]| -> Vec<u8> {
            let s1 = Side {
                path: b"f",
                data: Some(x),
                exec: false,
                symlink: false,
            };
            let s2 = Side {
                path: b"f",
                data: Some(d),
                exec: false,
                symlink: false,
            };
            file_diff(&s1, &s2, None, "000000000000", &old).unwrap()
        };
        let text = side(y);
        let elapsed = start.elapsed();
        println!(
            "100k lines: {} blocks, {} bytes, {:?}",
            bl.len(),
            text.len(),
            elapsed
        );
        assert!(
            elapsed < Duration::from_secs(limit),
            "too slow: {elapsed:?}"
        );
    }
}

// ----- whole-output oracle against a real hg repository -----

#[derive(Clone)]
enum Content {
    File(Vec<u8>, bool),
    Link(&'static str),
}

fn file(data: &[u8]) -> Option<Content> {
    Some(Content::File(data.to_vec(), false))
}

fn exec_file(data: &[u8]) -> Option<Content> {
    Some(Content::File(data.to_vec(), true))
}

fn numbered(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

fn edited(n: usize, edits: &[(usize, &str)]) -> Vec<u8> {
    let mut v = numbered(n);
    for &(i, s) in edits {
        v[i] = s.to_string();
    }
    v.concat().into_bytes()
}

fn write_content(root: &Path, name: &str, c: &Content) {
    let p = root.join(name);
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    if std::fs::symlink_metadata(&p).is_ok() {
        std::fs::remove_file(&p).unwrap();
    }
    match c {
        Content::File(data, exec) => {
            std::fs::write(&p, data).unwrap();
            let mode = if *exec { 0o755 } else { 0o644 };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        Content::Link(target) => std::os::unix::fs::symlink(target, &p).unwrap(),
    }
}

fn hg(repo: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("hg")
        .args(args)
        .current_dir(repo)
        .env("HGPLAIN", "1")
        .env("HGRCPATH", "")
        .env("HGUSER", "t")
        .env_remove("HGENCODING")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Old and new content of every file of the test repository.
fn repo_spec() -> Vec<(&'static str, Option<Content>, Option<Content>)> {
    let n20 = numbered(20).concat().into_bytes();
    let n40 = numbered(40).concat().into_bytes();
    let dup_old = b"{\n}\n\n{\n}\n\nx\n{\n}\n\n".repeat(6);
    let mut dup_new = dup_old.clone();
    dup_new.splice(30..30, b"{\n}\n\ny\n".iter().copied());
    let moved_old = numbered(30).concat().into_bytes();
    let mut mv = numbered(30);
    let block: Vec<String> = mv.drain(3..9).collect();
    mv.splice(20..20, block);
    let big_old: Vec<u8> = (0..3000)
        .map(|i| match i % 7 {
            0 => "\n".to_string(),
            1 => "}\n".to_string(),
            2 => "    return x;\n".to_string(),
            _ => format!("stmt {i};\n"),
        })
        .collect::<String>()
        .into_bytes();
    let mut big_new_lines: Vec<Vec<u8>> = big_old
        .split_inclusive(|&c| c == b'\n')
        .map(|l| l.to_vec())
        .collect();
    for (k, at) in [5usize, 400, 401, 1200, 2990].iter().enumerate() {
        big_new_lines.insert(*at, format!("inserted {k}\n").into_bytes());
    }
    big_new_lines.drain(2000..2030);
    big_new_lines.insert(2500, b"}\n".to_vec());
    let big_new = big_new_lines.concat();
    let crlf_old = b"one\r\ntwo\r\nthree\r\nfour\r\n".to_vec();
    let crlf_new = b"one\r\ntwo\ntwo and a half\r\nthree\r\nfour\r\n".to_vec();
    vec![
        (
            "edit_start.txt",
            file(&n20),
            file(&edited(20, &[(0, "first\n")])),
        ),
        (
            "edit_mid.txt",
            file(&n40),
            file(&edited(40, &[(19, "middle\n")])),
        ),
        (
            "edit_end.txt",
            file(&n20),
            file(&edited(20, &[(19, "last\n")])),
        ),
        (
            "two_hunks.txt",
            file(&n40),
            file(&edited(40, &[(4, "x\n"), (30, "y\n")])),
        ),
        (
            "gap6.txt",
            file(&n40),
            file(&edited(40, &[(9, "x\n"), (16, "y\n")])),
        ),
        (
            "gap7.txt",
            file(&n40),
            file(&edited(40, &[(9, "x\n"), (17, "y\n")])),
        ),
        ("noeol_old.txt", file(b"a\nb\nc"), file(b"a\nb\nc\n")),
        ("noeol_new.txt", file(b"a\nb\nc\n"), file(b"a\nb\nc")),
        (
            "noeol_both_far.txt",
            file(&[&n20[..], b"end"].concat()),
            file(&[&edited(20, &[(2, "x\n")])[..], b"end"].concat()),
        ),
        (
            "noeol_both_near.txt",
            file(&[&n20[..], b"end"].concat()),
            file(&[&edited(20, &[(18, "x\n")])[..], b"end"].concat()),
        ),
        (
            "noeol_both_last.txt",
            file(b"a\nb\nold"),
            file(b"a\nb\nnew"),
        ),
        ("noeol_single.txt", file(b"x"), file(b"y")),
        ("empty_to_content.txt", file(b""), file(b"hello\n")),
        ("content_to_empty.txt", file(b"bye\nbye\n"), file(b"")),
        ("removed.txt", file(&n20), None),
        ("removed_empty.txt", file(b""), None),
        ("removed_noeol.txt", file(b"a\nb"), None),
        ("added.txt", None, file(b"new\nfile\n")),
        ("added_empty.txt", None, file(b"")),
        ("added_noeol.txt", None, file(b"no newline")),
        (
            "exec_on.sh",
            file(b"#!/bin/sh\n"),
            exec_file(b"#!/bin/sh\n"),
        ),
        (
            "exec_off.sh",
            exec_file(b"#!/bin/sh\n"),
            file(b"#!/bin/sh\n"),
        ),
        (
            "exec_edit.sh",
            file(b"#!/bin/sh\necho a\n"),
            exec_file(b"#!/bin/sh\necho b\n"),
        ),
        ("exec_added.sh", None, exec_file(b"#!/bin/sh\n")),
        ("exec_removed.sh", exec_file(b"#!/bin/sh\n"), None),
        (
            "link_changed",
            Some(Content::Link("target1")),
            Some(Content::Link("target2")),
        ),
        (
            "link_to_file",
            Some(Content::Link("edit_end.txt")),
            file(b"now a file\n"),
        ),
        (
            "file_to_link",
            file(b"was a file\n"),
            Some(Content::Link("added.txt")),
        ),
        ("link_added", None, Some(Content::Link("some/where"))),
        ("link_removed", Some(Content::Link("gone")), None),
        ("bin_mod.bin", file(b"\x00\x01\x02"), file(b"\x00\x01\x03")),
        ("bin_added.bin", None, file(b"\x00bin")),
        ("bin_removed.bin", file(b"\x00\x01bin\n"), None),
        ("bin_to_text.bin", file(b"\x00\x01"), file(b"text\n")),
        ("text_to_bin.bin", file(b"text\n"), file(b"te\x00xt\n")),
        ("bin_to_empty.bin", file(b"\x00\x01"), file(b"")),
        (
            "bin_exec_only.bin",
            file(b"\x00\x01"),
            exec_file(b"\x00\x01"),
        ),
        ("crlf.txt", file(&crlf_old), file(&crlf_new)),
        ("with space.txt", file(b"a\nb\n"), file(b"a\nc\n")),
        ("dup_lines.txt", file(&dup_old), file(&dup_new)),
        (
            "moved_block.txt",
            file(&moved_old),
            file(&mv.concat().into_bytes()),
        ),
        (
            "sub/dir/nested.txt",
            file(b"nested\n"),
            file(b"nested\nmore\n"),
        ),
        ("big.txt", file(&big_old), file(&big_new)),
        ("all_replaced.txt", file(b"a\nb\nc\n"), file(b"x\ny\n")),
        ("unchanged.txt", file(b"same\n"), file(b"same\n")),
        ("copy_src.txt", file(&n20), file(&n20)),
        ("rename_src.txt", file(&n40), None),
        ("rename_plain_src.txt", file(b"moved as is\n"), None),
        (
            "copy_exec_src.sh",
            exec_file(b"#!/bin/sh\n"),
            exec_file(b"#!/bin/sh\n"),
        ),
    ]
}

/// (source, destination, is_rename, new content of the destination)
fn copy_spec() -> Vec<(&'static str, &'static str, bool, Option<Content>)> {
    vec![
        (
            "copy_src.txt",
            "copy_dst.txt",
            false,
            file(&edited(20, &[(5, "copied\n")])),
        ),
        (
            "rename_src.txt",
            "rename_dst.txt",
            true,
            file(&edited(40, &[(39, "renamed\n")])),
        ),
        ("rename_plain_src.txt", "z_renamed.txt", true, None),
        (
            "copy_exec_src.sh",
            "a_copy_noexec.sh",
            false,
            file(b"#!/bin/sh\n"),
        ),
    ]
}

/// (old path, new path, copy operation)
type FilePair = (Option<Vec<u8>>, Option<Vec<u8>>, Option<CopyOp>);

/// `patch._filepairs`: (old path, new path, copy op) in output order.
fn filepairs(
    modified: &[Vec<u8>],
    added: &[Vec<u8>],
    removed: &[Vec<u8>],
    copies: &[(Vec<u8>, Vec<u8>)],
    git: bool,
) -> Vec<FilePair> {
    let copy: HashMap<&Vec<u8>, &Vec<u8>> = copies.iter().map(|(d, s)| (d, s)).collect();
    let copyto: HashMap<&Vec<u8>, &Vec<u8>> = copies.iter().map(|(d, s)| (s, d)).collect();
    let addedset: HashSet<&Vec<u8>> = added.iter().collect();
    let removedset: HashSet<&Vec<u8>> = removed.iter().collect();
    let mut gone = HashSet::new();
    let all: BTreeSet<&Vec<u8>> = modified.iter().chain(added).chain(removed).collect();
    let mut out = Vec::new();
    for f in all {
        let (mut f1, mut f2, mut op) = (Some(f.clone()), Some(f.clone()), None);
        if addedset.contains(f) {
            f1 = None;
            if let (true, Some(src)) = (git, copy.get(f)) {
                f1 = Some((*src).clone());
                if removedset.contains(*src) && !gone.contains(*src) {
                    op = Some(CopyOp::Rename);
                    gone.insert((*src).clone());
                } else {
                    op = Some(CopyOp::Copy);
                }
            }
        } else if removedset.contains(f) {
            f2 = None;
            if git {
                if let Some(dst) = copyto.get(f) {
                    if addedset.contains(*dst) && copy.get(*dst) == Some(&f) {
                        continue;
                    }
                }
            }
        }
        out.push((f1, f2, op));
    }
    out
}

struct OldFile {
    data: Vec<u8>,
    exec: bool,
    symlink: bool,
}

struct NewFile {
    data: Vec<u8>,
    exec: bool,
    symlink: bool,
}

fn read_new(root: &Path, name: &[u8]) -> NewFile {
    let p = root.join(std::ffi::OsStr::from_bytes(name));
    let meta = std::fs::symlink_metadata(&p).unwrap();
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&p).unwrap();
        NewFile {
            data: target.as_os_str().as_bytes().to_vec(),
            exec: false,
            symlink: true,
        }
    } else {
        NewFile {
            data: std::fs::read(&p).unwrap(),
            exec: meta.permissions().mode() & 0o100 != 0,
            symlink: false,
        }
    }
}

#[test]
fn file_diff_matches_hg_diff() {
    if !oracle_available() {
        return;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let tmp = TempDir(std::env::temp_dir().join(format!(
        "revfs-diff-oracle-{}-{}",
        std::process::id(),
        nanos
    )));
    let root = tmp.0.clone();
    std::fs::create_dir_all(&root).unwrap();
    hg(&root, &["init"]);
    let spec = repo_spec();
    for (name, old, _) in &spec {
        if let Some(c) = old {
            write_content(&root, name, c);
        }
    }
    hg(&root, &["add", "-q"]);
    hg(
        &root,
        &["commit", "-q", "-m", "init", "-d", "1500000000 -7200"],
    );
    for (src, dst, rename, content) in copy_spec() {
        hg(&root, &[if rename { "mv" } else { "cp" }, "-q", src, dst]);
        if let Some(c) = content {
            write_content(&root, dst, &c);
        }
    }
    for (name, old, new) in &spec {
        match (old, new) {
            (Some(_), None) => {
                if std::fs::symlink_metadata(root.join(name)).is_ok() {
                    hg(&root, &["rm", "-q", name]);
                }
            }
            (None, Some(c)) => {
                write_content(&root, name, c);
                hg(&root, &["add", "-q", name]);
            }
            (Some(_), Some(c)) => write_content(&root, name, c),
            (None, None) => {}
        }
    }

    // What hg knows: status with copies, parent, old flags.
    let status = hg(&root, &["status", "-C"]);
    let (mut modified, mut added, mut removed, mut copies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut last_added: Option<Vec<u8>> = None;
    for line in status.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
        let path = line[2..].to_vec();
        match line[0] {
            b'M' => modified.push(path),
            b'A' => {
                added.push(path.clone());
                last_added = Some(path);
            }
            b'R' => removed.push(path),
            b' ' => copies.push((last_added.clone().unwrap(), path)),
            other => panic!("unexpected status {}", other as char),
        }
    }
    assert!(copies.len() == 4, "copies: {copies:?}");
    let parent = String::from_utf8(hg(&root, &["log", "-r", ".", "-T", "{node|short}"])).unwrap();
    let hgdate = String::from_utf8(hg(&root, &["log", "-r", ".", "-T", "{date|hgdate}"])).unwrap();
    let mut it = hgdate.split(' ').map(|x| x.parse::<i64>().unwrap());
    let (t, tz) = (it.next().unwrap(), it.next().unwrap());
    let mut old_flags: HashMap<Vec<u8>, (bool, bool)> = HashMap::new();
    for line in hg(&root, &["manifest", "-v", "-r", "."]).split(|&c| c == b'\n') {
        if line.len() > 6 {
            old_flags.insert(line[6..].to_vec(), (line[4] == b'*', line[4] == b'@'));
        }
    }
    let old_file = |p: &[u8]| -> OldFile {
        let pat = format!("path:{}", String::from_utf8_lossy(p));
        let (exec, symlink) = old_flags[p];
        OldFile {
            data: hg(&root, &["cat", "-r", ".", &pat]),
            exec,
            symlink,
        }
    };

    let default_date = "1600000000 19800";
    let date_cfg = format!("devel.default-date={default_date}");
    let unsupported: Vec<&str> = vec![
        "bin_mod.bin",
        "bin_added.bin",
        "bin_to_text.bin",
        "text_to_bin.bin",
    ];
    for git in [false, true] {
        let opts = DiffOptions {
            git,
            old_date: hg_datestr(t, tz),
            new_date: hg_datestr(1_600_000_000, 19800),
        };
        let mut args: Vec<&str> = vec!["diff", "--config", date_cfg.as_str()];
        let excludes: Vec<String> = unsupported.iter().map(|u| format!("path:{u}")).collect();
        if git {
            args.push("--git");
            for e in &excludes {
                args.push("-X");
                args.push(e);
            }
        }
        let theirs = hg(&root, &args);
        let mut ours = Vec::new();
        let mut errors = 0;
        for (f1, f2, op) in filepairs(&modified, &added, &removed, &copies, git) {
            // Plain mode: pass the copy source anyway, file_diff must
            // show the file as added.
            let (old_path, copy) = match (&f1, &f2) {
                (Some(p), _) => (p.clone(), op),
                (None, Some(p)) => match copies.iter().find(|(d, _)| d == p) {
                    Some((_, src)) if !git => (src.clone(), Some(CopyOp::Copy)),
                    _ => (p.clone(), None),
                },
                (None, None) => unreachable!(),
            };
            let has_old = f1.is_some() || copy.is_some();
            let old = if has_old {
                Some(old_file(&old_path))
            } else {
                None
            };
            let new_path = f2.clone().unwrap_or_else(|| old_path.clone());
            let new = f2.as_ref().map(|p| read_new(&root, p));
            let old_side = Side {
                path: &old_path,
                data: old.as_ref().map(|o| &o.data[..]),
                exec: old.as_ref().is_some_and(|o| o.exec),
                symlink: old.as_ref().is_some_and(|o| o.symlink),
            };
            let new_side = Side {
                path: &new_path,
                data: new.as_ref().map(|n| &n.data[..]),
                exec: new.as_ref().is_some_and(|n| n.exec),
                symlink: new.as_ref().is_some_and(|n| n.symlink),
            };
            let res = file_diff(&old_side, &new_side, copy, &parent, &opts);
            let name = String::from_utf8_lossy(&new_path).to_string();
            if git && unsupported.contains(&name.as_str()) {
                assert!(res.is_err(), "{name} should be unsupported");
                errors += 1;
                continue;
            }
            ours.extend_from_slice(&res.unwrap());
        }
        if git {
            assert_eq!(errors, unsupported.len());
        }
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "git={git}"
        );
        assert_eq!(ours, theirs, "git={git}");
    }
}
