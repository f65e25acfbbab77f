//! A least-recently-used cache of reconstructed revision texts, bounded in bytes and shared
//! by every revlog of a repository, so that a long delta chain is rebuilt once, not per read.

use lru::LruCache;
use std::sync::{Arc, Mutex};

/// Identifies one revision of one open revlog.
pub type CacheKey = (u32, i32);

struct Inner {
    lru: LruCache<CacheKey, Arc<[u8]>>,
    bytes: usize,
}

/// The shared text cache. Cloning gives another handle to the same cache.
#[derive(Clone)]
pub struct TextCache {
    inner: Arc<Mutex<Inner>>,
    budget: usize,
}

impl TextCache {
    /// A cache that holds at most `budget` bytes of text.
    pub fn new(budget: usize) -> Self {
        TextCache {
            inner: Arc::new(Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
            })),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the LRU inconsistent, so recover.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, key: CacheKey) -> Option<Arc<[u8]>> {
        self.lock().lru.get(&key).cloned()
    }

    /// Inserts a text, evicting the least recently used ones beyond the budget.
    /// A text larger than half the budget is not kept.
    pub fn insert(&self, key: CacheKey, text: Arc<[u8]>) {
        if text.len() > self.budget / 2 {
            return;
        }
        let mut inner = self.lock();
        inner.bytes += text.len();
        if let Some(old) = inner.lru.put(key, text) {
            inner.bytes -= old.len();
        }
        while inner.bytes > self.budget {
            match inner.lru.pop_lru() {
                Some((_, t)) => inner.bytes -= t.len(),
                None => break,
            }
        }
    }

    /// Bytes currently held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_bounds_the_bytes_held() {
        let c = TextCache::new(10);
        c.insert((0, 0), Arc::from(&b"abcd"[..]));
        c.insert((0, 1), Arc::from(&b"efgh"[..]));
        c.insert((0, 2), Arc::from(&b"ijkl"[..]));
        assert!(c.bytes() <= 10);
        assert!(c.get((0, 0)).is_none());
        assert_eq!(c.get((0, 2)).as_deref(), Some(&b"ijkl"[..]));
        c.insert((0, 3), Arc::from(&b"0123456789"[..]));
        assert!(
            c.get((0, 3)).is_none(),
            "a text over half the budget is not kept"
        );
    }
}
