//! What the daemon does before it serves: its settings logged and its descriptor limit
//! raised, the working copy opened (and a kept one taken to the requested parent), the
//! FUSE session's options.

use super::*;

/// Logs to the mount's log file, applies the cache sizes to every repository handle of the
/// process, logs the settings in effect and raises the descriptor limit.
pub(super) fn log_settings(req: &MountRequest, state_dir: &StateDir) -> Result<(), DaemonError> {
    let log_filter = init_logging(&state_dir.log_file(), req.config.log.level)?;
    // Every repository handle of this process (the ones reopened after a commit or an
    // update too) gets the configured cache sizes.
    let options = req.config.repo_options();
    RepoOptions::set_process_default(options);
    let config_file = match &req.config.file {
        Some(p) => p.display().to_string(),
        None => "none".to_owned(),
    };
    tracing::info!(
        config = %config_file,
        threads = req.threads.max(1),
        allow_other = req.allow_other,
        text_cache_size = options.text_cache_bytes,
        open_filelogs = options.open_filelogs,
        filelog_cache_size = options.filelog_cache_bytes,
        manifest_cache_size = options.manifest_cache_bytes,
        size_cache_size = options.size_cache_bytes,
        open_files = req.config.mount.open_files,
        loaded_files = req.config.mount.loaded_files,
        listed_files = req.config.mount.listed_files,
        readahead_threads = req.config.mount.readahead_threads,
        readahead_size = req.config.mount.readahead_size,
        passthrough = req.config.mount.passthrough,
        io_uring = req.config.mount.io_uring,
        log = %log_filter,
        "settings"
    );
    match raise_descriptor_limit() {
        Ok((was, soft, hard)) => {
            tracing::info!(soft_limit = soft, hard_limit = hard, was, "descriptors")
        }
        Err(e) => tracing::warn!("the descriptor limit cannot be read or raised: {e}"),
    }
    Ok(())
}

/// Opens the working copy the mount serves, at the requested parent, and the state it
/// starts from.
pub(super) fn open_working_copy(
    req: &MountRequest,
    state_dir: &StateDir,
) -> Result<(Arc<WorkingCopy>, MountState), DaemonError> {
    // A working copy kept here at another parent goes to the requested one as `update`
    // would take it there: opened at its own parent, then updated (the command checked that
    // it has no uncommitted changes; an update keeps unknown and ignored files).
    let kept_parent = match state_dir.load()? {
        Some(saved) if saved.repo == req.repo => {
            state_dir.journal_parent()?.filter(|p| *p != req.node)
        }
        _ => None,
    };
    let open_at = kept_parent.unwrap_or(req.node);
    let mut state = prepare_state(
        state_dir,
        &MountRequest {
            node: open_at,
            ..req.clone()
        },
    )?;
    let repo = Arc::new(Repo::open(&req.repo)?);
    // A repository cloned from a server reads file revisions through its cache and server.
    if repo.is_shallow() {
        crate::shallow::attach(&repo, req.config.remote.timeout)?;
        tracing::info!(timeout = ?req.config.remote.timeout, cache_size = req.config.remote.cache_size, "file revisions from the repository's server");
    }
    // The base manifest: mapped from the repository's manifest cache when an earlier mount
    // or commit at this revision wrote it there (a mount then reads only the pages it needs),
    // else rebuilt into a new cache file and mapped from it (kept in the background).
    let manifest_node = repo
        .manifest_node_at(&open_at)?
        .ok_or_else(|| DaemonError::UnknownNode(open_at.to_hex()))?;
    let t0 = std::time::Instant::now();
    let (manifest, new_file) = repo.kept_manifest(&manifest_node)?;
    tracing::info!(
        node = %manifest_node.to_hex(),
        mapped = manifest.text().is_mapped(),
        rebuilt = new_file.is_some(),
        bytes = manifest.text().len(),
        elapsed = ?t0.elapsed(),
        "base manifest"
    );
    let checkout_time = UNIX_EPOCH + Duration::from_secs(state.checkout_time.max(0) as u64);
    let wc = Arc::new(WorkingCopy::open(
        repo.clone(),
        open_at,
        manifest,
        state_dir.path(),
        checkout_time,
        req.config.mount.open_files,
    )?);
    wc.set_root_path(req.mountpoint.clone());
    if let Some(source) = revfs_store::shallow::source::registered(repo.store_path()) {
        source.bound_cache(req.config.remote.cache_size, keep_for(&wc));
        // Small packs an earlier daemon (or hg) left are merged once things are quiet.
        source.cache().merge_packs_when_quiet();
    }
    wc.set_loaded_files(req.config.mount.loaded_files);
    wc.set_listed_files(req.config.mount.listed_files);
    wc.start_readahead(
        req.config.mount.readahead_threads,
        req.config.mount.readahead_size,
    );
    match new_file {
        // Checked against its node as it was written.
        Some(file) => file.keep_in_background(),
        None => wc.verify_base_in_background(),
    }
    wc.map_base_in_background();
    if kept_parent.is_some() {
        if repo.changelog().rev_of(&req.node).is_none() && !req.node.is_null() {
            return Err(DaemonError::UnknownNode(req.node.to_hex()));
        }
        match wc.update(repo.clone(), req.node, false, None) {
            Ok(outcome) => {
                tracing::info!(from = %open_at.to_hex(), node = %req.node.to_hex(), updated = outcome.updated, removed = outcome.removed, "kept working copy updated");
                wc.map_base_in_background();
                state.node = req.node.to_hex();
                state_dir.save(&state)?;
            }
            Err(WcError::UncommittedChanges(paths) | WcError::UntrackedDiffers(paths)) => {
                return Err(DaemonError::Switch {
                    mountpoint: req.mountpoint.clone(),
                    paths: paths
                        .iter()
                        .map(|p| String::from_utf8_lossy(p).into_owned())
                        .collect(),
                })
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((wc, state))
}

/// The FUSE session's options, and whether io_uring could be prepared.
pub(super) fn session_config(req: &MountRequest) -> (Config, Result<(), String>) {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("revfs:{}", req.repo.display())),
        MountOption::Subtype("revfs".into()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    config.acl = if req.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(req.threads.max(1));
    config.clone_fd = true;
    let uring_prepared = crate::fuse::uring::prepare(req.config.mount.io_uring);
    config.io_uring = uring_prepared.is_ok();
    config.io_uring_threads = crate::fuse::uring::THREADS_PER_CPU;
    (config, uring_prepared)
}

/// What the bounded cache of a repository cloned from a server keeps for working copy `wc`:
/// the parent's revisions of the paths it changed (and of copy sources), so that status,
/// diff, revert and commit read them with the server gone.
fn keep_for(wc: &Arc<WorkingCopy>) -> revfs_store::shallow::source::KeepFn {
    let weak = Arc::downgrade(wc);
    Box::new(move || {
        let Some(wc) = weak.upgrade() else {
            return Vec::new();
        };
        let paths = match wc.changed_paths() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("the cache keeps no changed file's parent: {e}");
                return Vec::new();
            }
        };
        let base = wc.base_manifest();
        paths
            .into_iter()
            .filter_map(|p| {
                let node = base.find(&p).ok().flatten()?.node;
                Some((p, node))
            })
            .collect()
    })
}
