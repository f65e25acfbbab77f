//! `revfs doctor`'s look at mounts and state directories: the kernel's mount table
//! against the state directories, and for each working copy its state, its daemon (does it
//! answer, through its control socket and its filesystem), its journal and, when no
//! daemon holds it, a dry run of its replay on a copy.

use super::*;

/// Checks the mounts the kernel knows and the state directories revfs keeps, and returns
/// their repositories.
pub(super) fn check_mounts(r: &mut Report, only: Option<&Path>, need: u64) -> RepoMounts {
    let mut repos = RepoMounts::new();
    let root = match state_root() {
        Ok(root) => root,
        Err(e) => {
            r.check("state directories");
            r.problem(&e.to_string(), "set HOME, or REVFS_STATE_DIR");
            return repos;
        }
    };
    let table = match revfs_mounts() {
        Ok(t) => t,
        Err(e) => {
            r.check("mount table (/proc/self/mountinfo)");
            r.problem(&format!("{e:#}"), "mount /proc");
            Vec::new()
        }
    };
    // Each state directory we look at, with what we know of its mount.
    let mut dirs: BTreeMap<PathBuf, Target> = BTreeMap::new();
    let mut others = Vec::new();
    match only {
        Some(arg) => {
            let mp = match mountpoint_path(arg) {
                Ok(mp) => mp,
                Err(e) => {
                    r.check(&format!("mount {}", arg.display()));
                    r.problem(&format!("{}: {e:#}", arg.display()), "check the path");
                    return repos;
                }
            };
            let Ok(sd) = StateDir::for_mountpoint(&mp) else {
                return repos;
            };
            let km = table.iter().find(|m| m.mountpoint == mp);
            let source = km.map(|m| m.source.clone());
            if source.is_none() && !sd.path().exists() {
                r.check(&format!("mount {}", mp.display()));
                r.problem(
                    &format!(
                        "{} is not a revfs mount, and revfs keeps no state for it under {}",
                        mp.display(),
                        root.display()
                    ),
                    &format!("mount it: revfs mount REPO {}", mp.display()),
                );
                return repos;
            }
            dirs.insert(
                sd.path().to_owned(),
                Target {
                    mounted: source.is_some(),
                    mountpoint: Some(mp),
                    source,
                    conn: km.and_then(|m| m.conn),
                },
            );
        }
        None => {
            r.check(&format!("state directories ({})", root.display()));
            let mounts_dir = root.join("mounts");
            if let Ok(entries) = std::fs::read_dir(&mounts_dir) {
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        dirs.insert(e.path(), Target::default());
                    }
                }
            }
            for km in &table {
                let (mp, source) = (&km.mountpoint, &km.source);
                match StateDir::for_mountpoint(mp) {
                    Ok(sd) if sd.path().exists() => {
                        dirs.insert(
                            sd.path().to_owned(),
                            Target {
                                mountpoint: Some(mp.clone()),
                                mounted: true,
                                source: Some(source.clone()),
                                conn: km.conn,
                            },
                        );
                    }
                    _ => others.push((mp.clone(), source.clone())),
                }
            }
            if dirs.is_empty() {
                r.note("no mounts");
            }
        }
    }
    for (dir, target) in dirs {
        check_state_dir(r, &StateDir::at(dir), &target, &mut repos, need);
    }
    for (mp, source) in others {
        r.check(&format!("mount {}", mp.display()));
        r.note(&format!(
            "{} ({source}): its state is not under {} (another user's mount, or another \
             REVFS_STATE_DIR): not checked",
            mp.display(),
            root.display()
        ));
    }
    repos
}

/// What the journal of a state directory says, read from a copy.
pub(crate) struct JournalView {
    pub(crate) base: Node,
    pub(crate) records: Vec<Record>,
    /// Bytes the mount would cut off its end (a record cut short by a crash).
    damaged_tail: u64,
    /// The copy, inside a temporary state directory.
    tmp: tempfile::TempDir,
}

/// Reads the journal of `sd` from a copy (the original is not touched; `Journal::open`
/// cuts a damaged tail off the file it opens). `Ok(None)` when there is none.
pub(crate) fn read_journal(sd: &StateDir) -> Result<Option<JournalView>, String> {
    let path = sd.journal_file();
    let base = match Journal::peek_base(&path) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let tmp = tempfile::Builder::new()
        .prefix("revfs-doctor")
        .tempdir()
        .map_err(|e| format!("a temporary directory: {e}"))?;
    let copy = tmp.path().join("journal");
    let len = std::fs::copy(&path, &copy).map_err(|e| format!("{}: {e}", path.display()))?;
    let (journal, records) = Journal::open(&copy, &base).map_err(|e| {
        // Name the real file, not the copy.
        e.to_string()
            .replace(&copy.display().to_string(), &path.display().to_string())
    })?;
    drop(journal);
    let after = std::fs::metadata(&copy).map(|m| m.len()).unwrap_or(len);
    Ok(Some(JournalView {
        base,
        records,
        damaged_tail: len.saturating_sub(after),
        tmp,
    }))
}

/// The overlay id a record names, with its path.
fn overlay_ref(rec: &Record) -> Option<(u64, &[u8])> {
    match rec {
        Record::Create { path, id, .. } | Record::Materialize { path, id } => Some((*id, path)),
        Record::Put {
            path,
            entry: PutEntry::OverlayFile { id },
            ..
        } => Some((*id, path)),
        _ => None,
    }
}

fn overlay_ids(dir: &Path) -> BTreeSet<u64> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| u64::from_str_radix(n, 16).ok())
        })
        .collect()
}

/// A filesystem request served for this long (ms) means the mount does not answer.
const STUCK_REQUEST_MS: u64 = 10_000;

/// What the mount table says of a state directory's mount.
#[derive(Debug, Default)]
struct Target {
    /// The mountpoint, when known before reading `mount.json` (from the mount table or the
    /// command line).
    mountpoint: Option<PathBuf>,
    /// In the mount table.
    mounted: bool,
    /// The mount table's source (`revfs:REPO`).
    source: Option<String>,
    /// The mount's FUSE connection.
    conn: Option<u32>,
}

fn check_state_dir(
    r: &mut Report,
    sd: &StateDir,
    target: &Target,
    repos: &mut RepoMounts,
    need: u64,
) {
    let problems_before = r.problems;
    let dir = sd.path();
    let dir_arg = dir.display().to_string();
    let discard_at = |mp: &Path| {
        format!(
            "discard this working copy and every change in it (its changed files are in \
             {dir_arg}/overlay): revfs discard --force {}",
            mp.display()
        )
    };
    let discard = match &target.mountpoint {
        Some(mp) => discard_at(mp),
        None => format!(
            "discard this working copy, whose changed files are in {dir_arg}/overlay: rm -rf \
             {dir_arg}"
        ),
    };
    let Some(state) = load_state(r, sd, target, &discard) else {
        return;
    };
    let mp = target
        .mountpoint
        .clone()
        .unwrap_or_else(|| state.mountpoint.clone());
    r.check(&format!("mount {} (state {dir_arg})", mp.display()));
    repos
        .entry(state.repo.clone())
        .or_default()
        .push(mp.clone());
    let repo_arg = state.repo.display().to_string();
    let mp_arg = mp.display().to_string();
    let discard = discard_at(&mp);
    // Said after the problems.
    let mut notes = Vec::new();

    check_daemon(r, sd, target, need, &mp_arg, &repo_arg, &mut notes);
    check_journal(r, sd, target, &state, &mp, &discard, problems_before, notes);
}

/// The state directory's `mount.json`, or the problem (or note) of why there is none.
fn load_state(r: &mut Report, sd: &StateDir, target: &Target, discard: &str) -> Option<MountState> {
    let dir_arg = sd.path().display().to_string();
    match sd.load() {
        Ok(Some(s)) => Some(s),
        Ok(None) => {
            r.check(&format!("state {dir_arg}"));
            if !target.mounted {
                r.note(&format!(
                    "no mount.json: a mount that never started; remove it: rm -rf {dir_arg}"
                ));
            }
            None
        }
        Err(e) => {
            let mp = target
                .mountpoint
                .as_ref()
                .map_or_else(|| "MOUNTPOINT".to_owned(), |m| m.display().to_string());
            r.check(&format!("mount {mp} (state {dir_arg})"));
            let fix = match &e {
                StateError::Version { .. } => {
                    format!("another revfs version wrote it: use that one, or {discard}")
                }
                _ => {
                    let file = sd.state_file().display().to_string();
                    let node = Journal::peek_base(&sd.journal_file())
                        .ok()
                        .flatten()
                        .map_or_else(|| "NODE".to_owned(), |n| n.to_hex());
                    let repo = target
                        .source
                        .as_deref()
                        .and_then(|s| s.strip_prefix("revfs:"))
                        .unwrap_or("REPO");
                    let unmount = if target.mounted {
                        format!("revfs unmount {mp}; ")
                    } else {
                        String::new()
                    };
                    format!(
                        "set it aside and mount again at the journal's parent: {unmount}mv \
                         {file} {file}.bad; revfs mount -r {node} {repo} {mp}; or {discard}"
                    )
                }
            };
            r.problem(&e.to_string(), &fix);
            None
        }
    }
}

/// The daemon of a state directory: whether it answers, on its control socket and through
/// its filesystem, and how it serves; or a daemon left running without its mount.
fn check_daemon(
    r: &mut Report,
    sd: &StateDir,
    target: &Target,
    need: u64,
    mp_arg: &str,
    repo_arg: &str,
    notes: &mut Vec<String>,
) {
    let pid = std::fs::read_to_string(sd.pid_file())
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let running = pid.filter(|&p| process_running(p));
    if target.mounted {
        let force = format!(
            "run `revfs unmount --force {mp_arg}`, then `revfs mount {repo_arg} {mp_arg}` \
             resumes the working copy"
        );
        let waiting = target.conn.and_then(mounts::waiting_requests).unwrap_or(0);
        match control::request(&sd.socket(), &Request::Ping, Duration::from_secs(2)) {
            Ok(Response::Pong { pid, busy_ms, busy }) if busy_ms >= STUCK_REQUEST_MS => r.problem(
                &format!(
                    "daemon {pid} answers, but its filesystem does not: a request has \
                         waited {} s ({busy} being served, {waiting} waiting in the kernel)",
                    busy_ms / 1000
                ),
                &force,
            ),
            Ok(Response::Pong { pid, .. }) => {
                notes.push(format!("mounted; daemon {pid} answers"));
                // How the kernel reads and writes files written through the mount.
                if let Ok(Response::Info(info)) =
                    control::request(&sd.socket(), &Request::Info, Duration::from_secs(2))
                {
                    if let Some(mode) = info.requests {
                        notes.push(format!("requests through {mode}"));
                    }
                    if let Some(mode) = info.passthrough {
                        notes.push(format!(
                            "passthrough {mode}{}",
                            if mode == "on" {
                                ": the kernel reads and writes files in the overlay directly"
                            } else {
                                ": files in the overlay are read and written through the daemon"
                            }
                        ));
                    }
                }
                if let Some(kib) = target
                    .conn
                    .and_then(|c| revfs_vfs::fuse::bdi::read_ahead_kib(c).ok())
                {
                    let want = revfs_vfs::fuse::bdi::READ_AHEAD / 1024;
                    notes.push(if kib >= want {
                        format!("read-ahead {kib} KiB")
                    } else {
                        format!(
                            "read-ahead {kib} KiB (the daemon raises it to {want} KiB when it \
                             runs as root: more round trips for a first read of each file)"
                        )
                    });
                }
                check_descriptors(r, pid, need, mp_arg, repo_arg);
            }
            Err(control::ControlError::NotAnswering { .. }) => r.problem(
                &format!(
                    "daemon{} does not answer on its control socket ({waiting} filesystem \
                     requests waiting)",
                    running.map(|p| format!(" {p}")).unwrap_or_default()
                ),
                &force,
            ),
            _ => match running {
                Some(pid) => r.problem(
                    &format!("daemon {pid} does not answer on its control socket"),
                    &force,
                ),
                None => r.problem(
                    "the daemon is gone (killed or crashed): the mount is dead",
                    &force,
                ),
            },
        }
    } else if let Some(pid) = running {
        r.problem(
            &format!("daemon {pid} runs but {mp_arg} is not mounted"),
            &format!("stop it: kill {pid}"),
        );
    }
}

/// The journal of a state directory, and with it the working-copy parent: readable, in
/// the repository, and (no daemon holding it) replayed dry on a copy; then how to go on,
/// unless something found since `problems_before` needs fixing first.
#[allow(clippy::too_many_arguments)]
fn check_journal(
    r: &mut Report,
    sd: &StateDir,
    target: &Target,
    state: &MountState,
    mp: &Path,
    discard: &str,
    problems_before: usize,
    mut notes: Vec<String>,
) {
    let dir = sd.path();
    let repo_arg = state.repo.display().to_string();
    let mp_arg = mp.display().to_string();
    let view = match read_journal(sd) {
        Ok(v) => v,
        Err(e) => {
            r.problem(
                &format!("the journal cannot be read: {e}"),
                &format!("a newer revfs may have written it: use that one; or {discard}"),
            );
            return;
        }
    };
    let saved_node = Node::from_hex(state.node.as_bytes());
    let parent = match (&view, saved_node) {
        (Some(v), _) => v.base,
        (None, Some(n)) => n,
        (None, None) => return,
    };
    if let (Some(v), Some(n)) = (&view, saved_node) {
        if v.base != n {
            notes.push(format!(
                "mount.json names parent {}, the journal {}: the journal's wins (a commit or \
                 an update was cut short)",
                &n.to_hex()[..12],
                &v.base.to_hex()[..12]
            ));
        }
    }
    // (A live daemon may be appending: its journal's end proves nothing.)
    if let Some(v) = view.as_ref().filter(|_| !target.mounted) {
        if v.damaged_tail > 0 {
            notes.push(format!(
                "the journal ends with {} bytes of a record cut short (a crash while it was \
                 written); the next mount drops them",
                v.damaged_tail
            ));
        }
    }
    let resume = (!target.mounted).then(|| {
        let records = view.as_ref().map_or(0, |v| v.records.len());
        [
            format!(
                "not mounted: `revfs mount {repo_arg} {mp_arg}` resumes it ({records} journal \
             record{}){}",
                if records == 1 { "" } else { "s" },
                if mp.exists() {
                    ""
                } else {
                    "; create the mountpoint first"
                }
            ),
            format!(
                "to discard it instead (and every change in it): revfs discard --force {mp_arg}"
            ),
        ]
    });
    // The repository's own check says why it cannot be opened.
    if let Ok(repo) = Repo::open(&state.repo) {
        if !parent.is_null() && repo.changelog().rev_of(&parent).is_none() {
            r.problem(
                &format!(
                    "the working copy's parent {} is not in {repo_arg} any more (stripped or \
                     rolled back?)",
                    parent.to_hex()
                ),
                &format!(
                    "bring it back with hg unbundle, from the bundle hg strip saved in \
                     {repo_arg}/.hg/strip-backup/; or {discard}"
                ),
            );
        } else if let Some(view) = view.filter(|_| !target.mounted) {
            // A working copy no daemon holds: a dry run of the mount's replay, on the copy.
            dry_run(
                r, repo, parent, &view, dir, &mut notes, discard, &repo_arg, &mp_arg,
            );
        }
    }
    // How to go on, unless something above needs fixing first.
    if r.problems == problems_before {
        notes.extend(resume.into_iter().flatten());
    }
    for n in notes {
        r.note(&n);
    }
}

/// Replays the copy of a journal in `view`'s temporary directory as `revfs mount` would,
/// and checks that the overlay files the working copy needs are in `dir`.
#[allow(clippy::too_many_arguments)]
fn dry_run(
    r: &mut Report,
    repo: Repo,
    parent: Node,
    view: &JournalView,
    dir: &Path,
    notes: &mut Vec<String>,
    discard: &str,
    repo_arg: &str,
    mp_arg: &str,
) {
    let tmp_overlay = view.tmp.path().join("overlay");
    if std::fs::create_dir(&tmp_overlay).is_err() {
        return;
    }
    // Stand-ins for every overlay file a record names: the replay deletes those nothing
    // points at, so what is left is what the working copy needs.
    let mut last_path: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for rec in &view.records {
        if let Some((id, path)) = overlay_ref(rec) {
            last_path.insert(id, path.to_vec());
            let _ = std::fs::File::create(tmp_overlay.join(format!("{id:016x}")));
        }
    }
    let manifest = match repo.manifest_at(&parent) {
        Ok(Some(m)) => m,
        Err(e) => {
            r.problem(
                &format!("the parent's manifest cannot be read: {e}"),
                &format!("check the repository: hg verify -R {repo_arg}"),
            );
            return;
        }
        Ok(None) => Manifest::empty(),
    };
    let replay = WorkingCopy::open(
        Arc::new(repo),
        parent,
        manifest,
        view.tmp.path(),
        std::time::SystemTime::now(),
        revfs_vfs::wc::overlay::DEFAULT_OPEN_FILES,
    );
    match replay {
        Err(e) => r.problem(
            &format!("the journal cannot be replayed: {e}"),
            &format!("revfs mount would fail: {discard}"),
        ),
        Ok(wc) => {
            drop(wc);
            let needed = overlay_ids(&tmp_overlay);
            let present = overlay_ids(&dir.join("overlay"));
            let missing: Vec<String> = needed
                .difference(&present)
                .map(|id| {
                    let path = last_path
                        .get(id)
                        .map(|p| String::from_utf8_lossy(p).into_owned())
                        .unwrap_or_default();
                    format!("{id:016x} ({path})")
                })
                .collect();
            if !missing.is_empty() {
                let n = missing.len();
                r.problem(
                    &format!(
                        "{n} overlay file{} the working copy needs {} missing from {}/overlay: {}",
                        if n == 1 { "" } else { "s" },
                        if n == 1 { "is" } else { "are" },
                        dir.display(),
                        missing.join(", ")
                    ),
                    &format!(
                        "their content is lost: after `revfs mount {repo_arg} {mp_arg}`, \
                         `revfs revert` those files, or delete them"
                    ),
                );
            }
            let unused = present.difference(&needed).count();
            if unused > 0 {
                notes.push(format!(
                    "{unused} overlay file{} nothing points at; the next mount deletes them",
                    if unused == 1 { "" } else { "s" }
                ));
            }
        }
    }
}
