//! The vfs crate's subsystems import each other one way (docs/ARCHITECTURE.md, "vfs/"):
//! every `crate::X` a file of `vfs/src/F/` names is a subsystem `F` may use. An import
//! that runs back up (the working copy reaching into the daemon, say) fails here with the
//! file that makes it.

use std::collections::BTreeSet;
use std::path::Path;

/// What each top-level module of `vfs/src` may import (`crate::X`), besides itself.
const ALLOWED: &[(&str, &[&str])] = &[
    (
        "service",
        &[
            "fuse",
            "checkout",
            "wc",
            "readahead",
            "config",
            "busy",
            "cpu_latency",
            "shallow",
        ],
    ),
    ("fuse", &["checkout", "wc", "readahead", "busy", "helper"]),
    ("checkout", &["wc", "readahead", "busy"]),
    ("wc", &["readahead", "busy"]),
    ("readahead", &["helper"]),
    ("client", &["service", "fuse", "wc", "config", "shallow"]),
    ("config", &["wc"]),
    ("busy", &[]),
    ("cpu_latency", &["busy"]),
    ("helper", &[]),
    ("shallow", &[]),
    ("lib", &[]),
];

/// The top-level modules that a source names as `crate::X`, outside comments.
fn imports(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in src.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        for (i, _) in code.match_indices("crate::") {
            if i > 0 && code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue; // revfs_crate::...
            }
            let name: String = code[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn the_vfs_subsystems_import_each_other_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vfs/src");
    let files = revfs_tests::rust_sources(&src);
    let mut wrong = Vec::new();
    let mut arrows = 0;
    for f in &files {
        let rel = f.strip_prefix(&src).expect("below vfs/src");
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|s| s.trim_end_matches(".rs"))
            .expect("a file name");
        let allowed = ALLOWED
            .iter()
            .find(|(m, _)| *m == top)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| {
                panic!("vfs/src/{top}: a top-level module the layout does not know")
            });
        let text = std::fs::read_to_string(f).expect("a vfs source");
        for m in imports(&text) {
            if m == top {
                continue;
            }
            arrows += 1;
            if !allowed.contains(&m.as_str()) {
                wrong.push(format!("vfs/src/{}: {top} -> {m}", rel.display()));
            }
        }
    }
    assert!(
        arrows > 10,
        "found only {arrows} imports between subsystems: the scan is broken"
    );
    assert!(
        wrong.is_empty(),
        "imports that run against the layout (docs/ARCHITECTURE.md):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scan_sees_an_import_in_code_and_not_in_a_comment() {
    let src = "use crate::wc::WorkingCopy;\n// crate::service is named here only\nlet x = crate::fuse::notify::f();\nrevfs_crate::x;";
    let got: Vec<_> = imports(src).into_iter().collect();
    assert_eq!(got, ["fuse", "wc"]);
}
