//! File revisions from a remotefilelog server: `x_rfl_getfile` for each key, batched in one
//! `batch` request (as hg's own client does over HTTP), each answer a zlib-compressed blob
//! (decompressed here, verified by the store before use). One connection pool per server,
//! opened at the first fetch and reopened after a failure; every request has a deadline.
//!
//! Two limits of hg's server shape the batches: a key the server does not have fails the
//! whole batch (HTTP 500), and so does a path that is not ASCII (hg's server cannot decode
//! it from the request's headers). A failed batch is therefore retried key by key, so that
//! one bad key costs only itself, and non-ASCII paths are refused without asking.
//!
//! A server that runs out a request's deadline fails every fetch at once until it answers
//! again ([`crate::health`]).

use crate::health::Health;
use crate::http::{HttpOptions, HttpPeer};
use crate::{wire, RemoteError, RemoteUrl};
use revfs_store::shallow::Fetcher;
use revfs_store::Node;
use std::sync::Mutex;

/// The largest blob accepted (decompressed): a revlog's limit.
const MAX_BLOB: u64 = i32::MAX as u64;

/// A [`Fetcher`] over HTTP.
pub struct HttpFetcher {
    url: RemoteUrl,
    opts: HttpOptions,
    peer: Mutex<Option<std::sync::Arc<HttpPeer>>>,
    health: Health,
}

impl HttpFetcher {
    /// Fetches from `url` with `opts` (whose `request_timeout` bounds each request).
    pub fn new(url: RemoteUrl, opts: HttpOptions) -> HttpFetcher {
        HttpFetcher {
            url,
            opts,
            peer: Mutex::new(None),
            health: Health::default(),
        }
    }

    fn peer(&self) -> Result<std::sync::Arc<HttpPeer>, RemoteError> {
        let mut p = self.peer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(peer) = &*p {
            return Ok(peer.clone());
        }
        // Connecting holds the lock: concurrent first fetches wait for one connection.
        let peer = std::sync::Arc::new(HttpPeer::open(&self.url, &self.opts)?);
        *p = Some(peer.clone());
        Ok(peer)
    }

    fn forget_peer(&self) {
        *self.peer.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// One `batch` request for `keys`: each answer's blob, or the batch's error.
    fn batch(&self, keys: &[(&[u8], Node)]) -> Result<Vec<Result<Vec<u8>, String>>, RemoteError> {
        let peer = self.peer()?;
        let hexes: Vec<String> = keys.iter().map(|(_, n)| n.to_hex()).collect();
        let cmds = wire::batch_cmds(keys.iter().zip(&hexes).map(|((path, _), hex)| {
            (
                "x_rfl_getfile",
                vec![("file", *path), ("node", hex.as_bytes())],
            )
        }));
        let limit = MAX_BLOB.saturating_mul(keys.len() as u64).min(u64::MAX / 2);
        let body = peer.call_bytes("batch", &[("cmds", &cmds)], limit)?;
        let answers = wire::split_batch_answer(&body).map_err(|e| RemoteError::Protocol {
            url: self.url.to_string(),
            reason: e.to_string(),
        })?;
        if answers.len() != keys.len() {
            return Err(RemoteError::Protocol {
                url: self.url.to_string(),
                reason: format!("{} answers to {} requests", answers.len(), keys.len()),
            });
        }
        Ok(keys
            .iter()
            .zip(&answers)
            .map(|((path, _), a)| {
                wire::getfile_blob(&String::from_utf8_lossy(path), a, MAX_BLOB)
                    .map_err(|e| e.to_string())
            })
            .collect())
    }
}

/// The most bytes of encoded arguments one request carries. hg's server reads them from
/// `X-HgArg-<n>` headers of `httpheader` bytes each (1024), and Python's HTTP server
/// refuses a request of more than 100 headers (431 Too Many Headers): 60 headers' worth.
const MAX_ARGS: usize = 60 * 1000;

/// The bytes a key of `path` adds to a batch's encoded arguments: its path escaped for the
/// batch, then URL-encoded, and the rest of its command.
fn encoded_len(path: &[u8]) -> usize {
    let path_len: usize = path
        .iter()
        .map(|&b| {
            let url = |c: u8| match c {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' | b' ' => 1,
                _ => 3,
            };
            match b {
                // `:c`, `:o`, `:s`, `:e`
                b':' | b',' | b';' | b'=' => 3 + 1,
                _ => url(b),
            }
        })
        .sum();
    "x_rfl_getfile+file%3D%2Cnode%3D%3B".len() + 40 + path_len
}

impl Fetcher for HttpFetcher {
    fn fetch(&self, keys: &[(&[u8], Node)]) -> Vec<Result<Vec<u8>, String>> {
        if let Err(why) = self.health.check() {
            return keys.iter().map(|_| Err(why.clone())).collect();
        }
        // Requests whose arguments fit in the server's headers, one after the other.
        let mut out = Vec::with_capacity(keys.len());
        let mut start = 0;
        while start < keys.len() {
            let mut end = start;
            let mut size = 0;
            while end < keys.len() && (end == start || size + encoded_len(keys[end].0) <= MAX_ARGS)
            {
                size += encoded_len(keys[end].0);
                end += 1;
            }
            out.extend(self.fetch_one_request(&keys[start..end]));
            start = end;
        }
        out
    }

    fn describe(&self) -> String {
        self.url.to_string()
    }
}

impl HttpFetcher {
    /// The blobs of `keys`, asked in one `batch` (a failed batch: key by key).
    fn fetch_one_request(&self, keys: &[(&[u8], Node)]) -> Vec<Result<Vec<u8>, String>> {
        let mut out: Vec<Option<Result<Vec<u8>, String>>> = vec![None; keys.len()];
        let mut asked = Vec::new();
        for (i, (path, _)) in keys.iter().enumerate() {
            if path.is_ascii() {
                asked.push(i);
            } else {
                out[i] = Some(Err(format!(
                    "{} cannot be asked over HTTP for a name that is not ASCII (a limit of \
                     Mercurial's server)",
                    self.url
                )));
            }
        }
        let batch: Vec<(&[u8], Node)> = asked.iter().map(|&i| keys[i]).collect();
        match self.batch(&batch) {
            Ok(answers) => {
                for (i, a) in asked.iter().zip(answers) {
                    out[*i] = Some(a);
                }
            }
            Err(e) if asked.len() > 1 && matches!(e, RemoteError::Http { .. }) => {
                // One key the server refused fails the batch: each key alone.
                for &i in &asked {
                    out[i] = Some(match self.batch(&[keys[i]]) {
                        Ok(mut a) => a.pop().unwrap_or_else(|| Err("no answer".into())),
                        Err(e) => Err(e.to_string()),
                    });
                }
            }
            Err(e) => {
                self.forget_peer();
                let reason = e.to_string();
                if e.is_silence() {
                    let (url, opts) = (self.url.clone(), self.opts.clone());
                    self.health
                        .silent(&reason, move || match HttpPeer::open(&url, &opts) {
                            Ok(_) => true,
                            Err(e) => !e.is_silence(),
                        });
                }
                for &i in &asked {
                    out[i] = Some(Err(reason.clone()));
                }
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err("not asked".into())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_keys_encoded_length_is_what_the_request_carries() {
        for path in [&b"dir/a b.txt"[..], b"x:y,z;w=v", b"plain"] {
            let node = "0".repeat(40);
            let one = crate::wire::urlencode(&[(
                "cmds",
                &crate::wire::batch_cmds([(
                    "x_rfl_getfile",
                    vec![("file", path), ("node", node.as_bytes())],
                )]),
            )]);
            // "cmds=" and the trailing ";" of a batch's other commands.
            assert_eq!(
                super::encoded_len(path),
                one.len() - "cmds=".len() + "%3B".len()
            );
        }
    }
}
