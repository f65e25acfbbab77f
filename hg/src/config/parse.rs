//! One configuration file as hg's `config.parse` reads it: sections of ordered items with
//! priority levels, continuation lines, comments, `%include` and `%unset`.

use super::env::{dirname, expandpath, strerror, Env};
use super::syntax;
use super::ConfigError;
use crate::paths::{join, normpath};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// One value and hg's priority level for it.
#[derive(Debug, Clone)]
pub(super) struct Item {
    pub(super) key: Vec<u8>,
    pub(super) value: Vec<u8>,
    pub(super) level: i64,
}

/// Sections of ordered items; setting a key moves it to the end, as hg's `sortdict` does.
pub(super) type Sections = BTreeMap<Vec<u8>, Vec<Item>>;

pub(super) fn lookup<'a>(data: &'a Sections, section: &[u8], key: &[u8]) -> Option<&'a Item> {
    data.get(section)?.iter().find(|i| i.key == key)
}

pub(super) fn remove(data: &mut Sections, section: &[u8], key: &[u8]) {
    if let Some(items) = data.get_mut(section) {
        items.retain(|i| i.key != key);
    }
}

pub(super) fn insert(data: &mut Sections, section: &[u8], item: Item) {
    let items = data.entry(section.to_vec()).or_default();
    items.retain(|i| i.key != item.key);
    items.push(item);
}

/// Python's `bytes.splitlines(True)`: lines end at `\n`, `\r\n` or `\r`, endings kept.
pub(super) fn splitlines(data: &[u8]) -> Vec<&[u8]> {
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

pub(super) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What reading one file can fail with: its own I/O error (hg skips some), or a
/// configuration error.
pub(super) enum ReadError {
    Io(std::io::Error),
    Config(ConfigError),
}

/// One file read by `ui.readconfig` (with what it includes): hg's per-file `config`.
#[derive(Default)]
pub(super) struct Layer {
    pub(super) data: Sections,
    pub(super) unset: Vec<(Vec<u8>, Vec<u8>)>,
    pub(super) level: i64,
}

impl Layer {
    /// `config.read`: a new source level, then the file (given, or read here).
    pub(super) fn read(
        &mut self,
        path: &[u8],
        data: Option<Vec<u8>>,
        env: &Env,
    ) -> Result<(), ReadError> {
        self.level += 1;
        let data = match data {
            Some(d) => d,
            None => std::fs::read(OsStr::from_bytes(path)).map_err(ReadError::Io)?,
        };
        self.parse(path, &data, env)
    }

    /// `config.parse`.
    fn parse(&mut self, src: &[u8], data: &[u8], env: &Env) -> Result<(), ReadError> {
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
                if syntax::comment(l) {
                    continue;
                }
                if let Some(text) = syntax::cont(l) {
                    let key = item.clone().unwrap_or_default();
                    let mut v = lookup(&self.data, &section, &key)
                        .map(|i| i.value.clone())
                        .unwrap_or_default();
                    v.push(b'\n');
                    v.extend_from_slice(text);
                    self.set(&section, &key, v);
                    continue;
                }
                item = None;
                cont = false;
            }
            if let Some(file) = syntax::include(l) {
                let expanded = expandpath(file, env);
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
            if syntax::empty(l) {
                continue;
            }
            if let Some(name) = syntax::section(l) {
                section = name.to_vec();
                self.data.entry(section.clone()).or_default();
                continue;
            }
            if let Some((key, value)) = syntax::item(l) {
                let key = key.to_vec();
                self.set(&section, &key, value.to_vec());
                item = Some(key);
                cont = true;
                continue;
            }
            if let Some(name) = syntax::unset(l) {
                let name = name.to_vec();
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

    pub(super) fn set(&mut self, section: &[u8], key: &[u8], value: Vec<u8>) {
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
