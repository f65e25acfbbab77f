//! Shared, immutable bytes of a revision text: on the heap (rebuilt from a revlog) or mapped
//! from a cache file ([`crate::manifest_cache`]). Cloning shares the bytes.

use std::ops::Deref;
use std::sync::Arc;

/// The bytes of one text, shared.
#[derive(Clone)]
pub enum SharedText {
    /// Rebuilt in memory.
    Heap(Arc<[u8]>),
    /// `len` bytes at `start` of a mapped file that nothing truncates (a cache file is
    /// written whole under a temporary name, renamed into place and only ever unlinked).
    Mapped {
        map: Arc<memmap2::Mmap>,
        start: usize,
        len: usize,
    },
}

impl SharedText {
    /// Whether the bytes are mapped from a file rather than held on the heap.
    pub fn is_mapped(&self) -> bool {
        matches!(self, SharedText::Mapped { .. })
    }
}

impl Deref for SharedText {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            SharedText::Heap(t) => t,
            // `start + len` was checked against the map's length when it was made.
            SharedText::Mapped { map, start, len } => map.get(*start..start + len).unwrap_or(&[]),
        }
    }
}

impl From<Arc<[u8]>> for SharedText {
    fn from(text: Arc<[u8]>) -> Self {
        SharedText::Heap(text)
    }
}

impl From<Vec<u8>> for SharedText {
    fn from(text: Vec<u8>) -> Self {
        SharedText::Heap(Arc::from(text))
    }
}
