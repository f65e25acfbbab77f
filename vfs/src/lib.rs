//! The revfs working copy served over FUSE.
//!
//! This crate owns everything about a mounted checkout: the inode tree built lazily from a
//! manifest ([`wc`]), the FUSE request handlers ([`fs`]), the mount's state directory
//! ([`state`]), the daemon's control socket ([`control`]) and the daemon itself
//! ([`daemon`]). It reads source-control objects only through `revfs-store`.

pub mod bdi;
pub mod busy;
pub mod checkout;
pub mod children;
pub mod config;
pub mod content;
pub mod control;
pub mod daemon;
pub mod fs;
pub mod journal;
pub mod kept;
pub mod lease;
pub mod mount_table;
pub mod notify;
pub mod overlay;
pub mod passthrough;
pub mod readahead;
pub mod readers;
pub mod share;
pub mod state;
pub mod status;
pub mod uring;
pub mod wc;

pub use revfs_store as store;
