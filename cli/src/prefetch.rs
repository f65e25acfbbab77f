//! `revfs prefetch [-r REV] PATTERN...`: has the mount's daemon read the matching files of
//! the working-copy parent (or REV) before a build opens them, in parallel, so that reads
//! through the mount find the daemon's caches (and the kernel's page cache of the revlogs)
//! warm. Unmatched file arguments are reported as `hg cat` reports them.

use crate::commands::open_workspace;
use crate::progress::{self, Progress};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_vfs::service::control::{Request, Response};

#[derive(Args, Debug)]
#[command(mut_arg("rev", |a| a.help("Prefetch the files of this revision (default: the working-copy parent)")))]
pub struct PrefetchArgs {
    #[command(flatten)]
    rev: crate::commands::RevArg,
    /// Print no summary and no progress
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// Files, directories or patterns (glob:, re:, path:) to prefetch
    #[arg(value_name = "PATTERN", required = true)]
    patterns: Vec<String>,
}

pub fn run(cli: &crate::Cli, args: &PrefetchArgs) -> Result<u8> {
    let ws = open_workspace(cli)?;
    if ws.mount.is_none() {
        bail!(
            "{} is not a revfs mount (prefetch runs inside a mount, or with -R MOUNTPOINT)",
            ws.root.display()
        );
    }
    let t0 = std::time::Instant::now();
    let rev = ws.resolve_single(args.rev.rev.as_deref())?;
    let node = ws.repo()?.changelog().node(rev)?;
    let manifest = ws.repo()?.manifest_of(rev)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.patterns)?;
    let mut matched = vec![false; matcher.args().len()];
    let mut paths = Vec::new();
    for entry in manifest.iter() {
        let entry = entry?;
        if !matcher.matches(entry.path) {
            continue;
        }
        if let Some(i) = matcher.matching_arg(entry.path) {
            matched[i] = true;
        }
        paths.push(entry.path.to_vec());
    }
    // hg names them in path order.
    let mut unmatched: Vec<&Vec<u8>> = matcher
        .args()
        .iter()
        .zip(&matched)
        .filter(|(_, m)| !**m)
        .map(|(a, _)| a)
        .collect();
    unmatched.sort();
    unmatched.dedup();
    for arg in unmatched {
        eprintln!(
            "{}: no such file in rev {}",
            String::from_utf8_lossy(&ctx.display(arg)),
            node.short()
        );
    }
    if paths.is_empty() {
        return Ok(1);
    }
    let mut bar = Progress::new(progress::wanted(args.quiet, Some(ws.repo_root())));
    revfs_vfs::client::Progress::start(&mut bar, "prefetching");
    let req = Request::Prefetch {
        node: args.rev.rev.as_ref().map(|_| node.to_hex()),
        paths,
    };
    let (files, bytes) = match ws.request_with_progress(&req, &mut bar)? {
        Response::Prefetched { files, bytes } => (files, bytes),
        other => return Err(anyhow!("unexpected answer from the daemon: {other:?}")),
    };
    if !args.quiet {
        println!(
            "prefetched {files} files ({}) in {:.2} s",
            human_bytes(bytes),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(0)
}

/// `512 bytes`, `12.3 KB`, `4.5 MB`, `1.2 GB` (powers of 1000).
fn human_bytes(n: u64) -> String {
    let f = n as f64;
    if n < 1000 {
        format!("{n} bytes")
    } else if f < 1e6 {
        format!("{:.1} KB", f / 1e3)
    } else if f < 1e9 {
        format!("{:.1} MB", f / 1e6)
    } else {
        format!("{:.1} GB", f / 1e9)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(super::human_bytes(0), "0 bytes");
        assert_eq!(super::human_bytes(999), "999 bytes");
        assert_eq!(super::human_bytes(21_180), "21.2 KB");
        assert_eq!(super::human_bytes(4_500_000), "4.5 MB");
        assert_eq!(super::human_bytes(1_234_000_000), "1.2 GB");
    }
}
