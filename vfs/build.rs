//! Embeds the Mercurial extension (every `.py` file of `hgext/revfs/`) in the crate: writes
//! `$OUT_DIR/extension.rs` with the list of its files, which `service/share.rs` includes and
//! writes into each mount's state directory. A module added to the package is carried
//! without a line changed here.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let dir = manifest.join("../hgext/revfs");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".py"))
        .collect();
    names.sort();
    assert!(
        names.iter().any(|n| n == "__init__.py"),
        "{}: no __init__.py",
        dir.display()
    );
    let mut out = String::from(
        "/// The Mercurial extension's files (name in the package, contents), sorted by name.\n\
         pub const EXTENSION_FILES: &[(&str, &str)] = &[\n",
    );
    for n in &names {
        let path = dir.join(n).canonicalize().expect("listed just now");
        writeln!(
            out,
            "    ({n:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    out.push_str("];\n");
    let dest =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("extension.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
}
