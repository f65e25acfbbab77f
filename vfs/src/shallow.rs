//! Gives a shallow repository (one `revfs clone` made, or `hg clone --shallow`) its source
//! of file revisions in this process: the repository's hg configuration (read with hg's
//! rules: `paths.default`, `remotefilelog.cachepath` and `remotefilelog.reponame`) names the
//! server and the cache hg shares, and the store reads through them (store::shallow).
//! Called by the daemon before it opens the repository, and by commands that read it.

use revfs_remote::fetch::HttpFetcher;
use revfs_remote::http::HttpOptions;
use revfs_remote::ssh::{SshFetcher, SshOptions};
use revfs_remote::{PeerOptions, RemoteUrl, Scheme};
use revfs_store::shallow::{Fetcher, ShallowSource, SharedCache};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why a shallow repository's source could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ShallowSetupError {
    #[error(transparent)]
    Config(#[from] revfs_hg::config::ConfigError),
    #[error("{}: remotefilelog.cachepath is not set (a repository cloned from a server needs its cache)", .0.display())]
    NoCache(PathBuf),
    #[error(transparent)]
    Url(#[from] revfs_remote::UrlError),
    /// hg's `[hostsecurity]` or `web.cacerts` refused (`abort: ...`, with hg's hint).
    #[error("{0}")]
    Tls(#[from] revfs_hg::config::HostSecurityError),
}

fn path_of(v: &[u8], env: &revfs_hg::config::Env) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(&revfs_hg::config::expand_path(
        v, env,
    )))
}

/// Where a shallow repository's file revisions come from, as its hg configuration says.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `paths.default`: the server (none: the cache only).
    pub server: Option<RemoteUrl>,
    /// `remotefilelog.cachepath`, expanded.
    pub cachepath: PathBuf,
    /// `remotefilelog.reponame`.
    pub reponame: String,
    /// hg's TLS settings for an `https://` server's host.
    pub tls: Option<revfs_hg::config::HostSecurity>,
    /// `ui.ssh`, `ui.remotecmd` and `[sshenv]`: how an `ssh://` server is reached.
    pub ssh: SshOptions,
}

/// hg's ssh settings (`ui.ssh`, `ui.remotecmd`, `[sshenv]`) from `config`, with hg's
/// defaults; timeouts and stderr as [`SshOptions::default`] says.
pub fn ssh_options(config: &revfs_hg::config::Config) -> SshOptions {
    let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
    let d = SshOptions::default();
    SshOptions {
        ssh: config.get("ui", "ssh").map_or(d.ssh, text),
        remotecmd: config.get("ui", "remotecmd").map_or(d.remotecmd, text),
        env: config
            .items("sshenv")
            .into_iter()
            .map(|(k, v)| (text(k), text(v)))
            .collect(),
        ..d
    }
}

/// The settings of the shallow repository at `root` (`Repo::is_shallow`).
pub fn settings(root: &Path) -> Result<Settings, ShallowSetupError> {
    let env = revfs_hg::config::Env::from_process();
    let config = revfs_hg::config::Config::load_env(&env, Some(root))?;
    let cachepath = config
        .get("remotefilelog", "cachepath")
        .map(|v| path_of(v, &env))
        .ok_or_else(|| ShallowSetupError::NoCache(root.to_owned()))?;
    let reponame = String::from_utf8_lossy(config.get("remotefilelog", "reponame").unwrap_or(b""))
        .into_owned();
    let server = match config.get("paths", "default") {
        None => None,
        Some(url) => Some(with_auth(
            &config,
            &env,
            RemoteUrl::parse(&String::from_utf8_lossy(url))?,
        )),
    };
    let tls = match &server {
        Some(url) => tls_for(&config, &env, url)?,
        None => None,
    };
    Ok(Settings {
        server,
        cachepath,
        reponame,
        tls,
        ssh: ssh_options(&config),
    })
}

/// hg's TLS settings (`[hostsecurity]`, `[hostfingerprints]`, `web.cacerts`) for `url`'s
/// host when it is an `https://` address; hg's abort when they are wrong.
pub fn tls_for(
    config: &revfs_hg::config::Config,
    env: &revfs_hg::config::Env,
    url: &RemoteUrl,
) -> Result<Option<revfs_hg::config::HostSecurity>, revfs_hg::config::HostSecurityError> {
    if url.scheme != Scheme::Https {
        return Ok(None);
    }
    revfs_hg::config::host_security(config, env, &url.host).map(Some)
}

/// `url` with the credentials hg's `[auth]` section gives it, when it has no password of
/// its own (as hg's HTTP peer: `httpconnection.readauthforuri`).
pub fn with_auth(
    config: &revfs_hg::config::Config,
    env: &revfs_hg::config::Env,
    mut url: RemoteUrl,
) -> RemoteUrl {
    if url.password().is_some() || !matches!(url.scheme, Scheme::Http | Scheme::Https) {
        return url;
    }
    let user = url.user.clone();
    if let Some(a) = revfs_hg::config::auth_for(
        config,
        env,
        &url.without_auth(),
        user.as_deref().map(str::as_bytes),
    ) {
        if let Some(u) = a.username {
            url.user = Some(String::from_utf8_lossy(&u).into_owned());
        }
        if let Some(p) = a.password {
            url.set_password(Some(String::from_utf8_lossy(&p).into_owned()));
        }
    }
    url
}

/// The options of requests to a shallow repository's server, each bounded by `timeout`.
pub fn peer_options(settings: &Settings, timeout: Duration) -> PeerOptions {
    PeerOptions {
        http: HttpOptions {
            connect_timeout: timeout,
            request_timeout: Some(timeout),
            tls: settings.tls.clone(),
        },
        ssh: SshOptions {
            connect_timeout: timeout,
            request_timeout: Some(timeout),
            ..settings.ssh.clone()
        },
    }
}

/// Registers the source of shallow repository `repo` (`Repo::is_shallow`), whose every
/// request to its server `timeout` bounds: every handle this process opens on its store
/// reads through it.
pub fn attach(repo: &revfs_store::Repo, timeout: Duration) -> Result<(), ShallowSetupError> {
    let settings = settings(repo.root())?;
    let opts = peer_options(&settings, timeout);
    let fetcher: Option<Arc<dyn Fetcher>> = match &settings.server {
        None => None,
        Some(url) => match url.scheme {
            Scheme::Http | Scheme::Https => {
                Some(Arc::new(HttpFetcher::new(url.clone(), opts.http)))
            }
            Scheme::Ssh | Scheme::Local => Some(Arc::new(SshFetcher::new(url.clone(), opts.ssh))),
        },
    };
    let cache = SharedCache::new(&settings.cachepath, &settings.reponame);
    let store = repo.store_path();
    let source = ShallowSource::new(store, cache, fetcher);
    revfs_store::shallow::source::register(store, Arc::new(source));
    Ok(())
}

/// Whether the repository at `root` was cloned from a server (its requirements name
/// remotefilelog's), read from its requirement files alone.
pub fn is_shallow_repo(root: &Path) -> bool {
    ["requires", "store/requires"].iter().any(|f| {
        std::fs::read_to_string(root.join(".hg").join(f)).is_ok_and(|t| {
            t.lines()
                .any(|l| l.trim() == revfs_store::shallow::REQUIREMENT)
        })
    })
}

/// The server the repository at `root` fetches file revisions from, when it was cloned
/// from one and says which (`paths.default`).
pub fn server_of(root: &Path) -> Option<RemoteUrl> {
    if !is_shallow_repo(root) {
        return None;
    }
    settings(root).ok()?.server
}
