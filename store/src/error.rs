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

    /// Requirements Mercurial 6.3.2 does not know either: hg's abort, with its hint.
    #[error("repository requires features unknown to this Mercurial: {}\n(see https://mercurial-scm.org/wiki/MissingRequirement for more information)", .0.join(" "))]
    UnsupportedRequirements(Vec<String>),

    /// A revision expression of hg's revset language that revfs does not evaluate.
    #[error("revision expression '{0}' is not supported by revfs (use hg instead)")]
    UnsupportedRevset(String),

    /// Requirements hg knows that revfs does not read.
    #[error("repository requires features revfs does not support: {} (use hg instead)", .0.join(" "))]
    RequirementsNotImplemented(Vec<String>),

    #[error("{}: {reason}", path.display())]
    BadRequirements { path: PathBuf, reason: String },

    /// A share and its source disagree on share-safe: hg's abort (its default
    /// `share.safe-mismatch.*` settings), with its hint.
    #[error("{message}\n(see `hg help config.format.use-share-safe` for more information)")]
    ShareSafeMismatch {
        share_source: PathBuf,
        message: &'static str,
    },

    /// The index of a revlog is malformed as a whole (bad header, bad size, bad entry).
    /// (hg's words: the revlog without `.i`; the reason is for the logs.)
    #[error("index {} is corrupted", radix(revlog))]
    CorruptIndex { revlog: String, reason: String },

    /// One revision of a revlog cannot be read back: bad chunk, bad delta, bad hash.
    #[error("{revlog}@{rev}: {reason}")]
    CorruptRevision {
        revlog: String,
        rev: u32,
        reason: String,
    },

    /// The reconstructed text does not hash to the node stored in the index.
    #[error("integrity check failed on {}:{rev}", radix(revlog))]
    IntegrityCheckFailed { revlog: String, rev: u32 },

    /// A revision's chunks run past the end of their file: hg reads a delta chain's span
    /// at once, and says how much of it it got.
    #[error(
        "partial read of revlog {file}; expected {expected} bytes from offset {offset}, got {got}"
    )]
    PartialRead {
        file: String,
        expected: u64,
        offset: u64,
        got: i64,
    },

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

    /// A file revision of a shallow repository that could not be had: not on this machine
    /// and not from its server (down, slow, refusing, or sending what does not verify).
    #[error("{path}@{}: file contents not available: {reason}", node.get(..12).unwrap_or(node))]
    NotFetched {
        path: String,
        node: String,
        reason: String,
    },

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

/// A revlog's name as hg shows it in messages (`display_id`): without its `.i`.
fn radix(index_name: &str) -> &str {
    index_name.strip_suffix(".i").unwrap_or(index_name)
}
