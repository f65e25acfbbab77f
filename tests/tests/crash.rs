//! kill -9 of the daemon in the middle of a write storm, then a remount: every write that
//! was acknowledged by fsync is there, and `revfs status` equals what `hg status` says of a
//! checkout holding the same files.
//!
//! `REVFS_CRASH_ROUNDS` (default 20; tests/long.sh runs more) sets the number of trials; with the commit and update
//! crash tests (50 and 30 by default) CI runs 120 kills.

use revfs_tests::mount::{snapshot, Mount, Snap};
use revfs_tests::{fixtures, hg_cmd, revfs};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One attempted change of a path: its content afterwards (None = deleted), and whether
/// fsync acknowledged it.
type Attempt = (String, Option<Vec<u8>>, bool);

/// Writes, overwrites, renames and deletes files until an operation fails (the daemon is
/// gone), logging each attempt before it and its acknowledgement after fsync.
fn storm(root: &Path, stop: &AtomicBool, acked: &Mutex<Vec<Attempt>>) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let name = format!("storm/f{}.txt", i % 37);
        let content = format!("round {i}\n")
            .repeat((i % 50) as usize + 1)
            .into_bytes();
        let r = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(root.join("storm"))?;
            match i % 7 {
                5 => {
                    let from = root.join(format!("storm/f{}.txt", (i + 3) % 37));
                    if from.exists() {
                        let data = std::fs::read(&from)?;
                        let from_name = format!("storm/f{}.txt", (i + 3) % 37);
                        let n = {
                            let mut a = acked.lock().unwrap();
                            a.push((from_name, None, false));
                            a.push((name.clone(), Some(data), false));
                            a.len()
                        };
                        std::fs::rename(&from, root.join(&name))?;
                        std::fs::File::open(root.join("storm"))?.sync_all()?;
                        let mut a = acked.lock().unwrap();
                        a[n - 2].2 = true;
                        a[n - 1].2 = true;
                    }
                }
                6 => {
                    let p = root.join(&name);
                    if p.exists() {
                        let n = {
                            let mut a = acked.lock().unwrap();
                            a.push((name.clone(), None, false));
                            a.len()
                        };
                        std::fs::remove_file(&p)?;
                        std::fs::File::open(root.join("storm"))?.sync_all()?;
                        acked.lock().unwrap()[n - 1].2 = true;
                    }
                }
                _ => {
                    let n = {
                        let mut a = acked.lock().unwrap();
                        // Until acknowledged, a rewrite may leave the file empty or partial.
                        a.push((name.clone(), Some(Vec::new()), false));
                        a.push((name.clone(), Some(content.clone()), false));
                        a.len()
                    };
                    let mut f = std::fs::File::create(root.join(&name))?;
                    f.write_all(&content)?;
                    f.sync_all()?;
                    acked.lock().unwrap()[n - 1].2 = true;
                }
            }
            Ok(())
        })();
        if r.is_err() {
            return;
        }
    }
}

fn crash_once(round: u64) {
    let repo = fixtures().join("tiny");
    let mount = Mount::new(&repo, Some("tip"));
    // Some earlier, fsync'd edits of tracked files too.
    std::fs::write(mount.dir.join("a.txt"), b"edited before the storm\n").unwrap();
    std::fs::File::open(mount.dir.join("a.txt"))
        .unwrap()
        .sync_all()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (root, stop, acked) = (mount.dir.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || storm(&root, &stop, &acked))
    };
    // A kill at a random point of the storm, between 0.1 and 0.5 s into it.
    let mut rng = revfs_tests::Rng::new(0x5eed_0000 + round);
    std::thread::sleep(std::time::Duration::from_millis(
        100 + rng.below(400) as u64,
    ));
    mount.kill_daemon();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    mount.unmount();
    mount.remount(&repo, Some("tip"));

    // Each path holds its last acknowledged state, or a state attempted after it (a change
    // the daemon may or may not have made before it died).
    let log = acked.lock().unwrap().clone();
    assert!(
        log.iter().any(|a| a.2),
        "round {round}: the storm acknowledged nothing"
    );
    let paths: std::collections::BTreeSet<&String> = log.iter().map(|a| &a.0).collect();
    for p in paths {
        let mine: Vec<&Attempt> = log.iter().filter(|a| &a.0 == p).collect();
        let Some(last_ack) = mine.iter().rposition(|a| a.2) else {
            continue;
        };
        let allowed: Vec<Option<&[u8]>> = mine[last_ack..].iter().map(|a| a.1.as_deref()).collect();
        let got = std::fs::read(mount.dir.join(p)).ok();
        let partial = |g: &[u8]| {
            mine[last_ack..]
                .iter()
                .any(|a| a.1.as_deref().is_some_and(|c| c.starts_with(g)))
        };
        assert!(
            allowed.contains(&got.as_deref()) || got.as_deref().is_some_and(|g| last_ack + 1 < mine.len() && partial(g)),
            "round {round}: {p} after the crash is {:?}, expected one of {} states from the last acknowledged one",
            got.as_ref().map(|g| String::from_utf8_lossy(&g[..g.len().min(40)]).into_owned()),
            allowed.len()
        );
    }
    assert_eq!(
        std::fs::read(mount.dir.join("a.txt")).unwrap(),
        b"edited before the storm\n"
    );

    // Status equals hg's on a checkout holding the same files.
    let tmp = revfs_tests::scratch_dir();
    let wc = tmp.path().join("wc");
    assert!(hg_cmd(
        tmp.path(),
        &[
            "clone",
            "-q",
            "-u",
            "tip",
            &repo.display().to_string(),
            "wc"
        ]
    )
    .status
    .success());
    for (p, s) in snapshot(&wc) {
        if !matches!(s, Snap::Dir) {
            std::fs::remove_file(wc.join(p)).unwrap();
        }
    }
    for (p, s) in snapshot(&mount.dir) {
        match s {
            Snap::Dir => std::fs::create_dir_all(wc.join(&p)).unwrap(),
            Snap::File { data, exec, .. } => {
                std::fs::write(wc.join(&p), data).unwrap();
                if exec {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(wc.join(&p), std::fs::Permissions::from_mode(0o755))
                        .unwrap();
                }
            }
            Snap::Link(t) => {
                std::os::unix::fs::symlink(String::from_utf8(t).unwrap(), wc.join(&p)).unwrap()
            }
        }
    }
    let ours = revfs(&mount.dir, &["status"]);
    let theirs = hg_cmd(&wc, &["status"]);
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&theirs.stdout),
        "round {round}: status after the crash"
    );
}

#[test]
fn fsynced_writes_survive_a_killed_daemon() {
    let rounds: u64 = revfs_tests::env_or("REVFS_CRASH_ROUNDS", 20);
    for round in 0..rounds {
        crash_once(round);
    }
}
