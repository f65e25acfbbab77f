//! `revfs clone URL [DEST]`: a shallow repository of a server's history (changelog and
//! manifests; file revisions come on first read) under revfs's state directory, or at
//! `--repo`, then a mount of it at DEST. The work is revfs_remote::clone's; this module
//! chooses the places, prints what hg's clone prints and mounts.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use revfs_remote::clone::{CloneError, CloneOptions};
use revfs_remote::http::HttpOptions;
use revfs_remote::{Peer, PeerOptions, RemoteUrl, Scheme};
use revfs_store::bundle::Progress;
use sha1::{Digest, Sha1};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct CloneArgs {
    /// Where the repository goes (default: under revfs's state directory)
    #[arg(long = "repo", value_name = "PATH")]
    repo: Option<PathBuf>,
    /// Make the repository only; mount nothing
    #[arg(short = 'U', long = "noupdate")]
    noupdate: bool,
    /// The ssh command to use (hg's ui.ssh)
    #[arg(short = 'e', long = "ssh", value_name = "CMD")]
    ssh: Option<String>,
    /// The hg command to run on the server (hg's ui.remotecmd)
    #[arg(long = "remotecmd", value_name = "CMD")]
    remotecmd: Option<String>,
    /// The server: http://, https://, ssh://, or a local path
    source: String,
    /// Where to mount the working copy (default: the last part of the URL's path)
    dest: Option<PathBuf>,
}

/// remotefilelog's `cachepath` from the user's configuration, else revfs's own
/// (`<state root>/cache`), so that hg and revfs share one cache.
fn cachepath(config: &revfs_hg::config::Config) -> Result<PathBuf> {
    if let Some(p) = config.get("remotefilelog", "cachepath") {
        let env = revfs_hg::config::Env::from_process();
        let expanded = revfs_hg::config::expand_path(p, &env);
        use std::os::unix::ffi::OsStrExt;
        return Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&expanded)));
    }
    Ok(revfs_vfs::service::state::state_root()?.join("cache"))
}

/// A name for the repository's part of the cache and its directory: the URL's last path
/// part, made safe.
fn repo_name(url: &RemoteUrl) -> String {
    let name: String = url
        .default_dest()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match name.trim_start_matches('.') {
        "" => "repo".to_owned(),
        n => n.to_owned(),
    }
}

fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_owned()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// The compression engines the hg on the PATH can use (`hg debuginstall`'s available
/// ones), which must read the repository in the mount; `None` when there is no hg to ask.
fn hg_engines() -> Option<Vec<String>> {
    let out = std::process::Command::new("hg")
        .args(["debuginstall", "-T", "{compenginesavail}"])
        .env("HGPLAIN", "1")
        .env("HGRCPATH", "")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    // debuginstall exits 1 for a problem of its own (no user name, say): the list is there.
    let text = String::from_utf8_lossy(&out.stdout);
    let list: Vec<String> = text
        .split(',')
        .map(|e| e.trim().to_owned())
        .filter(|e| !e.is_empty())
        .collect();
    (!list.is_empty()).then_some(list)
}

/// The engine of the new repository's revlogs: hg's choice (`format.revlog-compression`)
/// among the engines revfs and the hg on the PATH both have.
fn compression(
    config: &revfs_hg::config::Config,
    hg: Option<Vec<String>>,
) -> Result<revfs_store::revlog_writer::Compression> {
    use revfs_store::revlog_writer::Compression;
    let engine = revfs_hg::newrepo::revlog_compression(config, |e| {
        hg.as_ref().is_none_or(|have| have.iter().any(|h| h == e))
    })
    .map_err(|e| anyhow!("{e}\n({})", e.hint()))?;
    Ok(match engine {
        "zstd" => Compression::Zstd,
        "none" => Compression::None,
        _ => Compression::Zlib,
    })
}

pub fn clone(args: &CloneArgs) -> Result<u8> {
    // What the hg on the PATH can read, asked while the clone starts (about 0.2 s).
    let engines = std::thread::spawn(hg_engines);
    let mut url = RemoteUrl::parse(&args.source)?;
    if url.scheme == Scheme::Local {
        // A repository on this machine: recorded by its absolute path, as hg's clone does.
        let path = absolute(Path::new(&url.path))?;
        if !path.join(".hg").is_dir() {
            bail!("repository {} not found", path.display());
        }
        url = RemoteUrl::parse(&path.to_string_lossy())?;
    }
    let config = revfs_hg::config::Config::load(None)?;
    let dest = absolute(
        args.dest
            .as_deref()
            .unwrap_or(Path::new(&url.default_dest())),
    )?;
    let name = repo_name(&url);
    let repo = match &args.repo {
        Some(r) => absolute(r)?,
        None => {
            use std::os::unix::ffi::OsStrExt;
            let key = hex::encode(&Sha1::digest(dest.as_os_str().as_bytes())[..6]);
            revfs_vfs::service::state::state_root()?
                .join("repos")
                .join(format!("{name}-{key}"))
        }
    };
    if args.repo.is_none() && repo.exists() {
        bail!(
            "the repository revfs cloned for {} is still in {}\n(mount it: revfs mount {} {}; \
             or remove it with its working copy: revfs discard --remove-repo {})",
            dest.display(),
            repo.display(),
            repo.display(),
            dest.display(),
            dest.display()
        );
    }
    if !args.noupdate && dest.exists() && std::fs::read_dir(&dest)?.next().is_some() {
        bail!("destination '{}' is not empty", dest.display());
    }
    let default_path = Some(url.for_config());
    // The credentials hg's [auth] gives the address, for this clone's requests (the
    // daemon's fetches find them there too).
    let env = revfs_hg::config::Env::from_process();
    let url = revfs_vfs::shallow::with_auth(&config, &env, url);
    let mut ssh = revfs_vfs::shallow::ssh_options(&config);
    ssh.forward_stderr = true;
    if let Some(c) = &args.ssh {
        ssh.ssh = c.clone();
    }
    if let Some(c) = &args.remotecmd {
        ssh.remotecmd = c.clone();
    }
    let tls = revfs_vfs::shallow::tls_for(&config, &env, &url).map_err(|e| match e.hint() {
        Some(h) => anyhow!("{e}\n({h})"),
        None => anyhow!(e),
    })?;
    for w in tls.iter().flat_map(|t| &t.warnings) {
        eprintln!("{w}");
    }
    let peer_opts = PeerOptions {
        http: HttpOptions {
            tls,
            ..HttpOptions::default()
        },
        ssh,
    };
    let peer = Peer::open(&url, &peer_opts).map_err(with_hint)?;
    let opts = CloneOptions {
        cachepath: cachepath(&config)?,
        reponame: name,
        default_path,
        compression: compression(&config, engines.join().unwrap_or(None))?,
    };
    println!("requesting all changes");
    let mut bar = crate::progress::Progress::new(crate::progress::wanted(false, None));
    revfs_vfs::client::Progress::start(&mut bar, "cloning");
    let mut phase = 0;
    let mut report = |p: Progress<'_>| {
        use revfs_vfs::client::Progress as _;
        let (now, what, done) = match p {
            Progress::Changesets(n) => (1, "changesets", n),
            Progress::Manifests(n) => (2, "manifests", n),
            Progress::Files { done, .. } => (3, "files", done),
        };
        if now != phase {
            phase = now;
            println!(
                "{}",
                [
                    "",
                    "adding changesets",
                    "adding manifests",
                    "adding file changes"
                ][now]
            );
        }
        bar.update(&format!("{what} {done}"), done as u64, 0);
    };
    let cloned =
        revfs_remote::clone::clone(&peer, &repo, &opts, &mut report).map_err(|e| match e {
            CloneError::Remote(r) => with_hint(r),
            other => anyhow!(other),
        })?;
    drop(bar);
    let a = cloned.applied;
    if a.changesets == 0 {
        println!("no changes found");
    } else {
        println!(
            "added {} changesets with {} changes to {} files",
            a.changesets, a.file_revisions, a.files
        );
        if let (Some(first), Some(last)) = (cloned.first, cloned.last) {
            let (f, l) = (&first.to_hex()[..12], &last.to_hex()[..12]);
            if f == l {
                println!("new changesets {f}");
            } else {
                println!("new changesets {f}:{l}");
            }
        }
    }
    println!("repository in {}", repo.display());
    if args.noupdate {
        return Ok(0);
    }
    std::fs::create_dir_all(&dest)?;
    super::mount::mount_fresh(&repo, &dest)
}

/// A remote error with hg's hint line, when it has one.
fn with_hint(e: revfs_remote::RemoteError) -> anyhow::Error {
    match e.hint() {
        Some(h) => anyhow!("{e}\n({h})"),
        None => anyhow!(e),
    }
}
