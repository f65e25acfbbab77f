//! `revfs cat`: file contents as of a revision, byte for byte what `hg cat` prints.

use crate::paths::{Matcher, PathContext};
use crate::ui::{ignore_broken_pipe, Out};
use anyhow::{Context, Result};
use clap::Args;
use revfs_vfs::store::Node;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[derive(Args, Debug)]
pub struct CatArgs {
    /// Print the given revision (default: the working directory parent)
    #[arg(short = 'r', long = "rev", value_name = "REV")]
    rev: Option<String>,
    /// Print output to files named by FORMAT (%% %s %d %p %H %R %h %r %b)
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    output: Option<String>,
    /// Files or directories to print
    #[arg(value_name = "FILE", required = true)]
    files: Vec<String>,
}

/// What `-o` needs to know to name an output file.
struct OutputName<'a> {
    format: &'a str,
    node: Node,
    rev: i32,
    repo_base: &'a [u8],
}

impl OutputName<'_> {
    fn expand(&self, path: &[u8]) -> Vec<u8> {
        let (dir, base) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b"."[..], path),
        };
        let mut out = Vec::new();
        let mut chars = self.format.bytes();
        while let Some(c) = chars.next() {
            if c != b'%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some(b'%') => out.push(b'%'),
                Some(b's') => out.extend_from_slice(base),
                Some(b'd') => out.extend_from_slice(dir),
                Some(b'p') => out.extend_from_slice(path),
                Some(b'H') => out.extend_from_slice(self.node.to_hex().as_bytes()),
                Some(b'h') => out.extend_from_slice(self.node.short().as_bytes()),
                Some(b'R') | Some(b'r') => out.extend_from_slice(self.rev.to_string().as_bytes()),
                Some(b'b') => out.extend_from_slice(self.repo_base),
                Some(other) => out.extend_from_slice(&[b'%', other]),
                None => out.push(b'%'),
            }
        }
        out
    }
}

pub fn run(cli: &crate::Cli, args: &CatArgs) -> Result<u8> {
    let repo = super::open_repo(cli)?;
    let rev = super::resolve_single(&repo, args.rev.as_deref())?;
    let manifest = repo.manifest_of(rev)?;
    let ctx = PathContext::new(repo.root())?;
    let matcher = Matcher::new(&ctx, &args.files)?;

    // Exact files are found by binary search; directories by a prefix scan.
    let mut selected = BTreeMap::new();
    let mut unmatched = Vec::new();
    for arg in matcher.args() {
        if let Some(entry) = manifest.find(arg)? {
            selected.insert(entry.path.to_vec(), entry.node);
            continue;
        }
        let mut dir = arg.clone();
        if !dir.is_empty() {
            dir.push(b'/');
        }
        let before = selected.len();
        let mut found = false;
        for entry in manifest.iter_prefix(&dir) {
            let entry = entry?;
            selected.insert(entry.path.to_vec(), entry.node);
            found = true;
        }
        if !found && selected.len() == before {
            unmatched.push(arg.clone());
        }
    }

    let node = repo.changelog().node(rev)?;
    let repo_base = repo
        .root()
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    let naming = args.output.as_deref().map(|format| OutputName {
        format,
        node,
        rev,
        repo_base: &repo_base,
    });
    let mut out = Out::new();
    let mut result = Ok(());
    for (path, filenode) in &selected {
        let filelog = repo.filelog(path)?;
        let text = filelog.read(filelog.rev_of(filenode)?)?;
        match &naming {
            Some(naming) => {
                let name = naming.expand(path);
                let target = Path::new(std::ffi::OsStr::from_bytes(&name));
                if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("cannot create {}", parent.display()))?;
                }
                std::fs::write(target, &*text)
                    .with_context(|| format!("cannot write {}", target.display()))?;
            }
            None => {
                result = out.write(&text);
                if result.is_err() {
                    break;
                }
            }
        }
    }
    ignore_broken_pipe(result.and_then(|_| out.finish()))?;
    for arg in &unmatched {
        eprintln!(
            "{}: no such file in rev {}",
            String::from_utf8_lossy(&ctx.display(arg)),
            node.short()
        );
    }
    Ok(if selected.is_empty() { 1 } else { 0 })
}
