//! The user's revfs configuration: `~/.config/revfs/config.toml`.
//!
//! One TOML file, read by `revfs mount` and by the mount daemon (and checked by
//! `revfs doctor`). Where it is, in order:
//!
//! * `REVFS_CONFIG`: the file it names (it must exist); set but empty, no file at all;
//! * `$XDG_CONFIG_HOME/revfs/config.toml` when `XDG_CONFIG_HOME` is an absolute path;
//! * `~/.config/revfs/config.toml`.
//!
//! A missing file (other than one named by `REVFS_CONFIG`) means the defaults. The schema
//! (version 1, every key optional, documented in docs/CONFIG.md):
//!
//! ```toml
//! version = 1
//!
//! [store]
//! text_cache_size = "64 MiB"   # bytes of rebuilt revision texts kept in memory
//! open_filelogs = 1024         # filelogs kept open
//! filelog_cache_size = "16 MiB" # memory the open filelogs may hold
//! big_text_cache_size = "2 GiB" # rebuilt big texts kept on disk, per mount
//! manifest_cache_size = "1 GiB" # full manifests kept in the repository's .hg/cache
//! size_cache_size = "64 MiB"   # file sizes kept in the repository's .hg/cache
//!
//! [mount]
//! threads = 8                  # FUSE request threads (`revfs mount --threads` wins)
//! allow_other = false          # let other users in (`--allow-other`/`--no-allow-other` win)
//! open_files = 256             # overlay files a daemon keeps open
//! loaded_files = 200000        # files with an entry kept while the kernel holds them
//! listed_files = 500000        # names in unchanged directory listings kept
//! readahead_threads = 2        # threads reading a directory's files ahead of a reader
//! readahead_size = "32 MiB"    # bytes read ahead and not read yet, at most
//! passthrough = false          # the kernel reads and writes overlay files directly
//! io_uring = true              # requests through io_uring rings (Linux 6.14+, root)
//! # cpu_latency_us = 0         # while requests come, idle CPUs wake within this (unset: off)
//!
//! [log]
//! level = "info"               # the daemon's log level (`REVFS_LOG` wins)
//!
//! [remote]
//! timeout = 10                 # seconds a read waits for the server
//! cache_size = "10 GiB"        # fetched file revisions kept in the shared cache
//! ```
//!
//! Every value is checked when the file is read; an unknown key, a value of the wrong type
//! or out of range, or a newer schema version is an error naming the file and the key.
//! The committer name is not here: it stays where hg looks for it (`.hg/hgrc`, `~/.hgrc`).

use revfs_store::repo::RepoOptions;
use std::path::{Path, PathBuf};

/// The schema version this code reads (the `version` key; 1 when absent).
pub const CONFIG_VERSION: i64 = 1;

/// Default number of FUSE request threads.
pub const DEFAULT_THREADS: usize = 8;
/// The most FUSE request threads a mount may have.
pub const MAX_THREADS: usize = 256;

/// Errors reading the configuration file. Each names the file, and the key when there is one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // (The I/O error is part of the message, not a separate cause: the CLI prints causes.)
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: unknown key '{key}' ({known})", path.display())]
    UnknownKey {
        path: PathBuf,
        key: String,
        /// What is allowed there, for the message.
        known: String,
    },
    #[error("{}: {key}: {message}", path.display())]
    Value {
        path: PathBuf,
        key: String,
        message: String,
    },
}

/// The daemon's log level (`[log] level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    const ALL: [LogLevel; 6] = [
        LogLevel::Off,
        LogLevel::Error,
        LogLevel::Warn,
        LogLevel::Info,
        LogLevel::Debug,
        LogLevel::Trace,
    ];

    /// The level's name, as written in the file and understood by `REVFS_LOG`.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Off => "off",
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }

    fn parse(s: &str) -> Option<LogLevel> {
        Self::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// `[store]`: the repository handles' caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// Bytes of reconstructed revision texts kept in memory (shared by every revlog).
    pub text_cache_size: usize,
    /// Filelogs kept open at once.
    pub open_filelogs: usize,
    /// Bytes of memory the open filelogs may hold.
    pub filelog_cache_size: usize,
    /// Bytes of rebuilt big texts kept on disk, in the mount's state directory.
    pub big_text_cache_size: u64,
    /// Bytes of full manifest texts kept in the repository's cache directory.
    pub manifest_cache_size: u64,
    /// Bytes of file sizes kept in the repository's cache directory.
    pub size_cache_size: u64,
}

/// `[mount]`: defaults of `revfs mount`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountConfig {
    /// FUSE request threads.
    pub threads: usize,
    /// Let other users access mounts (FUSE `allow_other`).
    pub allow_other: bool,
    /// Overlay files (files written through the mount) a daemon keeps open at once.
    pub open_files: usize,
    /// Unchanged files whose entries a daemon keeps while the kernel still holds them;
    /// past it, the oldest are dropped from the kernel's cache (and then frozen).
    pub loaded_files: usize,
    /// Names in unchanged directory listings kept before the oldest are dropped.
    pub listed_files: usize,
    /// Threads reading a directory's files ahead of a reader (0: no read-ahead).
    pub readahead_threads: usize,
    /// Bytes of texts read ahead and not read yet, at most (0: no read-ahead).
    pub readahead_size: u64,
    /// Kernel passthrough for files in the overlay (Linux 6.9+, root).
    pub passthrough: bool,
    /// Requests through io_uring rings instead of `/dev/fuse` where the kernel offers it
    /// (Linux 6.14+; the daemon turns the fuse module's `enable_uring` on when root).
    pub io_uring: bool,
    /// While requests come, ask the kernel that idle CPUs wake within this many
    /// microseconds (PM QoS; 0: they poll). `None`: ask nothing (`crate::cpu_latency`).
    pub cpu_latency_us: Option<u32>,
}

/// The default of `mount.readahead_threads`.
pub const DEFAULT_READAHEAD_THREADS: usize = 2;
/// The default of `mount.readahead_size`.
pub const DEFAULT_READAHEAD_SIZE: u64 = 32 << 20;

/// `[log]`: the daemon's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    pub level: LogLevel,
}

/// `[control]`: how revfs commands talk to a mount's daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlConfig {
    /// How long a command waits for the daemon: to connect, for an answer, and between two
    /// progress lines of a long request. Past it the daemon is taken as not answering.
    pub timeout: std::time::Duration,
}

/// The default of `control.timeout`.
pub const DEFAULT_CONTROL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// `[remote]`: a repository cloned from a server (`revfs clone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteConfig {
    /// How long a read waits for a file's contents from the server before it fails (EIO).
    pub timeout: std::time::Duration,
    /// The most bytes of fetched file revisions the repository's part of the shared cache
    /// holds before the least recently used go.
    pub cache_size: u64,
}

/// The default of `remote.cache_size` (hg's `remotefilelog.cachelimit`, 1000 GB, bounds the
/// cache only when `hg gc` runs).
pub const DEFAULT_REMOTE_CACHE_SIZE: u64 = 10 << 30;

/// The default of `remote.timeout`.
pub const DEFAULT_REMOTE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The effective configuration: the file's values over the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The file these values come from; `None` when there was none (all defaults).
    pub file: Option<PathBuf>,
    pub store: StoreConfig,
    pub mount: MountConfig,
    pub log: LogConfig,
    pub control: ControlConfig,
    pub remote: RemoteConfig,
}

impl Default for Config {
    fn default() -> Self {
        let repo = RepoOptions::default();
        Config {
            file: None,
            store: StoreConfig {
                text_cache_size: repo.text_cache_bytes,
                open_filelogs: repo.open_filelogs,
                filelog_cache_size: repo.filelog_cache_bytes,
                big_text_cache_size: repo.big_text_cache_bytes,
                manifest_cache_size: repo.manifest_cache_bytes,
                size_cache_size: repo.size_cache_bytes,
            },
            mount: MountConfig {
                threads: DEFAULT_THREADS,
                allow_other: false,
                open_files: crate::wc::overlay::DEFAULT_OPEN_FILES,
                loaded_files: crate::wc::DEFAULT_LOADED_FILES,
                listed_files: crate::wc::DEFAULT_LISTED_FILES,
                readahead_threads: DEFAULT_READAHEAD_THREADS,
                readahead_size: DEFAULT_READAHEAD_SIZE,
                passthrough: false,
                io_uring: true,
                cpu_latency_us: None,
            },
            log: LogConfig {
                level: LogLevel::Info,
            },
            control: ControlConfig {
                timeout: DEFAULT_CONTROL_TIMEOUT,
            },
            remote: RemoteConfig {
                timeout: DEFAULT_REMOTE_TIMEOUT,
                cache_size: DEFAULT_REMOTE_CACHE_SIZE,
            },
        }
    }
}

/// Where the configuration file is looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigLocation {
    /// Named by `REVFS_CONFIG`: it must exist.
    Env(PathBuf),
    /// The per-user file; it may be absent.
    User(PathBuf),
    /// `REVFS_CONFIG` is set but empty, or there is no home directory: no file.
    None,
}

impl ConfigLocation {
    /// The location the environment gives.
    pub fn from_env() -> ConfigLocation {
        if let Some(p) = std::env::var_os("REVFS_CONFIG") {
            return if p.is_empty() {
                ConfigLocation::None
            } else {
                ConfigLocation::Env(PathBuf::from(p))
            };
        }
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        let base = xdg.or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        });
        match base {
            Some(b) => ConfigLocation::User(b.join("revfs").join("config.toml")),
            None => ConfigLocation::None,
        }
    }

    /// The file's path, if there is one to look at.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ConfigLocation::Env(p) | ConfigLocation::User(p) => Some(p),
            ConfigLocation::None => None,
        }
    }
}

impl Config {
    /// Reads the configuration from where the environment says (see the module docs).
    pub fn load() -> Result<Config, ConfigError> {
        Self::load_from(&ConfigLocation::from_env())
    }

    /// Reads the configuration at `location`.
    pub fn load_from(location: &ConfigLocation) -> Result<Config, ConfigError> {
        let (path, required) = match location {
            ConfigLocation::Env(p) => (p, true),
            ConfigLocation::User(p) => (p, false),
            ConfigLocation::None => return Ok(Config::default()),
        };
        match std::fs::read(path) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| ConfigError::Syntax {
                    path: path.clone(),
                    line: 1,
                    message: "not valid UTF-8".into(),
                })?;
                Self::parse(&text, path)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                Ok(Config::default())
            }
            Err(error) => Err(ConfigError::Io {
                path: path.clone(),
                error,
            }),
        }
    }

    /// Parses and checks the text of the file at `path` (named in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            line: e.span().map_or(1, |s| {
                1 + text[..s.start.min(text.len())].matches('\n').count()
            }),
            message: e.message().trim().to_owned(),
        })?;
        let mut config = Config {
            file: Some(path.to_owned()),
            ..Config::default()
        };
        let checker = Checker { path };
        // The version first: a newer schema is reported as such, not as unknown keys.
        if let Some(v) = table.get("version") {
            match v.as_integer() {
                Some(CONFIG_VERSION) => {}
                Some(n) => {
                    return Err(checker.value(
                        "version",
                        format!(
                        "version {n} is not supported (this revfs reads version {CONFIG_VERSION})"
                    ),
                    ))
                }
                None => {
                    return Err(checker.value(
                        "version",
                        format!("expected an integer, found {}", describe(v)),
                    ))
                }
            }
        }
        for (section, value) in &table {
            let entries = match section.as_str() {
                "version" => continue,
                "store" | "mount" | "log" | "control" | "remote" => {
                    value.as_table().ok_or_else(|| {
                        checker.value(
                            section,
                            format!("expected a table ([{section}]), found {}", describe(value)),
                        )
                    })?
                }
                _ => {
                    return Err(checker.unknown(
                        section,
                        "known: version, [store], [mount], [log], [control], [remote]".into(),
                    ))
                }
            };
            for (key, v) in entries {
                let full = format!("{section}.{key}");
                match (section.as_str(), key.as_str()) {
                    ("store", "text_cache_size") => {
                        config.store.text_cache_size = checker.size(&full, v)?
                    }
                    ("store", "big_text_cache_size") => {
                        config.store.big_text_cache_size = checker.size(&full, v)? as u64
                    }
                    ("store", "filelog_cache_size") => {
                        config.store.filelog_cache_size = checker.size(&full, v)?
                    }
                    ("store", "size_cache_size") => {
                        config.store.size_cache_size = checker.size(&full, v)? as u64
                    }
                    ("store", "manifest_cache_size") => {
                        config.store.manifest_cache_size = checker.size(&full, v)? as u64
                    }
                    ("store", "open_filelogs") => {
                        config.store.open_filelogs = checker.int(&full, v, 1, 1 << 20)?
                    }
                    ("mount", "threads") => {
                        config.mount.threads = checker.int(&full, v, 1, MAX_THREADS)?
                    }
                    ("mount", "open_files") => {
                        config.mount.open_files = checker.int(&full, v, 16, 1 << 20)?
                    }
                    ("mount", "loaded_files") => {
                        config.mount.loaded_files = checker.int(&full, v, 16, 1 << 30)?
                    }
                    ("mount", "listed_files") => {
                        config.mount.listed_files = checker.int(&full, v, 16, 1 << 30)?
                    }
                    ("mount", "readahead_threads") => {
                        config.mount.readahead_threads = checker.int(&full, v, 0, 64)?
                    }
                    ("mount", "readahead_size") => {
                        config.mount.readahead_size = checker.size(&full, v)? as u64
                    }
                    ("mount", "passthrough") => {
                        config.mount.passthrough = checker.boolean(&full, v)?
                    }
                    ("mount", "io_uring") => config.mount.io_uring = checker.boolean(&full, v)?,
                    ("mount", "cpu_latency_us") => {
                        config.mount.cpu_latency_us =
                            Some(checker.int(&full, v, 0, 1_000_000)? as u32)
                    }
                    ("mount", "allow_other") => {
                        config.mount.allow_other = checker.boolean(&full, v)?
                    }
                    ("log", "level") => {
                        config.log.level =
                            v.as_str().and_then(LogLevel::parse).ok_or_else(|| {
                                checker.value(
                                    &full,
                                    format!(
                                        "expected one of {}, found {}",
                                        LogLevel::ALL
                                            .map(|l| format!("\"{}\"", l.as_str()))
                                            .join(", "),
                                        describe(v)
                                    ),
                                )
                            })?
                    }
                    ("control", "timeout") => config.control.timeout = checker.seconds(&full, v)?,
                    ("remote", "timeout") => config.remote.timeout = checker.seconds(&full, v)?,
                    ("remote", "cache_size") => {
                        config.remote.cache_size = checker.size(&full, v)? as u64
                    }
                    _ => {
                        let known = match section.as_str() {
                            "store" => {
                                "text_cache_size, open_filelogs, filelog_cache_size, big_text_cache_size, manifest_cache_size, size_cache_size"
                            }
                            "mount" => "threads, allow_other, open_files, loaded_files, listed_files, readahead_threads, readahead_size, passthrough, io_uring, cpu_latency_us",
                            "control" => "timeout",
                            "remote" => "timeout, cache_size",
                            _ => "level",
                        };
                        return Err(
                            checker.unknown(&full, format!("known keys in [{section}]: {known}"))
                        );
                    }
                }
            }
        }
        Ok(config)
    }

    /// The repository options these settings give.
    pub fn repo_options(&self) -> RepoOptions {
        RepoOptions {
            text_cache_bytes: self.store.text_cache_size,
            open_filelogs: self.store.open_filelogs,
            filelog_cache_bytes: self.store.filelog_cache_size,
            big_text_cache_bytes: self.store.big_text_cache_size,
            manifest_cache_bytes: self.store.manifest_cache_size,
            size_cache_bytes: self.store.size_cache_size,
        }
    }
}

/// Builds errors about one file.
struct Checker<'a> {
    path: &'a Path,
}

impl Checker<'_> {
    fn value(&self, key: &str, message: String) -> ConfigError {
        ConfigError::Value {
            path: self.path.to_owned(),
            key: key.to_owned(),
            message,
        }
    }

    fn unknown(&self, key: &str, known: String) -> ConfigError {
        ConfigError::UnknownKey {
            path: self.path.to_owned(),
            key: key.to_owned(),
            known,
        }
    }

    fn int(
        &self,
        key: &str,
        v: &toml::Value,
        min: usize,
        max: usize,
    ) -> Result<usize, ConfigError> {
        let bad = || {
            self.value(
                key,
                format!(
                    "expected an integer from {min} to {max}, found {}",
                    describe(v)
                ),
            )
        };
        let n = v.as_integer().ok_or_else(bad)?;
        usize::try_from(n)
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(bad)
    }

    /// A number of seconds, integer or not, from 0.1 to 3600.
    fn boolean(&self, key: &str, v: &toml::Value) -> Result<bool, ConfigError> {
        v.as_bool().ok_or_else(|| {
            self.value(
                key,
                format!("expected true or false, found {}", describe(v)),
            )
        })
    }

    fn seconds(&self, key: &str, v: &toml::Value) -> Result<std::time::Duration, ConfigError> {
        let secs = match v {
            toml::Value::Integer(n) => Some(*n as f64),
            toml::Value::Float(f) => Some(*f),
            _ => None,
        };
        secs.filter(|s| (0.1..=3600.0).contains(s))
            .map(std::time::Duration::from_secs_f64)
            .ok_or_else(|| {
                self.value(
                    key,
                    format!(
                        "expected a number of seconds from 0.1 to 3600, found {}",
                        describe(v)
                    ),
                )
            })
    }

    fn size(&self, key: &str, v: &toml::Value) -> Result<usize, ConfigError> {
        let bad = || {
            self.value(
                key,
                format!(
                    "expected a size in bytes (an integer, or a string such as \"64 MiB\" with unit B, KiB, MiB or GiB), found {}",
                    describe(v)
                ),
            )
        };
        match v {
            toml::Value::Integer(n) => usize::try_from(*n).map_err(|_| bad()),
            toml::Value::String(s) => parse_size(s).ok_or_else(bad),
            _ => Err(bad()),
        }
    }
}

/// `"64 MiB"`, `"512KiB"`, `"1G"`, `"4096"`: a number and an optional binary unit.
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let n: u64 = s[..digits].parse().ok()?;
    let unit = s[digits..].trim();
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return None,
    };
    let bytes = n.checked_mul(1u64 << shift)?;
    usize::try_from(bytes).ok()
}

/// A value as the error messages show it: its TOML text.
fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(_) => "a table".into(),
        toml::Value::Array(_) => "an array".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/home/u/.config/revfs/config.toml"))
    }

    #[test]
    fn an_empty_file_gives_the_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.store.text_cache_size, 64 << 20);
        assert_eq!(c.store.open_filelogs, 1024);
        assert_eq!(c.mount.threads, DEFAULT_THREADS);
        assert!(!c.mount.allow_other);
        assert_eq!(c.mount.cpu_latency_us, None, "no latency asked by default");
        assert_eq!(c.log.level, LogLevel::Info);
        assert_eq!(
            c.file.as_deref(),
            Some(Path::new("/home/u/.config/revfs/config.toml"))
        );
    }

    #[test]
    fn every_key_is_read() {
        let c = parse(
            "version = 1\n[store]\ntext_cache_size = \"128 MiB\"\nopen_filelogs = 10\n\
             [mount]\nthreads = 3\nallow_other = true\ncpu_latency_us = 0\n\
             [log]\nlevel = \"debug\"\n",
        )
        .unwrap();
        assert_eq!(c.mount.cpu_latency_us, Some(0));
        assert_eq!(c.store.text_cache_size, 128 << 20);
        assert_eq!(c.store.open_filelogs, 10);
        assert_eq!(c.mount.threads, 3);
        assert!(c.mount.allow_other);
        assert_eq!(c.log.level, LogLevel::Debug);
        assert_eq!(c.repo_options().text_cache_bytes, 128 << 20);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1KiB"), Some(1024));
        assert_eq!(parse_size(" 2 gib "), Some(2 << 30));
        assert_eq!(parse_size("3M"), Some(3 << 20));
        assert_eq!(parse_size("0"), Some(0));
        for bad in [
            "",
            "MiB",
            "1.5 MiB",
            "12 MB",
            "-1",
            "99999999999999999999 GiB",
        ] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let msg = |t: &str| parse(t).unwrap_err().to_string();
        let f = "/home/u/.config/revfs/config.toml";
        assert_eq!(
            msg("[mount]\nthreds = 4\n"),
            format!(
                "{f}: unknown key 'mount.threds' (known keys in [mount]: threads, allow_other, open_files, loaded_files, listed_files, readahead_threads, readahead_size, passthrough, io_uring, cpu_latency_us)"
            )
        );
        assert_eq!(
            msg("[fuse]\nthreads = 4\n"),
            format!("{f}: unknown key 'fuse' (known: version, [store], [mount], [log], [control], [remote])")
        );
        assert_eq!(
            msg("[control]\ntimeout = 0\n"),
            format!("{f}: control.timeout: expected a number of seconds from 0.1 to 3600, found 0")
        );
        assert_eq!(
            parse("[control]\ntimeout = 2.5\n").unwrap().control.timeout,
            std::time::Duration::from_millis(2500)
        );
        assert_eq!(
            msg("[mount]\nthreads = 0\n"),
            format!("{f}: mount.threads: expected an integer from 1 to 256, found 0")
        );
        assert_eq!(
            msg("[mount]\ncpu_latency_us = -1\n"),
            format!("{f}: mount.cpu_latency_us: expected an integer from 0 to 1000000, found -1")
        );
        assert_eq!(
            msg("[mount]\nthreads = \"many\"\n"),
            format!("{f}: mount.threads: expected an integer from 1 to 256, found \"many\"")
        );
        assert_eq!(
            msg("[log]\nlevel = \"loud\"\n"),
            format!("{f}: log.level: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", found \"loud\"")
        );
        assert!(
            msg("[store]\ntext_cache_size = \"12 MB\"\n").starts_with(&format!(
                "{f}: store.text_cache_size: expected a size in bytes"
            ))
        );
        assert_eq!(
            msg("version = 2\n[whatever]\n"),
            format!("{f}: version: version 2 is not supported (this revfs reads version 1)")
        );
        assert_eq!(
            msg("mount = 3\n"),
            format!("{f}: mount: expected a table ([mount]), found 3")
        );
        assert_eq!(
            msg("[mount]\nallow_other = \"yes\"\n"),
            format!("{f}: mount.allow_other: expected true or false, found \"yes\"")
        );
        let syntax = msg("[mount]\nthreads = = 4\n");
        assert!(syntax.starts_with(&format!("{f}:2: ")), "{syntax}");
    }

    #[test]
    fn locations() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope.toml");
        // A missing per-user file means the defaults; a missing REVFS_CONFIG file is an error.
        assert_eq!(
            Config::load_from(&ConfigLocation::User(missing.clone())).unwrap(),
            Config::default()
        );
        let err = Config::load_from(&ConfigLocation::Env(missing.clone())).unwrap_err();
        assert!(matches!(err, ConfigError::Io { .. }), "{err}");
        assert!(err.to_string().starts_with(&missing.display().to_string()));
        let file = tmp.path().join("c.toml");
        std::fs::write(&file, "[mount]\nthreads = 2\n").unwrap();
        let c = Config::load_from(&ConfigLocation::Env(file.clone())).unwrap();
        assert_eq!((c.mount.threads, c.file), (2, Some(file)));
        assert_eq!(
            Config::load_from(&ConfigLocation::None).unwrap(),
            Config::default()
        );
    }
}
