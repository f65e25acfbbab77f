//! The `revfs` CLI never disagrees with hg: a differential test. A repository made with hg
//! gets random edits, applied alike to a mount and to an hg clone; then random commands
//! (flags and file patterns of every kind, from the root or a subdirectory, or from outside
//! with `-R`) run on both sides. stdout, stderr and the exit code must be hg's, byte for
//! byte, or revfs must stop with a single `abort:` line that says hg should be used
//! instead. Fixed seeds in CI (`REVFS_CLI_SEEDS=a..b` and `REVFS_CLI_COMMANDS=n` for longer
//! runs), plus one regression test per wrong answer found before.

use revfs_tests::mount::Mount;
use revfs_tests::{env_or, hg_cmd, hg_repo, revfs, Rng};
use std::path::{Path, PathBuf};
use std::process::Output;

const BASE: &[(&str, &str)] = &[
    ("a", "a\n"),
    ("a.c", "int a;\n"),
    ("dx", "dx\n"),
    ("d/f", "f\n"),
    ("d/f.c", "f.c\n"),
    ("d/sub/g", "g\n"),
    ("d/sub/g.c", "g.c\n"),
    ("d/sub/deep/h", "h\n"),
    ("e/d/f", "ef\n"),
    ("x y/z", "z\n"),
    (".hgignore", "syntax: glob\n*.o\nbuild\n"),
];

/// Paths the edits and patterns are made of.
const NAMES: &[&str] = &[
    "a",
    "a.c",
    "b.c",
    "n.c",
    "dx",
    "dy",
    "d/f",
    "d/u",
    "d/f.c",
    "d/sub/g",
    "d/sub/new",
    "d/sub/deep/h",
    "dd/u",
    "e/d/f",
    "x y/z",
    "ign.o",
    "d/x.o",
    "build/out",
    "d/build/o",
];

const PATTERN_PIECES: &[&str] = &[
    "d", "dx", "d*", "*", "**", "*.c", "sub", "?", "f", "u", "deep", "[a-d]*", "{f,g}", ".", "..",
    "build", "*.o", "x y", "e", "nonexist",
];

const KINDS: &[&str] = &[
    "",
    "",
    "",
    "glob:",
    "path:",
    "relpath:",
    "relglob:",
    "rootglob:",
    "rootfilesin:",
    "re:",
    "relre:",
    "set:",
];

const STATUS_FLAGS: &[&str] = &[
    "-m", "-a", "-r", "-d", "-u", "-i", "-c", "-A", "-C", "-n", "-q",
];

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// Output with the tree's root replaced, so that both sides can be compared.
fn normalized(out: &Output, root: &Path) -> (Option<i32>, String, String) {
    let root = canonical(root);
    let n = |b: &[u8]| String::from_utf8_lossy(b).replace(&root, "$ROOT");
    (out.status.code(), n(&out.stdout), n(&out.stderr))
}

/// Whether revfs declined, as it must for what it does not implement.
fn declined(out: &(Option<i32>, String, String)) -> bool {
    out.0 == Some(255)
        && out.1.is_empty()
        && out.2.starts_with("abort: ")
        && out.2.trim_end().ends_with("(use hg instead)")
        && out.2.trim_end().lines().count() == 1
}

/// Two trees: an hg clone (`wc`) and a mount of the same repository.
struct Trees {
    _tmp: tempfile::TempDir,
    wc: PathBuf,
    mount: Mount,
    /// Directories beside each tree (both trees are named `mnt`), for commands run with
    /// `-R` from outside: the mount's and the clone's.
    outside: [PathBuf; 2],
}

fn trees() -> Trees {
    let tmp = revfs_tests::scratch_dir();
    let repo = hg_repo(tmp.path(), BASE);
    let out = hg_cmd(tmp.path(), &["clone", "-q", "repo", "mnt"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wc = tmp.path().join("mnt");
    let mount = Mount::new(&repo, None);
    let outside = [
        mount.dir.parent().unwrap().join("outside"),
        tmp.path().join("outside"),
    ];
    for o in &outside {
        std::fs::create_dir(o).unwrap();
    }
    Trees {
        _tmp: tmp,
        wc,
        mount,
        outside,
    }
}

/// One random edit, applied to both trees; returns what it did.
fn random_edit(rng: &mut Rng, roots: [&Path; 2]) -> String {
    let name = *rng.pick(NAMES).unwrap();
    let op = rng.below(4);
    for root in roots {
        let p = root.join(name);
        match op {
            0 | 1 => {
                if let Some(parent) = p.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                let _ = std::fs::write(&p, format!("{name} {op}\n"));
            }
            2 => {
                let _ = std::fs::remove_file(&p);
            }
            _ => {
                let _ = std::fs::write(&p, "changed\n");
            }
        }
    }
    format!("{} {name}", ["write", "write", "rm", "change"][op])
}

fn random_pattern(rng: &mut Rng) -> String {
    let kind = *rng.pick(KINDS).unwrap();
    let n = 1 + rng.below(2);
    let body: Vec<&str> = (0..n).map(|_| *rng.pick(PATTERN_PIECES).unwrap()).collect();
    let body = body.join("/");
    let body = if kind.ends_with("re:") {
        body.replace('.', "\\.")
            .replace("**", ".*")
            .replace('*', "[^/]*")
    } else if kind == "set:" {
        ["modified()", "added()", "unknown()", "ignored()", "clean()"][rng.below(5)].to_string()
    } else {
        body
    };
    format!("{kind}{body}")
}

/// A random `status` command: flags, patterns, and where it runs from (`""` the root, a
/// subdirectory, or outside with `-R`).
fn random_status(rng: &mut Rng) -> (String, Vec<String>) {
    let mut args = vec!["status".to_string()];
    for _ in 0..rng.below(3) {
        args.push(rng.pick(STATUS_FLAGS).unwrap().to_string());
    }
    for _ in 0..rng.below(4) {
        args.push(random_pattern(rng));
    }
    let cwd = ["", "", "d", "d/sub", "@outside"][rng.below(5)];
    (cwd.to_string(), args)
}

/// Runs `args` on both sides from `cwd`; returns (revfs, hg) outputs, normalized.
type Pair = ((Option<i32>, String, String), (Option<i32>, String, String));

fn run_both(t: &Trees, cwd: &str, args: &[String]) -> Pair {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if cwd == "@outside" {
        // `@TREE` in an argument is the tree's name (`mnt` on both sides).
        let with_r = |r: &Path| -> Vec<String> {
            let mut v = vec!["-R".to_string(), r.display().to_string()];
            v.extend(args.iter().map(|a| a.replace("@TREE", "mnt")));
            v
        };
        let ours = with_r(&t.mount.dir);
        let theirs = with_r(&t.wc);
        let strs = |v: &[String]| v.iter().map(String::clone).collect::<Vec<_>>();
        let o = revfs(
            &t.outside[0],
            &strs(&ours).iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let h = hg_cmd(
            &t.outside[1],
            &strs(&theirs).iter().map(String::as_str).collect::<Vec<_>>(),
        );
        return (normalized(&o, &t.mount.dir), normalized(&h, &t.wc));
    }
    let o = revfs(&t.mount.dir.join(cwd), &args);
    let h = hg_cmd(&t.wc.join(cwd), &args);
    (normalized(&o, &t.mount.dir), normalized(&h, &t.wc))
}

fn run_seed(seed: u64, commands: usize) {
    let t = trees();
    let mut rng = Rng::new(seed);
    let mut log = Vec::new();
    for i in 0..commands {
        if i % 4 == 0 {
            for _ in 0..1 + rng.below(3) {
                log.push(random_edit(&mut rng, [&t.mount.dir, &t.wc]));
            }
        }
        let (cwd, args) = random_status(&mut rng);
        let (ours, theirs) = run_both(&t, &cwd, &args);
        log.push(format!("(cd {cwd:?}) {args:?}"));
        if declined(&ours) {
            continue;
        }
        assert_eq!(
            ours,
            theirs,
            "seed {seed}: {args:?} in {cwd:?} differs (left revfs, right hg); steps:\n  {}",
            log.join("\n  ")
        );
    }
}

#[test]
fn status_with_random_patterns_and_flags_prints_what_hg_prints() {
    let seeds: Vec<u64> = match std::env::var("REVFS_CLI_SEEDS") {
        Ok(r) => {
            let (a, b) = r.split_once("..").expect("REVFS_CLI_SEEDS=a..b");
            (a.parse().unwrap()..b.parse().unwrap()).collect()
        }
        Err(_) => vec![1, 2],
    };
    let commands = env_or("REVFS_CLI_COMMANDS", 60);
    for seed in seeds {
        run_seed(seed, commands);
    }
}

/// Each wrong answer the issue listed, as a fixed command against hg.
#[test]
fn status_patterns_that_used_to_disagree_with_hg() {
    let t = trees();
    for (name, data) in [
        ("dx", "changed\n"),
        ("n.c", "n\n"),
        ("d/u", "u\n"),
        ("dd/u", "u\n"),
    ] {
        for root in [&t.mount.dir, &t.wc] {
            let p = root.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        }
    }
    let cases: &[(&str, &[&str])] = &[
        ("", &["status", "-A", "glob:d*"]),
        ("", &["status", "-A", "glob:d"]),
        ("", &["status", "-A", "rootfilesin:d"]),
        ("", &["status", "-A", "relpath:d/sub"]),
        ("d", &["status", "-A", "relpath:sub"]),
        ("", &["status", "listfile:nofile"]),
        ("", &["status", "nonexist", "d/nonexist"]),
        ("", &["status", "-A", "glob:*.o", "ign.o"]),
        ("d", &["status", "../dx", "glob:../d*", "glob:*"]),
        ("", &["status", "d/.hg/x"]),
        ("", &["status", "../x"]),
        ("@outside", &["status", "-A", "@TREE/dx", "../@TREE/d"]),
        ("@outside", &["status", "dx"]),
    ];
    for (cwd, args) in cases {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (ours, theirs) = run_both(&t, cwd, &args);
        assert_eq!(ours, theirs, "{args:?} in {cwd:?} (left revfs, right hg)");
    }
    // A copy's source is left out with --no-status.
    for (tool, root) in [("revfs", &t.mount.dir), ("hg", &t.wc)] {
        let out = if tool == "revfs" {
            revfs(root, &["copy", "a", "acopy"])
        } else {
            hg_cmd(root, &["copy", "a", "acopy"])
        };
        assert!(out.status.success(), "{tool} copy");
    }
    let args: Vec<String> = ["status", "-n", "-C"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (ours, theirs) = run_both(&t, "", &args);
    assert_eq!(ours, theirs, "status -n -C (left revfs, right hg)");
    assert!(!ours.1.contains("  a\n"), "{}", ours.1);
}
