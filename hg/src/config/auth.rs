//! hg's `[auth]` section (`httpconnection.readauthforuri`): which group's credentials an
//! HTTP(S) address gets. Groups are `NAME.prefix`, `NAME.username`, `NAME.password`,
//! `NAME.schemes`; the longest prefix that matches the address (without its scheme when
//! the prefix has none, in `schemes`, https by default) wins, and a username given in the
//! address must be the group's, if it names one.

use super::{expand_path, Config, Env};
use std::collections::BTreeMap;

/// The credentials a group gives.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Auth {
    pub username: Option<Vec<u8>>,
    pub password: Option<Vec<u8>>,
}

/// The `[auth]` credentials for `url` (`scheme://host[:port]/path`, without credentials),
/// whose username is `user` when the address names one.
pub fn auth_for(config: &Config, env: &Env, url: &str, user: Option<&[u8]>) -> Option<Auth> {
    let (scheme, hostpath) = url.split_once("://")?;
    let mut groups: BTreeMap<&[u8], BTreeMap<&[u8], Vec<u8>>> = BTreeMap::new();
    for (key, value) in config.items("auth") {
        let Some(dot) = key.iter().rposition(|&b| b == b'.') else {
            continue;
        };
        let (group, setting) = (&key[..dot], &key[dot + 1..]);
        let value = match setting {
            b"username" | b"cert" | b"key" => expand_path(value, env),
            _ => value.to_vec(),
        };
        groups.entry(group).or_default().insert(setting, value);
    }
    let mut best: Option<(usize, bool, Auth)> = None;
    for settings in groups.values() {
        let username = settings.get(&b"username"[..]);
        if let (Some(u), Some(g)) = (user, username) {
            if u != g.as_slice() {
                continue;
            }
        }
        let Some(prefix) = settings.get(&b"prefix"[..]) else {
            continue;
        };
        let prefix = String::from_utf8_lossy(prefix).into_owned();
        let (schemes, prefix) = match prefix.split_once("://") {
            Some((s, rest)) => (vec![s.to_owned()], rest.to_owned()),
            None => (
                String::from_utf8_lossy(settings.get(&b"schemes"[..]).map_or(&b"https"[..], |s| s))
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect(),
                prefix,
            ),
        };
        // A user in the prefix must be the address's; it is not part of the match.
        let prefix = match prefix.split_once('@') {
            Some((u, rest)) if !u.contains('/') => {
                if user != Some(u.as_bytes()) {
                    continue;
                }
                rest.to_owned()
            }
            _ => prefix,
        };
        if !(prefix == "*" || hostpath.starts_with(&prefix)) || !schemes.iter().any(|s| s == scheme)
        {
            continue;
        }
        let len = prefix.len();
        let better = match &best {
            None => true,
            Some((l, has_user, _)) => len > *l || (len == *l && !*has_user && username.is_some()),
        };
        if better {
            let auth = Auth {
                username: username.cloned().or_else(|| user.map(<[u8]>::to_vec)),
                password: settings.get(&b"password"[..]).cloned(),
            };
            best = Some((len, username.is_some(), auth));
        }
    }
    best.map(|(_, _, a)| a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> (Config, Env) {
        crate::config::from_text(text)
    }

    #[test]
    fn the_longest_matching_prefix_of_the_right_scheme_gives_the_credentials() {
        let (c, env) = config(
            "[auth]\nall.prefix = *\nall.username = any\nall.password = p0\n\
             big.prefix = hg.example.com/big\nbig.username = joe\nbig.password = s3cret\n\
             local.prefix = http://127.0.0.1:8000/\nlocal.username = me\nlocal.password = lp\n",
        );
        let got = |url: &str, user: Option<&str>| auth_for(&c, &env, url, user.map(str::as_bytes));
        let a = got("https://hg.example.com/big/sub", None).unwrap();
        assert_eq!(a.username.as_deref(), Some(&b"joe"[..]));
        assert_eq!(a.password.as_deref(), Some(&b"s3cret"[..]));
        // https is the default scheme of a prefix without one.
        assert_eq!(got("http://hg.example.com/big", None), None);
        assert_eq!(
            got("https://other.example.com/", None)
                .unwrap()
                .password
                .unwrap(),
            b"p0"
        );
        assert_eq!(
            got("http://127.0.0.1:8000/r", None)
                .unwrap()
                .password
                .unwrap(),
            b"lp"
        );
        // A user in the address must be the group's, when the group names one.
        assert_eq!(got("https://hg.example.com/big", Some("ann")), None);
        let a = got("https://hg.example.com/big", Some("joe")).unwrap();
        assert_eq!(a.password.as_deref(), Some(&b"s3cret"[..]));
    }
}
