//! The author and date a commit records, `revfs debugidentity [-u USER] [-d DATE]` (what
//! `revfs commit` uses) against what `hg commit` records in the same repository with the
//! same environment: configuration files (HGRCPATH, ~/.hgrc, XDG, the repository's hgrc,
//! includes, continuations, %unset, untrusted files, shares), HGUSER, EMAIL, hg's
//! fallback and aborts; and ~30 `-d` strings in several time zones. Standard output,
//! standard error and exit codes must match.
//!
//! Known differences, normalized here: hg prints "transaction abort!" and "rollback
//! completed" before the errors it finds inside its commit transaction (an empty user name,
//! a newline in `-u`), and repeats "not trusting file" once per time it reads the file.

use revfs_tests::revfs_bin;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A command with only the environment given (plus PATH and hg's fixed encoding).
fn cmd(prog: &Path, dir: &Path, env: &[(&str, String)]) -> Command {
    let mut c = Command::new(prog);
    c.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LC_ALL", "C.UTF-8")
        .env("HGENCODING", "utf-8")
        .env("HGPLAIN", "1")
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn hg() -> PathBuf {
    PathBuf::from("hg")
}

fn run(mut c: Command) -> Output {
    c.output().expect("spawn")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// hg's stderr without the transaction lines and with repeated lines once.
fn normalize_hg_stderr(s: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for l in s.split_inclusive('\n') {
        if l == "transaction abort!\n" || l == "rollback completed\n" {
            continue;
        }
        if (l.starts_with("not trusting file") || l.starts_with("ignored ")) && out.contains(&l) {
            continue;
        }
        out.push(l);
    }
    out.concat()
}

/// A repository with one tracked file, made with a neutral environment.
fn new_repo(dir: &Path) {
    let env = [("HGRCPATH", String::new()), ("HGUSER", "setup".to_owned())];
    let out = run({
        let mut c = cmd(&hg(), dir.parent().unwrap(), &env);
        c.arg("init").arg(dir);
        c
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(dir.join("f"), "0\n").unwrap();
    let out = run({
        let mut c = cmd(&hg(), dir, &env);
        c.args(["add", "-q", "f"]);
        c
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn append(repo: &Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(repo.join("f"))
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

/// (exit code, stdout, stderr) of `hg commit ARGS` followed, on success, by the author and
/// date it recorded.
fn hg_commit(repo: &Path, env: &[(&str, String)], args: &[&str]) -> (i32, String, String) {
    append(repo, "change");
    let out = run({
        let mut c = cmd(&hg(), repo, env);
        c.args(["commit", "-m", "x"]).args(args);
        c
    });
    let code = out.status.code().unwrap_or(-1);
    let mut stdout = text(&out.stdout);
    if code == 0 {
        let log = run({
            let mut c = cmd(&hg(), repo, env);
            c.args(["log", "-r", ".", "-T", "{author}\n{date|hgdate}\n"]);
            c
        });
        assert!(log.status.success(), "hg log: {}", text(&log.stderr));
        stdout.push_str(&text(&log.stdout));
    }
    (code, stdout, normalize_hg_stderr(&text(&out.stderr)))
}

fn revfs_identity(repo: &Path, env: &[(&str, String)], args: &[&str]) -> (i32, String, String) {
    let out = run({
        let mut c = cmd(&revfs_bin(), repo, env);
        c.arg("debugidentity").args(args);
        c
    });
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// Compares, allowing the commit time to differ by the seconds between the two runs when
/// the date is "now".
fn assert_same(
    what: &str,
    ours: &(i32, String, String),
    theirs: &(i32, String, String),
    now: bool,
) {
    assert_eq!(
        ours.0, theirs.0,
        "{what}: exit code\nours: {ours:?}\nhg: {theirs:?}"
    );
    assert_eq!(ours.2, theirs.2, "{what}: stderr");
    if now && ours.0 == 0 {
        let split = |s: &str| -> (String, i64, String) {
            let lines: Vec<&str> = s.lines().collect();
            let date = lines.last().copied().unwrap_or_default();
            let (t, tz) = date.split_once(' ').unwrap_or_default();
            (
                lines[..lines.len().saturating_sub(1)].join("\n"),
                t.parse().unwrap_or(i64::MIN),
                tz.to_owned(),
            )
        };
        let (a, b) = (split(&ours.1), split(&theirs.1));
        assert_eq!((a.0, &a.2), (b.0, &b.2), "{what}: stdout");
        assert!(
            (a.1 - b.1).abs() <= 3,
            "{what}: now differs: {} vs {}",
            a.1,
            b.1
        );
    } else {
        assert_eq!(ours.1, theirs.1, "{what}: stdout");
    }
}

/// One configuration setup.
struct Case {
    name: &'static str,
    /// Files under HOME (relative path, content).
    home: &'static [(&'static str, &'static str)],
    /// The repository's .hg/hgrc.
    repo_hgrc: Option<&'static str>,
    /// Environment (values may use {home}); HGRCPATH is unset unless given.
    env: &'static [(&'static str, &'static str)],
    args: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "HGUSER wins over everything",
        home: &[(".hgrc", "[ui]\nusername = Home <h@x>\n")],
        repo_hgrc: Some("[ui]\nusername = Repo <r@x>\n"),
        env: &[("HGUSER", "Env User <env@x>"), ("EMAIL", "e@x")],
        args: &[],
    },
    Case {
        name: "HGRCPATH file with an include, comments and a continuation elsewhere",
        home: &[
            (
                "main.rc",
                "# comment\n[other]\nx = 1\n  continued\n; semicolon\n%include sub/inc.rc\n",
            ),
            ("sub/inc.rc", "[ui]\nusername = Included <i@x>\n"),
        ],
        repo_hgrc: None,
        env: &[("HGRCPATH", "{home}/main.rc")],
        args: &[],
    },
    Case {
        name: "a continuation makes a newline",
        home: &[("main.rc", "[ui]\nusername = First\n  Second <s@x>\n")],
        repo_hgrc: None,
        env: &[("HGRCPATH", "{home}/main.rc")],
        args: &[],
    },
    Case {
        name: "HGRCPATH directory, later files win, then %unset",
        home: &[
            ("rc/a.rc", "[ui]\nusername = A\n"),
            ("rc/b.rc", "[ui]\nusername = B\n"),
            ("rc/c.txt", "[ui]\nusername = not read\n"),
        ],
        repo_hgrc: Some("[ui]\n%unset username\n"),
        env: &[("HGRCPATH", "{home}/rc:"), ("EMAIL", "fallback@x")],
        args: &[],
    },
    Case {
        name: "repository hgrc overrides ~/.hgrc",
        home: &[(".hgrc", "[ui]\nusername = Home <h@x>\n")],
        repo_hgrc: Some("[ui]\nusername = Repo <r@x>\n"),
        env: &[],
        args: &[],
    },
    Case {
        name: "XDG config after ~/.hgrc",
        home: &[
            (".hgrc", "[ui]\nusername = Home <h@x>\n"),
            ("xdg/hg/hgrc", "[ui]\nusername = Xdg <x@x>\n"),
        ],
        repo_hgrc: None,
        env: &[("XDG_CONFIG_HOME", "{home}/xdg")],
        args: &[],
    },
    Case {
        name: "~/.config/hg/hgrc without XDG_CONFIG_HOME",
        home: &[(".config/hg/hgrc", "[ui]\nusername = Dot Config\n")],
        repo_hgrc: None,
        env: &[],
        args: &[],
    },
    Case {
        name: "EMAIL only",
        home: &[],
        repo_hgrc: None,
        env: &[("HGRCPATH", ""), ("EMAIL", "only@example.org")],
        args: &[],
    },
    Case {
        name: "nothing set: user@host with a warning",
        home: &[],
        repo_hgrc: None,
        env: &[("HGRCPATH", "")],
        args: &[],
    },
    Case {
        name: "nothing set, LOGNAME",
        home: &[],
        repo_hgrc: None,
        env: &[("HGRCPATH", ""), ("LOGNAME", "someone"), ("USER", "other")],
        args: &[],
    },
    Case {
        name: "interactive without a name aborts",
        home: &[("rc", "[ui]\ninteractive = yes\n")],
        repo_hgrc: None,
        env: &[("HGRCPATH", "{home}/rc")],
        args: &[],
    },
    Case {
        name: "askusername without a terminal",
        home: &[("rc", "[ui]\naskusername = true\n")],
        repo_hgrc: None,
        env: &[("HGRCPATH", "{home}/rc")],
        args: &[],
    },
    Case {
        name: "HGUSER empty",
        home: &[],
        repo_hgrc: None,
        env: &[("HGRCPATH", ""), ("HGUSER", "")],
        args: &[],
    },
    Case {
        name: "HGUSER blank",
        home: &[],
        repo_hgrc: None,
        env: &[("HGRCPATH", ""), ("HGUSER", "   ")],
        args: &[],
    },
    Case {
        name: "empty ui.username",
        home: &[],
        repo_hgrc: Some("[ui]\nusername =\n"),
        env: &[("HGRCPATH", ""), ("EMAIL", "not used")],
        args: &[],
    },
    Case {
        name: "variables in ui.username",
        home: &[],
        repo_hgrc: Some("[ui]\nusername = $NAME <${MAIL}> $UNSET\n"),
        env: &[("HGRCPATH", ""), ("NAME", "Var"), ("MAIL", "v@x")],
        args: &[],
    },
    Case {
        name: "ui.user alias in the same file and in a later one",
        home: &[
            ("a.rc", "[ui]\nusername = Name\nuser = Alias\n"),
            ("b.rc", "[ui]\nuser = Later Alias\n"),
        ],
        repo_hgrc: None,
        env: &[("HGRCPATH", "{home}/a.rc:{home}/b.rc")],
        args: &[],
    },
    Case {
        name: "-u wins and is stripped",
        home: &[],
        repo_hgrc: Some("[ui]\nusername = Repo\n"),
        env: &[("HGRCPATH", "")],
        args: &["-u", "  Spaced <s@x>  "],
    },
    Case {
        name: "-u '' falls back",
        home: &[],
        repo_hgrc: None,
        env: &[("HGRCPATH", ""), ("HGUSER", "From Env")],
        args: &["-u", ""],
    },
    Case {
        name: "-u with a newline",
        home: &[],
        repo_hgrc: None,
        env: &[("HGRCPATH", "")],
        args: &["-u", "a\nb"],
    },
    Case {
        name: "config error in ~/.hgrc",
        home: &[(".hgrc", "[ui]\nusername: colon\n")],
        repo_hgrc: None,
        env: &[("HGUSER", "set")],
        args: &[],
    },
    Case {
        name: "config error: unexpected leading whitespace in the repository",
        home: &[],
        repo_hgrc: Some("[ui]\n  username = x\n"),
        env: &[("HGRCPATH", ""), ("HGUSER", "set")],
        args: &[],
    },
    Case {
        name: "a directory included",
        home: &[("rc", "%include sub\n"), ("sub/x", "")],
        repo_hgrc: None,
        env: &[("HGRCPATH", "{home}/rc"), ("HGUSER", "set")],
        args: &[],
    },
    Case {
        name: "HGRCSKIPREPO",
        home: &[],
        repo_hgrc: Some("[ui]\nusername = Repo\n"),
        env: &[
            ("HGRCPATH", ""),
            ("HGRCSKIPREPO", "1"),
            ("EMAIL", "skipped@x"),
        ],
        args: &[],
    },
    Case {
        name: "invalid date before the user",
        home: &[],
        repo_hgrc: None,
        env: &[("HGRCPATH", ""), ("HGUSER", "")],
        args: &["-d", "not a date"],
    },
];

fn setup(case: &Case, tmp: &Path) -> (PathBuf, Vec<(&'static str, String)>) {
    let home = tmp.join("home");
    std::fs::create_dir_all(&home).unwrap();
    for (rel, content) in case.home {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    let repo = tmp.join("repo");
    new_repo(&repo);
    if let Some(rc) = case.repo_hgrc {
        std::fs::write(repo.join(".hg/hgrc"), rc).unwrap();
    }
    let mut env = vec![("HOME", home.display().to_string())];
    for (k, v) in case.env {
        env.push((k, v.replace("{home}", &home.display().to_string())));
    }
    (repo, env)
}

#[test]
fn author_matches_hg_commit() {
    for case in CASES {
        let tmp = revfs_tests::scratch_dir();
        let (repo, env) = setup(case, tmp.path());
        let ours = revfs_identity(&repo, &env, case.args);
        let theirs = hg_commit(&repo, &env, case.args);
        let now = !case.args.contains(&"-d");
        assert_same(case.name, &ours, &theirs, now);
    }
}

#[test]
fn untrusted_repository_hgrc_is_ignored_with_a_warning() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc_geteuid() } != 0 {
        eprintln!("skipped: needs root to give the hgrc to another user");
        return;
    }
    let tmp = revfs_tests::scratch_dir();
    let case = Case {
        name: "untrusted",
        home: &[(".hgrc", "[ui]\nusername = Home <h@x>\n")],
        repo_hgrc: Some("[ui]\nusername = Repo <r@x>\n[x]\n  bad\n"),
        env: &[],
        args: &[],
    };
    let (repo, env) = setup(&case, tmp.path());
    let rc = repo.join(".hg/hgrc");
    let st = Command::new("chown")
        .args(["65534:65534"])
        .arg(&rc)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(std::fs::metadata(&rc).unwrap().uid(), 65534);
    let ours = revfs_identity(&repo, &env, &[]);
    let theirs = hg_commit(&repo, &env, &[]);
    assert!(ours.2.contains("not trusting file"), "{}", ours.2);
    assert_same(case.name, &ours, &theirs, true);
    // Trusted by name: read again.
    std::fs::write(
        tmp.path().join("home/.hgrc"),
        "[ui]\nusername = Home\n[trusted]\nusers = nobody, other\n",
    )
    .unwrap();
    std::fs::write(&rc, "[ui]\nusername = Trusted Repo\n").unwrap();
    let ours = revfs_identity(&repo, &env, &[]);
    let theirs = hg_commit(&repo, &env, &[]);
    assert_same("trusted by [trusted] users", &ours, &theirs, true);
    assert!(ours.1.starts_with("Trusted Repo\n"), "{}", ours.1);
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

#[test]
fn share_safe_share_reads_the_source_hgrc() {
    let tmp = revfs_tests::scratch_dir();
    let src = tmp.path().join("src");
    new_repo(&src);
    std::fs::write(src.join(".hg/hgrc"), "[ui]\nusername = Source <s@x>\n").unwrap();
    let env = vec![
        ("HGRCPATH", String::new()),
        ("HOME", tmp.path().display().to_string()),
    ];
    let out = run({
        let mut c = cmd(&hg(), tmp.path(), &env);
        c.args(["--config", "extensions.share=", "share", "-q", "src", "dst"]);
        c
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dst = tmp.path().join("dst");
    std::fs::write(dst.join("f"), "0\n").unwrap();
    let out = run({
        let mut c = cmd(&hg(), &dst, &env);
        c.args(["add", "-q", "f"]);
        c
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    let requires = std::fs::read_to_string(dst.join(".hg/requires")).unwrap();
    assert!(requires.contains("share-safe"), "{requires}");
    let ours = revfs_identity(&dst, &env, &[]);
    let theirs = hg_commit(&dst, &env, &[]);
    assert_same("share-safe share", &ours, &theirs, true);
    assert!(ours.1.starts_with("Source <s@x>\n"), "{}", ours.1);
    // The share's own hgrc comes after the source's.
    std::fs::write(dst.join(".hg/hgrc"), "[ui]\nusername = Share\n").unwrap();
    let ours = revfs_identity(&dst, &env, &[]);
    let theirs = hg_commit(&dst, &env, &[]);
    assert_same("share hgrc", &ours, &theirs, true);
}

/// Date strings for `-d`, valid and not.
const DATES: &[&str] = &[
    "0 0",
    "1700000000 -3600",
    "1_0 +5",
    "2026-11-21 10:00:00 +0100",
    "2026-11-21 10:00",
    "2026-11-21",
    "2026-11-21T10:00:00Z",
    "2026-11-21T10:00:00+05:30",
    "2026-11-21T1000",
    "Sat Nov 21 10:00:00 2026 +0100",
    "Sat Nov 21 10:00:00 2026",
    "sat nov 21 10:00:00pm 2026",
    "Mon, 21 Dec 2026 10:00:00",
    "2026-07-01 12:00",
    "2026-03-29 02:30",
    "2026-10-25 02:30",
    "2026-11-21 1030",
    "2026-11-21 10:00:60 UTC",
    "Nov 21",
    "Nov 21 2025",
    "11/21",
    "11/21/26",
    "11/21/1999",
    "10:30",
    "10:30pm",
    "today",
    "yesterday",
    "  2026-11-21  ",
    "1969-12-31 23:00 UTC",
    "1901-12-13 20:45:52 +0000",
    "1901-12-13 20:45:51 +0000",
    "2038-01-19 03:14:08 +0000",
    "xyz",
    "2026-02-30",
    "2026-11-21 10:00 +01:00",
    "99999999999 0",
    "0 99999",
    "0 -50401",
    "0 0 0",
];

/// Dates whose value depends on the moment of the run.
const NOW_DATES: &[&str] = &["now", ""];

#[test]
fn dates_match_hg_commit_in_several_time_zones() {
    // CI: UTC, a half-hour offset and a 45-minute one with summer time; tests/long.sh adds
    // Europe and America (REVFS_DATE_ZONES=all).
    let all = std::env::var("REVFS_DATE_ZONES").is_ok_and(|v| v == "all");
    let zones: &[&str] = if all {
        &[
            "UTC",
            "Europe/Paris",
            "America/New_York",
            "Asia/Kolkata",
            "Pacific/Chatham",
        ]
    } else {
        &["UTC", "Asia/Kolkata", "Pacific/Chatham"]
    };
    std::thread::scope(|s| {
        for &tz in zones {
            s.spawn(move || {
                let tmp = revfs_tests::scratch_dir();
                let repo = tmp.path().join("repo");
                new_repo(&repo);
                let env = vec![
                    ("HGRCPATH", String::new()),
                    ("HGUSER", "dates <d@x>".to_owned()),
                    ("TZ", tz.to_owned()),
                ];
                // Commit with each date (message = its index), then read them all back.
                let mut ours_all = Vec::new();
                let mut theirs_all = Vec::new();
                for (i, d) in DATES.iter().chain(NOW_DATES).enumerate() {
                    let ours = revfs_identity(&repo, &env, &["-d", d]);
                    append(&repo, d);
                    let out = run({
                        let mut c = cmd(&hg(), &repo, &env);
                        c.args(["commit", "-m", &i.to_string(), "-d", d]);
                        c
                    });
                    let theirs = (
                        out.status.code().unwrap_or(-1),
                        text(&out.stdout),
                        normalize_hg_stderr(&text(&out.stderr)),
                    );
                    ours_all.push(ours);
                    theirs_all.push(theirs);
                }
                let log = run({
                    let mut c = cmd(&hg(), &repo, &env);
                    c.args(["log", "-T", "{desc} {author}\n{date|hgdate}\n"]);
                    c
                });
                assert!(log.status.success(), "{}", text(&log.stderr));
                let log = text(&log.stdout);
                let lines: Vec<&str> = log.lines().collect();
                let mut recorded = std::collections::HashMap::new();
                for pair in lines.chunks(2) {
                    let (i, author) = pair[0].split_once(' ').unwrap();
                    recorded.insert(
                        i.parse::<usize>().unwrap(),
                        format!("{author}\n{}\n", pair[1]),
                    );
                }
                let mut checked = 0;
                for (i, d) in DATES.iter().chain(NOW_DATES).enumerate() {
                    let mut theirs = theirs_all[i].clone();
                    if theirs.0 == 0 {
                        theirs.1.push_str(&recorded[&i]);
                    }
                    let now = NOW_DATES.contains(d);
                    assert_same(&format!("TZ={tz} -d {d:?}"), &ours_all[i], &theirs, now);
                    checked += 1;
                }
                // And without -d.
                let ours = revfs_identity(&repo, &env, &[]);
                let theirs = hg_commit(&repo, &env, &[]);
                assert_same(&format!("TZ={tz}, no -d"), &ours, &theirs, true);
                assert_eq!(checked, DATES.len() + NOW_DATES.len());
            });
        }
    });
}
