//! The hg share that makes a mount a working copy real hg can use: `.hg` at the root of
//! the mount is a symbolic link to `hg/` in the mount's state directory (docs/FORMATS.md,
//! "The working copy's .hg"), which this module writes when the daemon starts:
//!
//! - `sharedpath`: the repository's `.hg`;
//! - `requires`: `shared`, the repository's `share-safe` (or, without it, the repository's
//!   own requirements, as `hg share` copies them) and [`REQUIREMENT`], which an hg without
//!   revfs's extension refuses, so that it never reads an empty dirstate;
//! - `hgrc`: the user's, made once, which includes `revfs.rc`: rewritten at each start, it
//!   enables the extension, names the control socket and turns hg's fsmonitor off (the
//!   daemon is the mount's monitor);
//! - `shared`: `bookmarks`, so that hg's share extension (which `revfs.rc` enables) reads
//!   and writes the repository's bookmarks, as `revfs` commands do: a mount's bookmarks
//!   are its repository's (hg share -B); the active bookmark stays the mount's own;
//! - `wcache/`, where hg probes the file system;
//! - `../hgext/revfs/*.py`: the extension (a Python package), which this binary carries
//!   ([`EXTENSION_FILES`], listed by `vfs/build.rs` from `hgext/revfs/`).
//!
//! Every file is written whole to a temporary name and renamed into place, when it
//! changed.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The requirement of a mount's share: only an hg with revfs's extension opens it.
pub const REQUIREMENT: &str = "revfs-dirstate-v1";

// The Mercurial extension, as this binary carries it: `EXTENSION_FILES`.
include!(concat!(env!("OUT_DIR"), "/extension.rs"));

/// The oldest and the newest Mercurial release (major, minor) the extension serves in a
/// mount: its `compat.SUPPORTED`, which a test keeps equal.
pub const HG_RELEASES: [(u32, u32); 2] = [(6, 3), (7, 2)];

/// [`HG_RELEASES`] as users read it: `6.3 to 7.2`.
pub fn hg_range() -> String {
    let [(a, b), (c, d)] = HG_RELEASES;
    format!("{a}.{b} to {c}.{d}")
}

/// Whether the extension serves the Mercurial release `version` (`6.3.2`, `7.2.4+3-abc`).
pub fn hg_serves(version: &str) -> bool {
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => {
            HG_RELEASES[0] <= (major, minor) && (major, minor) <= HG_RELEASES[1]
        }
        _ => false,
    }
}

/// Working-directory requirements of the repository that a share of it must not copy: its
/// dirstate is revfs's.
const NOT_SHARED: &[&str] = &["dirstate-v2", "dirstate-tracked-key-v1", "share-safe"];

/// Has the kernel cache the way to the share through the mount: the root's attributes,
/// the `.hg` name and its target (symlink targets are cached: `FUSE_CACHE_SYMLINKS`; every
/// entry lives for the mount's long TTL). hg then reaches the share, its hgrc and the
/// extension without asking the daemon, so that when the daemon is frozen or killed the
/// extension's deadline, not the kernel's wait, decides what hg says (docs/FORMATS.md,
/// "Inside the mount"). Called from a thread that is not a FUSE worker, once the mount
/// serves; errors are nothing to report (the kernel then asks later).
pub fn prime_kernel_cache(mountpoint: &Path) {
    let dot_hg = mountpoint.join(".hg");
    let _ = std::fs::read_link(&dot_hg);
    let _ = std::fs::metadata(&dot_hg);
    // Reading a link marks its atime stale in the kernel (even under noatime), which would
    // send hg's next lstat of `.hg` to the daemon: its attributes are asked for after.
    let _ = std::fs::symlink_metadata(&dot_hg);
    let _ = std::fs::symlink_metadata(mountpoint);
    // hg's path auditor of `.hg` probes the case-swapped name (util.fscasesensitive): its
    // negative entry is cached too.
    let _ = std::fs::symlink_metadata(mountpoint.join(".HG"));
}

/// The share's directory in the mount's state directory `state`, which `.hg` names.
pub fn dir(state: &Path) -> PathBuf {
    state.join("hg")
}

/// Writes the share into `state` for the repository at `repo` (its root), the mount at
/// `mountpoint` (canonical) and the control socket `socket`; returns the share's
/// directory, which `.hg` names.
pub fn write(
    state: &Path,
    repo: &Path,
    mountpoint: &Path,
    socket: &Path,
) -> std::io::Result<PathBuf> {
    let dir = dir(state);
    // `wcache`: where hg tests the file system (symlinks, exec bits) rather than in the
    // working copy, which would journal its probes.
    std::fs::create_dir_all(dir.join("wcache"))?;
    let repo_hg = std::fs::canonicalize(repo.join(".hg"))?;
    let theirs = std::fs::read_to_string(repo_hg.join("requires")).unwrap_or_default();
    let mut requires: Vec<&str> = if theirs.lines().any(|l| l == "share-safe") {
        vec!["share-safe"]
    } else {
        theirs
            .lines()
            .filter(|l| !l.is_empty() && !NOT_SHARED.contains(l))
            .collect()
    };
    requires.extend(["shared", REQUIREMENT]);
    requires.sort_unstable();
    requires.dedup();
    let mut text = requires.join("\n");
    text.push('\n');
    replace(&dir.join("requires"), text.as_bytes())?;
    use std::os::unix::ffi::OsStrExt;
    replace(&dir.join("sharedpath"), repo_hg.as_os_str().as_bytes())?;

    let ext_dir = state.join("hgext").join("revfs");
    std::fs::create_dir_all(&ext_dir)?;
    let mut changed = false;
    for (name, text) in EXTENSION_FILES {
        changed |= replace(&ext_dir.join(name), text.as_bytes())?;
    }
    // A module of another version of the extension that this one does not have.
    for entry in std::fs::read_dir(&ext_dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".py") && !EXTENSION_FILES.iter().any(|(n, _)| *n == name) {
            std::fs::remove_file(ext_dir.join(&*name))?;
            changed = true;
        }
    }
    if changed {
        // The extension writes its bytecode cache when Python may not; one made from
        // another version of it must go (Python would compile it at every command).
        match std::fs::remove_dir_all(ext_dir.join("__pycache__")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    let mut rc = Vec::new();
    rc.extend_from_slice(
        b"# Written by revfs at each mount; your settings go in hgrc, which includes this.\n\
          [extensions]\nshare =\nrevfs = ",
    );
    rc.extend_from_slice(ext_dir.as_os_str().as_bytes());
    rc.extend_from_slice(b"\n[revfs]\nsocket = ");
    rc.extend_from_slice(socket.as_os_str().as_bytes());
    // The mount and its repository as the extension names them in its aborts, known to it
    // before hg opens the repository (it asks the daemon first: hgext/revfs/__init__.py,
    // _repository).
    rc.extend_from_slice(b"\nroot = ");
    rc.extend_from_slice(mountpoint.as_os_str().as_bytes());
    rc.extend_from_slice(b"\nsource = ");
    rc.extend_from_slice(repo_hg.parent().unwrap_or(&repo_hg).as_os_str().as_bytes());
    // hg's fsmonitor, enabled in a user's hgrc, would ask Watchman to crawl the mount
    // (every file of a monorepo) for a status the daemon already knows: off in a mount,
    // before its reposetup looks (the share's hgrc is read before any reposetup).
    rc.extend_from_slice(b"\n[fsmonitor]\nmode = off\n");
    replace(&dir.join("revfs.rc"), &rc)?;
    replace(&dir.join("shared"), b"bookmarks\n")?;
    let hgrc = dir.join("hgrc");
    if !hgrc.exists() {
        replace(&hgrc, b"%include revfs.rc\n")?;
    }
    Ok(dir)
}

/// Writes `data` to `path` through a temporary file and a rename, unless `path` already
/// holds it (the usual case at a remount: no write, no fsync on the way to mounting).
/// True when it wrote.
fn replace(path: &Path, data: &[u8]) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == data) {
        return Ok(false);
    }
    let tmp = path.with_extension("revfs-tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

/// The working copy's branch, as hg reads it (`dirstate._branch`): the share's `branch`
/// file stripped of surrounding whitespace, `default` when it is missing or empty.
pub fn branch(share: &Path) -> Vec<u8> {
    let text = std::fs::read(share.join("branch")).unwrap_or_default();
    let name = text.trim_ascii();
    if name.is_empty() {
        b"default".to_vec()
    } else {
        name.to_vec()
    }
}

/// Sets the working copy's branch, as hg's `dirstate.setbranch` writes it: the name and a
/// newline, replacing the file whole.
pub fn set_branch(share: &Path, name: &[u8]) -> std::io::Result<()> {
    let mut text = name.to_vec();
    text.push(b'\n');
    replace(&share.join("branch"), &text).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_the_extensions_and_reads_versions_as_hg_prints_them() {
        let compat = EXTENSION_FILES
            .iter()
            .find(|(n, _)| *n == "compat.py")
            .map(|(_, t)| *t)
            .unwrap();
        let [(a, b), (c, d)] = HG_RELEASES;
        let line = format!("SUPPORTED = (({a}, {b}), ({c}, {d}))\n");
        assert!(compat.contains(&line), "compat.py lacks {line:?}");
        assert_eq!(hg_range(), "6.3 to 7.2");
        for v in [
            "6.3",
            "6.3.2",
            "6.9.5",
            "7.2.4",
            "7.2.4+12-6b8a2f10",
            "7.2rc0",
        ] {
            assert!(hg_serves(v), "{v}");
        }
        for v in ["6.2.3", "7.3", "7.3.1", "5.9", "", "unknown", "7"] {
            assert!(!hg_serves(v), "{v}");
        }
    }

    #[test]
    fn every_module_of_the_extension_is_written_and_a_stale_one_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".hg")).unwrap();
        std::fs::write(repo.join(".hg/requires"), "revlogv1\nstore\n").unwrap();
        let state = tmp.path().join("state");
        let ext = state.join("hgext/revfs");
        std::fs::create_dir_all(ext.join("__pycache__")).unwrap();
        std::fs::write(ext.join("gone.py"), "# a module of an older extension\n").unwrap();
        let mnt = tmp.path().join("mnt");
        let write_share = || write(&state, &repo, &mnt, &tmp.path().join("control.sock")).unwrap();
        write_share();
        let mut names: Vec<_> = std::fs::read_dir(&ext)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let want: Vec<_> = EXTENSION_FILES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(
            names, want,
            "the package's modules, no stale one, no old bytecode"
        );
        assert!(want.iter().any(|n| n == "__init__.py"));
        for (name, text) in EXTENSION_FILES {
            assert_eq!(std::fs::read_to_string(ext.join(name)).unwrap(), *text);
        }
        // The extension's aborts name the mount and its repository before hg opens it.
        let rc = std::fs::read_to_string(state.join("hg/revfs.rc")).unwrap();
        let repo = std::fs::canonicalize(&repo).unwrap();
        assert!(
            rc.contains(&format!("\nroot = {}\n", mnt.display())),
            "{rc}"
        );
        assert!(
            rc.contains(&format!("\nsource = {}\n", repo.display())),
            "{rc}"
        );
        // Written again unchanged: the bytecode Python made since is kept.
        std::fs::create_dir(ext.join("__pycache__")).unwrap();
        write_share();
        assert!(ext.join("__pycache__").is_dir());
    }
}
