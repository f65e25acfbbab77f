//! The oracle test of commit and update: the same random edits, commits and updates are
//! made on a revfs mount of one repository and, with hg, in an ordinary checkout of a clone
//! of it. Every commit must produce the very same changeset (same node: same files, file
//! revisions, copy records, manifest and changelog entry), and every command the same
//! output and exit status; after each step both trees hold the same files and `status`
//! says the same. The one known difference: an update over local changes that overlap it
//! stops in revfs (`abort: uncommitted changes`) where hg merges; then both sides discard
//! their changes and go on.
//!
//! `REVFS_ORACLE_STEPS` (default 150; tests/long.sh runs more) and `REVFS_SEED` set the length and the seed.

use revfs_tests::mount::{snapshot, Mount};
use revfs_tests::Rng;
use revfs_tests::{hg_cmd, scratch_dir};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn text(rng: &mut Rng) -> Vec<u8> {
    let lines: [&[u8]; 4] = [b"alpha\n", b"beta\n", b"gamma gamma\n", b"\n"];
    let n = rng.below(8);
    rng.concat(&lines, n)
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// (exit status, stdout, stderr) of a command.
type Res = (Option<i32>, String, String);

fn res(o: std::process::Output) -> Res {
    (o.status.code(), s(&o.stdout), s(&o.stderr))
}

struct Sides<'a> {
    m: &'a Mount,
    hgwc: &'a Path,
}

impl Sides<'_> {
    fn revfs(&self, args: &[&str]) -> Res {
        // From inside the mount, as hg runs in its checkout.
        res(self.m.revfs_in(&self.m.dir, args))
    }
    fn hg(&self, args: &[&str]) -> Res {
        res(hg_cmd(self.hgwc, args))
    }
    /// The same command on both sides; returns both results.
    fn both(&self, args: &[&str]) -> (Res, Res) {
        (self.revfs(args), self.hg(args))
    }
    fn roots(&self) -> [&Path; 2] {
        [&self.m.dir, self.hgwc]
    }
}

fn tracked_files(root: &Path) -> Vec<String> {
    snapshot(root)
        .into_iter()
        .filter(|(_, s)| !matches!(s, revfs_tests::mount::Snap::Dir))
        .map(|(p, _)| p.to_string_lossy().into_owned())
        .collect()
}

/// Removes the empty directories below `root` (not `.hg`).
fn prune_empty_dirs(root: &Path) {
    fn walk(dir: &Path, top: bool) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            if e.file_name() == ".hg" {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), false);
            }
        }
        if !top {
            let _ = std::fs::remove_dir(dir);
        }
    }
    walk(root, true);
}

#[test]
fn commits_and_updates_match_hg_byte_for_byte() {
    let steps: usize = revfs_tests::env_or("REVFS_ORACLE_STEPS", 150);
    let seed: u64 = revfs_tests::env_or("REVFS_SEED", 0xfeed_beef);
    let tmp = scratch_dir();
    let top = tmp.path().to_owned();
    // REVFS_KEEP keeps the repositories for a post-mortem.
    let _tmp = if std::env::var_os("REVFS_KEEP").is_some() {
        eprintln!("keeping {}", top.display());
        std::mem::forget(tmp);
        None
    } else {
        Some(tmp)
    };
    let repo = top.join("repo");
    assert!(hg_cmd(&top, &["init", "repo"]).status.success());
    for i in 0..16 {
        let p = repo.join(format!("d{}/s{}/f{i}", i % 3, i % 2));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("file {i}\n")).unwrap();
    }
    std::os::unix::fs::symlink("d0/s0/f0", repo.join("link")).unwrap();
    assert!(hg_cmd(&repo, &["commit", "-qAm", "base", "-d", "0 0"])
        .status
        .success());
    let hgwc = &top.join("hgwc");
    assert!(hg_cmd(&top, &["clone", "-q", "repo", "hgwc"])
        .status
        .success());
    let m = Mount::new(&repo, None);
    let sides = Sides { m: &m, hgwc };
    let mut rng = Rng::new(seed);
    let mut log: Vec<String> = Vec::new();
    let mut same_nodes = 0;
    for step in 0..steps {
        let files = tracked_files(hgwc);
        let pick = |rng: &mut Rng| -> Option<String> {
            (!files.is_empty()).then(|| files[rng.below(files.len())].clone())
        };
        let ctx = |log: &[String]| {
            format!(
                "seed {seed} step {step}; last operations:\n{}",
                log[log.len().saturating_sub(15)..].join("\n")
            )
        };
        let op = rng.below(20);
        let (a, b): (Res, Res) = match op {
            0..=4 => {
                let Some(f) = pick(&mut rng) else { continue };
                let data = text(&mut rng);
                let append = rng.below(2) == 0;
                for root in sides.roots() {
                    let p = root.join(&f);
                    if std::fs::symlink_metadata(&p)
                        .unwrap()
                        .file_type()
                        .is_symlink()
                    {
                        continue;
                    }
                    use std::io::Write;
                    let mut fh = std::fs::OpenOptions::new()
                        .write(true)
                        .append(append)
                        .truncate(!append)
                        .open(&p)
                        .unwrap();
                    fh.write_all(&data).unwrap();
                }
                log.push(format!("write {f} append={append}"));
                continue;
            }
            5 | 6 => {
                let f = format!("d{}/n{}", rng.below(4), rng.below(20));
                let data = text(&mut rng);
                for root in sides.roots() {
                    let p = root.join(&f);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, &data).unwrap();
                }
                log.push(format!("add {f}"));
                sides.both(&["add", &f])
            }
            7 => {
                let Some(f) = pick(&mut rng) else { continue };
                log.push(format!("remove {f}"));
                sides.both(&["remove", "-f", &f])
            }
            8 => {
                let Some(f) = pick(&mut rng) else { continue };
                for root in sides.roots() {
                    let p = root.join(&f);
                    let meta = std::fs::symlink_metadata(&p).unwrap();
                    if !meta.file_type().is_symlink() {
                        let mode = meta.permissions().mode() ^ 0o111;
                        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
                            .unwrap();
                    }
                }
                log.push(format!("chmod {f}"));
                continue;
            }
            9 | 10 => {
                let Some(f) = pick(&mut rng) else { continue };
                let cmd = if op == 9 { "copy" } else { "rename" };
                let to = format!("c/{}{}", f.replace('/', "_"), rng.below(3));
                log.push(format!("{cmd} {f} {to}"));
                sides.both(&[cmd, &f, &to])
            }
            11 => {
                let Some(f) = pick(&mut rng) else { continue };
                for root in sides.roots() {
                    std::fs::remove_file(root.join(&f)).unwrap();
                }
                log.push(format!("rm {f} (missing)"));
                continue;
            }
            12 => {
                log.push("addremove".into());
                sides.both(&["addremove"])
            }
            13 => {
                let Some(f) = pick(&mut rng) else { continue };
                log.push(format!("revert {f}"));
                sides.both(&["revert", "--no-backup", &f])
            }
            14..=17 => {
                let user = format!("u{}", rng.below(3));
                let date = format!("{} 0", 1000 + step);
                let msg = format!("step {step}");
                let mut args = vec!["commit", "-m", &msg, "-u", &user, "-d", &date];
                let subset = pick(&mut rng);
                if let (true, Some(f)) = (rng.below(4) == 0, subset.as_ref()) {
                    args.push(f);
                }
                log.push(args.join(" "));
                let r = sides.both(&args);
                if r.0 .0 == Some(0) {
                    let a = sides.revfs(&["log", "-r", ".", "-T", "{rev}:{node}"]);
                    let b = sides.hg(&["log", "-r", ".", "-T", "{rev}:{node}"]);
                    if a != b {
                        let t = "{rev} p1={p1node} p2={p2node} files={files} copies={file_copies} mf={manifest}\n";
                        let show = |dir: &Path, rev: &str| {
                            let l = hg_cmd(dir, &["log", "--debug", "-r", rev, "-T", t]);
                            let mf = hg_cmd(dir, &["manifest", "--debug", "-r", rev]);
                            let fl = hg_cmd(dir, &["debugindex", "-c"]);
                            format!("{}{}", s(&l.stdout), s(&mf.stdout)) + &s(&fl.stdout)[..0]
                        };
                        panic!(
                            "not the same changeset\nrevfs: {}\nhg: {}\n{}",
                            show(&repo, a.1.split(':').nth(1).unwrap_or(".")),
                            show(hgwc, "."),
                            ctx(&log)
                        );
                    }
                    same_nodes += 1;
                }
                r
            }
            _ => {
                let tip: usize = sides
                    .hg(&["log", "-r", "tip", "-T", "{rev}"])
                    .1
                    .parse()
                    .unwrap();
                let target = match rng.below(tip + 3) {
                    0 => "null".to_owned(),
                    1 => "-1".to_owned(),
                    n => (n - 2).to_string(),
                };
                let clean = rng.below(3) == 0;
                let mut args = vec!["update", "-r", &target];
                if clean {
                    args.push("-C");
                }
                log.push(args.join(" "));
                let a = sides.revfs(&args);
                let b = sides.hg(&args);
                if a.0 == Some(255)
                    && a.2.starts_with("abort: uncommitted changes")
                    && b.0 != Some(255)
                {
                    // hg merged an overlapping change; revfs refuses. Both start again clean.
                    assert!(
                        b.1.contains("merg"),
                        "revfs refused an update hg did without merging: {b:?}\n{}",
                        ctx(&log)
                    );
                    let p1 = sides.revfs(&["log", "-r", ".", "-T", "{rev}"]).1;
                    let (ra, rb) = (
                        sides.revfs(&["update", "-C", "-r", &p1]),
                        sides.hg(&["update", "-C", "-r", &target]),
                    );
                    assert_eq!(ra.0, Some(0), "{ra:?}");
                    assert_eq!(rb.0, Some(0), "{rb:?}");
                    let ra = sides.revfs(&["update", "-C", "-r", &target]);
                    assert_eq!(ra.0, Some(0), "{ra:?}");
                    // Untracked files: remove them on both sides.
                    for l in sides.revfs(&["status", "-u"]).1.lines() {
                        let _ = std::fs::remove_file(m.dir.join(&l[2..]));
                    }
                    for l in sides.hg(&["status", "-u"]).1.lines() {
                        let _ = std::fs::remove_file(hgwc.join(&l[2..]));
                    }
                    for root in sides.roots() {
                        prune_empty_dirs(root);
                    }
                    log.push("(overlap: both sides reset)".into());
                    continue;
                }
                (a, b)
            }
        };
        assert_eq!(a, b, "revfs and hg answer differently\n{}", ctx(&log));
        // Both trees and both statuses are the same.
        let sa = sides.revfs(&["status", "-C"]);
        let sb = sides.hg(&["status", "-C"]);
        assert_eq!(sa, sb, "status\n{}", ctx(&log));
        assert!(
            snapshot(&m.dir) == snapshot(hgwc),
            "trees differ\n{}",
            ctx(&log)
        );
    }
    assert!(
        same_nodes >= steps / 20,
        "only {same_nodes} commits compared"
    );
    let v = hg_cmd(&repo, &["verify", "-q"]);
    assert!(
        v.status.success(),
        "hg verify: {}{}",
        s(&v.stdout),
        s(&v.stderr)
    );
}
