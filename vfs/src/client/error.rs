//! The errors of a command's side of a mount: hg's aborts, worded as hg words them, and
//! the typed errors of the parts it uses (the store, the configuration, the matcher, the
//! control socket), each shown as its own.

use crate::service::control::ControlError;
use crate::service::state::StateError;
use revfs_hg::config::{ConfigError as HgConfigError, IdentityError};
use revfs_hg::date::DateError;
use revfs_hg::matcher::MatchError;
use revfs_hg::mergestate::MergeStateError;
use revfs_store::StoreError;
use std::path::PathBuf;

/// Why a working-copy command stopped. Shown after `abort: ` (the CLI adds each cause the
/// message does not already end with), except where [`ClientError::hg_message`] gives hg's
/// complete text.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// One of hg's aborts, with its message (a hint on the lines after the first).
    #[error("{0}")]
    Abort(String),
    /// The mount's daemon did not answer within the deadline.
    #[error(transparent)]
    NotAnswering(#[from] super::NotAnswering),
    /// The daemon answered the request with an error.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    HgConfig(#[from] HgConfigError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Match(#[from] MatchError),
    /// The committer's name is missing or unusable.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// A date given with `-d`.
    #[error(transparent)]
    Date(#[from] DateError),
    #[error(transparent)]
    MergeState(#[from] MergeStateError),
    /// The repository a mount serves could not be opened.
    #[error("repository of mount {}", mountpoint.display())]
    MountRepo {
        mountpoint: PathBuf,
        #[source]
        source: StoreError,
    },
    /// A file of the working copy or of the machine.
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A failure of the process itself (its current directory, a thread).
    #[error(transparent)]
    Os(#[from] std::io::Error),
}

impl ClientError {
    /// The complete standard-error text of the errors hg words in its own layout (the
    /// configuration's, the matcher's, the committer's name, a date, a daemon not
    /// answering), if this is one.
    pub fn hg_message(&self) -> Option<String> {
        match self {
            ClientError::NotAnswering(e) => Some(e.hg_message()),
            ClientError::HgConfig(e) => Some(e.hg_message()),
            ClientError::Match(e) => Some(e.hg_message()),
            ClientError::Identity(e) => Some(e.hg_message()),
            ClientError::Date(e) => Some(e.hg_message()),
            _ => None,
        }
    }

    /// An error for a file at `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ClientError {
        let path = path.into();
        move |source| ClientError::Io { path, source }
    }
}

/// hg's `abort: MESSAGE`.
pub fn abort(message: impl Into<String>) -> ClientError {
    ClientError::Abort(message.into())
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;
