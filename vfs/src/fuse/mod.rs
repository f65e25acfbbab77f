//! The kernel channel: everything that speaks FUSE or reads the kernel's view of a mount.
//!
//! Owns the request handlers ([`handlers`]: kernel requests translated into
//! [`crate::wc::WorkingCopy`] operations), passthrough of open files, the kernel cache
//! notifications, the events that tell inotify watchers of the daemon's own changes, how
//! requests arrive (io_uring or `/dev/fuse`), the mount's backing device,
//! and the kernel's mount table. It may use the working copy, checkout and read-ahead; it
//! never imports [`crate::service`] (the daemon hands it what it needs).

pub mod bdi;
pub mod events;
pub mod handlers;
mod killpriv;
mod listing;
pub mod mount_table;
pub mod notify;
mod page_filler;
pub mod passthrough;
mod reply;
mod revfs;
mod synthetic;
pub mod uring;

pub use revfs::RevFs;
pub use synthetic::{ControlTargets, CONTROL_DIR, DOT_HG};
