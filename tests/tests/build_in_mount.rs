//! A real C project builds inside the mount and gives the same binaries as a build outside
//! it. The project is zstd's C library (the copy vendored by the zstd-sys crate, which the
//! workspace's own build fetches), committed to a fresh hg repository.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_env};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The zstd sources vendored by zstd-sys in cargo's registry.
fn zstd_sources() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let registry = home.join("registry/src");
    for index in std::fs::read_dir(registry).ok()?.flatten() {
        for krate in std::fs::read_dir(index.path()).ok()?.flatten() {
            let name = krate.file_name();
            if name.to_string_lossy().starts_with("zstd-sys-") {
                let dir = krate.path().join("zstd");
                if dir.join("build/cmake/CMakeLists.txt").exists() {
                    return Some(dir);
                }
            }
        }
    }
    None
}

fn build(src: &Path, out: &Path) -> Vec<u8> {
    let run = |args: &[&str]| {
        let o = Command::new("cmake")
            .args(args)
            .output()
            .expect("cmake (apt-get install cmake)");
        assert!(
            o.status.success(),
            "cmake {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let (s, b) = (
        src.join("build/cmake").display().to_string(),
        out.display().to_string(),
    );
    run(&[
        "-S",
        &s,
        "-B",
        &b,
        "-DCMAKE_BUILD_TYPE=Release",
        // Unoptimized: the test is about the mount under a parallel build, not the code
        // the compiler makes, and -O3 made the two builds 90 s of CI (-O0: about a third).
        "-DCMAKE_C_FLAGS_RELEASE=-O0 -DNDEBUG",
        "-DZSTD_BUILD_PROGRAMS=OFF",
        "-DZSTD_BUILD_SHARED=OFF",
        "-DZSTD_BUILD_TESTS=OFF",
    ]);
    run(&["--build", &b, "-j", "8"]);
    std::fs::read(out.join("lib/libzstd.a")).expect("libzstd.a built")
}

#[test]
fn a_c_project_builds_in_the_mount_as_it_does_outside() {
    let Some(sources) = zstd_sources() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "zstd-sys sources not found in cargo's registry"
        );
        eprintln!("SKIPPED: zstd-sys sources not found");
        return;
    };
    let tmp = revfs_tests::scratch_dir();
    let repo = tmp.path().join("zstd");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(&sources)
        .arg(&repo)
        .status()
        .unwrap()
        .success());
    let ok = |o: std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr))
    };
    ok(hg_cmd(&repo, &["init"]));
    ok(hg_cmd(
        &repo,
        &["commit", "-q", "-A", "-m", "zstd sources", "-d", "0 0"],
    ));
    let mount = Mount::new(&repo, None);
    // A Release build records no absolute paths, so the two archives must match exactly.
    let native = build(&repo, &repo.join("out"));
    // Inside: `revfs status` runs in a loop during the parallel build, and a commit of a
    // tracked file happens in the middle of it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (dir, stop) = (mount.dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut runs = 0;
            let mut committed = false;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let st = hg_env(
                    Command::new(revfs_tests::revfs_bin())
                        .arg("status")
                        .current_dir(&dir),
                )
                .output()
                .unwrap();
                assert!(
                    st.status.success(),
                    "status during the build: {}",
                    String::from_utf8_lossy(&st.stderr)
                );
                runs += 1;
                if runs == 5 {
                    std::fs::write(dir.join("COPYING"), b"edited during the build\n").unwrap();
                    let c = hg_env(
                        Command::new(revfs_tests::revfs_bin())
                            .args(["commit", "-m", "during the build", "COPYING"])
                            .current_dir(&dir),
                    )
                    .output()
                    .unwrap();
                    assert!(
                        c.status.success(),
                        "commit during the build: {}",
                        String::from_utf8_lossy(&c.stderr)
                    );
                    committed = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            (runs, committed)
        })
    };
    let inside = build(&mount.dir, &mount.dir.join("out"));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (runs, committed) = poller.join().unwrap();
    assert!(
        runs >= 5 && committed,
        "{runs} status runs during the build"
    );
    ok(hg_cmd(&repo, &["verify", "-q"]));
    let log = hg_cmd(&repo, &["log", "-r", "tip", "-T", "{desc}|{files}"]);
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "during the build|COPYING"
    );
    assert!(native.len() > 100_000);
    assert!(
        native == inside,
        "libzstd.a differs: {} bytes outside, {} inside",
        native.len(),
        inside.len()
    );
    // The build products are untracked files of the working copy; nothing tracked changed.
    let st = hg_env(
        Command::new(revfs_tests::revfs_bin())
            .args(["status", "-m", "-a", "-r", "-d"])
            .current_dir(&mount.dir),
    )
    .output()
    .unwrap();
    assert!(st.status.success());
    assert_eq!(String::from_utf8_lossy(&st.stdout), "");
}
