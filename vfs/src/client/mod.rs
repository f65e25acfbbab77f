//! A command's side of a mount: what the `revfs` binary does in a working copy from
//! outside the daemon. It finds the mount a path is in from the kernel's mount table
//! ([`kernel`]), talks to the mount's daemon with a deadline ([`workspace`]), asks it for
//! the status ([`status`]), and runs Mercurial's working-copy commands over the dirstate
//! the daemon keeps: hg's dirstate changes ([`dirstate`]), its walk of the named files
//! ([`walk`]), `add`/`forget`/`remove`/`addremove` ([`track`]), `copy`/`rename`
//! ([`copy`]), `revert` ([`revert`]), `commit` ([`commit`]) and `update` ([`update`]), with
//! hg's messages, warnings and exit codes.
//!
//! It may use the control protocol and client (`service`), the working copy's shared
//! types (`wc`), the mount table and the control directory's name (`fuse`) and the
//! configuration; nothing else in this crate imports it, and it never runs in the daemon.
//! The binary parses arguments and prints errors; the semantics are here.

pub mod commit;
pub mod copy;
pub mod dirstate;
mod error;
pub mod kernel;
pub mod redirect;
pub mod revert;
pub mod status;
pub mod track;
pub mod update;
pub mod walk;
pub mod workspace;

pub use error::{abort, ClientError, Result};
/// A repository path or name for a message, as hg prints bytes that are not UTF-8.
fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub use workspace::{
    control_deadline, open, open_deferred, MountRef, NoProgress, NotAnswering, Progress, Workspace,
};
