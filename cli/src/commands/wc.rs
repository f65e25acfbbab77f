//! Working-copy commands that talk to the mount's daemon: `status`, `add`, `forget`,
//! `remove`, `addremove` and `revert`, with hg's flags, messages and exit codes.

use super::Workspace;
use crate::ui::{ignore_broken_pipe, json_string, Out};
use anyhow::{bail, Result};
use clap::Args;
use revfs_hg::color::Colors;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_vfs::client::status::{fetch, fetch_configured};
use revfs_vfs::client::walk::walk;
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
    // hg's states to show: those asked for; with `-A` all of them (with `-q` all but
    // unknown and ignored); without either, the changes (and unknown files unless `-q`).
    let wanted = |l: char| -> bool {
        let asked = match l {
            'M' => args.modified,
            'A' => args.added,
            'R' => args.removed,
            '!' => args.deleted,
            '?' => args.unknown,
            'I' => args.ignored,
            'C' => args.clean,
            _ => false,
        };
        let quiet_hides = args.quiet && matches!(l, '?' | 'I');
        if asked || (args.all && !quiet_hides) {
            return true;
        }
        !any && !args.all && (matches!(l, 'M' | 'A' | 'R' | '!') || (l == '?' && !args.quiet))
    };
    // Loaded before the request, from the repository's files (not through the mount): its
    // ignore files go with the request, and the colours come from it.
    let cfg = revfs_hg::config::Config::load(Some(ws.repo_root()))?;
    let fetched = fetch_configured(&ws, Some(&cfg), wanted('C'), wanted('I'), wanted('?'))?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let walked = walk(&ws, &ctx, &matcher, fetched);
    let copies = &walked.copies;
    // JSON is never coloured (hg's JSON formatter writes no labels).
    let colors = if json {
        Colors::off()
    } else {
        revfs_hg::color::for_command_with(cli.color.as_deref(), &cfg)
    };
    // hg leaves the copy sources out with --no-status.
    let show_copies = (args.copies || args.all) && !args.no_status;
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
    for (letter, path) in walked.entries().filter(|(l, _)| wanted(*l)) {
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

/// The file a repository path names, as seen through the mount.
fn disk_path(ws: &Workspace, path: &[u8]) -> PathBuf {
    ws.root.join(std::ffi::OsStr::from_bytes(path))
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

/// `hg diff`: the working copy's changes against its parent, as hg prints them.
pub fn diff(cli: &crate::Cli, args: &DiffArgs) -> Result<u8> {
    use revfs_hg::diff::{file_diff, hg_datestr, CopyOp, DiffLabeler, DiffOptions, Side};
    let ws = super::open_workspace(cli)?;
    let colors = revfs_hg::color::for_command(cli.color.as_deref(), ws.repo_root())?;
    let mut labeler = DiffLabeler::new();
    let mut colored = Vec::new();
    let fetched = fetch(&ws, false, false, false)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let walked = walk(&ws, &ctx, &matcher, fetched);
    let copies = &walked.copies;
    let rev = ws.resolve_single(Some("."))?;
    let cs = ws.repo()?.changeset(rev)?;
    let base = ws.repo()?.manifest_of(rev)?;
    let parent_short = ws.repo()?.changelog().node(rev)?.short();
    let (now, tz) = revfs_hg::date::now();
    let opts = DiffOptions {
        git: args.git,
        old_date: hg_datestr(cs.time, cs.tz as i64),
        new_date: hg_datestr(now, i64::from(tz)),
    };
    let letters: BTreeMap<Vec<u8>, char> = walked
        .entries()
        .filter(|(l, _)| matches!(l, 'M' | 'A' | 'R'))
        .map(|(l, p)| (p.clone(), *l))
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
        let fl = ws.repo()?.filelog(path)?;
        let text = fl.read(fl.rev_of(&e.node)?)?;
        use revfs_store::manifest::FileFlag;
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
                revfs_vfs::client::dirstate::read_working(&ws.root, path)?,
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
