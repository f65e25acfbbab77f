//! Every program a test starts is installed by `tests/deps.sh` on a bare Debian 12, or comes
//! with every Debian 12 system (its ESSENTIAL list). A test that starts a program nobody
//! installs passes on a machine that had it from elsewhere and fails on a fresh one.

use std::collections::BTreeSet;
use std::path::Path;

/// The programs `tests/deps.sh` names: the left sides of its "program:package" tables and
/// the words of its ESSENTIAL list.
fn listed(deps: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_essential = false;
    for line in deps.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(rest) = line.strip_prefix("ESSENTIAL=(") {
            in_essential = true;
            out.extend(
                rest.trim_end_matches(')')
                    .split_whitespace()
                    .map(String::from),
            );
            in_essential &= !line.ends_with(')');
            continue;
        }
        if in_essential {
            out.extend(
                line.trim_end_matches(')')
                    .split_whitespace()
                    .map(String::from),
            );
            in_essential = !line.ends_with(')');
            continue;
        }
        if let Some((prog, pkg)) = line.split_once(':') {
            if !prog.is_empty() && !pkg.is_empty() && !prog.contains(' ') && !pkg.contains(' ') {
                out.insert(prog.to_string());
            }
        }
    }
    out
}

/// The string literal that starts at `s` (after its opening quote), if it has no escape.
fn literal(s: &str) -> Option<&str> {
    let end = s.find('"')?;
    let lit = &s[..end];
    (!lit.contains('\\')).then_some(lit)
}

/// The programs a test source starts: `Command::new("X")`, and the first word of the
/// argument arrays given to a helper that runs `Command::new(cmd[0])`.
fn started(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in src.match_indices("Command::new(\"") {
        if let Some(p) = literal(&src[i + "Command::new(\"".len()..]) {
            out.insert(p.to_string());
        }
    }
    if src.contains("Command::new(cmd[0])") {
        for (i, _) in src.match_indices("run(") {
            let call = &src[i..src.len().min(i + 200)];
            if let Some(j) = call.find("&[\"") {
                if call[..j].contains(';') {
                    continue;
                }
                if let Some(p) = literal(&call[j + 3..]) {
                    out.insert(p.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn every_program_a_test_starts_is_installed_by_deps_sh_or_essential() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let deps = std::fs::read_to_string(root.join("deps.sh")).expect("tests/deps.sh");
    let listed = listed(&deps);
    // Programs of this workspace, or the test binary itself: built, not installed.
    let built = ["revfs", "/proc/self/exe"];
    let mut unlisted = Vec::new();
    let mut seen = 0;
    for dir in ["tests", "src"] {
        let files = revfs_tests::rust_sources(&root.join(dir));
        for f in files {
            if f.file_name().is_some_and(|n| n == "deps_listed.rs") {
                continue; // its own examples
            }
            let src = std::fs::read_to_string(&f).expect("a test source");
            for p in started(&src) {
                seen += 1;
                if !listed.contains(&p) && !built.contains(&p.as_str()) {
                    unlisted.push(format!("{}: {p}", f.display()));
                }
            }
        }
    }
    assert!(
        seen > 20,
        "found only {seen} programs started: the scan is broken"
    );
    assert!(
        unlisted.is_empty(),
        "programs started by tests that tests/deps.sh neither installs nor lists as essential:\n{}",
        unlisted.join("\n")
    );
}

#[test]
fn the_scan_finds_a_program_started_by_name_and_through_a_helper() {
    let src = "let o = Command::new(\"rsync\").arg(\"-a\");\n\
               fn run(d: &Path, cmd: &[&str]) { Command::new(cmd[0]); }\n\
               run(r, &[\"git\", \"init\"]);";
    let got: Vec<_> = started(src).into_iter().collect();
    assert_eq!(got, ["git", "rsync"]);
    let deps = "DEPS_TEST=(\n  git:git   # a comment\n)\nESSENTIAL=(cat\n  tar)\n";
    let got: Vec<_> = listed(deps).into_iter().collect();
    assert_eq!(got, ["cat", "git", "tar"]);
}
