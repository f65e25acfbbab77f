//! Repository requirements (`.hg/requires`, and `.hg/store/requires` under share-safe),
//! read as hg reads them, and checked against what this store supports.

use crate::error::{Result, StoreError};
use crate::pathenc::PathEncoding;
use std::collections::BTreeSet;
use std::path::Path;

/// Requirements this reader understands.
const SUPPORTED: &[&str] = &[
    "revlogv1",
    "store",
    "fncache",
    "dotencode",
    "generaldelta",
    "sparserevlog",
    "revlog-compression-zstd",
    "share-safe",
    "bookmarksinstore",
    "exp-sparse",
    "shared",
    "relshared",
    "dirstate-tracked-key-v1",
    // Ignored on read; a writer deletes the nodemaps first (crate::nodemap).
    "persistent-nodemap",
    // The source's own working copy: only its parents are read (crate::dirstate).
    "dirstate-v2",
    // The old names of the compression engines (a reader decodes any chunk; a writer
    // compresses with the named engine: crate::commit::compression_of), and raw chunks.
    "exp-compression-zstd",
    "exp-compression-zlib",
    "exp-compression-none",
    // A shallow repository (Mercurial's remotefilelog): file revisions come from a server
    // into a shared cache (crate::shallow), not from filelogs.
    crate::shallow::REQUIREMENT,
];

/// Requirements Mercurial 6.3 to 7.2 support without extensions
/// (`localrepo.gathersupportedrequirements`): those revfs lacks are refused with its own
/// words, the others with hg's.
const HG_SUPPORTED: &[&str] = &[
    // 7.x: delta information in revlog headers, the file index, the plain store encoding.
    "delta-info-revlog",
    "exp-very-fragile-and-unsafe-plain-store-encoding",
    "fileindex-v1",
    "bookmarksinstore",
    "dirstate-tracked-key-v1",
    "dirstate-v2",
    "dotencode",
    "exp-archived-phase",
    "exp-changelog-v2",
    "exp-compression-none",
    "exp-compression-zlib",
    "exp-compression-zstd",
    "exp-copies-sidedata-changeset",
    "exp-revlogv2.2",
    "exp-sparse",
    "fncache",
    "generaldelta",
    "internal-phase-2",
    "persistent-nodemap",
    "relshared",
    "revlog-compression-zstd",
    "revlogv1",
    "share-safe",
    "shared",
    "sparserevlog",
    "store",
    "treemanifest",
];

/// hg's check of one requirements file: the names it does not know, then those revfs
/// does not read.
fn check(set: &BTreeSet<String>) -> Result<()> {
    let unknown: Vec<String> = set
        .iter()
        .filter(|r| !HG_SUPPORTED.contains(&r.as_str()) && !SUPPORTED.contains(&r.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(StoreError::UnsupportedRequirements(unknown));
    }
    let lacking: Vec<String> = set
        .iter()
        .filter(|r| !SUPPORTED.contains(&r.as_str()))
        .cloned()
        .collect();
    if !lacking.is_empty() {
        return Err(StoreError::RequirementsNotImplemented(lacking));
    }
    Ok(())
}

/// The parsed set of requirements of a repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    set: BTreeSet<String>,
}

fn read_list(path: &Path, missing_ok: bool) -> Result<BTreeSet<String>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| StoreError::BadRequirements {
                path: path.to_owned(),
                reason: "not valid UTF-8".into(),
            })?;
            Ok(text
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing_ok => Ok(BTreeSet::new()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

impl Requirements {
    /// Reads the working-directory requirements in `dot_hg/requires` (without checking them).
    pub fn load_working(dot_hg: &Path) -> Result<Requirements> {
        Ok(Requirements {
            set: read_list(&dot_hg.join("requires"), true)?,
        })
    }

    /// Completes the working-directory requirements with the store's (under share-safe, from
    /// `store_dir/requires`), and refuses any requirement this reader does not support,
    /// naming each.
    pub fn load(dot_hg: &Path, store_dir: &Path) -> Result<Requirements> {
        let mut set = Self::load_working(dot_hg)?.set;
        check(&set)?;
        if set.contains("share-safe") {
            let store = read_list(&store_dir.join("requires"), false)?;
            check(&store)?;
            set.extend(store);
        }
        if !set.contains("revlogv1") {
            return Err(StoreError::UnsupportedRequirements(vec![
                "(missing revlogv1: repository format too old)".into(),
            ]));
        }
        Ok(Requirements { set })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    /// How store paths are encoded on disk.
    pub fn path_encoding(&self) -> PathEncoding {
        if !self.contains("store") {
            PathEncoding::Plain
        } else if self.contains("fncache") {
            PathEncoding::Fncache {
                dotencode: self.contains("dotencode"),
            }
        } else {
            PathEncoding::Store
        }
    }

    /// Iterates over the requirement names, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.set.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with(requires: &str, store_requires: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("store")).unwrap();
        std::fs::write(dir.path().join("requires"), requires).unwrap();
        if let Some(s) = store_requires {
            std::fs::write(dir.path().join("store/requires"), s).unwrap();
        }
        dir
    }

    const DEFAULT_STORE: &str =
        "dotencode\nfncache\ngeneraldelta\nrevlog-compression-zstd\nrevlogv1\nsparserevlog\nstore\n";

    #[test]
    fn share_safe_reads_the_store_requires_too() {
        let d = repo_with("share-safe\n", Some(DEFAULT_STORE));
        let r = Requirements::load(d.path(), &d.path().join("store")).unwrap();
        assert!(r.contains("revlog-compression-zstd"));
        assert_eq!(r.path_encoding(), PathEncoding::Fncache { dotencode: true });
    }

    #[test]
    fn share_safe_without_store_requires_is_an_error() {
        let d = repo_with("share-safe\n", None);
        let store = d.path().join("store");
        assert!(matches!(
            Requirements::load(d.path(), &store),
            Err(StoreError::Io { .. })
        ));
    }

    #[test]
    fn unknown_requirements_are_refused_by_name() {
        let d = repo_with(
            "share-safe\n",
            Some("revlogv1\nstore\ntreemanifest\nexp-changelog-v2\npersistent-nodemap\n"),
        );
        let err = Requirements::load(d.path(), &d.path().join("store")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "repository requires features revfs does not support: exp-changelog-v2 treemanifest (use hg instead)"
        );
        // What hg 6.3.2 does not know either: hg's words.
        let d = repo_with(
            "share-safe\n",
            Some("revlogv1\nstore\nexp-frob\ntreemanifest\n"),
        );
        let err = Requirements::load(d.path(), &d.path().join("store")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "repository requires features unknown to this Mercurial: exp-frob\n\
             (see https://mercurial-scm.org/wiki/MissingRequirement for more information)"
        );
    }

    #[test]
    fn requirements_of_hg_7_that_revfs_lacks_are_refused_in_revfss_words() {
        for r in [
            "delta-info-revlog",
            "fileindex-v1",
            "exp-very-fragile-and-unsafe-plain-store-encoding",
        ] {
            let d = repo_with("share-safe\n", Some(&format!("{DEFAULT_STORE}{r}\n")));
            let err = Requirements::load(d.path(), &d.path().join("store")).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "repository requires features revfs does not support: {r} (use hg instead)"
                )
            );
        }
    }

    #[test]
    fn the_compression_engines_old_names_are_read() {
        for r in [
            "exp-compression-zstd",
            "exp-compression-zlib",
            "exp-compression-none",
        ] {
            let store = DEFAULT_STORE.replace("revlog-compression-zstd", r);
            let d = repo_with("share-safe\n", Some(&store));
            let reqs = Requirements::load(d.path(), &d.path().join("store")).unwrap();
            assert!(reqs.contains(r));
        }
    }

    #[test]
    fn the_internal_phase_name_hg_dropped_in_6_3_is_refused_as_hg_refuses_it() {
        // 6.3 renamed it internal-phase-2; 6.3.2 no longer knows the old name.
        let d = repo_with("share-safe\n", Some("revlogv1\nstore\ninternal-phase\n"));
        let err = Requirements::load(d.path(), &d.path().join("store")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "repository requires features unknown to this Mercurial: internal-phase\n\
             (see https://mercurial-scm.org/wiki/MissingRequirement for more information)"
        );
    }
}
