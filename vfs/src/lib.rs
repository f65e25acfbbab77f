//! The revfs working copy served over FUSE.
//!
//! This crate owns everything about a mounted checkout, in six subsystems whose imports run
//! one way (docs/ARCHITECTURE.md, "vfs/"). Five are the daemon:
//!
//! - [`service`]: the daemon of one mount, its control socket (protocol, server, client),
//!   its state directory, the hg share, working copies kept unmounted;
//! - [`fuse`]: the kernel channel: FUSE request handlers, passthrough, kernel cache
//!   notifications, io_uring, the backing device, the mount table;
//! - [`checkout`]: a working copy moved to a new parent: commit, update, reparent, prefetch;
//! - [`wc`]: the working copy itself: the inode tree built lazily from a manifest, its
//!   content read from the store, the overlay, the journal, status;
//! - [`readahead`]: reading files ahead of a program that reads the tree: the queue and its
//!   threads, read leases, the guess whether a program is reading.
//!
//! The sixth never runs in the daemon: [`client`], a command's side of a mount (finding
//! it, talking to its daemon, hg's working-copy commands over the dirstate it keeps).
//!
//! Beside them, [`config`] (the user's configuration), [`busy`] (which requests are being
//! served), [`cpu_latency`] (idle CPUs kept quick to wake while requests come) and
//! [`helper`] (processes of the daemon's that make calls through its mount).
//! It reads source-control objects only through `revfs-store`.

pub mod busy;
pub mod checkout;
pub mod client;
pub mod config;
pub mod cpu_latency;
pub mod fuse;
pub mod helper;
pub mod readahead;
pub mod service;
pub mod shallow;
pub mod wc;
