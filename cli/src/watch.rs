//! `revfs watch [-T json] [--since CURSOR] [--once] [PATTERN...]`: prints what changes in a
//! mount as it changes (files written, made, removed through the mount; what an update
//! changed), from the daemon's change feed (`vfs/src/wc/feed.rs`), never from a walk of
//! the tree. A cursor says where a tool was: given back with `--since`, after a restart of
//! the tool or a remount, the changes after it are printed, none missed, none twice.

use crate::commands::open_workspace;
use crate::ui::json_string;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_vfs::service::control::{Request, Response};
use std::io::Write;

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Print the changes after this cursor (from an earlier `revfs watch`), then go on
    #[arg(long = "since", value_name = "CURSOR")]
    since: Option<String>,
    /// Print what changed since the cursor (with --since) and the cursor of now, then stop
    #[arg(long = "once")]
    once: bool,
    /// Output format (only `json`: one object a line, each with its cursor)
    #[arg(short = 'T', long = "template", value_name = "TEMPLATE")]
    template: Option<String>,
    /// Only changes of these files, directories or patterns (glob:, re:, path:)
    #[arg(value_name = "PATTERN")]
    patterns: Vec<String>,
}

/// How often the daemon is asked (a question costs it a look at its feed, nothing more).
const POLL: std::time::Duration = std::time::Duration::from_millis(100);

pub fn run(cli: &crate::Cli, args: &WatchArgs) -> Result<u8> {
    let json = match args.template.as_deref() {
        None => false,
        Some("json") => true,
        Some(other) => bail!("unsupported template '{other}' (only 'json' is supported)"),
    };
    if let Some(c) = &args.since {
        c.parse::<revfs_vfs::wc::feed::Cursor>()
            .map_err(|why| anyhow!("{why}"))?;
    }
    let ws = open_workspace(cli)?;
    if ws.mount.is_none() {
        bail!(
            "{} is not a revfs mount (watch runs inside a mount, or with -R MOUNTPOINT)",
            ws.root.display()
        );
    }
    let ctx = PathContext::new(&ws.root)?;
    let matcher = (!args.patterns.is_empty())
        .then(|| Matcher::new(&ctx, &args.patterns))
        .transpose()?;
    let mut since = args.since.clone();
    let stdout = std::io::stdout();
    loop {
        let (cursor, fresh, changes) = match ws.request(&Request::Changes {
            since: since.clone(),
        })? {
            Response::Changes {
                cursor,
                fresh,
                changes,
            } => (cursor, fresh, changes),
            other => return Err(anyhow!("unexpected answer from the daemon: {other:?}")),
        };
        let instance = cursor.split(':').next().unwrap_or_default().to_string();
        let mut out = Vec::new();
        if fresh {
            if json {
                out.extend_from_slice(
                    format!("{{\"cursor\": \"{cursor}\", \"fresh\": true}}\n").as_bytes(),
                );
            } else {
                eprintln!(
                    "revfs watch: cursor {} is not of this mount's changes, or too old: what changed before {cursor} cannot be told (look at the whole tree)",
                    since.as_deref().unwrap_or_default()
                );
            }
        } else if json && since.is_none() {
            // Where a tool starts (the first question, without a cursor): changes come
            // after it.
            out.extend_from_slice(format!("{{\"cursor\": \"{cursor}\"}}\n").as_bytes());
        }
        for (seq, kind, path) in &changes {
            if matcher.as_ref().is_some_and(|m| !m.matches(path)) {
                continue;
            }
            if json {
                out.extend_from_slice(
                    format!("{{\"cursor\": \"{instance}:{seq}\", \"kind\": \"{kind}\", \"path\": ")
                        .as_bytes(),
                );
                out.extend_from_slice(&json_string(path));
                out.extend_from_slice(b"}\n");
            } else {
                out.extend_from_slice(kind.as_bytes());
                out.push(b' ');
                out.extend_from_slice(path);
                out.push(b'\n');
            }
        }
        if args.once {
            if json {
                out.extend_from_slice(format!("{{\"cursor\": \"{cursor}\"}}\n").as_bytes());
            } else {
                out.extend_from_slice(format!("cursor {cursor}\n").as_bytes());
            }
        }
        if !out.is_empty() {
            let mut lock = stdout.lock();
            if let Err(e) = lock.write_all(&out).and_then(|_| lock.flush()) {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(0);
                }
                return Err(e.into());
            }
        }
        if args.once {
            return Ok(0);
        }
        since = Some(cursor);
        std::thread::sleep(POLL);
    }
}
