//! `revfs cat`: file contents as of a revision, byte for byte what `hg cat` prints.

use crate::ui::{ignore_broken_pipe, Out};
use anyhow::{anyhow, Context, Result};
use clap::Args;
use rayon::prelude::*;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_store::filelog::{FileText, Filelog};
use revfs_store::{pathaudit, Node, Rev};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[derive(Args, Debug)]
#[command(mut_arg("rev", |a| a.help("Print the given revision (default: the working directory parent)")))]
pub struct CatArgs {
    #[command(flatten)]
    rev: super::RevArg,
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

/// A file about to be read: its filelog, the revision, and its size from the index.
struct Opened<'p> {
    path: &'p [u8],
    filelog: Filelog,
    rev: Rev,
    size: usize,
}

/// Splits opened files into consecutive groups of at most `max_bytes` of text (a single
/// larger file makes a group of its own).
fn byte_bounded_groups<'a, 'p>(items: &'a [Opened<'p>], max_bytes: usize) -> Vec<&'a [Opened<'p>]> {
    let mut groups = Vec::new();
    let (mut start, mut bytes) = (0, 0usize);
    for (i, item) in items.iter().enumerate() {
        if i > start && bytes + item.size > max_bytes {
            groups.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += item.size;
    }
    if start < items.len() {
        groups.push(&items[start..]);
    }
    groups
}

/// Writes one `-o` output file, creating its directory.
fn write_output(name: &[u8], text: &[u8]) -> Result<()> {
    let target = Path::new(std::ffi::OsStr::from_bytes(name));
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(target, text).with_context(|| format!("cannot write {}", target.display()))
}

pub fn run(cli: &crate::Cli, args: &CatArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    let repo = ws.repo()?;
    let rev = ws.resolve_single(args.rev.rev.as_deref())?;
    let manifest = repo.manifest_of(rev)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;

    // Named files are found by binary search and directories by a prefix scan; other
    // patterns by a scan of the manifest.
    let (selected, unmatched) = revfs_vfs::client::walk::manifest_walk(&manifest, &matcher)?;
    let node = repo.changelog().node(rev)?;
    let repo_base = ws
        .root
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    let naming = args.output.as_deref().map(|format| OutputName {
        format,
        node,
        rev,
        repo_base: &repo_base,
    });
    // Files are opened and read in parallel, a batch at a time, and written out in path
    // order. A batch holds at most BATCH_BYTES of text, so huge files do not pile up.
    const BATCH_FILES: usize = 256;
    const BATCH_BYTES: usize = 32 << 20;
    let mut out = Out::new();
    let mut result = Ok(());
    for batch in selected.chunks(BATCH_FILES) {
        let opened: Vec<Opened> = batch
            .par_iter()
            .map(|(path, filenode)| -> Result<Opened> {
                let filelog = repo.filelog_uncached(path)?;
                let rev = filelog.rev_of(filenode)?;
                let size = filelog.raw_len(rev)?.unwrap_or(0) as usize;
                Ok(Opened {
                    path,
                    filelog,
                    rev,
                    size,
                })
            })
            .collect::<Result<_>>()?;
        for group in byte_bounded_groups(&opened, BATCH_BYTES) {
            let texts: Vec<Result<FileText>> = group
                .par_iter()
                .map(|file| -> Result<FileText> {
                    let text = file.filelog.read_uncached(file.rev)?;
                    if let Some(naming) = &naming {
                        // A hostile manifest must not make `-o %p` write outside the target.
                        pathaudit::audit(file.path).map_err(|why| {
                            anyhow!(
                                "refusing to write {:?}: {why}",
                                String::from_utf8_lossy(file.path)
                            )
                        })?;
                        write_output(&naming.expand(file.path), &text)?;
                    }
                    Ok(text)
                })
                .collect();
            for text in texts {
                let text = text?;
                if naming.is_none() && result.is_ok() {
                    result = out.write(&text);
                }
            }
            if result.is_err() {
                break;
            }
        }
        if result.is_err() {
            break;
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
