//! The soak (issue 56; docs/RELIABILITY.md, "The soak"): for a given time, with a fixed
//! seed, a mount of a repository takes at once updates back and forth, first reads with
//! read-ahead (4 readers, tar, grep), and a writer's creates, writes, renames, hard links,
//! truncations and fsyncs ([`load`]), rounds of tracked writes, `hg commit` and `hg
//! rebase` ([`tracked`]), and in some steps a frozen daemon ([`freeze`]); after every step
//! it checks every byte of every file it can name: the tracked files against `hg archive`
//! of the parent ([`truth`]), the writer's against its model ([`model`]). At random steps
//! it kills the daemon with SIGKILL and mounts again, and checks again: what was fsync'd
//! must be there; at others it kills it in the middle of the load ([`load`]), and after
//! the mount again a `revfs update` cut short must have left one revision or the other, an
//! hg command cut short is recovered as hg says (`hg recover`, `hg rebase --abort`, `hg
//! update -C`), and the writer's operation under way is made or not. The mount is of a
//! local clone of REPO (hard links, made in REPO's directory), so the commits stay out of
//! REPO.
//!
//! Usage: revfs-soak REPO --revs A,B [--seed N] [--minutes M] [--config FILE]
//!        [--kill-odds N] [--freeze-odds N]
//! (one step in N is frozen, 4 by default; one in N of the others is killed in its middle,
//! 5 by default)
//! (tests/soak/run.sh builds the linux corpus and runs each mode). Any difference is
//! printed with the seed and step that reproduce it, and the exit status is 1.

mod freeze;
mod load;
mod model;
mod tracked;
mod truth;

use revfs_tests::mount::Mount;
use revfs_tests::Rng;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Args {
    repo: PathBuf,
    revs: [String; 2],
    seed: u64,
    minutes: f64,
    config: String,
    kill_odds: usize,
    freeze_odds: usize,
}

fn usage(why: &str) -> ! {
    eprintln!("revfs-soak: {why}\nusage: revfs-soak REPO --revs A,B [--seed N] [--minutes M] [--config FILE] [--kill-odds N] [--freeze-odds N]");
    std::process::exit(2)
}

fn args() -> Args {
    let mut it = std::env::args().skip(1);
    let mut repo = None;
    let mut revs = None;
    let (mut seed, mut minutes, mut config) = (1u64, 10.0f64, String::new());
    let (mut kill_odds, mut freeze_odds) = (5usize, 4usize);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--revs" => {
                let v = value();
                let (x, y) = v.split_once(',').unwrap_or_else(|| usage("--revs A,B"));
                revs = Some([x.to_string(), y.to_string()]);
            }
            "--seed" => seed = value().parse().unwrap_or_else(|_| usage("--seed N")),
            "--minutes" => minutes = value().parse().unwrap_or_else(|_| usage("--minutes M")),
            "--kill-odds" => kill_odds = value().parse().unwrap_or_else(|_| usage("--kill-odds N")),
            "--freeze-odds" => {
                freeze_odds = value().parse().unwrap_or_else(|_| usage("--freeze-odds N"))
            }
            "--config" => {
                let f = value();
                config =
                    std::fs::read_to_string(&f).unwrap_or_else(|e| usage(&format!("{f}: {e}")));
            }
            _ if repo.is_none() && !a.starts_with('-') => repo = Some(PathBuf::from(a)),
            _ => usage(&format!("unknown argument {a}")),
        }
    }
    Args {
        repo: repo.unwrap_or_else(|| usage("no repository")),
        revs: revs.unwrap_or_else(|| usage("no --revs")),
        seed,
        minutes,
        config,
        kill_odds,
        freeze_odds,
    }
}

/// The directories of both revisions (relative), for the readers.
fn directories(revs: &[truth::Revision; 2]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = revs
        .iter()
        .flat_map(|r| r.files.iter())
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

fn main() {
    let a = args();
    // The mount's watchdog (tests/src/watchdog.rs) still fails a daemon stuck for a minute,
    // but its deadline for a mount's whole life is the soak's length and 15 minutes more,
    // not a test's 10 minutes.
    if std::env::var_os("REVFS_TEST_MOUNT_DEADLINE").is_none() {
        let seconds = (a.minutes * 60.0) as u64 + 900;
        // (before any thread starts)
        std::env::set_var("REVFS_TEST_MOUNT_DEADLINE", seconds.to_string());
    }
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let revs = [
        truth::Revision::new(&a.repo, &a.revs[0], scratch.path()),
        truth::Revision::new(&a.repo, &a.revs[1], scratch.path()),
    ];
    let nodes = [revs[0].node.clone(), revs[1].node.clone()];
    let dirs = directories(&revs);
    // The commits go to a clone beside REPO: hard links of its store, which hg breaks
    // before it appends to a revlog.
    let beside = tempfile::Builder::new()
        .prefix(".revfs-soak-")
        .tempdir_in(a.repo.parent().unwrap_or(Path::new("/var/tmp")))
        .expect("a directory beside the repository");
    let repo = beside.path().join("repo");
    let out = revfs_tests::hg_cmd(
        beside.path(),
        &["clone", "-q", "-U", &a.repo.display().to_string(), "repo"],
    );
    assert!(
        out.status.success(),
        "hg clone -U {}: {out:?}",
        a.repo.display()
    );
    let m = Mount::at_with_config(&repo, &nodes[0], &a.config);
    let mut model = model::Model::new(m.dir.join("soak-writes"));
    let mut rng = Rng::new(a.seed);
    let same = tracked::same_in_both(&revs, &mut rng, 200);
    let mut parent = 0;
    let (mut rounds, mut freezes, mut kernel_bound) = (0u64, 0u64, 0u64);
    let end = Instant::now() + Duration::from_secs_f64(a.minutes * 60.0);
    let started = Instant::now();
    let (mut step, mut kills, mut mid_kills, mut checked) = (0u64, 0u64, 0u64, 0u64);
    let mut failed = false;
    while Instant::now() < end && !failed {
        step += 1;
        let seconds = 2 + rng.below(9) as u64;
        let tree = load::Tree {
            mount: &m.dir,
            pid: m.daemon_pid(),
            dirs: &dirs,
            nodes: &nodes,
            same: &same,
            kill_odds: a.kill_odds,
            freeze_odds: a.freeze_odds,
        };
        let r = load::run(
            &tree,
            &mut parent,
            &mut rounds,
            &mut model,
            &mut rng,
            seconds,
        );
        freezes += u64::from(r.frozen.is_some());
        kernel_bound += u64::from(matches!(r.frozen, Some(freeze::Outcome::KernelBound(..))));
        let mut wrong = r.failures;
        let mut settled = String::new();
        if let Some(doing) = r.killed {
            // Killed in the middle of the step: mounted again, what was under way settled.
            mid_kills += 1;
            m.unmount();
            m.remount(&repo, None);
            match tracked::after_kill(&m.dir, &nodes, &mut parent, doing) {
                Ok(how) => settled = how,
                Err(e) => wrong.push(e),
            }
            match model.settle() {
                Ok(Some(how)) => settled = format!("{settled}; the writer's {how}"),
                Ok(None) => {}
                Err(e) => wrong.push(e),
            }
        }
        if let Err(e) = model.sync() {
            wrong.push(e);
        }
        wrong.extend(revs[parent].check(&m.dir, &revs[1 - parent]));
        wrong.extend(model.check());
        checked += revs[parent].files.len() as u64;
        let killed = wrong.is_empty() && rng.below(4) == 0;
        if killed {
            kills += 1;
            m.kill_daemon();
            m.unmount();
            m.remount(&repo, None);
            wrong.extend(revs[parent].check(&m.dir, &revs[1 - parent]));
            wrong.extend(model.check());
            checked += revs[parent].files.len() as u64;
        }
        println!(
            "step {step}: {seconds} s, {} files read, {} updates, {} commits and rebases, {} writes{}{}{}, parent {}, {}",
            r.files_read,
            r.updates,
            r.commits,
            r.writes,
            match &r.frozen {
                Some(freeze::Outcome::GaveUp(t)) =>
                    format!(", frozen (hg gave up after {:.2} s)", t.as_secs_f64()),
                Some(freeze::Outcome::KernelBound(t, w)) => format!(
                    ", frozen (hg waited for the kernel to look up .hg again: {:.2} s; {w})",
                    t.as_secs_f64()
                ),
                None => String::new(),
            },
            r.killed
                .map(|d| format!(", killed during the step ({d:?}; {settled})"))
                .unwrap_or_default(),
            if killed {
                ", killed and mounted again"
            } else {
                ""
            },
            &nodes[parent][..12],
            if wrong.is_empty() {
                "ok".to_string()
            } else {
                format!("{} WRONG", wrong.len())
            }
        );
        if !wrong.is_empty() {
            for w in wrong.iter().take(60) {
                println!("  {w}");
            }
            println!(
                "FAILED: seed {} step {step} (revfs-soak {} --revs {},{} --seed {})",
                a.seed,
                a.repo.display(),
                a.revs[0],
                a.revs[1],
                a.seed
            );
            failed = true;
        }
    }
    println!(
        "soak: seed {}, {step} steps in {:.0} s, {kills} kills after a step and {mid_kills} during one, {freezes} freezes ({kernel_bound} with hg waiting for the kernel to look up .hg again), {rounds} commit rounds, {checked} file checks, {}",
        a.seed,
        started.elapsed().as_secs_f64(),
        if failed { "FAILED" } else { "0 wrong" }
    );
    m.unmount();
    // process::exit runs no destructor: the mount, the clone and the archives go first.
    drop(m);
    drop(beside);
    drop(scratch);
    std::process::exit(i32::from(failed));
}
