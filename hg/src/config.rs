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

use crate::date::py_bytes_repr;
use crate::paths::{join, normpath};
use regex::bytes::Regex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io::{BufRead, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::OnceLock;
use thiserror::Error;

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

/// Environment variables, as bytes (the process's, or given by a test).
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<OsString, OsString>,
}

impl Env {
    pub fn from_process() -> Env {
        Env {
            vars: std::env::vars_os().collect(),
        }
    }

    #[cfg_attr(not(test), allow(dead_code))]
    pub fn from_vars<K: Into<OsString>, V: Into<OsString>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Env {
        Env {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.vars.get(OsStr::new(name)).map(|v| v.as_bytes())
    }

    fn get_bytes(&self, name: &[u8]) -> Option<&[u8]> {
        self.vars.get(OsStr::from_bytes(name)).map(|v| v.as_bytes())
    }
}

// ----- Python's os.path, on bytes -----

/// `os.path.expandvars`: `$name` and `${name}` (name `[A-Za-z0-9_]+`, or anything but `}`
/// in braces) replaced when set, left as they are otherwise.
fn expandvars(path: &[u8], env: &Env) -> Vec<u8> {
    if !path.contains(&b'$') {
        return path.to_vec();
    }
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| Regex::new(r"(?-u)\$([A-Za-z0-9_]+|\{[^}]*\})").ok())
        .as_ref()
    else {
        return path.to_vec();
    };
    let mut out = Vec::with_capacity(path.len());
    let mut last = 0;
    for m in re.captures_iter(path) {
        let (Some(all), Some(name)) = (m.get(0), m.get(1)) else {
            continue;
        };
        let mut name = name.as_bytes();
        if name.starts_with(b"{") && name.ends_with(b"}") {
            name = &name[1..name.len() - 1];
        }
        if let Some(value) = env.get_bytes(name) {
            out.extend_from_slice(&path[last..all.start()]);
            out.extend_from_slice(value);
            last = all.end();
        }
    }
    out.extend_from_slice(&path[last..]);
    out
}

/// `os.path.expanduser`: a leading `~` (`$HOME`, or the password entry) or `~user`.
fn expanduser(path: &[u8], env: &Env) -> Vec<u8> {
    if !path.starts_with(b"~") {
        return path.to_vec();
    }
    let i = path[1..]
        .iter()
        .position(|&b| b == b'/')
        .map_or(path.len(), |p| p + 1);
    let home = if i == 1 {
        match env.get("HOME") {
            Some(h) => h.to_vec(),
            None => match passwd_by_uid(current_uid()) {
                Some(pw) => pw.dir,
                None => return path.to_vec(),
            },
        }
    } else {
        match passwd_by_name(&path[1..i]) {
            Some(pw) => pw.dir,
            None => return path.to_vec(),
        }
    };
    let mut home = home;
    while home.ends_with(b"/") {
        home.pop();
    }
    home.extend_from_slice(&path[i..]);
    if home.is_empty() {
        b"/".to_vec()
    } else {
        home
    }
}

/// hg's `util.expandpath`: variables, then `~`.
fn expandpath(path: &[u8], env: &Env) -> Vec<u8> {
    expanduser(&expandvars(path, env), env)
}

/// `os.path.dirname`.
fn dirname(path: &[u8]) -> &[u8] {
    let i = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let head = &path[..i];
    if !head.is_empty() && head.iter().any(|&b| b != b'/') {
        let end = head.iter().rposition(|&b| b != b'/').map_or(0, |e| e + 1);
        &head[..end]
    } else {
        head
    }
}

/// The text of an I/O error as Python's `strerror` has it.
pub fn strerror(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let text = std::io::Error::from_raw_os_error(code).to_string();
            match text.rfind(" (os error ") {
                Some(i) => text[..i].to_owned(),
                None => text,
            }
        }
        None => e.to_string(),
    }
}

// ----- users, groups, hosts -----

fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

struct Passwd {
    name: Vec<u8>,
    dir: Vec<u8>,
}

fn passwd_from(pw: &libc::passwd) -> Passwd {
    // SAFETY: getpwuid_r/getpwnam_r filled pw with NUL-terminated strings in our buffer.
    let field = |p: *const libc::c_char| {
        if p.is_null() {
            Vec::new()
        } else {
            unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()
        }
    };
    Passwd {
        name: field(pw.pw_name),
        dir: field(pw.pw_dir),
    }
}

fn passwd_by_uid(uid: u32) -> Option<Passwd> {
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: zeroed passwd is valid; getpwuid_r writes into pw and buf, both ours.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut result) };
    (rc == 0 && !result.is_null()).then(|| passwd_from(&pw))
}

fn passwd_by_name(name: &[u8]) -> Option<Passwd> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: as in passwd_by_uid.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then(|| passwd_from(&pw))
}

/// hg's `util.username(uid)`: the login name, or the number.
fn user_name(uid: u32) -> Vec<u8> {
    passwd_by_uid(uid).map_or_else(|| uid.to_string().into_bytes(), |p| p.name)
}

/// hg's `util.groupname(gid)`: the group name, or the number.
fn group_name(gid: u32) -> Vec<u8> {
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: zeroed group is valid; getgrgid_r writes into gr and buf, both ours.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::group = std::ptr::null_mut();
    let rc = unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc == 0 && !result.is_null() && !gr.gr_name.is_null() {
        // SAFETY: gr_name points into buf, NUL-terminated.
        unsafe { CStr::from_ptr(gr.gr_name) }.to_bytes().to_vec()
    } else {
        gid.to_string().into_bytes()
    }
}

/// Python's `getpass.getuser()`: `LOGNAME`, `USER`, `LNAME`, `USERNAME` (the first that is
/// set and not empty), else the password entry of the uid.
fn getuser(env: &Env) -> Option<Vec<u8>> {
    for name in ["LOGNAME", "USER", "LNAME", "USERNAME"] {
        if let Some(v) = env.get(name).filter(|v| !v.is_empty()) {
            return Some(v.to_vec());
        }
    }
    passwd_by_uid(current_uid()).map(|p| p.name)
}

extern "C" {
    // glibc; not in the libc crate.
    fn gethostbyaddr_r(
        addr: *const libc::c_void,
        len: libc::socklen_t,
        family: libc::c_int,
        ret: *mut libc::hostent,
        buf: *mut libc::c_char,
        buflen: libc::size_t,
        result: *mut *mut libc::hostent,
        h_errnop: *mut libc::c_int,
    ) -> libc::c_int;
}

/// Python's `socket.getfqdn()`: the host name, resolved to an address and back
/// (`gethostbyaddr`); the first of the canonical name and its aliases that has a dot,
/// else the canonical name; the plain host name when the lookups fail.
pub fn getfqdn() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = if rc == 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    match host_by_addr_of(&name) {
        Some((canonical, aliases)) => std::iter::once(&canonical)
            .chain(&aliases)
            .find(|n| n.contains('.'))
            .cloned()
            .unwrap_or(canonical),
        None => name,
    }
}

/// Python's `socket.gethostbyaddr(name)`: the name's first address (a numeric address as
/// is, else `getaddrinfo`), then the reverse lookup: (canonical name, aliases).
fn host_by_addr_of(name: &str) -> Option<(String, Vec<String>)> {
    let mut v4 = [0u8; 4];
    let mut v6 = [0u8; 16];
    let (family, addr): (libc::c_int, &[u8]) = if let Ok(ip) = name.parse::<std::net::Ipv4Addr>() {
        v4 = ip.octets();
        (libc::AF_INET, &v4)
    } else if let Some(ip) = (!name.contains('%'))
        .then(|| name.parse::<std::net::Ipv6Addr>().ok())
        .flatten()
    {
        v6 = ip.octets();
        (libc::AF_INET6, &v6)
    } else {
        let cname = CString::new(name).ok()?;
        // SAFETY: zeroed addrinfo hints are valid; getaddrinfo allocates res, freed below.
        let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
        hints.ai_family = libc::AF_UNSPEC;
        let mut res: *mut libc::addrinfo = std::ptr::null_mut();
        let rc = unsafe { libc::getaddrinfo(cname.as_ptr(), std::ptr::null(), &hints, &mut res) };
        if rc != 0 || res.is_null() {
            return None;
        }
        // SAFETY: res is a valid list from getaddrinfo; its first sockaddr matches its family.
        let out = unsafe {
            let ai = &*res;
            match ai.ai_family {
                libc::AF_INET if !ai.ai_addr.is_null() => {
                    let sin = &*(ai.ai_addr as *const libc::sockaddr_in);
                    v4 = sin.sin_addr.s_addr.to_ne_bytes();
                    Some(libc::AF_INET)
                }
                libc::AF_INET6 if !ai.ai_addr.is_null() => {
                    let sin6 = &*(ai.ai_addr as *const libc::sockaddr_in6);
                    v6 = sin6.sin6_addr.s6_addr;
                    Some(libc::AF_INET6)
                }
                _ => None,
            }
        };
        // SAFETY: res came from getaddrinfo and is freed once.
        unsafe { libc::freeaddrinfo(res) };
        match out? {
            libc::AF_INET => (libc::AF_INET, &v4),
            _ => (libc::AF_INET6, &v6),
        }
    };
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: zeroed hostent is valid; gethostbyaddr_r fills it with pointers into buf.
    let mut he: libc::hostent = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::hostent = std::ptr::null_mut();
    let mut herr: libc::c_int = 0;
    let rc = unsafe {
        gethostbyaddr_r(
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
            family,
            &mut he,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
            &mut herr,
        )
    };
    if rc != 0 || result.is_null() || he.h_name.is_null() {
        return None;
    }
    // SAFETY: h_name and h_aliases (a NULL-terminated array) point into buf.
    let canonical = unsafe { CStr::from_ptr(he.h_name) }
        .to_string_lossy()
        .into_owned();
    let mut aliases = Vec::new();
    if !he.h_aliases.is_null() {
        let mut p = he.h_aliases;
        unsafe {
            while !(*p).is_null() {
                aliases.push(CStr::from_ptr(*p).to_string_lossy().into_owned());
                p = p.add(1);
            }
        }
    }
    Some((canonical, aliases))
}

// ----- the parser -----

/// One value and hg's priority level for it.
#[derive(Debug, Clone)]
struct Item {
    key: Vec<u8>,
    value: Vec<u8>,
    level: i64,
}

/// Sections of ordered items; setting a key moves it to the end, as hg's `sortdict` does.
type Sections = BTreeMap<Vec<u8>, Vec<Item>>;

fn lookup<'a>(data: &'a Sections, section: &[u8], key: &[u8]) -> Option<&'a Item> {
    data.get(section)?.iter().find(|i| i.key == key)
}

fn remove(data: &mut Sections, section: &[u8], key: &[u8]) {
    if let Some(items) = data.get_mut(section) {
        items.retain(|i| i.key != key);
    }
}

fn insert(data: &mut Sections, section: &[u8], item: Item) {
    let items = data.entry(section.to_vec()).or_default();
    items.retain(|i| i.key != item.key);
    items.push(item);
}

/// The regular expressions of `config.parse`, on bytes with Python's ASCII `\s`.
struct Syntax {
    section: Regex,
    item: Regex,
    cont: Regex,
    empty: Regex,
    comment: Regex,
    unset: Regex,
    include: Regex,
}

fn syntax() -> Option<&'static Syntax> {
    static SYNTAX: OnceLock<Option<Syntax>> = OnceLock::new();
    SYNTAX
        .get_or_init(|| {
            let re = |p: &str| Regex::new(&format!("(?-u)^(?:{p})")).ok();
            Some(Syntax {
                section: re(r"\[([^\[]+)\]")?,
                item: re(r"([^=\s][^=]*?)\s*=\s*(.*\S|)")?,
                cont: re(r"\s+(\S|\S.*\S)\s*$")?,
                empty: re(r";|#|\s*$")?,
                comment: re(r";|#")?,
                unset: re(r"%unset\s+(\S+)")?,
                include: re(r"%include\s+(\S|\S.*\S)\s*$")?,
            })
        })
        .as_ref()
}

/// Python's `bytes.splitlines(True)`: lines end at `\n`, `\r\n` or `\r`, endings kept.
fn splitlines(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < data.len() {
        match data[i] {
            b'\n' => {
                out.push(&data[start..=i]);
                start = i + 1;
            }
            b'\r' => {
                let end = if data.get(i + 1) == Some(&b'\n') {
                    i + 1
                } else {
                    i
                };
                out.push(&data[start..=end]);
                i = end;
                start = end + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < data.len() {
        out.push(&data[start..]);
    }
    out
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What reading one file can fail with: its own I/O error (hg skips some), or a
/// configuration error.
enum ReadError {
    Io(std::io::Error),
    Config(ConfigError),
}

/// One file read by `ui.readconfig` (with what it includes): hg's per-file `config`.
#[derive(Default)]
struct Layer {
    data: Sections,
    unset: Vec<(Vec<u8>, Vec<u8>)>,
    level: i64,
}

impl Layer {
    /// `config.read`: a new source level, then the file (given, or read here).
    fn read(&mut self, path: &[u8], data: Option<Vec<u8>>, env: &Env) -> Result<(), ReadError> {
        self.level += 1;
        let data = match data {
            Some(d) => d,
            None => std::fs::read(OsStr::from_bytes(path)).map_err(ReadError::Io)?,
        };
        self.parse(path, &data, env)
    }

    /// `config.parse`.
    fn parse(&mut self, src: &[u8], data: &[u8], env: &Env) -> Result<(), ReadError> {
        let Some(sx) = syntax() else {
            return Err(ReadError::Config(ConfigError::Invalid(
                "internal error: bad config syntax expressions".into(),
            )));
        };
        let dir = dirname(src).to_vec();
        let mut section: Vec<u8> = Vec::new();
        let mut item: Option<Vec<u8>> = None;
        let mut cont = false;
        for (n, mut l) in splitlines(data).into_iter().enumerate() {
            let line = n + 1;
            if line == 1 && l.starts_with(b"\xef\xbb\xbf") {
                l = &l[3..];
            }
            let location = || format!("{}:{line}", lossy(src));
            if cont {
                if sx.comment.is_match(l) {
                    continue;
                }
                if let Some(m) = sx.cont.captures(l) {
                    let key = item.clone().unwrap_or_default();
                    let mut v = lookup(&self.data, &section, &key)
                        .map(|i| i.value.clone())
                        .unwrap_or_default();
                    v.push(b'\n');
                    v.extend_from_slice(m.get(1).map_or(&b""[..], |g| g.as_bytes()));
                    self.set(&section, &key, v);
                    continue;
                }
                item = None;
                cont = false;
            }
            if let Some(m) = sx.include.captures(l) {
                let expanded = expandpath(m.get(1).map_or(&b""[..], |g| g.as_bytes()), env);
                let abs = normpath(&join(&dir, &expanded));
                match self.read(&abs, None, env) {
                    // anything after the include has a higher level
                    Ok(()) => self.level += 1,
                    Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(ReadError::Io(e)) => {
                        return Err(ReadError::Config(ConfigError::Parse {
                            location: location(),
                            message: format!(
                                "cannot include {} ({})",
                                lossy(&expanded),
                                strerror(&e)
                            ),
                        }))
                    }
                    Err(e) => return Err(e),
                }
                continue;
            }
            if sx.empty.is_match(l) {
                continue;
            }
            if let Some(m) = sx.section.captures(l) {
                section = m.get(1).map_or(Vec::new(), |g| g.as_bytes().to_vec());
                self.data.entry(section.clone()).or_default();
                continue;
            }
            if let Some(m) = sx.item.captures(l) {
                let key = m.get(1).map_or(Vec::new(), |g| g.as_bytes().to_vec());
                let value = m.get(2).map_or(Vec::new(), |g| g.as_bytes().to_vec());
                self.set(&section, &key, value);
                item = Some(key);
                cont = true;
                continue;
            }
            if let Some(m) = sx.unset.captures(l) {
                let name = m.get(1).map_or(Vec::new(), |g| g.as_bytes().to_vec());
                remove(&mut self.data, &section, &name);
                self.unset.push((section.clone(), name));
                continue;
            }
            let message = lossy(crate::date::rstrip_ascii(l));
            let message = if l.starts_with(b" ") {
                format!("unexpected leading whitespace: {message}")
            } else {
                message
            };
            return Err(ReadError::Config(ConfigError::Parse {
                location: location(),
                message,
            }));
        }
        Ok(())
    }

    fn set(&mut self, section: &[u8], key: &[u8], value: Vec<u8>) {
        let level = self.level;
        insert(
            &mut self.data,
            section,
            Item {
                key: key.to_vec(),
                value,
                level,
            },
        );
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

    /// The value of `section.key`, if set.
    pub fn get(&self, section: &str, key: &str) -> Option<&[u8]> {
        lookup(&self.data, section.as_bytes(), key.as_bytes()).map(|i| i.value.as_slice())
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

/// `revfs debugidentity`: what a commit here would record as author and date.
#[cfg(test)]
mod tests {
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
}
