//! Phases (public, draft, secret...) computed from `store/phaseroots`: a changeset's phase
//! is the highest phase of any root among its ancestors (itself included).

use crate::error::{Result, StoreError};
use crate::node::{Node, Rev};
use crate::revlog::Revlog;
use std::path::Path;

/// A changeset phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Public = 0,
    Draft = 1,
    Secret = 2,
    Archived = 32,
    Internal = 96,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Public => "public",
            Phase::Draft => "draft",
            Phase::Secret => "secret",
            Phase::Archived => "archived",
            Phase::Internal => "internal",
        }
    }

    fn from_number(n: u32) -> Option<Phase> {
        Some(match n {
            0 => Phase::Public,
            1 => Phase::Draft,
            2 => Phase::Secret,
            32 => Phase::Archived,
            96 => Phase::Internal,
            _ => return None,
        })
    }
}

/// The phase of every changelog revision.
pub fn compute(store: &Path, changelog: &Revlog) -> Result<Vec<Phase>> {
    let path = store.join("phaseroots");
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    let mut phases = vec![Phase::Public; changelog.len()];
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(2, |&b| b == b' ');
        let phase = parts
            .next()
            .and_then(|p| std::str::from_utf8(p).ok()?.parse().ok())
            .and_then(Phase::from_number);
        let node = parts.next().and_then(Node::from_hex);
        let (Some(phase), Some(node)) = (phase, node) else {
            return Err(StoreError::Other(format!(
                "{}: malformed line {:?}",
                path.display(),
                String::from_utf8_lossy(line)
            )));
        };
        // Roots naming unknown nodes (stripped changesets) are ignored, as hg does.
        if let Some(rev) = changelog.rev_of(&node).filter(|&r| r >= 0) {
            let slot = &mut phases[rev as usize];
            *slot = (*slot).max(phase);
        }
    }
    for rev in 0..changelog.len() as Rev {
        let [p1, p2] = changelog.parents(rev)?;
        let mut phase = phases[rev as usize];
        for p in [p1, p2].into_iter().filter(|&p| p >= 0) {
            phase = phase.max(phases[p as usize]);
        }
        phases[rev as usize] = phase;
    }
    Ok(phases)
}
