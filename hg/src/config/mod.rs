//! hg's configuration files and the committer's name, as Mercurial 6.3 finds them.
//!
//! **Files**, later ones winning (`rcutil.rccomponents`, `scmposix`, `localrepo.loadhgrc`):
//! with `HGRCPATH` set, only its `:`-separated entries (`~` and `$VAR` expanded; a directory
//! means its `*.rc` files, sorted; empty entries skipped); otherwise
//! `/usr/etc/mercurial/hgrc` and `hgrc.d/*.rc` (hg's installation prefix on Debian, from
//! `/usr/bin/hg`), `/etc/mercurial/hgrc` and `hgrc.d/*.rc`, `~/.hgrc`, and
//! `$XDG_CONFIG_HOME/hg/hgrc` (`~/.config/hg/hgrc` when unset or relative). Then, unless
//! `HGRCSKIPREPO` is set, the repository's: the share source's `.hg/hgrc` for a share-safe
//! share, `.hg/hgrc`, `.hg/hgrc-not-shared`. Repository files not owned by the user (and
//! not covered by `[trusted] users/groups`) are ignored with hg's warning.
//!
//! **Syntax** (`config.py`): `[section]`, `key = value` (no `key: value`), continuation
//! lines starting with whitespace, `#` and `;` comments (also between continuation lines),
//! `%include PATH` (relative to the including file; a missing file is skipped),
//! `%unset key`, a UTF-8 BOM. A bad line is hg's `config error at FILE:LINE: ...`. Values
//! keep hg's priority levels, which decide between `ui.username` and its alias `ui.user`.
//! With `HGPLAIN` set, the keys hg drops for scripts (`ui.verbose`, `ui.quiet`, ...) are
//! dropped.
//!
//! **User name** (`ui.username()` then `changelog.add`): `HGUSER` (even empty), else
//! `ui.username` (with `$VAR` expanded), else `EMAIL`, else (with `ui.askusername`) a
//! prompt, else, when not interactive, `LOGNAME`/`USER`/`LNAME`/`USERNAME`/the password
//! entry `@` the fully qualified host name with hg's warning; then hg's aborts: `no
//! username supplied` (with its hint), `username 'x\ny' contains a newline`, and for a
//! commit, after stripping, `empty username`.

mod auth;
mod env;
mod hostsecurity;
mod parse;
mod syntax;
#[cfg(test)]
mod tests;

pub use auth::{auth_for, Auth};
use env::{current_uid, expandpath, expanduser, expandvars, getuser, group_name, user_name};
pub use env::{expand_path, getfqdn, strerror, Env};
pub use hostsecurity::{
    host_security, Fingerprint, FingerprintAlg, HostSecurity, HostSecurityError, TlsProtocol,
};
use parse::{insert, lookup, lossy, remove, Item, Layer, ReadError, Sections};

use crate::date::py_bytes_repr;
use crate::paths::{join, normpath};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{BufRead, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use thiserror::Error;

/// The configuration of `text` alone (`HGRCPATH` names one file, `HOME` a temporary
/// directory), for tests.
#[cfg(test)]
pub(crate) fn from_text(text: &str) -> (Config, Env) {
    let dir = tempfile::tempdir().unwrap();
    let rc = dir.path().join("hgrc");
    std::fs::write(&rc, text).unwrap();
    let env = Env::from_vars([
        ("HGRCPATH", rc.as_os_str()),
        ("HOME", dir.path().as_os_str()),
    ]);
    (Config::load_env(&env, None).unwrap(), env)
}

/// The items of a list value (see [`Config::get_list`]).
fn split_list(v: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = v;
    loop {
        let skip = rest
            .iter()
            .position(|&b| !(b == b',' || b.is_ascii_whitespace()))
            .unwrap_or(rest.len());
        rest = &rest[skip..];
        if rest.is_empty() {
            return out;
        }
        let quoted = rest[0] == b'"' && rest[1..].contains(&b'"');
        let (item, next) = if quoted {
            let end = 1 + rest[1..].iter().position(|&b| b == b'"').unwrap_or(0);
            (&rest[1..end], &rest[end + 1..])
        } else {
            let end = rest
                .iter()
                .position(|&b| b == b',' || b.is_ascii_whitespace())
                .unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        out.push(item.to_vec());
        rest = next;
    }
}

/// A configuration error, printed by hg without `abort:` (exit status 255).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// A line hg cannot read, or an `%include` it cannot open.
    #[error("config error at {location}: {message}")]
    Parse { location: String, message: String },
    /// A value that must be a boolean.
    #[error("config error: {section}.{key} is not a boolean ('{value}')")]
    NotABoolean {
        section: String,
        key: String,
        value: String,
    },
    /// Any other invalid value, with hg's message.
    #[error("config error: {0}")]
    Invalid(String),
}

impl ConfigError {
    /// Everything hg prints on stderr for this error.
    pub fn hg_message(&self) -> String {
        format!("{self}\n")
    }
}

/// Why no committer name could be found, with hg's wording.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IdentityError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Nothing set (or an empty value) and no fallback.
    #[error("no username supplied\n(use 'hg config --edit' to set your username)")]
    NoUsername,
    /// `ui.username()`'s check; hg's message ends with a newline of its own.
    #[error("username {} contains a newline\n", py_bytes_repr(.0))]
    Newline(Vec<u8>),
    /// The commit's check, after stripping (`changelog.add`).
    #[error("empty username")]
    Empty,
    /// The commit's check of an explicit `-u` (no extra newline).
    #[error("username {} contains a newline", py_bytes_repr(.0))]
    NewlineInCommit(Vec<u8>),
    /// `ui.askusername` and stdin at its end.
    #[error("response expected")]
    ResponseExpected,
}

impl IdentityError {
    /// Everything hg prints on stderr for this error (exit status 255). For a commit, hg
    /// prints `transaction abort!` and `rollback completed` before `Empty` and
    /// `NewlineInCommit`, which it finds inside its transaction.
    pub fn hg_message(&self) -> String {
        match self {
            IdentityError::Config(e) => e.hg_message(),
            other => format!("abort: {other}\n"),
        }
    }
}

/// The keys `ui._applyconfig` drops under `HGPLAIN`.
const PLAIN_UI_KEYS: [&str; 10] = [
    "debug",
    "fallbackencoding",
    "quiet",
    "slash",
    "logtemplate",
    "message-output",
    "statuscopies",
    "style",
    "traceback",
    "verbose",
];

/// hg's trusted configuration, as the files above make it.
#[derive(Debug, Clone, Default)]
pub struct Config {
    data: Sections,
    level: i64,
    plain: bool,
    trusted_users: BTreeSet<Vec<u8>>,
    trusted_groups: BTreeSet<Vec<u8>>,
    report_untrusted: bool,
    warnings: Vec<String>,
}

/// hg's booleans (`stringutil.parsebool`).
pub fn parse_bool(v: &[u8]) -> Option<bool> {
    match v.to_ascii_lowercase().as_slice() {
        b"1" | b"yes" | b"true" | b"on" | b"always" => Some(true),
        b"0" | b"no" | b"false" | b"off" | b"never" => Some(false),
        _ => None,
    }
}

impl Config {
    /// The configuration of the process's environment for the repository rooted at
    /// `repo_root` (none: only the global and user files). hg's warnings about untrusted
    /// or ignored files are printed on stderr.
    pub fn load(repo_root: Option<&Path>) -> Result<Config, ConfigError> {
        let cfg = Config::load_env(&Env::from_process(), repo_root)?;
        for w in &cfg.warnings {
            eprint!("{w}");
        }
        Ok(cfg)
    }

    /// [`Config::load`] with an explicit environment; warnings are kept, not printed.
    pub fn load_env(env: &Env, repo_root: Option<&Path>) -> Result<Config, ConfigError> {
        let mut cfg = Config {
            plain: env.get("HGPLAIN").is_some() || env.get("HGPLAINEXCEPT").is_some(),
            report_untrusted: true,
            ..Config::default()
        };
        for path in rc_paths(env) {
            cfg.read_file(&path, true, env)?;
        }
        if let Some(root) = repo_root {
            if env.get("HGRCSKIPREPO").is_none() {
                // The repository's ui is a copy of the global one: one level up.
                cfg.level += 1;
                for path in repo_rc_paths(root) {
                    cfg.read_file(&path, false, env)?;
                }
            }
        }
        Ok(cfg)
    }

    /// hg's warnings while reading (untrusted files, errors in them), each ending in `\n`.
    #[allow(dead_code)] // API: callers that load quietly
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// `HGPLAIN` or `HGPLAINEXCEPT` is set.
    #[allow(dead_code)] // API: for commands that honour HGPLAIN
    pub fn plain(&self) -> bool {
        self.plain
    }

    /// `ui.configitems(section)`: the items of a section, in hg's order.
    pub fn items(&self, section: &str) -> Vec<(&[u8], &[u8])> {
        self.data
            .get(section.as_bytes())
            .map(|items| {
                items
                    .iter()
                    .map(|i| (i.key.as_slice(), i.value.as_slice()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The ignore files named by `ui.ignore` and `ui.ignore.*`, as written (hg's
    /// `dirstate._ignorefiles`, after the root `.hgignore`).
    pub fn ignore_files(&self) -> Vec<Vec<u8>> {
        self.items("ui")
            .into_iter()
            .filter(|(k, _)| *k == b"ignore" || k.starts_with(b"ignore."))
            .map(|(_, v)| v.to_vec())
            .collect()
    }

    /// [`Config::ignore_files`] with `$VAR` and `~` expanded in `env`, as hg joins them
    /// to the working copy's root (a relative one is relative to it).
    pub fn ignore_paths(&self, env: &Env) -> Vec<Vec<u8>> {
        self.ignore_files()
            .iter()
            .map(|p| expand_path(p, env))
            .collect()
    }

    /// The value of `section.key`, if set.
    pub fn get(&self, section: &str, key: &str) -> Option<&[u8]> {
        lookup(&self.data, section.as_bytes(), key.as_bytes()).map(|i| i.value.as_slice())
    }

    /// `ui.configlist`: the items of `section.key`, separated by commas and whitespace, a
    /// double-quoted item kept whole (hg's parser also takes quotes inside an item and
    /// backslash escapes, which no setting revfs reads needs); `None` when unset.
    pub fn get_list(&self, section: &str, key: &str) -> Option<Vec<Vec<u8>>> {
        self.get(section, key).map(split_list)
    }

    /// The value of the first of `keys` with the highest level (hg's aliases).
    fn get_aliased(&self, section: &str, keys: &[&str]) -> Option<&[u8]> {
        let mut best: Option<&Item> = None;
        for k in keys {
            if let Some(i) = lookup(&self.data, section.as_bytes(), k.as_bytes()) {
                match best {
                    Some(b) if b.level >= i.level => {}
                    _ => best = Some(i),
                }
            }
        }
        best.map(|i| i.value.as_slice())
    }

    /// `ui.configbool`: `None` when unset; hg's error when not a boolean.
    pub fn get_bool(&self, section: &str, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(section, key) {
            None => Ok(None),
            Some(v) => parse_bool(v)
                .map(Some)
                .ok_or_else(|| ConfigError::NotABoolean {
                    section: section.into(),
                    key: key.into(),
                    value: lossy(v),
                }),
        }
    }

    /// `ui.configbytes`: sizes such as `10MB`, `2.5k`, `100`.
    pub fn get_bytes(&self, section: &str, key: &str) -> Result<Option<u64>, ConfigError> {
        let Some(v) = self.get(section, key) else {
            return Ok(None);
        };
        let t = String::from_utf8_lossy(v).trim().to_ascii_lowercase();
        let units: [(&str, f64); 7] = [
            ("m", 1048576.0),
            ("k", 1024.0),
            ("g", 1073741824.0),
            ("kb", 1024.0),
            ("mb", 1048576.0),
            ("gb", 1073741824.0),
            ("b", 1.0),
        ];
        let parsed = match units.iter().find(|(u, _)| t.ends_with(u)) {
            Some((u, mult)) => t[..t.len() - u.len()]
                .trim()
                .parse::<f64>()
                .ok()
                .map(|n| (n * mult) as u64),
            None => t.parse::<u64>().ok(),
        };
        parsed.map(Some).ok_or_else(|| {
            ConfigError::Invalid(format!(
                "{section}.{key} is not a byte quantity ('{}')",
                lossy(v)
            ))
        })
    }

    /// `ui.readconfig(path)`: a file that cannot be opened is skipped; a repository file
    /// is checked for trust first.
    fn read_file(&mut self, path: &[u8], trust: bool, env: &Env) -> Result<(), ConfigError> {
        let Ok(data) = std::fs::read(OsStr::from_bytes(path)) else {
            return Ok(());
        };
        let trusted = trust || self.trusted(path);
        let mut layer = Layer::default();
        match layer.read(path, Some(data), env) {
            Ok(()) => {}
            Err(ReadError::Config(e)) if trusted => return Err(e),
            Err(ReadError::Config(ConfigError::Parse { location, message })) => self
                .warnings
                .push(format!("ignored {location}: {message}\n")),
            Err(ReadError::Config(e)) => self.warnings.push(format!("ignored: {e}\n")),
            Err(ReadError::Io(_)) => return Ok(()),
        }
        if self.plain {
            if let Some(items) = layer.data.get_mut(&b"ui"[..]) {
                items.retain(|i| !PLAIN_UI_KEYS.iter().any(|k| i.key == k.as_bytes()));
            }
            for s in ["defaults", "commands", "command-templates"] {
                if let Some(items) = layer.data.get_mut(s.as_bytes()) {
                    items.clear();
                }
            }
        }
        if trusted {
            self.update(layer);
        }
        self.fix_trust()
    }

    /// `config.update`: the layer's unsets, then its values one level above ours.
    fn update(&mut self, layer: Layer) {
        let current = self.level + 1;
        let mut max_level = self.level;
        for (s, k) in &layer.unset {
            remove(&mut self.data, s, k);
        }
        for (section, items) in layer.data {
            self.data.entry(section.clone()).or_default();
            for mut item in items {
                item.level += current;
                // (hg keeps the level of the last item, not the highest)
                max_level = item.level.max(current);
                insert(&mut self.data, &section, item);
            }
        }
        self.level = max_level;
    }

    /// `ui.fixconfig`: trusted users and groups, and whether to report untrusted files.
    fn fix_trust(&mut self) -> Result<(), ConfigError> {
        for (key, set) in [("users", 0), ("groups", 1)] {
            let words: Vec<Vec<u8>> = self
                .get("trusted", key)
                .map(|v| {
                    v.split(|b| b.is_ascii_whitespace() || *b == b',')
                        .filter(|w| !w.is_empty())
                        .map(<[u8]>::to_vec)
                        .collect()
                })
                .unwrap_or_default();
            let target = if set == 0 {
                &mut self.trusted_users
            } else {
                &mut self.trusted_groups
            };
            target.extend(words);
        }
        self.report_untrusted = self.get_bool("ui", "report_untrusted")?.unwrap_or(true);
        Ok(())
    }

    /// `ui._trusted`: owned by us, or by a trusted user or group.
    fn trusted(&mut self, path: &[u8]) -> bool {
        let Ok(meta) = std::fs::metadata(OsStr::from_bytes(path)) else {
            return true;
        };
        if meta.uid() == current_uid() {
            return true;
        }
        if self.trusted_users.contains(&b"*"[..]) || self.trusted_groups.contains(&b"*"[..]) {
            return true;
        }
        let user = user_name(meta.uid());
        let group = group_name(meta.gid());
        if self.trusted_users.contains(&user)
            || self.trusted_groups.contains(&group)
            || user == user_name(current_uid())
        {
            return true;
        }
        if self.report_untrusted {
            self.warnings.push(format!(
                "not trusting file {} from untrusted user {}, group {}\n",
                lossy(path),
                lossy(&user),
                lossy(&group)
            ));
        }
        false
    }

    /// hg's `ui.username()`: see the module documentation.
    pub fn username(&self, env: &Env, console: &mut dyn Console) -> Result<Vec<u8>, IdentityError> {
        let mut user: Option<Vec<u8>> = env.get("HGUSER").map(<[u8]>::to_vec);
        if user.is_none() {
            user = self
                .get_aliased("ui", &["username", "user"])
                .map(|u| expandvars(u, env));
        }
        if user.is_none() {
            user = env.get("EMAIL").map(<[u8]>::to_vec);
        }
        if user.is_none() && self.get_bool("ui", "askusername")?.unwrap_or(false) {
            user = self.prompt(console, "enter a commit username:")?;
        }
        if user.is_none() && !self.interactive(console)? {
            if let Some(name) = getuser(env) {
                let mut u = name;
                u.push(b'@');
                u.extend_from_slice(getfqdn().as_bytes());
                console.err(&format!(
                    "no username found, using '{}' instead\n",
                    lossy(&u)
                ));
                user = Some(u);
            }
        }
        let user = match user {
            Some(u) if !u.is_empty() => u,
            _ => return Err(IdentityError::NoUsername),
        };
        if user.contains(&b'\n') {
            return Err(IdentityError::Newline(user));
        }
        Ok(user)
    }

    /// The author of a commit: `explicit` (`-u`) when given and not empty, else
    /// [`Config::username`]; stripped and checked as `changelog.add` does.
    pub fn commit_user(
        &self,
        explicit: Option<&str>,
        env: &Env,
        console: &mut dyn Console,
    ) -> Result<String, IdentityError> {
        let raw = match explicit {
            Some(u) if !u.is_empty() => u.as_bytes().to_vec(),
            _ => self.username(env, console)?,
        };
        let user = crate::date::strip_ascii(&raw);
        if user.is_empty() {
            return Err(IdentityError::Empty);
        }
        if user.contains(&b'\n') {
            return Err(IdentityError::NewlineInCommit(user.to_vec()));
        }
        Ok(lossy(user))
    }

    /// `ui.interactive()`: the `ui.interactive` setting, else whether stdin is a terminal.
    fn interactive(&self, console: &dyn Console) -> Result<bool, ConfigError> {
        Ok(match self.get_bool("ui", "interactive")? {
            Some(b) => b,
            None => console.stdin_is_tty(),
        })
    }

    /// `ui.prompt(msg, default=None)`.
    fn prompt(
        &self,
        console: &mut dyn Console,
        msg: &str,
    ) -> Result<Option<Vec<u8>>, IdentityError> {
        if !self.interactive(console)? {
            console.out(&format!("{msg} \n"));
            return Ok(None);
        }
        console.out(&format!("{msg} "));
        let Some(mut line) = console.read_line() else {
            return Err(IdentityError::ResponseExpected);
        };
        if line.ends_with(b"\n") {
            line.pop();
        }
        let r = (!line.is_empty()).then_some(line);
        if self.get_bool("ui", "promptecho")?.unwrap_or(false) {
            console.out(&format!("{}\n", lossy(r.as_deref().unwrap_or_default())));
        }
        Ok(r)
    }
}

/// The config files before the repository's, in hg's order (see the module docs).
fn rc_paths(env: &Env) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(hgrcpath) = env.get("HGRCPATH") {
        for p in hgrcpath.split(|&b| b == b':').filter(|p| !p.is_empty()) {
            let p = expandpath(p, env);
            match std::fs::read_dir(OsStr::from_bytes(&p)) {
                Ok(entries) if Path::new(OsStr::from_bytes(&p)).is_dir() => {
                    let mut files: Vec<Vec<u8>> = entries
                        .flatten()
                        .map(|e| e.file_name().into_vec())
                        .filter(|n| n.ends_with(b".rc"))
                        .map(|n| join(&p, &n))
                        .collect();
                    files.sort();
                    out.extend(files);
                }
                _ => out.push(p),
            }
        }
        return out;
    }
    let rcfiles = |dir: &[u8], out: &mut Vec<Vec<u8>>| {
        out.push(normpath(&join(dir, b"hgrc")));
        let rcdir = join(dir, b"hgrc.d");
        if let Ok(entries) = std::fs::read_dir(OsStr::from_bytes(&rcdir)) {
            let mut names: Vec<Vec<u8>> = entries
                .flatten()
                .map(|e| e.file_name().into_vec())
                .filter(|n| n.ends_with(b".rc"))
                .collect();
            names.sort();
            out.extend(names.iter().map(|n| normpath(&join(&rcdir, n))));
        }
    };
    rcfiles(b"/usr/etc/mercurial", &mut out);
    rcfiles(b"/etc/mercurial", &mut out);
    out.push(normpath(&expanduser(b"~/.hgrc", env)));
    let confighome = match env.get("XDG_CONFIG_HOME") {
        Some(c) if c.starts_with(b"/") => c.to_vec(),
        _ => expanduser(b"~/.config", env),
    };
    out.push(normpath(&join(&join(&confighome, b"hg"), b"hgrc")));
    out
}

/// The repository's config files (`localrepo.loadhgrc`), under its real path.
fn repo_rc_paths(root: &Path) -> Vec<Vec<u8>> {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let dot_hg = root.as_os_str().as_bytes().to_vec();
    let dot_hg = join(&dot_hg, b".hg");
    let mut out = Vec::new();
    let requires =
        std::fs::read(OsStr::from_bytes(&join(&dot_hg, b"requires"))).unwrap_or_default();
    let has = |name: &[u8]| requires.split(|&b| b == b'\n').any(|l| l == name);
    if has(b"share-safe") && (has(b"shared") || has(b"relshared")) {
        if let Ok(sp) = std::fs::read(OsStr::from_bytes(&join(&dot_hg, b"sharedpath"))) {
            let mut sp = sp;
            while sp.ends_with(b"\n") {
                sp.pop();
            }
            let sp = if has(b"relshared") {
                join(&dot_hg, &sp)
            } else {
                sp
            };
            let real = std::fs::canonicalize(OsStr::from_bytes(&sp))
                .map(|p| p.into_os_string().into_vec())
                .unwrap_or(sp);
            out.push(join(&real, b"hgrc"));
        }
    }
    out.push(join(&dot_hg, b"hgrc"));
    out.push(join(&dot_hg, b"hgrc-not-shared"));
    out
}

/// Where `ui.username()` talks to the user.
pub trait Console {
    fn stdin_is_tty(&self) -> bool;
    /// Standard output (prompts).
    fn out(&mut self, text: &str);
    /// Standard error (warnings).
    fn err(&mut self, text: &str);
    /// One line of standard input with its newline; `None` at its end.
    fn read_line(&mut self) -> Option<Vec<u8>>;
}

/// The process's terminal.
pub struct StdConsole;

impl Console for StdConsole {
    fn stdin_is_tty(&self) -> bool {
        // SAFETY: isatty only inspects the descriptor.
        unsafe { libc::isatty(0) == 1 }
    }
    fn out(&mut self, text: &str) {
        let mut o = std::io::stdout();
        let _ = o.write_all(text.as_bytes());
        let _ = o.flush();
    }
    fn err(&mut self, text: &str) {
        eprint!("{text}");
    }
    fn read_line(&mut self) -> Option<Vec<u8>> {
        let mut line = Vec::new();
        match std::io::stdin().lock().read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    }
}
