//! History from a server: file revisions as Mercurial's remotefilelog keeps them, one
//! blob per (path, filenode), fetched from a server on first use instead of held in
//! filelogs. This module owns their format ([`blob`]: parsed once, at the edge, and
//! verified against the node before anything uses the text) and the shared cache hg's
//! client and revfs both read and write ([`cache`]). docs/research/remotefilelog-protocol.md
//! has the sources it rests on; docs/FORMATS.md describes what revfs writes.

pub mod blob;
pub mod cache;
pub mod pack;
pub mod source;

/// The requirement of a shallow repository (remotefilelog's `SHALLOWREPO_REQUIREMENT`).
pub const REQUIREMENT: &str = "exp-remotefilelog-repo-req-1";

pub use blob::{Ancestor, Blob, ShallowError};
pub use cache::{CacheError, SharedCache};
pub use source::{Fetcher, ShallowSource};
