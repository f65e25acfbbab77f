//! The `.hgignore` matcher against what hg 6.3.2 decides, and the Python regex translation.

use super::*;
use crate::pattern::MAX_RE_SIZE;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

struct MapSource(HashMap<Vec<u8>, Vec<u8>>);

impl FileSource for MapSource {
    fn read(&self, path: &[u8]) -> Option<Vec<u8>> {
        self.0.get(path).cloned()
    }
}

fn source(files: &[(&str, &[u8])]) -> MapSource {
    MapSource(
        files
            .iter()
            .map(|(p, c)| (p.as_bytes().to_vec(), c.to_vec()))
            .collect(),
    )
}

fn load(files: &[(&str, &[u8])]) -> Ignore {
    Ignore::load(&source(files)).expect("load")
}

fn hgignore(content: &str) -> Ignore {
    load(&[(".hgignore", content.as_bytes())])
}

#[track_caller]
fn check(ig: &Ignore, ignored: &[&str], unknown: &[&str]) {
    for p in ignored {
        assert!(ig.is_ignored(p.as_bytes()), "{p} should be ignored");
    }
    for p in unknown {
        assert!(!ig.is_ignored(p.as_bytes()), "{p} should not be ignored");
    }
}

#[test]
fn absent_and_empty() {
    let ig = Ignore::load(&source(&[])).unwrap();
    check(&ig, &[], &["a", "a/b", ".hgignore"]);
    check(&Ignore::empty(), &[], &["a", ""]);
    check(&hgignore("# only comments\n\n  \n"), &[], &["a", "b/c"]);
}

#[test]
fn default_syntax_is_unanchored_regexp() {
    let ig = hgignore("\\.o$\nbuild\n");
    check(
        &ig,
        &[
            "a.o",
            "x/y/z.o",
            "build",
            "src/build/a",
            "rebuild.txt",
            "a.o/x",
        ],
        &["a.oo", "a.c", "buil"],
    );
}

#[test]
fn anchored_regexp() {
    let ig = hgignore("^build/\n^dir$\n");
    check(
        &ig,
        &["build/x", "dir", "dir/x"],
        &["src/build/x", "build", "adir", "dirx"],
    );
}

#[test]
fn top_level_alternation_only_prefixes_first_branch() {
    // hg prepends ".*" to the whole pattern: "^a|b" keeps both anchored at the start.
    let ig = hgignore("^dir|build\n");
    check(&ig, &["dir/x", "build/x", "builder"], &["src/build/y"]);
    let ig = hgignore("zzz|\n");
    check(&ig, &["anything", "a/b"], &[]);
}

#[test]
fn glob_syntax() {
    let ig = hgignore("syntax: glob\n*.o\n*~\ntest?.log\n[!a]b\nx[0-9]\n");
    check(
        &ig,
        &[
            "a.o",
            "d/e/f.o",
            "a~",
            "test1.log",
            "d/testX.log",
            "cb",
            "x5",
            "x5/y",
        ],
        &["a.c", "test12.log", "ab", "xa", "a.o~x"],
    );
}

#[test]
fn glob_doublestar_and_braces() {
    let ig = hgignore("syntax: glob\nsrc/**.o\n**/deep/x\n*.{c,h}\nfoo{,.txt}\n");
    check(
        &ig,
        &[
            "src/a.o",
            "src/a/b.o",
            "q/src/a/b.o",
            "deep/x",
            "a/deep/x",
            "a.c",
            "b/a.h",
            "foo",
            "foo.txt",
        ],
        &["src.o", "a.cc", "foo.t", "deep/xy"],
    );
}

#[test]
fn glob_classes_and_escapes() {
    // A glob class starting with '^' is not negated: "[^a]" is '^' or 'a'.
    let ig = hgignore("syntax: glob\n[^a]x\n\\*star\na[]]\nbrace\\{\n");
    check(
        &ig,
        &["^x", "ax", "*star", "a]", "brace{"],
        &["bx", "xstar"],
    );
}

#[test]
fn rootglob_and_prefixes() {
    let ig = hgignore("rootglob:*.o\nglob:*.pyc\nre:^docs/\nrelglob:*.gz\nrootglob:build\n");
    check(
        &ig,
        &[
            "a.o", "x.pyc", "a/x.pyc", "docs/x", "a.gz", "b/a.gz", "build", "build/x",
        ],
        &["a/b.o", "src/build", "x/docs/y"],
    );
}

#[test]
fn unrecognised_prefixes_are_pattern_text() {
    // path:/rootfilesin: are not ignore-file syntaxes: "path:foo" is a regexp.
    let ig = hgignore("path:foo\n");
    check(&ig, &["a/path:foo"], &["foo"]);
}

#[test]
fn syntax_switches() {
    let ig = hgignore(
        "syntax: glob\n*.o\nsyntax: regexp\n\\.c$\nsyntax:rootglob\nbuild\nsyntax: nope\n*.h\n",
    );
    check(
        &ig,
        &["a.o", "x/a.c", "build/a", "a.h"],
        &["x/build/a", "a.cc"],
    );
    assert_eq!(ig.warnings().len(), 1);
}

#[test]
fn comments_and_escapes() {
    let ig = hgignore("# c\n\\.o$ # trailing\n\\#x\\#\nsyntax: glob # c\n\\#*\n");
    check(&ig, &["a.o", "#x#", "#abc", "d/#e"], &["x#", "a.c"]);
}

#[test]
fn crlf_and_trailing_whitespace() {
    let ig = hgignore("syntax: glob\r\n*.o \t\r\n\r\n*.txt\r\n");
    check(&ig, &["a.o", "b.txt"], &["a.c"]);
}

#[test]
fn leading_whitespace_is_kept() {
    let ig = hgignore("syntax: glob\n foo\n");
    check(&ig, &[" foo", "a/ foo"], &["foo"]);
}

#[test]
fn glob_normalisation() {
    let ig = hgignore("syntax: glob\n./foo/\ndir//sub\nsrc/./lib/../main.c\n/abs\n");
    check(
        &ig,
        &["foo", "foo/x", "a/dir/sub/x", "src/main.c"],
        &["abs", "dir/x"],
    );
}

#[test]
fn include_is_relative_to_root() {
    let ig = load(&[
        (".hgignore", b"\\.o$\ninclude:conf/extra\n^abc$\n"),
        ("conf/extra", b"syntax: glob\n*.log\ninclude:conf/more\n"),
        ("conf/more", b"^tmp\n"),
    ]);
    check(
        &ig,
        &["a.o", "x.log", "d/x.log", "tmp/a", "abc"],
        &["abcd", "d/tmp"],
    );
    let inputs: Vec<&[u8]> = ig.inputs().iter().map(|(p, _)| p.as_slice()).collect();
    assert_eq!(inputs, vec![&b".hgignore"[..], b"conf/extra", b"conf/more"]);
}

#[test]
fn subinclude_is_relative_to_its_directory() {
    let ig = load(&[
        (".hgignore", b"subinclude:dir/.hgignore\n\\.h$\n"),
        (
            "dir/.hgignore",
            b"^b\nsyntax: glob\n*.o\nsubinclude:sub/.hgignore\n",
        ),
        ("dir/sub/.hgignore", b"^deep$\ninclude:../inc\n"),
        ("dir/inc", b"^x$\n"),
    ]);
    check(
        &ig,
        &["x.h", "dir/b.c", "dir/a.o", "dir/sub/deep/d", "dir/sub/x"],
        &["b.c", "a.o", "dir/sub/b", "dir/x", "deep/x"],
    );
}

#[test]
fn subinclude_same_prefix_only_first_counts() {
    let ig = load(&[
        (
            ".hgignore",
            b"subinclude:dir/.hgignore\nsubinclude:dir/other\n",
        ),
        ("dir/.hgignore", b"\\.o$\n"),
        ("dir/other", b"\\.c$\n"),
    ]);
    check(&ig, &["dir/a.o"], &["dir/a.c"]);
}

#[test]
fn missing_includes_warn() {
    let ig = load(&[(
        ".hgignore",
        b"include:nope\nsubinclude:no/.hgignore\n\\.c$\n",
    )]);
    check(&ig, &["a.c"], &["no/a"]);
    assert_eq!(ig.warnings().len(), 2);
}

#[test]
fn include_word_prefix_quirk() {
    // "includes" in regexp mode reads as the kind "include" + "s": a rooted glob.
    let ig = hgignore("includes\n");
    check(
        &ig,
        &["includes", "includes/a"],
        &["x/includes/b", "includes2"],
    );
}

#[test]
fn empty_path_matches_ignore_everything() {
    check(&hgignore("re:\n"), &["a", "b/c"], &[]);
    check(&hgignore("^$\n"), &["a", "b/c"], &[]);
}

#[test]
fn regexp_flags() {
    let ig = hgignore("(?i)caps\\.txt$\n(?x) foo \\. txt $\n(?i:^DOCS)/\n");
    check(
        &ig,
        &["CAPS.TXT", "a/Caps.txt", "foo.txt", "docs/x"],
        &["foo.txtx", "fo.txt"],
    );
}

#[test]
fn python_regex_details() {
    let ig = hgignore("a{b}$\nab{1,2}$\nfoo{,1}\\.c$\n\\d+\\.log$\n[[:x]]\n\\x41\\101\\Z\n");
    check(
        &ig,
        &[
            "a{b}", "ab", "abb", "fo.c", "foo.c", "x/12.log", "[]", "x]", "AA",
        ],
        &["abbb", "fooo.c", "a.log", "A"],
    );
}

#[test]
fn invalid_patterns_are_errors() {
    for (content, kind) in [
        ("(foo\n", "relre"),
        ("*.o\n", "relre"),
        ("syntax: glob\n{a,b\n", "relglob"),
        ("syntax: glob\n[z-a]\n", "relglob"),
        ("\\q\n", "relre"),
        ("a)\n", "relre"),
        ("(?u:x)\n", "relre"),
        ("x(?i)y\n", "relre"),
        ("a**\n", "relre"),
        ("^*\n", "relre"),
    ] {
        let err = Ignore::load(&source(&[(".hgignore", content.as_bytes())])).unwrap_err();
        match &err {
            IgnoreError::InvalidPattern {
                file,
                kind: k,
                line,
                ..
            } => {
                assert_eq!(file, ".hgignore");
                assert_eq!(*k, kind, "{content:?}");
                assert!(*line >= 1);
            }
            e => panic!("{content:?}: unexpected {e:?}"),
        }
        assert!(
            err.to_string().starts_with(".hgignore: invalid pattern ("),
            "{err}"
        );
    }
}

#[test]
fn unsupported_python_features_are_errors() {
    for content in [
        "foo(?=bar)\n",
        "(?<!a)b\n",
        "(a)\\1\n",
        "(?P<n>a)(?P=n)\n",
        "(?>a)\n",
        "a*+\n",
        "(a)?(?(1)b|c)\n",
    ] {
        match Ignore::load(&source(&[(".hgignore", content.as_bytes())])) {
            Err(IgnoreError::UnsupportedPattern { line: 1, .. }) => {}
            other => panic!("{content:?}: {other:?}"),
        }
    }
    // Garbage never panics.
    for content in [
        "(((((((((((",
        "[",
        "\\",
        "(?",
        "(?P",
        "(?P<",
        "x{99999999999}",
        "(?#",
        "[\\",
    ] {
        assert!(Ignore::load(&source(&[(".hgignore", content.as_bytes())])).is_err());
    }
    let deep = format!("{}a{}", "(".repeat(5000), ")".repeat(5000));
    assert!(Ignore::load(&source(&[(".hgignore", deep.as_bytes())])).is_err());
}

#[test]
fn include_loops_are_errors() {
    let r = Ignore::load(&source(&[
        (".hgignore", b"include:a\n"),
        ("a", b"include:.hgignore\n"),
    ]));
    assert!(matches!(r, Err(IgnoreError::Recursion { .. })), "{r:?}");
    let r = Ignore::load(&source(&[(".hgignore", b"subinclude:.hgignore\n")]));
    assert!(matches!(r, Err(IgnoreError::Recursion { .. })), "{r:?}");
}

#[test]
fn include_fan_out_is_bounded() {
    // Each file includes the next one twice: 2^20 expansions if nothing stopped it.
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    files.push((".hgignore".into(), b"include:f0\n".to_vec()));
    for i in 0..20 {
        let next = format!("include:f{}\ninclude:f{}\nx{i}\n", i + 1, i + 1);
        files.push((format!("f{i}"), next.into_bytes()));
    }
    let src = MapSource(
        files
            .into_iter()
            .map(|(p, c)| (p.into_bytes(), c))
            .collect(),
    );
    let r = Ignore::load(&src);
    assert!(matches!(r, Err(IgnoreError::Recursion { .. })), "{r:?}");
}

#[test]
fn subinclude_outside_root_is_an_error() {
    let r = Ignore::load(&source(&[(".hgignore", b"subinclude:../x/.hgignore\n")]));
    assert!(matches!(r, Err(IgnoreError::NotUnderRoot { .. })), "{r:?}");
}

#[test]
fn big_pattern_sets_are_grouped() {
    let mut content = String::new();
    for i in 0..3000 {
        content.push_str(&format!("^file{i}\\.txt$\n"));
    }
    let ig = hgignore(&content);
    check(
        &ig,
        &["file0.txt", "file2999.txt", "file1500.txt"],
        &["file3000.txt"],
    );
    let long = format!("{}\n", "a".repeat(MAX_RE_SIZE + 1));
    assert!(matches!(
        Ignore::load(&source(&[(".hgignore", long.as_bytes())])),
        Err(IgnoreError::PatternTooLong { .. })
    ));
}

#[test]
fn non_utf8_paths_and_patterns() {
    let ig = load(&[(".hgignore", b"caf\xe9\n\\xff$\n")]);
    assert!(!ig.is_ignored("caf\u{e9}".as_bytes()));
    assert!(ig.is_ignored(b"x/caf\xe9"));
    assert!(ig.is_ignored(b"a\xff"));
    assert!(!ig.is_ignored(b"a\xfe"));
}

// ---- oracle test against the real hg ------------------------------------------------

/// Candidate files, written untracked in every case's repository.
const BASE_PATHS: &[&str] = &[
    "a.o",
    "b.c",
    "c.h",
    "foo",
    "foo.txt",
    "foo.txt.bak",
    ".foo",
    ".hidden/x",
    "x.pyc",
    "dir/a.o",
    "dir/b.c",
    "dir/sub/c.o",
    "dir/sub/deep/d.txt",
    "dir/y~",
    "dir/#y#",
    "dir/q.rej",
    "dir/ab",
    "build/out.bin",
    "build/sub/x.txt",
    "src/build/y.txt",
    "src/main.c",
    "src/main.o",
    "src/lib/util.c",
    "src/lib/util.o",
    "src/tmp",
    "docs/readme.md",
    "docs/a.txt.bak",
    "x~",
    "#x#",
    "with space.txt",
    "dir/with space/z.o",
    "a.b.c",
    "a.tar.gz",
    "dist/pkg.tar.gz",
    "node_modules/m/index.js",
    "lib/node_modules/n.js",
    "test1.log",
    "test22.log",
    "logs/2024/x.log",
    "abc",
    "abd",
    "ab",
    "abb",
    "aXc",
    "ab[c]",
    "a{b}",
    "foo,bar",
    "q.orig",
    "CAPS.TXT",
    "caps.txt",
    "tmp/a",
    "tmpfile",
    "mytmp/b",
    "foo.d/bar/baz",
    "bar/foo",
    "baz.foo/x",
    "include",
    "includes/a",
    "x/includes/b",
    "sub/file",
    "caf\u{e9}.txt",
    "a]",
    "a+b",
    "a$b",
    "1.log",
    "deep/a/b/c/d/e.o",
    "fo.txt",
    "path:foo",
    "x/path:foo",
];

struct Case {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
}

const CASES: &[Case] = &[
    Case { name: "empty", files: &[(".hgignore", "# nothing\n\n   \n")] },
    Case { name: "glob_basic", files: &[(".hgignore", "syntax: glob\n*.o\n*~\n*.pyc\n")] },
    Case {
        name: "glob_doublestar",
        files: &[(".hgignore", "syntax: glob\nsrc/**.o\n**/deep/**\nlogs/**\n**.gz\n")],
    },
    Case {
        name: "glob_qmark_class",
        files: &[(".hgignore", "syntax: glob\ntest?.log\na[bX]c\n[!a.]b*\nab[c]\n[0-9].log\na[]]\n")],
    },
    Case {
        name: "glob_braces",
        files: &[(".hgignore", "syntax: glob\n*.{o,pyc}\n{build,dist}\nfoo{,.txt}\na{b}\n")],
    },
    Case {
        name: "rootglob",
        files: &[(".hgignore", "syntax: rootglob\n*.o\nbuild\nsrc/*.c\ndir/*/deep\n")],
    },
    Case {
        name: "re_anchored",
        files: &[(".hgignore", "^build/\n\\.o$\n^src/.*\\.c$\n^dir/sub\n")],
    },
    Case { name: "re_unanchored", files: &[(".hgignore", "build\nlib\n~$\n")] },
    Case {
        name: "re_dirs",
        files: &[(".hgignore", "^dir$\n^foo\\.d/bar$\n^logs/[0-9]+$\n")],
    },
    Case {
        name: "syntax_switch",
        files: &[(
            ".hgignore",
            "syntax: glob\n*.o\nsyntax: regexp\n\\.c$\nsyntax: rootglob\nbuild\nsyntax:glob\n*.md\nsyntax: bogus\n*.h\n",
        )],
    },
    Case {
        name: "prefixes",
        files: &[(
            ".hgignore",
            "glob:*.pyc\nre:^docs/\nrelre:tar\nrelglob:*.gz\nrootglob:tmp*\nregexp:^abc$\nsyntax: glob\nre:^ab$\npath:foo\nrootfilesin:dir\n",
        )],
    },
    Case {
        name: "comments",
        files: &[(".hgignore", "# comment\n\\.o$ # trailing\n\\#x\\#\nfoo\\\\#bar\n  # indented\n")],
    },
    Case {
        name: "crlf",
        files: &[(".hgignore", "syntax: glob\r\n*.o\r\n*.txt   \r\n\r\nsyntax: regexp\r\n^abc$\r\n")],
    },
    Case {
        name: "whitespace",
        files: &[(".hgignore", "syntax: glob\n\t\n*.log\t \n foo\n")],
    },
    Case {
        name: "include",
        files: &[
            (".hgignore", "\\.o$\ninclude:extra.ignore\n^abc\n"),
            ("extra.ignore", "syntax: glob\n*.log\ninclude:more/x.ignore\n"),
            ("more/x.ignore", "^tmp\n"),
        ],
    },
    Case {
        name: "subinclude",
        files: &[
            (".hgignore", "subinclude:dir/.hgignore\n"),
            ("dir/.hgignore", "syntax: glob\n*.o\nsub\nsyntax: regexp\n^b\n"),
        ],
    },
    Case {
        name: "subinclude_re",
        files: &[
            (".hgignore", "subinclude:src/.hgignore\n\\.h$\n"),
            ("src/.hgignore", "^lib$\nmain\\.o$\n^build\n"),
        ],
    },
    Case {
        name: "nested_subinclude",
        files: &[
            (".hgignore", "subinclude:dir/.hgignore\n"),
            ("dir/.hgignore", "subinclude:sub/.hgignore\n^y\n"),
            ("dir/sub/.hgignore", "^deep\n"),
        ],
    },
    Case {
        name: "dup_prefix",
        files: &[
            (".hgignore", "subinclude:dir/.hgignore\nsubinclude:dir/other.ignore\n"),
            ("dir/.hgignore", "\\.o$\n"),
            ("dir/other.ignore", "\\.c$\n"),
        ],
    },
    Case {
        name: "missing",
        files: &[(".hgignore", "include:nope.ignore\nsubinclude:nodir/.hgignore\n\\.c$\n")],
    },
    Case { name: "include_word", files: &[(".hgignore", "includes\nsubincludex\n")] },
    Case { name: "empty_re", files: &[(".hgignore", "re:\n")] },
    Case { name: "match_empty", files: &[(".hgignore", "^$\n")] },
    Case {
        name: "flags",
        files: &[(".hgignore", "(?i)caps\\.txt$\n(?i)^DOCS/\n(?x) foo \\. txt $\n")],
    },
    Case { name: "trailing_alt", files: &[(".hgignore", "zzz|\n")] },
    Case { name: "alt_quirk", files: &[(".hgignore", "^dir|build\n")] },
    Case {
        name: "glob_norm",
        files: &[(".hgignore", "syntax: glob\n./foo/\nbuild/\ndir//sub\n/abs\nsrc/./lib/../main.c\n")],
    },
    Case { name: "err_paren", files: &[(".hgignore", "^x\n(foo\n")] },
    Case { name: "err_repeat", files: &[(".hgignore", "*.o\n")] },
    Case {
        name: "re_escapes",
        files: &[(".hgignore", "\\d+\\.log$\n[[:alpha:]]\n\\x61b[c-d]$\n\\bcaps\\b\n\\w+~$\n")],
    },
    Case {
        name: "re_braces",
        files: &[(".hgignore", "a{b}$\nab{1,2}$\nfoo{,1}\\.txt$\ntest{2}\n")],
    },
    Case { name: "dotfiles", files: &[(".hgignore", "syntax: glob\n.*\n")] },
    Case {
        name: "rootglob_star",
        files: &[(".hgignore", "rootglob:dir/**\nrootglob:**/c.o\nrootglob:*/util.?\n")],
    },
    Case {
        name: "subinclude_root_prefix",
        files: &[
            (".hgignore", "subinclude:extra.ignore\nsyntax: glob\n*.md\n"),
            ("extra.ignore", "^foo\n"),
        ],
    },
    Case {
        name: "glob_specials",
        files: &[(".hgignore", "syntax: glob\n\\#*\n*\\#\n*[+$]*\nfoo,bar\n")],
    },
    Case {
        name: "sub_include",
        files: &[
            (".hgignore", "subinclude:dir/.hgignore\n"),
            ("dir/.hgignore", "include:inc.ignore\n"),
            ("dir/inc.ignore", "^b\\.c$\n"),
        ],
    },
];

fn hg(dir: &Path, args: &[&str]) -> std::io::Result<std::process::Output> {
    Command::new("hg")
        .args(args)
        .current_dir(dir)
        .env("HGPLAIN", "1")
        .env("HGRCPATH", "")
        .env_remove("HGUSER")
        .output()
}

struct DirSource<'a>(&'a Path);

impl FileSource for DirSource<'_> {
    fn read(&self, path: &[u8]) -> Option<Vec<u8>> {
        let p = self.0.join(std::ffi::OsStr::from_bytes(path));
        if p.is_file() {
            std::fs::read(p).ok()
        } else {
            None
        }
    }
}

/// Runs one case; returns the disagreements and a one-line summary.
fn run_case(case: &Case) -> (Vec<String>, String) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let init = hg(root, &["init"]).expect("hg init");
    assert!(init.status.success(), "hg init: {init:?}");
    let mut written: Vec<Vec<u8>> = Vec::new();
    let mut put = |rel: &[u8], content: &[u8]| {
        let p = root.join(std::ffi::OsStr::from_bytes(rel));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, content).expect("write");
        written.push(rel.to_vec());
    };
    for (path, content) in case.files {
        put(path.as_bytes(), content.as_bytes());
    }
    let taken: Vec<&str> = case.files.iter().map(|(p, _)| *p).collect();
    for path in BASE_PATHS {
        let clashes = taken.iter().any(|t| {
            t == path || t.starts_with(&format!("{path}/")) || path.starts_with(&format!("{t}/"))
        });
        if !clashes {
            put(path.as_bytes(), b"x\n");
        }
    }
    let out = hg(root, &["status", "-i", "-u"]).expect("hg status");
    let ours = Ignore::load(&DirSource(root));
    let mut problems = Vec::new();
    if !out.status.success() {
        if ours.is_ok() {
            problems.push(format!(
                "{}: hg failed ({}) but we loaded fine",
                case.name,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let summary = format!("{}: hg aborts, so do we", case.name);
        return (problems, summary);
    }
    let ig = match ours {
        Ok(ig) => ig,
        Err(e) => {
            problems.push(format!("{}: hg succeeded but we failed: {e}", case.name));
            return (problems, String::new());
        }
    };
    let mut hg_says: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
    for line in out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match line {
            [b'I', b' ', path @ ..] => hg_says.insert(path.to_vec(), true),
            [b'?', b' ', path @ ..] => hg_says.insert(path.to_vec(), false),
            _ => panic!(
                "unexpected hg output line {:?}",
                String::from_utf8_lossy(line)
            ),
        };
    }
    for path in &written {
        match hg_says.get(path) {
            None => problems.push(format!("{}: hg did not report {}", case.name, show(path))),
            Some(&expected) => {
                if ig.is_ignored(path) != expected {
                    problems.push(format!(
                        "{}: {} hg says {} we say {}",
                        case.name,
                        show(path),
                        if expected { "I" } else { "?" },
                        if expected { "?" } else { "I" }
                    ));
                }
            }
        }
    }
    let ignored = hg_says.values().filter(|&&i| i).count();
    let summary = format!(
        "{}: {} paths, {} ignored",
        case.name,
        written.len(),
        ignored
    );
    (problems, summary)
}

#[test]
fn oracle_against_real_hg() {
    if !crate::oracle::available(None) {
        return;
    }
    let results: Vec<(Vec<String>, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|k| {
                s.spawn(move || {
                    CASES
                        .iter()
                        .skip(k)
                        .step_by(2)
                        .map(run_case)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("oracle thread"))
            .collect()
    });
    let mut problems = Vec::new();
    for (p, summary) in results {
        println!("{summary}");
        problems.extend(p);
    }
    assert!(
        problems.is_empty(),
        "disagreements with hg:\n{}",
        problems.join("\n")
    );
}
