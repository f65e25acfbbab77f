//! The parents recorded in a working copy's `.hg/dirstate`: in dirstate-v1, its first 40
//! bytes; in dirstate-v2 (`.hg/requires` names it), the docket's `dirstate-v2\n` marker
//! then two 32-byte slots, each a 20-byte node padded with zeros
//! (`hg help internals.dirstate-v2`, "The docket file format"). revfs never writes it.

use crate::error::{Result, StoreError};
use crate::node::Node;
use crate::repo::Repo;
use std::path::Path;

const V2_MARKER: &[u8] = b"dirstate-v2\n";

/// The working-directory parents of `repo`, or `None` when it has no dirstate file.
pub fn parents(repo: &Repo) -> Result<Option<[Node; 2]>> {
    read_parents(repo.dot_hg(), repo.requirements().contains("dirstate-v2"))
}

/// [`parents`] from `dot_hg/dirstate` in the format given.
pub fn read_parents(dot_hg: &Path, v2: bool) -> Result<Option<[Node; 2]>> {
    let path = dot_hg.join("dirstate");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    if bytes.is_empty() {
        return Ok(None);
    }
    let (p1, p2) = if v2 {
        if !bytes.starts_with(V2_MARKER) {
            return Err(damaged(&path));
        }
        (12..32, 44..64)
    } else {
        (0..20, 20..40)
    };
    let (Some(p1), Some(p2)) = (
        bytes.get(p1).and_then(Node::from_slice),
        bytes.get(p2).and_then(Node::from_slice),
    ) else {
        return Err(damaged(&path));
    };
    Ok(Some([p1, p2]))
}

fn damaged(path: &Path) -> StoreError {
    StoreError::Other(format!(
        "{}: working directory state appears damaged",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::tests::{hg, hg_available};

    /// `hg debugupgraderepo` switches the working copy's dirstate format in place.
    fn switch_dirstate(dir: &Path, v2: bool) {
        let setting = format!("format.use-dirstate-v2={}", if v2 { "yes" } else { "no" });
        hg(
            dir,
            &[
                "--config",
                "storage.dirstate-v2.slow-path=allow",
                "--config",
                &setting,
                "debugupgraderepo",
                "--run",
                "--no-backup",
                "-q",
            ],
        );
    }

    #[test]
    fn parents_are_read_from_either_dirstate_format_as_hg_records_them() {
        if !hg_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        hg(dir, &["init"]);
        std::fs::write(dir.join("a"), "a\n").unwrap();
        hg(dir, &["commit", "-Aqm", "a"]);
        std::fs::write(dir.join("a"), "b\n").unwrap();
        hg(dir, &["commit", "-qm", "b"]);
        hg(dir, &["update", "-q", "0"]);
        std::fs::write(dir.join("a"), "c\n").unwrap();
        hg(dir, &["commit", "-qm", "c"]);
        // A merge in progress has two parents.
        hg(dir, &["merge", "-q", "--tool", "internal:other", "1"]);
        let want = |dir: &Path| -> [Node; 2] {
            let out = hg(
                dir,
                &[
                    "--config",
                    "storage.dirstate-v2.slow-path=allow",
                    "log",
                    "-r",
                    "p1()+p2()",
                    "-T",
                    "{node}\n",
                ],
            );
            let nodes: Vec<Node> = out
                .lines()
                .map(|l| Node::from_hex(l.as_bytes()).unwrap())
                .collect();
            [nodes[0], nodes[1]]
        };
        for v2 in [true, false, true] {
            switch_dirstate(dir, v2);
            let repo = Repo::open(dir).unwrap();
            assert_eq!(repo.requirements().contains("dirstate-v2"), v2);
            assert_eq!(
                std::fs::read(dir.join(".hg/dirstate"))
                    .unwrap()
                    .starts_with(V2_MARKER),
                v2
            );
            assert_eq!(parents(&repo).unwrap(), Some(want(dir)), "v2: {v2}");
        }
        // A v2 docket that is not one is refused, not misread.
        std::fs::write(dir.join(".hg/dirstate"), [7u8; 100]).unwrap();
        let repo = Repo::open(dir).unwrap();
        assert!(parents(&repo)
            .unwrap_err()
            .to_string()
            .ends_with("working directory state appears damaged"));
    }
}
