//! The soak's history work: tracked files written in the mount, committed with `hg commit`,
//! the commit rebased onto the other revision with `hg rebase`, then the mount updated back
//! to that revision. Each round starts and ends at one of the two revisions, so between
//! rounds the tracked files are [`crate::truth`]'s; during a round they are checked here:
//! after the rebase the mount's parent is the rebased commit, on the other revision, and
//! every file written holds what was written.

use crate::model::first_difference;
use revfs_tests::Rng;
use std::path::{Path, PathBuf};

/// Tracked files whose bytes are the same in both revisions (regular files, not links):
/// an edit of one rebases onto the other revision without a conflict.
pub fn same_in_both(
    revs: &[crate::truth::Revision; 2],
    rng: &mut Rng,
    want: usize,
) -> Vec<PathBuf> {
    let mut same = Vec::new();
    for _ in 0..want * 4 {
        let Some(f) = rng.pick(&revs[0].files) else {
            break;
        };
        if same.contains(f) || revs[1].files.binary_search(f).is_err() {
            continue;
        }
        if let (Some(a), Some(b)) = (revs[0].bytes(f), revs[1].bytes(f)) {
            if a == b {
                same.push(f.clone());
            }
        }
        if same.len() == want {
            break;
        }
    }
    same
}

fn hg(mount: &Path, args: &[&str]) -> Result<String, String> {
    let out = revfs_tests::hg_plain_cmd(mount, args);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "hg {}: exit {:?}: {}",
            args.join(" "),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// One round from the revision `nodes[*parent]`: writes 1-4 of `files`, commits them,
/// rebases the commit onto the other revision, checks the mount there, and updates to the
/// other revision (moving `parent`). An error's text when anything differs or fails.
pub fn round(
    mount: &Path,
    nodes: &[String; 2],
    parent: &mut usize,
    files: &[PathBuf],
    rng: &mut Rng,
    n: u64,
) -> Result<(), String> {
    let to = 1 - *parent;
    let mut written: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let Some(f) = rng.pick(files) else { break };
        if written.iter().any(|(w, _)| w == f) {
            continue;
        }
        let p = mount.join(f);
        let mut data = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        data.extend_from_slice(
            format!("revfs soak round {n}: {:016x}\n", rng.next_u64()).as_bytes(),
        );
        std::fs::write(&p, &data).map_err(|e| format!("write {}: {e}", p.display()))?;
        written.push((f.clone(), data));
    }
    let message = format!("soak round {n}");
    hg(mount, &["commit", "-q", "-m", &message])?;
    hg(
        mount,
        &[
            "--config",
            "extensions.rebase=",
            "rebase",
            "-q",
            "-r",
            ".",
            "-d",
            &nodes[to],
        ],
    )?;
    let (p1, desc) = {
        let out = hg(mount, &["log", "-r", ".", "-T", "{p1node}\\n{desc}"])?;
        let (p1, desc) = out.split_once('\n').unwrap_or((&out, ""));
        (p1.to_string(), desc.to_string())
    };
    if p1 != nodes[to] || desc != message {
        return Err(format!(
            "after hg rebase of {message:?} onto {}: the parent is {desc:?}, on {p1}",
            nodes[to]
        ));
    }
    let changed = hg(mount, &["status", "-mard"])?;
    if !changed.is_empty() {
        return Err(format!(
            "after hg rebase of {message:?}: hg status -mard says\n{changed}"
        ));
    }
    for (f, want) in &written {
        let p = mount.join(f);
        match std::fs::read(&p) {
            Ok(got) if &got == want => {}
            Ok(got) => {
                return Err(format!(
                    "after hg rebase: {}",
                    first_difference(&p, &got, want)
                ))
            }
            Err(e) => return Err(format!("after hg rebase: {}: {e}", p.display())),
        }
    }
    crate::load::update(mount, &nodes[to], rng.below(2) == 0)?;
    *parent = to;
    Ok(())
}

/// After a kill in the middle of a step and a mount again: with no hg command under way
/// (nothing, or `revfs update`), the mount's parent must be one of the two revisions as it
/// stands (an update is whole or not at all); with `hg update` or a round under way, what
/// hg left is recovered as hg tells a user to (`hg recover`, `hg rebase --abort`, then `hg
/// update -C` to the revision the round started from, or the one hg update reached). Then
/// `hg status -mard` must be empty; `parent` is set to the revision the mount is at. What
/// was done, or an error's text.
pub fn after_kill(
    mount: &Path,
    nodes: &[String; 2],
    parent: &mut usize,
    doing: crate::load::InFlight,
) -> Result<String, String> {
    use crate::load::InFlight;
    let now = hg(mount, &["log", "-r", ".", "-T", "{node}"])?;
    let at = nodes.iter().position(|n| *n == now);
    let how = match doing {
        InFlight::Nothing | InFlight::RevfsUpdate => {
            let Some(at) = at else {
                return Err(format!(
                    "after a kill during {doing:?}: the parent is {now}, neither revision"
                ));
            };
            *parent = at;
            "no recovery".to_string()
        }
        InFlight::HgUpdate | InFlight::Round => {
            let mut did = Vec::new();
            let out = revfs_tests::hg_plain_cmd(mount, &["recover"]);
            if out.status.success() {
                did.push("hg recover");
            }
            let out = revfs_tests::hg_plain_cmd(
                mount,
                &["--config", "extensions.rebase=", "rebase", "--abort"],
            );
            if out.status.success() {
                did.push("hg rebase --abort");
            } else if !String::from_utf8_lossy(&out.stderr).contains("no rebase in progress") {
                return Err(format!(
                    "after a kill during {doing:?}: hg rebase --abort: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            let to = match (doing, at) {
                (InFlight::HgUpdate, Some(at)) => at,
                _ => *parent,
            };
            hg(mount, &["update", "-q", "-C", &nodes[to]])?;
            did.push("hg update -C");
            *parent = to;
            did.join(", ")
        }
    };
    let changed = hg(mount, &["status", "-mard"])?;
    if !changed.is_empty() {
        return Err(format!(
            "after a kill during {doing:?} ({how}): hg status -mard says\n{changed}"
        ));
    }
    Ok(how)
}
