//! The revfs working copy served over FUSE.
//!
//! This crate owns everything mutable about a checkout: the mounted tree, the overlay of
//! materialized files, the change journal and the control socket. It reads source-control
//! objects only through `revfs-store`, which it never writes behind the store's back.
//! (The mount arrives with the mount issue; for now the crate only re-exports the store.)

pub use revfs_store as store;
