//! kill -9 in the middle of `revfs commit`, at random points: of the daemon that writes
//! the commit, and of the command that asked for it. After each kill, `revfs recover` (when
//! a transaction was left behind) and a remount: `hg verify` passes, and every working-copy
//! change is still there, committed or not.
//!
//! `REVFS_COMMIT_CRASH_ROUNDS` (default 25; tests/long.sh runs more) sets the number of trials.

use revfs_tests::mount::{snapshot, Mount};
use revfs_tests::{hg_cmd, scratch_dir};
use std::path::Path;
use std::time::{Duration, Instant};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn make_repo(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    assert!(hg_cmd(dir, &["init", "repo"]).status.success());
    for i in 0..300 {
        let p = repo.join(format!("d{}/f{i}.txt", i % 10));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("file {i}\n").repeat(50)).unwrap();
    }
    assert!(hg_cmd(&repo, &["commit", "-qAm", "base", "-d", "0 0"])
        .status
        .success());
    repo
}

fn rv(m: &Mount, args: &[&str]) -> std::process::Output {
    let mut full = vec!["-R", m.dir.to_str().unwrap()];
    full.extend_from_slice(args);
    m.revfs(&full)
}

#[test]
fn a_commit_killed_at_any_point_loses_nothing_and_hg_verify_passes() {
    let rounds: u64 = revfs_tests::env_or("REVFS_COMMIT_CRASH_ROUNDS", 25);
    let tmp = scratch_dir();
    let repo = make_repo(tmp.path());
    let m = Mount::new(&repo, None);
    // How long a commit of this size takes on this machine now, to spread the kills over it:
    // one commit of the same shape, not killed.
    for i in 0..150 {
        let f = m.dir.join(format!("d{}/f{i}.txt", i % 10));
        std::fs::write(&f, format!("calibration {i}\n")).unwrap();
    }
    let started = Instant::now();
    assert!(rv(&m, &["commit", "-m", "calibration"]).status.success());
    let mut commit_time = started.elapsed();
    let mut rng = 0x1234_5678_9abc_def1u64;
    let mut landed = 0;
    for round in 0..rounds {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        for i in 0..150 {
            let j = (i * 7 + round as usize) % 300;
            let f = m.dir.join(format!("d{}/f{j}.txt", j % 10));
            std::fs::write(&f, format!("round {round} edit {i}\n")).unwrap();
        }
        std::fs::write(m.dir.join(format!("new{round}.txt")), b"new\n").unwrap();
        assert!(rv(&m, &["add", &format!("path:new{round}.txt")])
            .status
            .success());
        let before = snapshot(&m.dir);
        let status_before = s(&rv(&m, &["status"]).stdout);
        let parent_before = s(&rv(&m, &["log", "-r", ".", "-T", "{node}"]).stdout);

        let kill_daemon = round % 5 != 4;
        let started = Instant::now();
        let delay = Duration::from_nanos(rng % (commit_time.as_nanos() as u64 * 3 / 2 + 1));
        let mut child =
            revfs_tests::hg_env(&mut std::process::Command::new(revfs_tests::revfs_bin()))
                .args([
                    "-R",
                    m.dir.to_str().unwrap(),
                    "commit",
                    "-m",
                    &format!("round {round}"),
                ])
                .env("REVFS_STATE_DIR", &m.state_root)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
        std::thread::sleep(delay);
        if kill_daemon {
            let pid = m.daemon_pid();
            assert!(std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap()
                .success());
        } else {
            let _ = child.kill();
        }
        let _ = child.wait();
        if kill_daemon {
            m.unmount();
            // A transaction left behind by the killed daemon is rolled back.
            let rec = revfs_tests::revfs(&repo, &["recover"]);
            let out = s(&rec.stdout) + &s(&rec.stderr);
            assert!(
                rec.status.success() || out.contains("no interrupted transaction available"),
                "round {round}: recover: {out}"
            );
            m.remount(&repo, None);
        } else {
            // The daemon finishes the commit on its own; wait for it (a kill before the
            // request went out leaves the changes pending: give up after 10 s). How long it
            // took is the commit time under the machine's load now: the next kills spread
            // over that.
            while started.elapsed() < Duration::from_secs(10) {
                if s(&rv(&m, &["status", "-m"]).stdout).is_empty() {
                    commit_time = started.elapsed();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let v = hg_cmd(&repo, &["verify", "-q"]);
        assert!(
            v.status.success(),
            "round {round} (delay {delay:?}, daemon killed: {kill_daemon}): hg verify: {}{}",
            s(&v.stdout),
            s(&v.stderr)
        );
        // No working-copy change is lost, whether the commit landed or not.
        let after = snapshot(&m.dir);
        if after != before {
            let diff: Vec<String> = after
                .iter()
                .filter(|e| !before.contains(e))
                .chain(before.iter().filter(|e| !after.contains(e)))
                .map(|(p, s)| format!("{} {s:?}", p.display()))
                .take(6)
                .collect();
            panic!(
                "round {round} (daemon killed: {kill_daemon}): files changed by the crash: {diff:#?}\nstatus now:\n{}",
                s(&rv(&m, &["status"]).stdout)
            );
        }
        let parent = s(&rv(&m, &["log", "-r", ".", "-T", "{node}"]).stdout);
        let status = s(&rv(&m, &["status"]).stdout);
        if parent == parent_before {
            assert_eq!(
                status, status_before,
                "round {round}: not committed, changes kept"
            );
        } else {
            landed += 1;
            assert_eq!(
                status, "",
                "round {round}: committed, nothing left to commit"
            );
            let log = hg_cmd(&repo, &["log", "-r", &parent, "-T", "{desc}"]);
            assert_eq!(s(&log.stdout), format!("round {round}"));
        }
        // Whatever is left is committed cleanly before the next round.
        if !status.is_empty() {
            let out = rv(&m, &["commit", "-m", &format!("after round {round}")]);
            assert!(out.status.success(), "round {round}: {}", s(&out.stderr));
        }
    }
    assert!(
        landed > 0 && landed < rounds,
        "kills should hit before and after the commit point ({landed} of {rounds} landed)"
    );
}

#[test]
fn an_update_killed_at_any_point_leaves_one_revision_or_the_other() {
    let rounds: u64 = revfs_tests::env_or("REVFS_UPDATE_CRASH_ROUNDS", 15);
    let tmp = scratch_dir();
    let repo = make_repo(tmp.path());
    // Revision 1 changes half the files, removes some, adds some.
    for i in 0..300 {
        let p = repo.join(format!("d{}/f{i}.txt", i % 10));
        match i % 6 {
            0 => std::fs::remove_file(&p).unwrap(),
            1..=3 => std::fs::write(&p, format!("changed {i}\n")).unwrap(),
            _ => {}
        }
    }
    for i in 0..40 {
        std::fs::create_dir_all(repo.join("new")).unwrap();
        std::fs::write(repo.join(format!("new/n{i}")), b"new\n").unwrap();
    }
    assert!(hg_cmd(&repo, &["commit", "-qAm", "one", "-d", "0 0"])
        .status
        .success());
    let m = Mount::new(&repo, Some("0"));
    let expected = |rev: &str| -> Vec<(std::path::PathBuf, revfs_tests::mount::Snap)> {
        let co = tmp.path().join(format!("co{rev}"));
        if !co.exists() {
            let out = hg_cmd(
                tmp.path(),
                &[
                    "clone",
                    "-q",
                    "-r",
                    rev,
                    repo.to_str().unwrap(),
                    co.to_str().unwrap(),
                ],
            );
            assert!(out.status.success(), "{}", s(&out.stderr));
        }
        snapshot(&co)
    };
    let (want0, want1) = (expected("0"), expected("1"));
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut moved = 0;
    for round in 0..rounds {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let _ = std::fs::read_dir(&m.dir).map(|d| d.count());
        let parent = s(&rv(&m, &["log", "-r", ".", "-T", "{rev}"]).stdout);
        let target = if parent == "0" { "1" } else { "0" };
        let mut child =
            revfs_tests::hg_env(&mut std::process::Command::new(revfs_tests::revfs_bin()))
                .args(["-R", m.dir.to_str().unwrap(), "update", "-r", target])
                .env("REVFS_STATE_DIR", &m.state_root)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
        std::thread::sleep(Duration::from_micros(rng % 40_000));
        let pid = m.daemon_pid();
        assert!(std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success());
        let _ = child.wait();
        m.unmount();
        m.remount(&repo, None);
        let now = s(&rv(&m, &["log", "-r", ".", "-T", "{rev}"]).stdout);
        assert!(now == "0" || now == "1", "round {round}: parent {now}");
        if now != parent {
            moved += 1;
        }
        let tree = snapshot(&m.dir);
        let want = if now == "0" { &want0 } else { &want1 };
        assert!(
            &tree == want,
            "round {round}: the tree is not revision {now} (killed during update {parent} -> {target})"
        );
        assert_eq!(s(&rv(&m, &["status"]).stdout), "", "round {round}");
    }
    assert!(moved > 0, "no update ever completed before the kill");
}
