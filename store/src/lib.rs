//! revfs-store: read (and later write) Mercurial repositories in hg's own on-disk format.
//!
//! This crate owns the immutable source-control objects: requirements, revlogs, the
//! changelog, manifests and filelogs, store path encoding, and revision lookup. It knows
//! nothing of working copies or FUSE. Everything read from disk is parsed here, at the edge,
//! into typed values; corrupt input gives a [`StoreError`] naming the revlog and revision.

pub mod bigtext;
pub mod bookmarks;
pub mod bundle;
mod cache_dir;
pub mod changelog;
pub mod commit;
pub mod dirstate;
pub mod error;
pub mod filelog;
pub mod lock;
pub mod manifest;
pub mod manifest_cache;
pub mod mpatch;
pub mod names;
pub mod node;
pub mod nodemap;
pub mod pathaudit;
pub mod pathenc;
pub mod phases;
pub mod repo;
pub mod requirements;
pub mod revlog;
pub mod revlog_writer;
pub mod revset;
pub mod shallow;
pub mod size_cache;
pub mod text;
pub mod transaction;
pub mod zlib;

pub use error::{Result, StoreError};
pub use node::{Node, Rev, NULL_REV};
pub use repo::Repo;
