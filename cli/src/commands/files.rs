//! `revfs files`: the tracked files of a revision, as `hg files` lists them.

use crate::ui::{ignore_broken_pipe, json_string, Out};
use anyhow::{bail, Result};
use clap::Args;
use revfs_hg::matcher::{Matcher, PathContext};

#[derive(Args, Debug)]
#[command(mut_arg("rev", |a| a.help("Search the repository as it is in REV")))]
pub struct FilesArgs {
    #[command(flatten)]
    rev: super::RevArg,
    /// End filenames with NUL, for use with xargs
    #[arg(short = '0', long = "print0")]
    print0: bool,
    /// Display with template (only `json`: `[{"path": ...}, ...]`, repository paths)
    #[arg(short = 'T', long = "template", value_name = "TEMPLATE")]
    template: Option<String>,
    /// Files or directories to list
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

pub fn run(cli: &crate::Cli, args: &FilesArgs) -> Result<u8> {
    let json = match args.template.as_deref() {
        None => false,
        Some("json") => true,
        Some(other) => bail!("template '{other}' is not supported by revfs files (use hg instead)"),
    };
    let ws = super::open_workspace(cli)?;
    let repo = ws.repo()?;
    let rev = ws.resolve_single(args.rev.rev.as_deref())?;
    let manifest = repo.manifest_of(rev)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let end = if args.print0 { b'\0' } else { b'\n' };
    let mut out = Out::new();
    let (found, bad) = if args.rev.rev.is_none() && ws.mount.is_some() {
        (working_files(&ws, &manifest, &matcher)?, Vec::new())
    } else {
        revfs_vfs::client::walk::manifest_walk(&manifest, &matcher)?
    };
    let mut any = false;
    let mut result = if json { out.write(b"[") } else { Ok(()) };
    for (path, _) in &found {
        let path = path.as_slice();
        let line = if json {
            // hg's JSON formatter: the repository path, whatever the current directory.
            let mut item = if any {
                b",\n {\n  \"path\": ".to_vec()
            } else {
                b"\n {\n  \"path\": ".to_vec()
            };
            item.extend_from_slice(&json_string(path));
            item.extend_from_slice(b"\n }");
            item
        } else {
            let mut line = ctx.display(path);
            line.push(end);
            line
        };
        any = true;
        result = out.write(&line);
        if result.is_err() {
            break;
        }
    }
    if json && result.is_ok() {
        result = out.write(b"\n]\n");
    }
    ignore_broken_pipe(result.and_then(|_| out.finish()))?;
    let short = repo.changelog().node(rev)?.short();
    for f in &bad {
        eprintln!(
            "{}: no such file in rev {short}",
            String::from_utf8_lossy(&ctx.display(f))
        );
    }
    Ok(if any { 0 } else { 1 })
}

/// The working copy's tracked files that `matcher` matches (hg's `files` without `-r`:
/// `dirstate.matches`, removed files left out), in path order; no warnings.
fn working_files(
    ws: &super::Workspace,
    base: &revfs_store::manifest::Manifest,
    matcher: &Matcher,
) -> Result<revfs_vfs::client::walk::ManifestFiles> {
    let status = revfs_vfs::client::status::fetch(ws, false, false, false)?;
    let letters: std::collections::BTreeMap<&[u8], char> = status
        .entries
        .iter()
        .map(|(l, p)| (p.as_slice(), *l))
        .collect();
    let in_dirstate =
        |f: &[u8]| -> Result<bool> { Ok(letters.contains_key(f) || base.find(f)?.is_some()) };
    let mut files: Vec<Vec<u8>> = Vec::new();
    let mut all_known = matcher.only_paths() && !matcher.is_always();
    if all_known {
        for f in matcher.files() {
            all_known &= in_dirstate(f)?;
        }
    }
    if all_known {
        // hg's fast path: the named files themselves (twice when named twice).
        files.extend(matcher.files().iter().cloned());
    } else {
        for e in base.iter() {
            let e = e?;
            if matcher.matches(e.path) {
                files.push(e.path.to_vec());
            }
        }
        for (p, l) in &letters {
            let added = *l == 'A' || (*l == '!' && base.find(p)?.is_none());
            if added && matcher.matches(p) {
                files.push(p.to_vec());
            }
        }
    }
    files.retain(|f| letters.get(f.as_slice()) != Some(&'R'));
    files.sort();
    Ok(files
        .into_iter()
        .map(|f| (f, revfs_store::Node::NULL))
        .collect())
}
