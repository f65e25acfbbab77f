//! The oracles the unit tests compare with: the `hg` command and Mercurial's own Python
//! modules (Debian's python3). Without them a test is skipped, except under CI, where it
//! fails.

use std::process::Command;

/// Debian's python3, which can import the system mercurial package.
pub(crate) const PYTHON: &str = "/usr/bin/python3";

/// Whether `hg` runs and, when `python_module` is given, python3 can import it. Otherwise
/// prints SKIPPED, or panics when `CI` is set.
pub(crate) fn available(python_module: Option<&str>) -> bool {
    let hg = Command::new("hg")
        .arg("--version")
        .env("HGRCPATH", "")
        .env("HGPLAIN", "1")
        .output()
        .is_ok_and(|o| o.status.success());
    let py = python_module.is_none_or(|module| {
        Command::new(PYTHON)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !(hg && py) {
        let what = match python_module {
            Some(m) => format!("hg or {PYTHON} with {m}"),
            None => "hg".to_owned(),
        };
        if std::env::var_os("CI").is_some() {
            panic!("{what} is missing (CI is set)");
        }
        println!("SKIPPED: {what} is not available");
    }
    hg && py
}
