//! Working-copy commands that talk to the mount's daemon: `status`, `add`, `forget`,
//! `remove`, `addremove` and `revert`, with hg's flags, messages and exit codes.

use super::Workspace;
use crate::ui::{ignore_broken_pipe, json_string, Out};
use anyhow::{bail, Result};
use clap::Args;
use revfs_hg::color::Colors;
use revfs_hg::matcher::{below_roots, Matcher, PathContext};
use revfs_hg::paths::is_under;
use revfs_vfs::control::{Request, Response};
use revfs_vfs::journal::Track;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Show only modified files
    #[arg(short = 'm', long)]
    modified: bool,
    /// Show only added files
    #[arg(short = 'a', long)]
    added: bool,
    /// Show only removed files
    #[arg(short = 'r', long)]
    removed: bool,
    /// Show only missing (deleted but tracked) files
    #[arg(short = 'd', long)]
    deleted: bool,
    /// Show only unknown (not tracked) files
    #[arg(short = 'u', long)]
    unknown: bool,
    /// Show only ignored files
    #[arg(short = 'i', long)]
    ignored: bool,
    /// Show only files without changes
    #[arg(short = 'c', long)]
    clean: bool,
    /// Show status of all files
    #[arg(short = 'A', long)]
    all: bool,
    /// Show source of copied files
    #[arg(short = 'C', long)]
    copies: bool,
    /// Hide unknown files (hg's --quiet)
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Hide status prefix
    #[arg(short = 'n', long = "no-status")]
    no_status: bool,
    /// End filenames with NUL, for use with xargs
    #[arg(short = '0', long = "print0")]
    print0: bool,
    /// Display with template (only `json`)
    #[arg(short = 'T', long = "template", value_name = "TEMPLATE")]
    template: Option<String>,
    /// Files or directories to show
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

/// Status as the daemon reports it: (letter, repository path) in hg's order, and the copy
/// sources of copied files.
pub struct Status {
    pub entries: Vec<(char, Vec<u8>)>,
    pub copies: BTreeMap<Vec<u8>, Vec<u8>>,
}

pub fn fetch(ws: &Workspace, clean: bool, ignored: bool, unknown: bool) -> Result<Status> {
    match ws.request(&Request::Status {
        clean,
        ignored,
        unknown,
    })? {
        Response::Status { entries, copies } => Ok(Status {
            entries,
            copies: copies.into_iter().collect(),
        }),
        other => bail!("unexpected answer from the daemon: {other:?}"),
    }
}

/// Only the status lines.
pub fn fetch_status(
    ws: &Workspace,
    clean: bool,
    ignored: bool,
    unknown: bool,
) -> Result<Vec<(char, Vec<u8>)>> {
    Ok(fetch(ws, clean, ignored, unknown)?.entries)
}

pub fn status(cli: &crate::Cli, args: &StatusArgs) -> Result<u8> {
    // Nothing below touches the mount before the status request.
    let ws = super::open_workspace_deferred(cli)?;
    let json = match args.template.as_deref() {
        None => false,
        Some("json") => true,
        Some(other) => bail!("unsupported template '{other}' (only 'json' is supported)"),
    };
    let any = args.modified
        || args.added
        || args.removed
        || args.deleted
        || args.unknown
        || args.ignored
        || args.clean;
    let wanted = |l: char| -> bool {
        if args.all {
            return true;
        }
        if !any {
            return matches!(l, 'M' | 'A' | 'R' | '!') || (l == '?' && !args.quiet);
        }
        match l {
            'M' => args.modified,
            'A' => args.added,
            'R' => args.removed,
            '!' => args.deleted,
            '?' => args.unknown,
            'I' => args.ignored,
            'C' => args.clean,
            _ => false,
        }
    };
    let Status { entries, copies } = fetch(&ws, wanted('C'), wanted('I'), wanted('?'))?;
    // JSON is never coloured (hg's JSON formatter writes no labels).
    let colors = if json {
        Colors::off()
    } else {
        revfs_hg::color::for_command(cli.color.as_deref(), ws.repo.root())?
    };
    // hg leaves the copy sources out with --no-status.
    let show_copies = (args.copies || args.all) && !args.no_status;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let named = lstat_named(&ws, &matcher);
    warn_bad_files(&ctx, &matcher, &named, &entries);
    // hg's walk: tracked files are listed when they match; unknown and ignored ones when
    // they match and are named, or lie below a directory the walk lists.
    let roots = matcher.walk_roots(|d| {
        named
            .get(d)
            .is_some_and(|t| t.as_ref().is_ok_and(|t| t.is_dir()))
    });
    let listed = |l: char, p: &[u8]| {
        matcher.matches(p)
            && (!matches!(l, '?' | 'I') || matcher.exact(p) || below_roots(&roots, p))
    };
    let end = if args.print0 { b'\0' } else { b'\n' };
    // hg's legacy rule (`ui.relative-paths=legacy`): paths relative to the current
    // directory only when files were named, else relative to the root.
    let shown = |p: &[u8]| -> Vec<u8> {
        if args.files.is_empty() {
            p.to_vec()
        } else {
            ctx.display(p)
        }
    };
    let mut out = Out::new();
    let mut buf = Vec::new();
    let mut first = true;
    if json {
        buf.extend_from_slice(b"[");
    }
    for (letter, path) in entries.iter().filter(|(l, p)| wanted(*l) && listed(*l, p)) {
        if json {
            // hg's JSON: repository paths (not relative to the current directory), keys
            // in sorted order.
            buf.extend_from_slice(if first { b"\n {\n" } else { b",\n {\n" });
            buf.extend_from_slice(b"  \"itemtype\": \"file\",\n  \"path\": ");
            buf.extend_from_slice(&json_string(path));
            if let Some(source) = copies.get(path).filter(|_| show_copies) {
                buf.extend_from_slice(b",\n  \"source\": ");
                buf.extend_from_slice(&json_string(source));
            }
            buf.extend_from_slice(b",\n  \"status\": ");
            buf.extend_from_slice(&json_string(letter.to_string().as_bytes()));
            buf.extend_from_slice(b"\n }");
        } else {
            let label = revfs_hg::color::status_label(*letter);
            if !args.no_status {
                colors.label(&[*letter as u8, b' '], label, &mut buf);
            }
            let mut line = shown(path);
            line.push(end);
            colors.label(&line, label, &mut buf);
            if let Some(source) = copies.get(path).filter(|_| show_copies) {
                let mut line = b"  ".to_vec();
                line.extend_from_slice(&shown(source));
                line.push(end);
                colors.label(&line, "status.copied", &mut buf);
            }
        }
        first = false;
    }
    if json {
        buf.extend_from_slice(b"\n]\n");
    }
    ignore_broken_pipe(out.write(&buf).and_then(|_| out.finish()))?;
    Ok(0)
}

#[derive(Args, Debug)]
pub struct PathArgs {
    /// Files or directories
    #[arg(value_name = "FILE")]
    pub files: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// Record delete for missing files
    #[arg(short = 'A', long)]
    after: bool,
    /// Forget added files, delete modified files
    #[arg(short = 'f', long)]
    force: bool,
    #[arg(value_name = "FILE", required = true)]
    files: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RevertArgs {
    /// Revert all changes when no arguments given
    #[arg(short = 'a', long)]
    all: bool,
    /// Do not save backup copies of files
    #[arg(short = 'C', long = "no-backup")]
    no_backup: bool,
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

/// hg's warnings for the files named on the command line that its walk cannot find
/// (`dirstate._walkexplicit`): not on disk and not tracked (a tracked file that is gone is
/// deleted or removed, a tracked directory that is gone has deleted files), or of a type
/// hg does not track.
fn warn_bad_files(
    ctx: &PathContext,
    matcher: &Matcher,
    named: &BTreeMap<Vec<u8>, std::io::Result<std::fs::FileType>>,
    entries: &[(char, Vec<u8>)],
) {
    // Sorted, not deduplicated: hg warns once per pattern naming a missing file.
    let mut files: Vec<&Vec<u8>> = matcher.files().iter().collect();
    files.sort();
    if files.is_empty() || files.iter().any(|f| f.is_empty()) {
        return;
    }
    for f in files {
        let Some(found) = named.get(f) else { continue };
        let msg = match found {
            Ok(t) => {
                use std::os::unix::fs::FileTypeExt;
                let kind = if t.is_dir() || t.is_file() || t.is_symlink() {
                    continue;
                } else if t.is_char_device() {
                    "character device"
                } else if t.is_block_device() {
                    "block device"
                } else if t.is_fifo() {
                    "fifo"
                } else if t.is_socket() {
                    "socket"
                } else {
                    "unknown"
                };
                format!("unsupported file type (type is {kind})")
            }
            Err(e) => {
                let gone_tracked = entries.iter().any(|(l, p)| {
                    (p == f && matches!(l, '!' | 'R')) || (*l == '!' && is_under(p, f))
                });
                if gone_tracked {
                    continue;
                }
                revfs_hg::config::strerror(e)
            }
        };
        eprintln!("{}: {msg}", lossy(&ctx.display(f)));
    }
}

/// One `lstat` of each file named on the command line (the root excepted), by repository
/// path: what hg's walk learns of them first (`dirstate._walkexplicit`).
fn lstat_named(
    ws: &Workspace,
    matcher: &Matcher,
) -> BTreeMap<Vec<u8>, std::io::Result<std::fs::FileType>> {
    matcher
        .files()
        .iter()
        .filter(|f| !f.is_empty())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|f| {
            let t = std::fs::symlink_metadata(disk_path(ws, f)).map(|m| m.file_type());
            (f.clone(), t)
        })
        .collect()
}

/// The status of every path that is not clean, by repository path.
fn status_map(ws: &Workspace) -> Result<BTreeMap<Vec<u8>, char>> {
    Ok(fetch_status(ws, false, true, true)?
        .into_iter()
        .map(|(l, p)| (p, l))
        .collect())
}

fn track(ws: &Workspace, paths: Vec<Vec<u8>>, track: Track) -> Result<()> {
    if paths.is_empty() {
        return Ok(());
    }
    ws.request(&Request::Track { paths, track })?;
    Ok(())
}

/// The file a repository path names, as seen through the mount.
fn disk_path(ws: &Workspace, path: &[u8]) -> PathBuf {
    ws.root.join(std::ffi::OsStr::from_bytes(path))
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Is `path` (a repository path) a directory in the working copy?
fn is_dir(ws: &Workspace, path: &[u8]) -> bool {
    path.is_empty() || std::fs::symlink_metadata(disk_path(ws, path)).is_ok_and(|m| m.is_dir())
}

/// `hg add`: start tracking unknown files (all of them without arguments).
pub fn add(cli: &crate::Cli, args: &PathArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    let ctx = PathContext::new(&ws.root)?;
    let status = status_map(&ws)?;
    let base = ws.repo.manifest_of(ws.resolve_single(Some("."))?)?;
    let mut to_add = Vec::new();
    let mut to_untrack_removal = Vec::new();
    let mut code = 0;
    // A removed file that still exists counts as unknown for adding (as in hg).
    let addable = |p: &[u8], l: char| {
        l == '?' || (l == 'R' && std::fs::symlink_metadata(disk_path(&ws, p)).is_ok())
    };
    if args.files.is_empty() {
        for (p, l) in &status {
            if addable(p, *l) {
                println!("adding {}", lossy(&ctx.display(p)));
                if *l == 'R' {
                    to_untrack_removal.push(p.clone());
                } else {
                    to_add.push(p.clone());
                }
            }
        }
    } else {
        let matcher = Matcher::new(&ctx, &args.files)?;
        for arg in matcher.args() {
            if is_dir(&ws, arg) {
                for (p, l) in status.range(arg.clone()..) {
                    if !is_under(p, arg) && !arg.is_empty() {
                        break;
                    }
                    if addable(p, *l) && is_under(p, arg) {
                        println!("adding {}", lossy(&ctx.display(p)));
                        if *l == 'R' {
                            to_untrack_removal.push(p.clone());
                        } else {
                            to_add.push(p.clone());
                        }
                    }
                }
                continue;
            }
            let exists = std::fs::symlink_metadata(disk_path(&ws, arg)).is_ok();
            match status.get(arg) {
                _ if !exists => {
                    eprintln!("{}: No such file or directory", lossy(&ctx.display(arg)));
                    code = 1;
                }
                Some('?') | Some('I') => to_add.push(arg.clone()),
                Some('R') => to_untrack_removal.push(arg.clone()),
                _ if base.find(arg)?.is_some() || status.get(arg) == Some(&'A') => {
                    eprintln!("{} already tracked!", lossy(&ctx.display(arg)));
                }
                _ => to_add.push(arg.clone()),
            }
        }
    }
    track(&ws, to_add, Track::Added)?;
    track(&ws, to_untrack_removal, Track::Default)?;
    Ok(code)
}

/// `hg forget`: stop tracking files without deleting them.
pub fn forget(cli: &crate::Cli, args: &PathArgs) -> Result<u8> {
    if args.files.is_empty() {
        bail!("no files specified");
    }
    let ws = super::open_workspace(cli)?;
    let ctx = PathContext::new(&ws.root)?;
    let status = fetch_status(&ws, true, false, false)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let mut remove = Vec::new();
    let mut undo_add = Vec::new();
    let mut code = 0;
    for arg in matcher.args() {
        let mut hit = false;
        for (l, p) in status.iter().filter(|(_, p)| p == arg || is_under(p, arg)) {
            match l {
                'A' => undo_add.push(p.clone()),
                'R' => continue,
                _ => remove.push(p.clone()),
            }
            if p != arg {
                println!("removing {}", lossy(&ctx.display(p)));
            }
            hit = true;
        }
        if !hit {
            if std::fs::symlink_metadata(disk_path(&ws, arg)).is_ok() {
                eprintln!(
                    "not removing {}: file is already untracked",
                    lossy(&ctx.display(arg))
                );
            } else {
                eprintln!("{}: No such file or directory", lossy(&ctx.display(arg)));
            }
            code = 1;
        }
    }
    track(&ws, remove, Track::Removed)?;
    track(&ws, undo_add, Track::Default)?;
    Ok(code)
}

/// `hg remove`: delete tracked files and record their removal.
pub fn remove(cli: &crate::Cli, args: &RemoveArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    let ctx = PathContext::new(&ws.root)?;
    let status = fetch_status(&ws, true, false, false)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let mut removed = Vec::new();
    let mut undo_add = Vec::new();
    let mut code = 0;
    for arg in matcher.args() {
        let mut hit = false;
        for (l, p) in status.iter().filter(|(_, p)| p == arg || is_under(p, arg)) {
            hit = true;
            let shown = lossy(&ctx.display(p));
            let implicit = p != arg;
            match (l, args.after, args.force) {
                ('R', _, _) => continue,
                ('!', _, _) => {}
                (_, true, _) => {
                    eprintln!("not removing {shown}: file still exists");
                    code = 1;
                    continue;
                }
                ('A', _, false) => {
                    eprintln!("not removing {shown}: file has been marked for add (use 'hg forget' to undo add)");
                    code = 1;
                    continue;
                }
                ('M', _, false) => {
                    eprintln!("not removing {shown}: file is modified (use -f to force removal)");
                    code = 1;
                    continue;
                }
                _ => {}
            }
            if implicit {
                println!("removing {shown}");
            }
            // hg never deletes an added file on remove: it only forgets it.
            if *l != '!' && *l != 'A' {
                let f = disk_path(&ws, p);
                std::fs::remove_file(&f).or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })?;
                remove_empty_parents(&ws, p);
            }
            if *l == 'A' {
                undo_add.push(p.clone());
            } else {
                removed.push(p.clone());
            }
        }
        if !hit {
            eprintln!(
                "not removing {}: file is untracked",
                lossy(&ctx.display(arg))
            );
            code = 1;
        }
    }
    track(&ws, removed, Track::Removed)?;
    track(&ws, undo_add, Track::Default)?;
    Ok(code)
}

/// hg removes directories that a removal left empty.
fn remove_empty_parents(ws: &Workspace, path: &[u8]) {
    let mut p = path;
    while let Some(i) = p.iter().rposition(|&b| b == b'/') {
        p = &p[..i];
        if std::fs::remove_dir(disk_path(ws, p)).is_err() {
            break;
        }
    }
}

/// `hg addremove`: add every unknown file, remove every missing one, and record exact
/// renames (a removed file whose content an added file has), as hg does by default.
pub fn addremove(cli: &crate::Cli, args: &PathArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let exists = |p: &[u8]| std::fs::symlink_metadata(disk_path(&ws, p)).is_ok();
    let (mut added, mut unknown, mut deleted, mut removed, mut forgotten) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (l, p) in fetch_status(&ws, false, false, true)? {
        if !matcher.matches(&p) {
            continue;
        }
        match l {
            '?' => unknown.push(p),
            '!' => deleted.push(p),
            'R' if exists(&p) => forgotten.push(p),
            'R' => removed.push(p),
            'A' => added.push(p),
            _ => {}
        }
    }
    let explicit = |p: &[u8]| matcher.args().iter().any(|a| a == p);
    let mut report: Vec<(&Vec<u8>, &str)> = unknown
        .iter()
        .chain(&forgotten)
        .map(|p| (p, "adding"))
        .chain(deleted.iter().map(|p| (p, "removing")))
        .collect();
    report.sort();
    for (p, what) in report {
        if !explicit(p) {
            println!("{what} {}", lossy(&ctx.display(p)));
        }
    }
    // Exact renames: sha1-equal content, empty files left out (hg's similar.py).
    let base = ws.repo.manifest_of(ws.resolve_single(Some("."))?)?;
    let mut by_hash: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut gone: Vec<&Vec<u8>> = removed.iter().chain(&deleted).collect();
    gone.sort();
    for p in gone {
        let Some(entry) = base.find(p)? else { continue };
        let fl = ws.repo.filelog(p)?;
        let text = fl.read(fl.rev_of(&entry.node)?)?;
        if !text.is_empty() {
            // The first removed file (in path order) with that content wins.
            by_hash.entry(sha1_of(&text)).or_insert_with(|| p.clone());
        }
    }
    let mut copies = Vec::new();
    if !by_hash.is_empty() {
        let mut new: Vec<&Vec<u8>> = added.iter().chain(&unknown).collect();
        new.sort();
        for p in new {
            let Ok(data) = read_working(&ws, p) else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            if let Some(old) = by_hash.get(&sha1_of(&data)) {
                if !explicit(old) || !explicit(p) {
                    println!(
                        "recording removal of {} as rename to {} (100% similar)",
                        lossy(&ctx.display(old)),
                        lossy(&ctx.display(p))
                    );
                }
                copies.push((p.clone(), Some(old.clone())));
            }
        }
    }
    let (forget_added, forget_base): (Vec<_>, Vec<_>) = deleted
        .into_iter()
        .partition(|p| added_or_not_in_base(&base, p));
    track(&ws, forget_base, Track::Removed)?;
    track(&ws, forget_added, Track::Default)?;
    track(&ws, unknown, Track::Added)?;
    track(&ws, forgotten, Track::Default)?;
    if !copies.is_empty() {
        ws.request(&Request::Copy { copies })?;
    }
    Ok(0)
}

fn added_or_not_in_base(base: &revfs_vfs::store::manifest::Manifest, p: &[u8]) -> bool {
    !matches!(base.find(p), Ok(Some(_)))
}

fn sha1_of(data: &[u8]) -> Vec<u8> {
    use sha1::{Digest, Sha1};
    Sha1::digest(data).to_vec()
}

/// A working-copy file's bytes (a symlink's target), read through the mount.
fn read_working(ws: &Workspace, p: &[u8]) -> std::io::Result<Vec<u8>> {
    let f = disk_path(ws, p);
    let meta = std::fs::symlink_metadata(&f)?;
    if meta.file_type().is_symlink() {
        return Ok(std::fs::read_link(&f)?.as_os_str().as_bytes().to_vec());
    }
    std::fs::read(&f)
}

/// `hg revert`: back to the working-copy parent's content for the named files.
pub fn revert(cli: &crate::Cli, args: &RevertArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    if args.files.is_empty() && !args.all {
        bail!("no files or directories specified\n(use --all to revert all files)");
    }
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let fetched = fetch(&ws, false, false, false)?;
    let status = fetched.entries;
    // Reverting the destination of a rename undeletes its source too (hg's revert), without
    // a message.
    let letters: BTreeMap<&Vec<u8>, char> = status.iter().map(|(l, p)| (p, *l)).collect();
    let mut sources: std::collections::BTreeSet<Vec<u8>> = std::collections::BTreeSet::new();
    for (_, p) in status
        .iter()
        .filter(|(_, p)| args.all || matcher.matches(p))
    {
        if let Some(src) = fetched.copies.get(p) {
            if letters.get(src) == Some(&'R') && !(args.all || matcher.matches(src)) {
                sources.insert(src.clone());
            }
        }
    }
    let mut forget = Vec::new();
    let mut restore = Vec::new();
    let mut messages: Vec<(u8, String)> = Vec::new();
    for (l, p) in status
        .iter()
        .filter(|(_, p)| args.all || matcher.matches(p) || sources.contains(p))
    {
        let shown = lossy(&ctx.display(p));
        // hg names what it does only for files it found, not for files named exactly.
        let exact = matcher.args().contains(p) || sources.contains(p);
        let mut messages = Said {
            quiet: exact,
            out: &mut messages,
        };
        match l {
            'A' => {
                messages.push((0, format!("forgetting {shown}")));
                forget.push(p.clone());
            }
            'M' => {
                messages.push((1, format!("reverting {shown}")));
                if !args.no_backup {
                    let f = disk_path(&ws, p);
                    let mut backup = f.clone().into_os_string();
                    backup.push(".orig");
                    if let Ok(meta) = std::fs::symlink_metadata(&f) {
                        if meta.file_type().is_symlink() {
                            let _ = std::fs::remove_file(&backup);
                            std::os::unix::fs::symlink(std::fs::read_link(&f)?, &backup)?;
                        } else {
                            std::fs::write(&backup, std::fs::read(&f)?)?;
                        }
                    }
                }
                restore.push(p.clone());
            }
            'R' | '!' => {
                messages.push((2, format!("undeleting {shown}")));
                forget.push(p.clone());
                restore.push(p.clone());
            }
            _ => {}
        }
    }
    // A file named exactly that has nothing to revert gets hg's warning.
    let changed: std::collections::BTreeSet<&Vec<u8>> = status.iter().map(|(_, p)| p).collect();
    let base = ws.repo.manifest_of(ws.resolve_single(Some("."))?)?;
    let mut clean: Vec<&Vec<u8>> = Vec::new();
    for arg in matcher.args() {
        if !changed.contains(arg) && base.find(arg)?.is_some() {
            clean.push(arg);
        }
    }
    clean.sort();
    track(&ws, forget, Track::Default)?;
    if !restore.is_empty() {
        ws.request(&Request::Restore { paths: restore })?;
    }
    messages.sort();
    for (_, m) in messages {
        println!("{m}");
    }
    for p in clean {
        eprintln!("no changes needed to {}", lossy(&ctx.display(p)));
    }
    Ok(0)
}

/// Revert's action messages, dropped for exactly named files.
struct Said<'a> {
    quiet: bool,
    out: &'a mut Vec<(u8, String)>,
}

impl Said<'_> {
    fn push(&mut self, m: (u8, String)) {
        if !self.quiet {
            self.out.push(m);
        }
    }
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Use git extended diff format
    #[arg(short = 'g', long)]
    git: bool,
    /// Files or directories to diff
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

/// The local time zone's offset in seconds west of UTC, as hg's `makedate` gives it.
fn local_offset_west(t: i64) -> i64 {
    let tt = t as libc::time_t;
    // SAFETY: localtime_r fills the tm we own from a valid time_t.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&tt, &mut tm) }.is_null() {
        return 0;
    }
    -tm.tm_gmtoff
}

/// `hg diff`: the working copy's changes against its parent, as hg prints them.
pub fn diff(cli: &crate::Cli, args: &DiffArgs) -> Result<u8> {
    use revfs_hg::diff::{file_diff, hg_datestr, CopyOp, DiffLabeler, DiffOptions, Side};
    let ws = super::open_workspace(cli)?;
    let colors = revfs_hg::color::for_command(cli.color.as_deref(), ws.repo.root())?;
    let mut labeler = DiffLabeler::new();
    let mut colored = Vec::new();
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let Status { entries, copies } = fetch(&ws, false, false, false)?;
    let rev = ws.resolve_single(Some("."))?;
    let cs = ws.repo.changeset(rev)?;
    let base = ws.repo.manifest_of(rev)?;
    let parent_short = ws.repo.changelog().node(rev)?.short();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let opts = DiffOptions {
        git: args.git,
        old_date: hg_datestr(cs.time, cs.tz as i64),
        new_date: hg_datestr(now, local_offset_west(now)),
    };
    let letters: BTreeMap<Vec<u8>, char> = entries
        .into_iter()
        .filter(|(l, p)| matches!(l, 'M' | 'A' | 'R') && matcher.matches(p))
        .map(|(l, p)| (p, l))
        .collect();
    // Sources renamed away are shown once, as the rename (git mode).
    let renamed_sources: std::collections::BTreeSet<&Vec<u8>> = copies
        .iter()
        .filter(|(dest, _)| letters.get(*dest) == Some(&'A'))
        .map(|(_, src)| src)
        .collect();
    let base_side = |path: &[u8]| -> Result<Option<(Vec<u8>, bool, bool)>> {
        let Some(e) = base.find(path)? else {
            return Ok(None);
        };
        let fl = ws.repo.filelog(path)?;
        let text = fl.read(fl.rev_of(&e.node)?)?;
        use revfs_vfs::store::manifest::FileFlag;
        Ok(Some((
            text.to_vec(),
            e.flag == FileFlag::Executable,
            e.flag == FileFlag::Symlink,
        )))
    };
    let mut gone = std::collections::BTreeSet::new();
    let mut out = Out::new();
    let mut result = Ok(());
    for (path, letter) in &letters {
        if *letter == 'R' && args.git && renamed_sources.contains(path) {
            continue;
        }
        let new_side = if *letter == 'R' {
            None
        } else {
            let f = disk_path(&ws, path);
            let meta = std::fs::symlink_metadata(&f)?;
            use std::os::unix::fs::PermissionsExt;
            Some((
                read_working(&ws, path)?,
                meta.permissions().mode() & 0o100 != 0,
                meta.file_type().is_symlink(),
            ))
        };
        let (old_path, old_side, copy) = match (letter, copies.get(path)) {
            ('A', Some(src)) => {
                let op = if letters.get(src) == Some(&'R') && gone.insert(src.clone()) {
                    CopyOp::Rename
                } else {
                    CopyOp::Copy
                };
                (src.clone(), base_side(src)?, Some(op))
            }
            ('A', None) => (path.clone(), None, None),
            _ => (path.clone(), base_side(path)?, None),
        };
        let old = Side {
            path: &old_path,
            data: old_side.as_ref().map(|s| s.0.as_slice()),
            exec: old_side.as_ref().is_some_and(|s| s.1),
            symlink: old_side.as_ref().is_some_and(|s| s.2),
        };
        let new = Side {
            path,
            data: new_side.as_ref().map(|s| s.0.as_slice()),
            exec: new_side.as_ref().is_some_and(|s| s.1),
            symlink: new_side.as_ref().is_some_and(|s| s.2),
        };
        let text = file_diff(&old, &new, copy, &parent_short, &opts)?;
        result = if colors.enabled() {
            colored.clear();
            labeler.label(&text, |t, l| colors.label(t, l, &mut colored));
            out.write(&colored)
        } else {
            out.write(&text)
        };
        if result.is_err() {
            break;
        }
    }
    ignore_broken_pipe(result.and_then(|_| out.finish()))?;
    Ok(0)
}
