//! README.md, run as written (`revfs_tests::doc`): its first mount, every ```sh block in
//! order in one shell, with the outputs it shows; and every `revfs` command of its synopsis
//! exists with the flags it shows.

use revfs_tests::{doc, revfs_bin, workspace};
use std::process::Command;

fn readme() -> String {
    std::fs::read_to_string(workspace().join("README.md")).expect("README.md")
}

#[test]
fn the_readme_runs_as_written() {
    let (steps, skipped) = doc::steps(&readme());
    assert!(
        skipped >= 2,
        "the two commands and the install are ```sh install blocks"
    );
    assert!(steps.len() >= 2, "only {} steps", steps.len());
    assert!(
        steps.iter().all(|s| s.expected.is_some()),
        "every step of the README shows its output"
    );
    doc::run("README.md", "readme", &steps, &["work"]);
}

/// The `revfs` command lines of the README's ```text synopsis: the subcommand and the long
/// and short flags it shows, for each line.
fn synopsis(markdown: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for b in doc::blocks(markdown)
        .into_iter()
        .filter(|b| b.info == "text")
    {
        for line in b.text.lines() {
            let line = line.split('#').next().unwrap_or("");
            // `revfs add [FILE...] | forget FILE... | ...`: each alternative a command.
            for part in line.split(" | ") {
                let words: Vec<&str> = part.split_whitespace().collect();
                let (cmd, rest) = match words.as_slice() {
                    ["revfs", cmd, rest @ ..] => (cmd.to_string(), rest),
                    [cmd, rest @ ..] if !out.is_empty() && part != line => (cmd.to_string(), rest),
                    _ => continue,
                };
                let flags = rest
                    .iter()
                    .flat_map(|w| w.split(['[', ']', '|', '=']))
                    .filter(|w| w.starts_with('-') && w.len() > 1)
                    .map(String::from)
                    .collect();
                out.push((cmd, flags));
            }
        }
    }
    out
}

#[test]
fn every_command_and_flag_of_the_readmes_synopsis_exists() {
    let commands = synopsis(&readme());
    assert!(
        commands.len() >= 20,
        "only {} commands found",
        commands.len()
    );
    for (cmd, flags) in &commands {
        let out = Command::new(revfs_bin())
            .args([cmd.as_str(), "--help"])
            .output()
            .expect("run revfs");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "revfs {cmd} --help: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for flag in flags {
            // -mardui: each letter a flag of its own.
            let singles: Vec<String> = if !flag.starts_with("--") && flag.len() > 2 {
                flag[1..].chars().map(|c| format!("-{c}")).collect()
            } else {
                vec![flag.clone()]
            };
            for f in singles {
                let shown = help
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .any(|w| {
                        w == f || w.starts_with(&format!("{f}=")) || w.starts_with(&format!("{f}["))
                    });
                assert!(shown, "revfs {cmd}: the README shows {f}, which `revfs {cmd} --help` does not list:\n{help}");
            }
        }
    }
}
