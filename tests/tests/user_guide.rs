//! docs/USER_GUIDE.md, run as written: every ```sh block, in order, in one bash (with
//! `set -e`) started in a fresh temporary directory with a fresh home directory, the
//! `revfs` under test first on the PATH. Blocks marked ```sh install are skipped. A
//! ```text output block right after a step is what that step must print (stdout and
//! stderr together). The test fails on the first step that fails, naming it.

use revfs_tests::{revfs_bin, workspace};
use std::process::Command;

/// One fenced block of the guide: its info string, first line number, and text.
struct Block {
    info: String,
    line: usize,
    text: String,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    line: i + 1,
                    text: String::new(),
                })
            }
            (Some(_), Some("")) => out.extend(open.take()),
            (Some(b), _) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "an unclosed code block");
    out
}

/// A step to run, and what it must print, if the guide says.
struct Step {
    line: usize,
    script: String,
    expected: Option<String>,
}

fn steps(markdown: &str) -> (Vec<Step>, usize) {
    let mut steps: Vec<Step> = Vec::new();
    let mut skipped = 0;
    let mut last_was_step = false;
    for b in blocks(markdown) {
        match b.info.as_str() {
            "sh" => {
                steps.push(Step {
                    line: b.line,
                    script: b.text,
                    expected: None,
                });
                last_was_step = true;
                continue;
            }
            "sh install" => skipped += 1,
            "text output" => {
                let step = steps
                    .last_mut()
                    .filter(|s| last_was_step && s.expected.is_none())
                    .unwrap_or_else(|| {
                        panic!("line {}: an output block must follow a sh block", b.line)
                    });
                step.expected = Some(b.text);
            }
            other if other.starts_with("sh") => {
                panic!("line {}: unknown block kind ```{other}", b.line)
            }
            _ => {}
        }
        last_was_step = false;
    }
    (steps, skipped)
}

#[test]
fn the_user_guide_runs_as_written() {
    let guide = workspace().join("docs/USER_GUIDE.md");
    let markdown = std::fs::read_to_string(&guide).expect("docs/USER_GUIDE.md");
    let (steps, skipped) = steps(&markdown);
    assert!(
        skipped >= 1,
        "the installation blocks are marked ```sh install"
    );
    assert!(steps.len() >= 10, "only {} steps", steps.len());

    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, home, out) = (
        tmp.path().join("guide"),
        tmp.path().join("home"),
        tmp.path().join("out"),
    );
    for d in [&dir, &home, &out] {
        std::fs::create_dir(d).unwrap();
    }
    // The guide's mounts are made by its script: watch whatever appears below it.
    let _watchdog = revfs_tests::watchdog::Watchdog::start_under(
        tmp.path(),
        &home.join(".local/state/revfs"),
        revfs_tests::watchdog::default_deadline(),
    );
    // Each step in a group (not a subshell: `cd` and variables carry on), its output to a
    // file of its own; `current` says which one ran last.
    let mut script = String::from("set -e\n");
    for (i, step) in steps.iter().enumerate() {
        script.push_str(&format!(
            "echo {i} > '{out}/current'\n{{\n{}}} > '{out}/{i}' 2>&1\n",
            step.script,
            out = out.display()
        ));
    }
    script.push_str(&format!("echo done > '{}/current'\n", out.display()));
    std::fs::write(tmp.path().join("guide.sh"), &script).unwrap();

    let bin_dir = revfs_bin().parent().expect("bin dir").to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let started = std::time::Instant::now();
    let run = Command::new("timeout")
        .args(["120", "bash"])
        .arg(tmp.path().join("guide.sh"))
        .current_dir(&dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("TERM", "dumb")
        .env("USER", "alice")
        .output()
        .expect("run bash");
    let elapsed = started.elapsed();
    // Whatever happened, nothing stays mounted.
    for m in ["work", "other"] {
        let _ = Command::new("fusermount3")
            .arg("-uz")
            .arg(dir.join(m))
            .stderr(std::process::Stdio::null())
            .status();
    }

    let current = std::fs::read_to_string(out.join("current")).unwrap_or_default();
    let output_of = |i: usize| std::fs::read_to_string(out.join(i.to_string())).unwrap_or_default();
    if current.trim() != "done" || !run.status.success() {
        let i: usize = current.trim().parse().unwrap_or(0);
        panic!(
            "the step at docs/USER_GUIDE.md line {} failed ({}):\n{}\n--- its output:\n{}\n--- bash's stderr:\n{}",
            steps[i].line,
            run.status,
            steps[i].script,
            output_of(i),
            String::from_utf8_lossy(&run.stderr)
        );
    }
    for (i, step) in steps.iter().enumerate() {
        if let Some(expected) = &step.expected {
            assert_eq!(
                &output_of(i),
                expected,
                "the output of the step at docs/USER_GUIDE.md line {}",
                step.line
            );
        }
    }
    assert!(
        elapsed < std::time::Duration::from_secs(60),
        "the guide took {elapsed:?}"
    );
}
