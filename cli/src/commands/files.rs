//! `revfs files`: the tracked files of a revision, as `hg files` lists them.

use crate::paths::{Matcher, PathContext};
use crate::ui::{ignore_broken_pipe, Out};
use anyhow::Result;
use clap::Args;

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
    /// Files or directories to list
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

pub fn run(cli: &crate::Cli, args: &FilesArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    let repo = &ws.repo;
    let rev = ws.resolve_single(args.rev.as_deref())?;
    let manifest = repo.manifest_of(rev)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let end = if args.print0 { b'\0' } else { b'\n' };
    let mut out = Out::new();
    let mut matched = vec![false; matcher.args().len()];
    let mut any = false;
    let mut result = Ok(());
    for entry in manifest.iter() {
        let entry = entry?;
        if !matcher.matches(entry.path) {
            continue;
        }
        if let Some(i) = matcher.matching_arg(entry.path) {
            matched[i] = true;
        }
        any = true;
        let mut line = ctx.display(entry.path);
        line.push(end);
        result = out.write(&line);
        if result.is_err() {
            break;
        }
    }
    ignore_broken_pipe(result.and_then(|_| out.finish()))?;
    let short = repo.changelog().node(rev)?.short();
    for (arg, _) in matcher.args().iter().zip(&matched).filter(|(_, m)| !**m) {
        eprintln!(
            "{}: no such file in rev {short}",
            String::from_utf8_lossy(&ctx.display(arg))
        );
    }
    Ok(if any { 0 } else { 1 })
}
