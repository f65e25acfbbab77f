//! The configuration file (`~/.config/revfs/config.toml`, docs/CONFIG.md): a bad one stops
//! `revfs mount` with an error naming the file and the key (exit 255, nothing mounted);
//! a good one is applied by the daemon (FUSE threads, log level, cache size, allow_other),
//! with the command line and `REVFS_LOG` winning over it; the file is found through
//! `REVFS_CONFIG`, `XDG_CONFIG_HOME` and `HOME`.

use revfs_tests::watchdog::{default_deadline, Watchdog};
use revfs_tests::{hg_cmd, hg_env, revfs_bin};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A repository, a mountpoint and a state root in a temporary directory; unmounts (lazily)
/// when dropped.
struct Setup {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    mnt: PathBuf,
    _watchdog: Watchdog,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("repo");
        assert!(hg_cmd(tmp.path(), &["init", "repo"]).status.success());
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        assert!(hg_cmd(&repo, &["commit", "-qAm", "a"]).status.success());
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let _watchdog = Watchdog::start(&mnt, &tmp.path().join("state"), default_deadline());
        Setup {
            tmp,
            repo,
            mnt,
            _watchdog,
        }
    }

    /// `revfs ARGS` with this setup's state root, no configuration file (`REVFS_CONFIG`
    /// empty) and no `REVFS_LOG`, then `env` set and the variables in `remove` removed.
    fn revfs(&self, args: &[&str], env: &[(&str, &Path)], remove: &[&str]) -> Output {
        let mut cmd = Command::new(revfs_bin());
        hg_env(&mut cmd)
            .args(args)
            .current_dir(self.tmp.path())
            .env("REVFS_STATE_DIR", self.tmp.path().join("state"))
            .env("REVFS_CONFIG", "")
            .env_remove("REVFS_LOG")
            .env_remove("XDG_CONFIG_HOME");
        for (k, v) in env {
            cmd.env(k, v);
        }
        for k in remove {
            cmd.env_remove(k);
        }
        cmd.output().expect("spawn revfs")
    }

    fn mount_with(&self, extra: &[&str], env: &[(&str, &Path)], remove: &[&str]) -> Output {
        let (repo, mnt) = (
            self.repo.display().to_string(),
            self.mnt.display().to_string(),
        );
        let mut args = vec!["mount"];
        args.extend_from_slice(extra);
        args.extend([repo.as_str(), mnt.as_str()]);
        self.revfs(&args, env, remove)
    }

    fn unmount(&self) {
        let out = self.revfs(&["unmount", &self.mnt.display().to_string()], &[], &[]);
        assert!(out.status.success(), "unmount: {}", s(&out.stderr));
    }

    fn write_config(&self, name: &str, text: &str) -> PathBuf {
        let p = self.tmp.path().join(name);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(&p, text).unwrap();
        p
    }

    fn state_dir(&self) -> PathBuf {
        std::fs::read_link(self.mnt.join(".revfs/state")).expect("the mount's .revfs/state")
    }

    fn daemon_pid(&self) -> i32 {
        std::fs::read_to_string(self.state_dir().join("daemon.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// The daemon's FUSE request threads (fuser names them `fuser-N`).
    /// The daemon's FUSE request threads, once their number has settled (the session may
    /// still be starting them when `revfs mount` returns).
    fn fuse_threads(&self) -> usize {
        let pid = self.daemon_pid();
        let count = || {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .unwrap()
                .flatten()
                .filter(|t| {
                    // fuser's /dev/fuse threads (fuser-N), not its io_uring ones
                    // (fuser-ring-N, two a CPU whatever `threads` says).
                    let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                    comm.strip_prefix("fuser-")
                        .is_some_and(|n| n.trim().bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        };
        let (mut last, mut same) = (count(), 0);
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let now = count();
            same = if now == last && now > 0 { same + 1 } else { 0 };
            last = now;
            if same >= 6 {
                break;
            }
        }
        last
    }

    /// The super options of the mount in the kernel's table.
    fn mount_options(&self) -> String {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mnt = self.mnt.display().to_string();
        table
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(mnt.as_str()))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap_or_default()
            .to_owned()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.state_dir().join("daemon.log")).unwrap_or_default()
    }

    fn is_mounted(&self) -> bool {
        !self.mount_options().is_empty()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-uz")
            .arg(&self.mnt)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

#[test]
fn a_bad_configuration_stops_mount_with_the_file_and_the_key() {
    let t = Setup::new();
    let cases: &[(&str, &str)] = &[
        (
            "[mount]\nthreds = 4\n",
            ": unknown key 'mount.threds' (known keys in [mount]: threads, allow_other, open_files, loaded_files, listed_files, readahead_threads, readahead_size, passthrough, io_uring, cpu_latency_us)",
        ),
        (
            "[fuse]\nthreads = 4\n",
            ": unknown key 'fuse' (known: version, [store], [mount], [log], [control], [remote])",
        ),
        (
            "[mount]\nthreads = 0\n",
            ": mount.threads: expected an integer from 1 to 256, found 0",
        ),
        (
            "[store]\ntext_cache_size = \"64 MB\"\n",
            ": store.text_cache_size: expected a size in bytes",
        ),
        (
            "[log]\nlevel = \"verbose\"\n",
            ": log.level: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", found \"verbose\"",
        ),
        (
            "version = 2\n",
            ": version: version 2 is not supported (this revfs reads version 1)",
        ),
        ("[mount]\nthreads = = 4\n", ":2: "),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let file = t.write_config(&format!("bad{i}.toml"), text);
        let out = t.mount_with(&[], &[("REVFS_CONFIG", &file)], &[]);
        let err = s(&out.stderr);
        assert_eq!(out.status.code(), Some(255), "{text}: {err}");
        assert!(
            err.starts_with(&format!("abort: {}{expected}", file.display())),
            "{text}: {err}"
        );
        assert!(!t.is_mounted(), "{text}: mounted anyway");
    }
    // A file named by REVFS_CONFIG must exist.
    let missing = t.tmp.path().join("missing.toml");
    let out = t.mount_with(&[], &[("REVFS_CONFIG", &missing)], &[]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(
        s(&out.stderr),
        format!(
            "abort: {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    // The per-user file is checked the same way.
    let home = t.tmp.path().join("home");
    t.write_config("home/.config/revfs/config.toml", "[mount]\nthreads = -1\n");
    let out = t.mount_with(&[], &[("HOME", &home)], &["REVFS_CONFIG"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(
        s(&out.stderr).contains(".config/revfs/config.toml: mount.threads: expected an integer"),
        "{}",
        s(&out.stderr)
    );
    // And `revfs doctor` says so too (exit 1: something to fix).
    let bad = t.tmp.path().join("bad0.toml");
    let out = t.revfs(&["doctor"], &[("REVFS_CONFIG", &bad)], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", s(&out.stdout));
    assert!(s(&out.stdout).contains(&format!(" {}: unknown key 'mount.threds'", bad.display())));
}

#[test]
fn threads_log_level_and_cache_size_come_from_the_configuration() {
    let t = Setup::new();
    let config = t.write_config(
        "config.toml",
        "version = 1\n\n[store]\ntext_cache_size = \"8 MiB\"\nopen_filelogs = 100\n\
         filelog_cache_size = \"1 MiB\"\nmanifest_cache_size = 0\nsize_cache_size = 0\n\n\
         [mount]\nthreads = 3\nopen_files = 40\n\n[log]\nlevel = \"debug\"\n",
    );
    let env = [("REVFS_CONFIG", config.as_path())];
    let out = t.mount_with(&[], &env, &[]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(std::fs::read(t.mnt.join("a.txt")).unwrap(), b"a\n");
    assert_eq!(t.fuse_threads(), 3);
    let log = t.log();
    let settings = format!(
        "settings config={} threads=3 allow_other=false text_cache_size=8388608 open_filelogs=100 filelog_cache_size=1048576 manifest_cache_size=0 size_cache_size=0 open_files=40 loaded_files=200000 listed_files=500000 readahead_threads=2 readahead_size=33554432 passthrough=false io_uring=true log=debug",
        config.display()
    );
    assert!(log.contains(&settings), "{log}");
    assert!(
        log.contains(" DEBUG "),
        "no debug lines at level debug:\n{log}"
    );
    // `manifest_cache_size = 0`, `size_cache_size = 0`: no manifest kept (the thread that
    // would keep it has had the time of the reads above and the unmount), no size.
    let log_file = t.state_dir().join("daemon.log");
    t.unmount();
    assert!(!t.repo.join(".hg/cache/revfs").exists());
    let before = std::fs::read_to_string(&log_file).unwrap().len();

    // The command line wins over the configuration, REVFS_LOG over [log] level.
    let warn = Path::new("warn");
    let out = t.mount_with(
        &["--threads", "2"],
        &[("REVFS_CONFIG", &config), ("REVFS_LOG", warn)],
        &[],
    );
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(t.fuse_threads(), 2);
    let after = t.log()[before..].to_owned();
    assert!(
        !after.contains(" INFO ") && !after.contains(" DEBUG "),
        "REVFS_LOG=warn, yet:\n{after}"
    );
    t.unmount();

    // $XDG_CONFIG_HOME/revfs/config.toml, then ~/.config/revfs/config.toml.
    let xdg = t.tmp.path().join("xdg");
    t.write_config("xdg/revfs/config.toml", "[mount]\nthreads = 4\n");
    let out = t.mount_with(&[], &[("XDG_CONFIG_HOME", &xdg)], &["REVFS_CONFIG"]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(t.fuse_threads(), 4);
    t.unmount();
    let home = t.tmp.path().join("home");
    t.write_config("home/.config/revfs/config.toml", "[mount]\nthreads = 5\n");
    let out = t.mount_with(&[], &[("HOME", &home)], &["REVFS_CONFIG"]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(t.fuse_threads(), 5);
    t.unmount();
    // No file anywhere: the defaults (8 threads, level info).
    let out = t.mount_with(
        &[],
        &[("HOME", &t.tmp.path().join("nohome"))],
        &["REVFS_CONFIG"],
    );
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(t.fuse_threads(), 8);
    assert!(t.log().contains("settings config=none threads=8 allow_other=false text_cache_size=67108864 open_filelogs=1024 filelog_cache_size=16777216 manifest_cache_size=1073741824 size_cache_size=67108864 open_files=256 loaded_files=200000 listed_files=500000 readahead_threads=2 readahead_size=33554432 passthrough=false io_uring=true log=info"));
    t.unmount();
}

#[test]
fn allow_other_comes_from_the_configuration_and_the_flags_win() {
    let t = Setup::new();
    let config = t.write_config("config.toml", "[mount]\nallow_other = true\n");
    let env = [("REVFS_CONFIG", config.as_path())];
    let out = t.mount_with(&[], &env, &[]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    let opts = t.mount_options();
    assert!(opts.split(',').any(|o| o == "allow_other"), "{opts}");
    t.unmount();
    let out = t.mount_with(&["--no-allow-other"], &env, &[]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    let opts = t.mount_options();
    assert!(!opts.split(',').any(|o| o == "allow_other"), "{opts}");
    t.unmount();
    let out = t.mount_with(&["--allow-other"], &[], &[]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    let opts = t.mount_options();
    assert!(opts.split(',').any(|o| o == "allow_other"), "{opts}");
    t.unmount();
}
