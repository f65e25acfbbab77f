//! `revfs doctor`'s look at a repository: its requirements, an abandoned transaction, and
//! locks whose holder is gone.

use super::*;

/// The holder of a lock (`host:pid`, a symlink's target or a file's content).
fn lock_holder(path: &Path) -> Option<String> {
    if let Ok(t) = std::fs::read_link(path) {
        return Some(t.to_string_lossy().into_owned());
    }
    std::fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// What holds a lock: `Some(true)` a live process here, `Some(false)` a dead one here,
/// `None` a process this host cannot check.
fn holder_alive(holder: &str) -> Option<(bool, u32)> {
    let (host, pid) = holder.rsplit_once(':')?;
    let pid: u32 = pid.parse().ok()?;
    (host == lock_prefix()).then(|| (Path::new("/proc").join(pid.to_string()).exists(), pid))
}

pub(super) fn check_repo(r: &mut Report, root: &Path, mounts: &[PathBuf]) {
    r.check(&format!("repository {}", root.display()));
    let used_by = if mounts.is_empty() {
        String::new()
    } else {
        format!(
            " (used by {})",
            mounts
                .iter()
                .map(|m| m.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if !root.join(".hg").is_dir() {
        r.problem(
            &format!(
                "{} is not a repository any more (.hg not found){used_by}",
                root.display()
            ),
            "put the repository back where it was, or discard the working copies that use it \
             (revfs doctor MOUNTPOINT shows the state directory to remove)",
        );
        return;
    }
    // The layout only: a transaction cut short may have left the logs half-written.
    let repo = match Repo::open_for_recovery(root) {
        Ok(repo) => repo,
        Err(e) => {
            let fix = match &e {
                StoreError::UnsupportedRequirements(_)
                | StoreError::RequirementsNotImplemented(_) => {
                    "revfs reads the formats listed in docs/FORMATS.md: convert the repository \
                     with `hg debugupgraderepo` (e.g. --config \
                     format.use-persistent-nodemap=no), or use hg on it"
                }
                _ => "check the repository: hg verify",
            };
            // The abort's first line, without its advice: the fix says what to do.
            let text = e.to_string();
            let what = text.lines().next().unwrap_or_default();
            let what = what.strip_suffix(" (use hg instead)").unwrap_or(what);
            r.problem(&format!("{what}{used_by}"), fix);
            return;
        }
    };
    if repo.is_shallow() {
        check_server(r, root);
    }
    let store = repo.store_path().to_owned();
    let store_lock = store.join("lock");
    let store_holder = lock_holder(&store_lock);
    let journal = store.join("journal");
    if journal.exists() {
        match store_holder.as_deref().and_then(holder_alive) {
            Some((true, pid)) => r.note(&format!(
                "a transaction is in progress (process {pid} holds {})",
                store_lock.display()
            )),
            _ => r.problem(
                &format!("abandoned transaction found ({})", journal.display()),
                &format!("run `revfs recover -R {}`, or hg recover", root.display()),
            ),
        }
    }
    for lock in [repo.dot_hg().join("wlock"), store_lock] {
        let Some(holder) = lock_holder(&lock) else {
            continue;
        };
        match holder_alive(&holder) {
            Some((true, pid)) => r.note(&format!(
                "{} is held by process {pid} (a command at work)",
                lock.display()
            )),
            Some((false, pid)) => r.problem(
                &format!("stale lock {} (process {pid} is gone)", lock.display()),
                &format!(
                    "remove it: rm {}; hg and revfs also break it at their next write",
                    lock.display()
                ),
            ),
            None => r.note(&format!(
                "{} is held by {holder}, on another host or in another pid namespace: \
                 cannot tell whether it is stale",
                lock.display()
            )),
        }
    }
}

/// A repository cloned from a server: where its files come from, and whether the server
/// answers now (a read of a file not fetched yet needs it).
fn check_server(r: &mut Report, root: &Path) {
    let settings = match revfs_vfs::shallow::settings(root) {
        Ok(s) => s,
        Err(e) => {
            r.problem(
                &format!("{}: {e}", root.display()),
                "set remotefilelog.cachepath and paths.default in its .hg/hgrc (revfs clone writes them)",
            );
            return;
        }
    };
    let cache = settings.cachepath.join(&settings.reponame);
    let Some(url) = &settings.server else {
        r.problem(
            &format!(
                "file contents come from no server (paths.default is not set; cache {})",
                cache.display()
            ),
            "set paths.default in the repository's .hg/hgrc to the server it was cloned from",
        );
        return;
    };
    r.note(&format!(
        "file contents from {url} (cache {})",
        cache.display()
    ));
    let timeout = revfs_vfs::config::Config::load()
        .map(|c| c.remote.timeout)
        .unwrap_or(revfs_vfs::config::DEFAULT_REMOTE_TIMEOUT);
    let opts = revfs_vfs::shallow::peer_options(&settings, timeout);
    match revfs_remote::Peer::open(url, &opts) {
        Ok(peer) if peer.caps().has("x_rfl_getfile") => r.note("the server answers"),
        Ok(_) => r.problem(
            &format!("{url} does not serve file revisions on demand"),
            "enable remotefilelog on the server: [extensions] remotefilelog= and [remotefilelog] server=True",
        ),
        Err(e) => r.problem(
            &format!("the server does not answer: {e}"),
            "reads of files not fetched yet fail with EIO until it does (the mount's daemon.log says why); files already fetched keep working",
        ),
    }
}
