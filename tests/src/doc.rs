//! A document run as written: every ```sh block, in order, in one bash (with `set -e`)
//! started in a fresh temporary directory with a fresh home directory, the `revfs` under
//! test first on the PATH. Blocks marked ```sh install are skipped. A ```text output block
//! right after a step is what that step must print (stdout and stderr together). The run
//! fails on the first step that fails, naming it. docs/USER_GUIDE.md and README.md are run
//! this way (tests/tests/user_guide.rs, tests/tests/readme.rs).

use crate::revfs_bin;
use std::process::Command;

/// One fenced block of the guide: its info string, first line number, and text.
pub struct Block {
    pub info: String,
    pub line: usize,
    pub text: String,
}

pub fn blocks(markdown: &str) -> Vec<Block> {
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
pub struct Step {
    pub line: usize,
    pub script: String,
    pub expected: Option<String>,
}

/// The steps of a document, and how many ```sh install blocks it skipped.
pub fn steps(markdown: &str) -> (Vec<Step>, usize) {
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

/// Runs `steps` of document `name` in a fresh directory named `dir_name` (its outputs may
/// show paths in it); `mounts` are the directories (in it) that its steps mount, unmounted
/// whatever happens. Returns how long the run took.
pub fn run(name: &str, dir_name: &str, steps: &[Step], mounts: &[&str]) -> std::time::Duration {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, home, out) = (
        tmp.path().join(dir_name),
        tmp.path().join("home"),
        tmp.path().join("out"),
    );
    for d in [&dir, &home, &out] {
        std::fs::create_dir(d).unwrap();
    }
    // The document's mounts are made by its script: watch whatever appears below it.
    let _watchdog = crate::watchdog::Watchdog::start_under(
        tmp.path(),
        &home.join(".local/state/revfs"),
        crate::watchdog::default_deadline(),
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
    std::fs::write(tmp.path().join("doc.sh"), &script).unwrap();

    let bin_dir = revfs_bin().parent().expect("bin dir").to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let started = std::time::Instant::now();
    let run = Command::new("timeout")
        .args(["120", "bash"])
        .arg(tmp.path().join("doc.sh"))
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
    for m in mounts {
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
            "the step at {name} line {} failed ({}):\n{}\n--- its output:\n{}\n--- bash's stderr:\n{}",
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
                "the output of the step at {name} line {}",
                step.line
            );
        }
    }
    elapsed
}
