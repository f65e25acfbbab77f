//! `revfs clone`'s repository: a shallow repository as Mercurial's remotefilelog client
//! makes one (`hg clone --shallow`), holding the server's changelog and manifests and no
//! file revision but `.hgtags`'s. The server is asked with `getbundle` and the bundle2
//! capability `exp-remotefilelog-b2cap-1`, which makes a stock remotefilelog server leave
//! the files out of the changegroup over any transport (hg's own client sends it over ssh
//! only), and `excludepattern=.hgtags` so that tags keep a real filelog, as remotefilelog's
//! documentation asks. The repository's hgrc names the server, the shared cache and the
//! pattern, so that hg itself fetches what it lacks from the same server into the same
//! cache.
//!
//! A clone that fails leaves nothing: the directory it created is removed.

use crate::{Peer, RemoteError, RemoteUrl};
use revfs_store::bundle::{self, BundleError, Progress};
use revfs_store::{Node, Repo, StoreError};
use std::path::{Path, PathBuf};

/// Where the clone keeps file revisions.
#[derive(Debug, Clone)]
pub struct CloneOptions {
    /// remotefilelog's `cachepath`: the cache hg's client and revfs share.
    pub cachepath: PathBuf,
    /// remotefilelog's `reponame`: this repository's part of the cache.
    pub reponame: String,
    /// What the repository's `paths.default` says (the address as given, without its
    /// password); `None`: the peer's address.
    pub default_path: Option<String>,
    /// The engine of the repository's revlogs (hg's `format.revlog-compression`, as the hg
    /// that works in the mount can read).
    pub compression: revfs_store::revlog_writer::Compression,
}

/// What a clone received.
#[derive(Debug, Clone)]
pub struct Cloned {
    pub applied: bundle::Applied,
    /// The new changesets' first and last nodes.
    pub first: Option<Node>,
    pub last: Option<Node>,
}

/// Why a clone failed.
#[derive(Debug, thiserror::Error)]
pub enum CloneError {
    #[error("destination '{}' is not empty", .0.display())]
    NotEmpty(PathBuf),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the server must offer: the getbundle of bundle2 and remotefilelog's file service.
fn check_server(peer: &Peer) -> Result<(), RemoteError> {
    let caps = peer.caps();
    if !caps.has("getbundle") || !caps.has("bundle2") {
        return Err(RemoteError::Unsupported {
            message: format!("{} is too old a Mercurial server (no bundle2)", peer.url()),
            hint: "revfs needs Mercurial 4.7 or later on the server".into(),
        });
    }
    if !caps.has("x_rfl_getfile") {
        return Err(RemoteError::Unsupported {
            message: format!("{} does not serve file revisions on demand", peer.url()),
            hint: "enable remotefilelog on the server: [extensions] remotefilelog= and \
                   [remotefilelog] server=True in its hgrc"
                .into(),
        });
    }
    Ok(())
}

/// The repository's `.hg/hgrc`.
fn hgrc(url: &RemoteUrl, opts: &CloneOptions) -> String {
    let default = opts
        .default_path
        .clone()
        .unwrap_or_else(|| url.for_config());
    format!(
        "# written by revfs clone: hg fetches file revisions from the same server into the\n\
         # same cache as revfs (see revfs's USER_GUIDE, \"A working copy from a server\")\n\
         [paths]\ndefault = {}\n\n[extensions]\nremotefilelog =\n\n[remotefilelog]\n\
         reponame = {}\ncachepath = {}\nexcludepattern = .hgtags\n",
        default,
        opts.reponame,
        opts.cachepath.display()
    )
}

/// remotefilelog's `constants.BUNDLE2_CAPABLITY`: a server leaves the files it matches out
/// of a changegroup.
const BUNDLE2_CAPABILITY: &str = "exp-remotefilelog-b2cap-1";

/// The `bundlecaps` of the clone's getbundle: bundle2 with changegroups 01 and 02, and no
/// file revision but `.hgtags`'s.
fn bundlecaps() -> String {
    format!(
        "HG20,bundle2={},{},excludepattern=.hgtags",
        crate::wire::quote(b"HG20\nchangegroup=01,02", b"/"),
        BUNDLE2_CAPABILITY
    )
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CloneError + '_ {
    move |source| CloneError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Clones the server at `peer` into a new shallow repository at `dest` (a missing or
/// empty directory). `progress` sees the changegroup being applied.
pub fn clone(
    peer: &Peer,
    dest: &Path,
    opts: &CloneOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Cloned, CloneError> {
    check_server(peer)?;
    let created = match std::fs::read_dir(dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(CloneError::NotEmpty(dest.to_owned()));
            }
            false
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(io(dest)(e)),
    };
    let result = clone_into(peer, dest, opts, progress);
    if result.is_err() {
        // Nothing of a failed clone stays: what this clone made goes.
        if created {
            let _ = std::fs::remove_dir_all(dest);
        } else if let Ok(entries) = std::fs::read_dir(dest) {
            for e in entries.flatten() {
                let _ =
                    std::fs::remove_dir_all(e.path()).or_else(|_| std::fs::remove_file(e.path()));
            }
        }
    }
    result
}

fn clone_into(
    peer: &Peer,
    dest: &Path,
    opts: &CloneOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Cloned, CloneError> {
    revfs_store::commit::init_with(dest, opts.compression)?;
    let store_requires = dest.join(".hg/store/requires");
    let mut reqs = std::fs::read_to_string(&store_requires).map_err(io(&store_requires))?;
    let mut lines: Vec<&str> = reqs.lines().collect();
    lines.push(revfs_store::shallow::REQUIREMENT);
    lines.sort_unstable();
    reqs = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&store_requires, reqs).map_err(io(&store_requires))?;
    let rc = dest.join(".hg/hgrc");
    std::fs::write(&rc, hgrc(peer.url(), opts)).map_err(io(&rc))?;

    let heads = peer.heads()?;
    let heads_hex: Vec<String> = heads.iter().map(Node::to_hex).collect();
    let heads_arg = heads_hex.join(" ");
    let caps = bundlecaps();
    let common = Node::NULL.to_hex();
    let before = Repo::open(dest)?.changelog().len();
    let got = if heads.is_empty() {
        bundle::Received::default()
    } else {
        let stream = peer.call(
            "getbundle",
            &[
                ("bundlecaps", caps.as_bytes()),
                ("cg", b"1"),
                ("common", common.as_bytes()),
                ("heads", heads_arg.as_bytes()),
                ("listkeys", b"phases,bookmarks"),
            ],
        )?;
        bundle::unbundle(dest, stream, progress)?
    };
    let repo = Repo::open(dest)?;
    let cl = repo.changelog();
    let node_at = |r: usize| cl.node(r as revfs_store::Rev).ok();
    let cloned = Cloned {
        applied: got.applied,
        first: (cl.len() > before).then(|| node_at(before)).flatten(),
        last: (cl.len() > before).then(|| node_at(cl.len() - 1)).flatten(),
    };
    // Phases: everything is public from a publishing server; otherwise its draft roots.
    let phases = got.keys("phases");
    let publishing = phases
        .iter()
        .any(|(k, v)| k == b"publishing" && v.eq_ignore_ascii_case(b"true"));
    if !publishing {
        let mut text = String::new();
        for (k, v) in phases {
            if v == b"1" {
                if let Some(n) = Node::from_hex(k).filter(|n| cl.rev_of(n).is_some()) {
                    text.push_str(&format!("1 {}\n", n.to_hex()));
                }
            }
        }
        if !text.is_empty() {
            let p = repo.store_path().join("phaseroots");
            std::fs::write(&p, text).map_err(io(&p))?;
        }
    }
    let marks = got.keys("bookmarks");
    if !marks.is_empty() {
        let mut bm = revfs_store::bookmarks::Bookmarks::load(&repo)?;
        for (name, hex) in marks {
            if let Some(n) = Node::from_hex(hex).filter(|n| cl.rev_of(n).is_some()) {
                bm.set(name, n);
            }
        }
        bm.write()?;
    }
    Ok(cloned)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bundle_capabilities_ask_for_no_file_but_hgtags() {
        assert_eq!(
            super::bundlecaps(),
            "HG20,bundle2=HG20%0Achangegroup%3D01%2C02,exp-remotefilelog-b2cap-1,excludepattern=.hgtags"
        );
    }
}
