//! `revfs files`: the tracked files of a revision, as `hg files` lists them.

use crate::ui::{ignore_broken_pipe, json_string, Out};
use anyhow::{bail, Result};
use clap::Args;
use revfs_hg::matcher::{Matcher, PathContext};

#[derive(Args, Debug)]
pub struct FilesArgs {
    /// Search the repository as it is in REV
    #[arg(
        short = 'r',
        long = "rev",
        value_name = "REV",
        allow_hyphen_values = true
    )]
    rev: Option<String>,
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
        Some(other) => bail!("unsupported template '{other}' (only 'json' is supported)"),
    };
    let ws = super::open_workspace(cli)?;
    let repo = &ws.repo;
    let rev = ws.resolve_single(args.rev.as_deref())?;
    let manifest = repo.manifest_of(rev)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let end = if args.print0 { b'\0' } else { b'\n' };
    let mut out = Out::new();
    let (found, bad) = super::walk::manifest_walk(&manifest, &matcher)?;
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
