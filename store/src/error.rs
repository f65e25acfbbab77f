//! Typed errors of the store. Every variant names the file, revlog or revision it concerns,
//! so that the CLI can print an hg-style `abort: ...` line without further context.

use std::path::PathBuf;

/// The result type of the store crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Everything that can go wrong while reading a repository.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("no repository found in '{}' (.hg not found)", .0.display())]
    NotARepository(PathBuf),

    #[error("repository requires features unknown to this Mercurial: {}", .0.join(" "))]
    UnsupportedRequirements(Vec<String>),

    #[error("{}: {reason}", path.display())]
    BadRequirements { path: PathBuf, reason: String },

    /// The index of a revlog is malformed as a whole (bad header, bad size, bad entry).
    #[error("index {revlog} is corrupted: {reason}")]
    CorruptIndex { revlog: String, reason: String },

    /// One revision of a revlog cannot be read back: bad chunk, bad delta, bad hash.
    #[error("{revlog}@{rev}: {reason}")]
    CorruptRevision {
        revlog: String,
        rev: u32,
        reason: String,
    },

    /// The reconstructed text does not hash to the node stored in the index.
    #[error("integrity check failed on {revlog}:{rev}")]
    IntegrityCheckFailed { revlog: String, rev: u32 },

    /// A changelog or manifest text that does not parse.
    #[error("{what} {node} is malformed: {reason}")]
    Malformed {
        what: &'static str,
        node: String,
        reason: String,
    },

    #[error("{revlog}: unknown node {node}")]
    UnknownNode { revlog: String, node: String },

    #[error("unknown revision '{0}'")]
    UnknownRevision(String),

    #[error("ambiguous revision identifier: {0}")]
    AmbiguousRevision(String),

    #[error("{revlog}: no revision {rev}")]
    RevisionOutOfRange { revlog: String, rev: i64 },

    /// A lock could not be taken before the timeout: someone else holds it.
    #[error("timeout while waiting for lock {} held by '{holder}'", path.display())]
    LockHeld { path: PathBuf, holder: String },

    /// A previous transaction was interrupted; it must be rolled back first.
    #[error("abandoned transaction found in {} - run revfs recover (or hg recover)", .0.display())]
    AbandonedTransaction(PathBuf),

    #[error("{0}")]
    Other(String),
}

impl StoreError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt_rev(revlog: &str, rev: u32, reason: impl Into<String>) -> Self {
        StoreError::CorruptRevision {
            revlog: revlog.to_owned(),
            rev,
            reason: reason.into(),
        }
    }
}
