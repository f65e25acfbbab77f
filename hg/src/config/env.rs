//! The process as hg's configuration sees it: environment variables, Python's
//! `os.path.expanduser`/`expandvars` on bytes, user, group and host names.

use regex::bytes::Regex;
use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

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

/// hg's `util.expandpath`: `os.path.expanduser(os.path.expandvars(path))`.
pub fn expand_path(path: &[u8], env: &Env) -> Vec<u8> {
    expanduser(&expandvars(path, env), env)
}

/// `os.path.expandvars`: `$name` and `${name}` (name `[A-Za-z0-9_]+`, or anything but `}`
/// in braces) replaced when set, left as they are otherwise.
pub(super) fn expandvars(path: &[u8], env: &Env) -> Vec<u8> {
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
pub(super) fn expanduser(path: &[u8], env: &Env) -> Vec<u8> {
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
pub(super) fn expandpath(path: &[u8], env: &Env) -> Vec<u8> {
    expanduser(&expandvars(path, env), env)
}

/// `os.path.dirname`.
pub(super) fn dirname(path: &[u8]) -> &[u8] {
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

pub(super) fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

pub(super) struct Passwd {
    name: Vec<u8>,
    dir: Vec<u8>,
}

pub(super) fn passwd_from(pw: &libc::passwd) -> Passwd {
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

pub(super) fn passwd_by_uid(uid: u32) -> Option<Passwd> {
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: zeroed passwd is valid; getpwuid_r writes into pw and buf, both ours.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut result) };
    (rc == 0 && !result.is_null()).then(|| passwd_from(&pw))
}

pub(super) fn passwd_by_name(name: &[u8]) -> Option<Passwd> {
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
pub(super) fn user_name(uid: u32) -> Vec<u8> {
    passwd_by_uid(uid).map_or_else(|| uid.to_string().into_bytes(), |p| p.name)
}

/// hg's `util.groupname(gid)`: the group name, or the number.
pub(super) fn group_name(gid: u32) -> Vec<u8> {
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
pub(super) fn getuser(env: &Env) -> Option<Vec<u8>> {
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
pub(super) fn host_by_addr_of(name: &str) -> Option<(String, Vec<String>)> {
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
