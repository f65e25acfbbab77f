//! Data-integrity stress with verification, from Debian's `fio` and `stress-ng`, on the
//! three kinds of files a mount holds: new files (in the overlay from the start), clean
//! store files that the load writes over (copied up lazily under it), and files already
//! materialized. Every block is checksummed when written and checked when read back; any
//! corruption fails the run. Short runs here; `REVFS_STRESS_SECONDS` makes them longer (fio
//! repeats its jobs once per 5 s, stress-ng runs that long).

use revfs_tests::hg_cmd;
use revfs_tests::mount::Mount;
use std::process::Command;

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn seconds() -> u64 {
    revfs_tests::env_or("REVFS_STRESS_SECONDS", 5)
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = s(&out.stdout) + &s(&out.stderr);
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

/// A repository with two 16 MiB tracked files (clean, lazy in the mount).
fn repo(dir: &std::path::Path) -> std::path::PathBuf {
    assert!(hg_cmd(dir, &["init", "repo"]).status.success());
    let repo = dir.join("repo");
    for name in ["big1.bin", "big2.bin"] {
        let data: Vec<u8> = (0..16u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        std::fs::write(repo.join(name), data).unwrap();
    }
    assert!(hg_cmd(&repo, &["commit", "-qAm", "big", "-d", "0 0"])
        .status
        .success());
    repo
}

fn fio(args: &[&str], what: &str) -> String {
    // One verified pass per 5 s asked for: a longer run repeats the write-and-verify jobs.
    let loops = format!("--loops={}", (seconds() / 5).max(1));
    let runtime = format!("--runtime={}", seconds() * 10);
    let mut cmd = Command::new("fio");
    cmd.args([
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
        "--verify_state_save=0",
        "--ioengine=psync",
        "--time_based=0",
        &runtime,
        &loops,
        "--output-format=terse",
    ])
    .args(args);
    run(&mut cmd, what)
}

#[test]
fn fio_verifies_new_lazy_and_materialized_files() {
    fio_on("");
}

#[test]
fn fio_verifies_files_the_kernel_writes_through_passthrough() {
    fio_on(PASSTHROUGH);
}

#[test]
fn fio_verifies_files_through_dev_fuse() {
    fio_on(DEV_FUSE);
}

/// The kernel reads and writes files in the overlay directly (`mount.passthrough`).
const PASSTHROUGH: &str = "[mount]\npassthrough = true\n";
/// Requests read from /dev/fuse instead of io_uring rings (`mount.io_uring`).
const DEV_FUSE: &str = "[mount]\nio_uring = false\n";

/// What the daemon says of its mount: passthrough opens counted when on, requests through
/// /dev/fuse when io_uring is off.
fn check_mode(m: &Mount, config: &str) {
    if config == PASSTHROUGH {
        let st = m.stats();
        assert!(st.get("passthrough_opens") > 0, "{st}");
    }
    if config == DEV_FUSE {
        let info = m.control("{\"cmd\":\"info\"}");
        assert!(
            info.contains("\"requests\":\"/dev/fuse (mount.io_uring is off)\""),
            "{info}"
        );
    }
}

fn fio_on(config: &str) {
    let tmp = revfs_tests::scratch_dir();
    let repo = repo(tmp.path());
    let m = Mount::with_config(&repo, config);
    let dir = m.dir.join("fio");
    std::fs::create_dir(&dir).unwrap();
    let d = format!("--directory={}", dir.display());
    // New files: sequential, random and mixed, several jobs at once.
    fio(
        &[
            "--name=seq",
            &d,
            "--rw=write",
            "--bs=64k",
            "--size=8m",
            "--numjobs=2",
        ],
        "fio seq",
    );
    fio(
        &[
            "--name=rand",
            &d,
            "--rw=randwrite",
            "--bs=4k",
            "--size=4m",
            "--numjobs=3",
        ],
        "fio rand",
    );
    fio(
        &[
            "--name=mixed",
            &d,
            "--rw=randrw",
            "--bs=16k",
            "--size=4m",
            "--numjobs=2",
        ],
        "fio mixed",
    );
    // A clean store file written over at random (copied up under the load), then again
    // once materialized.
    let big = format!("--filename={}", m.dir.join("big1.bin").display());
    for what in ["lazy", "materialized"] {
        fio(
            &[
                "--name=big",
                &big,
                "--rw=randwrite",
                "--bs=8k",
                "--size=16m",
                "--numjobs=1",
            ],
            &format!("fio on a {what} file"),
        );
    }
    // The other big file was never touched: still the store's bytes.
    let st = m.revfs_in(&m.dir, &["status", "big2.bin"]);
    assert_eq!(s(&st.stdout), "");
    let st = m.revfs_in(&m.dir, &["status", "big1.bin"]);
    assert_eq!(s(&st.stdout), "M big1.bin\n");
    check_mode(&m, config);
}

#[test]
fn stress_ng_file_stressors_verify() {
    stress_ng_on("");
}

#[test]
fn stress_ng_file_stressors_verify_through_dev_fuse() {
    stress_ng_on(DEV_FUSE);
}

#[test]
fn stress_ng_file_stressors_verify_through_passthrough() {
    stress_ng_on(PASSTHROUGH);
}

fn stress_ng_on(config: &str) {
    let tmp = revfs_tests::scratch_dir();
    let repo = repo(tmp.path());
    let m = Mount::with_config(&repo, config);
    let dir = m.dir.join("sng");
    std::fs::create_dir(&dir).unwrap();
    let timeout = format!("{}s", seconds());
    let out = run(
        Command::new("stress-ng")
            .args(["--temp-path"])
            .arg(&dir)
            .args([
                "--hdd",
                "2",
                "--hdd-bytes",
                "4M",
                "--hdd-opts",
                "wr-seq,rd-seq",
            ])
            .args(["--seek", "1", "--seek-size", "4M"])
            .args(["--verify", "--timeout", &timeout, "--metrics-brief"]),
        "stress-ng",
    );
    assert!(!out.to_lowercase().contains("fail"), "{out}");
    check_mode(&m, config);
}
