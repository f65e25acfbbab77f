//! Configuration and identity compared with hg's own answers.

use super::env::dirname;
use super::*;
use std::fs;

struct TestConsole {
    tty: bool,
    input: Vec<Vec<u8>>,
    out: String,
    err: String,
}

impl TestConsole {
    fn new() -> TestConsole {
        TestConsole {
            tty: false,
            input: Vec::new(),
            out: String::new(),
            err: String::new(),
        }
    }
}

impl Console for TestConsole {
    fn stdin_is_tty(&self) -> bool {
        self.tty
    }
    fn out(&mut self, text: &str) {
        self.out.push_str(text);
    }
    fn err(&mut self, text: &str) {
        self.err.push_str(text);
    }
    fn read_line(&mut self) -> Option<Vec<u8>> {
        (!self.input.is_empty()).then(|| self.input.remove(0))
    }
}

/// An environment with only HGRCPATH=<files>, HOME=<dir> and the extra pairs.
fn env(rcpath: &str, home: &Path, extra: &[(&str, &str)]) -> Env {
    let mut v: Vec<(String, String)> = vec![
        ("HGRCPATH".into(), rcpath.into()),
        ("HOME".into(), home.display().to_string()),
    ];
    v.extend(extra.iter().map(|(a, b)| (a.to_string(), b.to_string())));
    Env::from_vars(v)
}

fn user_of(cfg: &Config, env: &Env) -> Result<String, IdentityError> {
    cfg.username(env, &mut TestConsole::new())
        .map(|u| lossy(&u))
}

#[test]
fn sections_items_continuations_comments() {
    let tmp = tempfile::tempdir().unwrap();
    let rc = tmp.path().join("a.rc");
    fs::write(
        &rc,
        "\u{feff}# comment\n; other\n[ui]\nusername = Jane\n  Doe\n# inside\n   again  \n\n\
             [x]\nk=v = w\nempty =\n[a]b] trailing\nq = 1\r\nr = 2\r",
    )
    .unwrap();
    let e = env(&rc.display().to_string(), tmp.path(), &[]);
    let cfg = Config::load_env(&e, None).unwrap();
    assert_eq!(cfg.get("ui", "username"), Some(&b"Jane\nDoe\nagain"[..]));
    assert_eq!(cfg.get("x", "k"), Some(&b"v = w"[..]));
    assert_eq!(cfg.get("x", "empty"), Some(&b""[..]));
    assert_eq!(cfg.get("a]b", "q"), Some(&b"1"[..]));
    assert_eq!(cfg.get("a]b", "r"), Some(&b"2"[..]));
}

#[test]
fn errors_name_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let rc = tmp.path().join("a.rc");
    let e = env(&rc.display().to_string(), tmp.path(), &[]);
    fs::write(&rc, "[ui]\n  foo\n").unwrap();
    assert_eq!(
        Config::load_env(&e, None).unwrap_err().hg_message(),
        format!(
            "config error at {}:2: unexpected leading whitespace:   foo\n",
            rc.display()
        )
    );
    fs::write(&rc, "[ui]\nusername: me  \n").unwrap();
    assert_eq!(
        Config::load_env(&e, None).unwrap_err().to_string(),
        format!("config error at {}:2: username: me", rc.display())
    );
    fs::create_dir(tmp.path().join("d")).unwrap();
    fs::write(&rc, "%include d\n").unwrap();
    assert_eq!(
        Config::load_env(&e, None).unwrap_err().to_string(),
        format!(
            "config error at {}:1: cannot include d (Is a directory)",
            rc.display()
        )
    );
}

#[test]
fn include_unset_and_file_order() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("sub");
    fs::create_dir(&sub).unwrap();
    fs::write(sub.join("inc.rc"), "[ui]\nusername = included\n").unwrap();
    fs::write(
        tmp.path().join("a.rc"),
        "%include sub/inc.rc\n%include missing.rc\n[other]\nx = 1\ny = 2\n",
    )
    .unwrap();
    fs::write(tmp.path().join("b.rc"), "[other]\n%unset x\n").unwrap();
    // A directory in HGRCPATH means its *.rc files, sorted.
    let e = env(&tmp.path().display().to_string(), tmp.path(), &[]);
    let cfg = Config::load_env(&e, None).unwrap();
    assert_eq!(cfg.get("ui", "username"), Some(&b"included"[..]));
    assert_eq!(cfg.get("other", "x"), None);
    assert_eq!(cfg.get("other", "y"), Some(&b"2"[..]));
    // Included paths are relative to the including file; ~ and $VAR are expanded.
    fs::write(
        tmp.path().join("c.rc"),
        "%include $SUBDIR/inc.rc\n%include ~/sub/inc.rc\n",
    )
    .unwrap();
    let e = env(
        &tmp.path().join("c.rc").display().to_string(),
        tmp.path(),
        &[("SUBDIR", "sub")],
    );
    let cfg = Config::load_env(&e, None).unwrap();
    assert_eq!(cfg.get("ui", "username"), Some(&b"included"[..]));
}

#[test]
fn username_order_and_alias_levels() {
    let tmp = tempfile::tempdir().unwrap();
    let rc = tmp.path().join("a.rc");
    let path = rc.display().to_string();
    fs::write(&rc, "[ui]\nuser = alias\nusername = $WHO <w@x>\n").unwrap();
    let cfg = Config::load_env(&env(&path, tmp.path(), &[]), None).unwrap();
    // Same level: ui.username wins; unset variables stay as they are.
    assert_eq!(
        user_of(&cfg, &env(&path, tmp.path(), &[])).unwrap(),
        "$WHO <w@x>"
    );
    let e = env(&path, tmp.path(), &[("WHO", "Ann"), ("EMAIL", "e@x")]);
    assert_eq!(user_of(&cfg, &e).unwrap(), "Ann <w@x>");
    let e = env(&path, tmp.path(), &[("HGUSER", "h"), ("EMAIL", "e@x")]);
    assert_eq!(user_of(&cfg, &e).unwrap(), "h");
    // A later file's alias beats an earlier file's name.
    let rc2 = tmp.path().join("b.rc");
    fs::write(&rc2, "[ui]\nuser = later alias\n").unwrap();
    let both = format!("{path}:{}", rc2.display());
    let cfg = Config::load_env(&env(&both, tmp.path(), &[]), None).unwrap();
    assert_eq!(
        user_of(&cfg, &env(&both, tmp.path(), &[])).unwrap(),
        "later alias"
    );
    // EMAIL when nothing else; HGUSER="" is "no username".
    let none = Config::load_env(&env("", tmp.path(), &[]), None).unwrap();
    let e = env("", tmp.path(), &[("EMAIL", "e@x")]);
    assert_eq!(user_of(&none, &e).unwrap(), "e@x");
    let e = env("", tmp.path(), &[("HGUSER", "")]);
    assert_eq!(user_of(&none, &e), Err(IdentityError::NoUsername));
    assert_eq!(
        IdentityError::NoUsername.hg_message(),
        "abort: no username supplied\n(use 'hg config --edit' to set your username)\n"
    );
}

#[test]
fn fallback_prompt_and_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let none = Config::load_env(&env("", tmp.path(), &[]), None).unwrap();
    let e = env("", tmp.path(), &[("LOGNAME", "lg")]);
    let mut c = TestConsole::new();
    let u = lossy(&none.username(&e, &mut c).unwrap());
    assert_eq!(u, format!("lg@{}", getfqdn()));
    assert_eq!(c.err, format!("no username found, using '{u}' instead\n"));
    // Interactive without a name: abort.
    let mut c = TestConsole::new();
    c.tty = true;
    assert_eq!(none.username(&e, &mut c), Err(IdentityError::NoUsername));
    // askusername: asked on a terminal, echoed as hg does without one.
    let rc = tmp.path().join("a.rc");
    fs::write(&rc, "[ui]\naskusername = yes\n").unwrap();
    let path = rc.display().to_string();
    let ask = Config::load_env(&env(&path, tmp.path(), &[]), None).unwrap();
    let mut c = TestConsole::new();
    c.tty = true;
    c.input.push(b"Typed Name\n".to_vec());
    assert_eq!(ask.username(&e, &mut c).unwrap(), b"Typed Name");
    assert_eq!(c.out, "enter a commit username: ");
    let mut c = TestConsole::new();
    c.tty = true;
    assert_eq!(
        ask.username(&e, &mut c),
        Err(IdentityError::ResponseExpected)
    );
    let mut c = TestConsole::new();
    ask.username(&e, &mut c).unwrap();
    assert_eq!(c.out, "enter a commit username: \n");
    // Newlines and empty names.
    let e = env("", tmp.path(), &[("HGUSER", "a\nb")]);
    let err = none.username(&e, &mut TestConsole::new()).unwrap_err();
    assert_eq!(
        err.hg_message(),
        "abort: username 'a\\nb' contains a newline\n\n"
    );
    let e = env("", tmp.path(), &[("HGUSER", "  ")]);
    assert_eq!(
        none.commit_user(None, &e, &mut TestConsole::new()),
        Err(IdentityError::Empty)
    );
    assert_eq!(
        none.commit_user(Some(" x\ny "), &e, &mut TestConsole::new())
            .unwrap_err()
            .hg_message(),
        "abort: username 'x\\ny' contains a newline\n"
    );
    assert_eq!(
        none.commit_user(Some(" Me "), &e, &mut TestConsole::new()),
        Ok("Me".to_owned())
    );
    assert_eq!(
        none.commit_user(Some(""), &e, &mut TestConsole::new()),
        Err(IdentityError::Empty)
    );
}

#[test]
fn repository_hgrc_overrides_user_hgrc() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    fs::create_dir_all(home.join(".config/hg")).unwrap();
    fs::write(home.join(".hgrc"), "[ui]\nusername = home\n[x]\nk = home\n").unwrap();
    fs::write(home.join(".config/hg/hgrc"), "[x]\nk = xdg\n").unwrap();
    let repo = tmp.path().join("repo");
    fs::create_dir_all(repo.join(".hg")).unwrap();
    fs::write(repo.join(".hg/hgrc"), "[ui]\nusername = repo\n").unwrap();
    let e = Env::from_vars([("HOME", home.as_os_str())]);
    let cfg = Config::load_env(&e, Some(&repo)).unwrap();
    assert_eq!(cfg.get("ui", "username"), Some(&b"repo"[..]));
    assert_eq!(cfg.get("x", "k"), Some(&b"xdg"[..]));
    let e = Env::from_vars([
        ("HOME", home.as_os_str()),
        ("HGRCSKIPREPO", OsStr::new("1")),
    ]);
    let cfg = Config::load_env(&e, Some(&repo)).unwrap();
    assert_eq!(cfg.get("ui", "username"), Some(&b"home"[..]));
}

#[test]
fn plain_drops_script_unfriendly_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let rc = tmp.path().join("a.rc");
    fs::write(
        &rc,
        "[ui]\nverbose = true\nusername = u\n[defaults]\nlog = -v\n",
    )
    .unwrap();
    let path = rc.display().to_string();
    let cfg = Config::load_env(&env(&path, tmp.path(), &[("HGPLAIN", "1")]), None).unwrap();
    assert_eq!(cfg.get("ui", "verbose"), None);
    assert_eq!(cfg.get("defaults", "log"), None);
    assert_eq!(cfg.get("ui", "username"), Some(&b"u"[..]));
    let cfg = Config::load_env(&env(&path, tmp.path(), &[]), None).unwrap();
    assert_eq!(cfg.get_bool("ui", "verbose"), Ok(Some(true)));
}

#[test]
fn python_path_helpers() {
    assert_eq!(normpath(b"/a//b/./c/../d/"), b"/a/b/d");
    assert_eq!(normpath(b"../x/.."), b"..");
    assert_eq!(normpath(b"//a"), b"//a");
    assert_eq!(normpath(b"///a"), b"/a");
    assert_eq!(dirname(b"/a/b//c"), b"/a/b");
    assert_eq!(dirname(b"c"), b"");
    assert_eq!(dirname(b"/c"), b"/");
    let e = Env::from_vars([("A", "1"), ("HOME", "/h/")]);
    assert_eq!(expandvars(b"$A${A}$B${}$", &e), b"11$B${}$");
    assert_eq!(expanduser(b"~/x", &e), b"/h/x");
    assert_eq!(expanduser(b"~", &e), b"/h");
    assert_eq!(expanduser(b"x~", &e), b"x~");
}
