//! Bundles received from a Mercurial server (or written by `hg bundle`): the bundle2
//! container ([`bundle2`]), the changegroups it carries ([`changegroup`]), and their
//! application to a repository ([`apply`]). [`receive`] reads a whole bundle2 stream into a
//! repository inside one transaction and returns what else the server said (its
//! `listkeys` parts: phases and bookmarks; its `output`). No network I/O here: the caller
//! hands in the stream.

pub mod apply;
pub mod bundle2;
pub mod changegroup;

pub use apply::{Applied, Progress};
pub use bundle2::{Bundle2Reader, PartHeader};
pub use changegroup::{CgReader, CgVersion, DeltaChunk};

use crate::error::StoreError;
use crate::repo::Repo;
use crate::transaction::Transaction;
use std::io::Read;

/// Why a bundle was not applied. Nothing of it is left in the repository: the transaction
/// is rolled back.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("reading the bundle: {0}")]
    Io(#[source] std::io::Error),
    #[error("malformed {what}: {reason}")]
    Malformed { what: String, reason: String },
    #[error("{0} is not supported")]
    Unsupported(String),
    /// A revision whose node is not the hash of its parents and text (hg's words).
    #[error("integrity check failed on {revlog}:{node}")]
    IntegrityCheckFailed { revlog: String, node: String },
    /// A parent, delta base or link changeset the repository does not have.
    #[error("{revlog}@{node}: unknown {what}")]
    Unknown {
        revlog: String,
        node: String,
        what: &'static str,
    },
    /// The server's own abort, sent as an `error:abort` part.
    #[error("remote error:\n{message}{}", hint.as_ref().map(|h| format!("\n({h})")).unwrap_or_default())]
    Remote {
        message: String,
        hint: Option<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The `key\tvalue` pairs of one listkeys namespace.
pub type Keys = Vec<(Vec<u8>, Vec<u8>)>;

/// What a bundle said besides its changegroups.
#[derive(Debug, Default)]
pub struct Received {
    pub applied: Applied,
    /// Each `listkeys` part: its namespace and its `key\tvalue` lines.
    pub listkeys: Vec<(String, Keys)>,
    /// The server's `output` parts, in order.
    pub output: Vec<u8>,
}

impl Received {
    /// The pairs of listkeys namespace `ns` (empty when the server sent none).
    pub fn keys(&self, ns: &str) -> &[(Vec<u8>, Vec<u8>)] {
        self.listkeys
            .iter()
            .find(|(n, _)| n == ns)
            .map_or(&[][..], |(_, k)| k.as_slice())
    }
}

fn read_payload(bundle: &mut Bundle2Reader) -> Result<Vec<u8>, BundleError> {
    let mut data = Vec::new();
    bundle
        .payload()
        .read_to_end(&mut data)
        .map_err(bundle2::io_to_bundle)?;
    Ok(data)
}

/// `pushkey.decodekeys`: `key\tvalue` lines.
fn decode_keys(data: &[u8]) -> Keys {
    data.split(|&b| b == b'\n')
        .filter_map(|l| {
            let tab = l.iter().position(|&b| b == b'\t')?;
            Some((l[..tab].to_vec(), l[tab + 1..].to_vec()))
        })
        .collect()
}

/// Reads bundle2 stream `bundle` into `repo` within `tr`: every changegroup part applied,
/// `listkeys` and `output` parts collected, the server's `error:abort` returned as
/// [`BundleError::Remote`], an unknown mandatory part refused and an unknown advisory one
/// skipped, as hg's `bundle2.processbundle` does.
pub fn receive(
    repo: &Repo,
    tr: &mut Transaction,
    bundle: &mut Bundle2Reader,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Received, BundleError> {
    let mut got = Received::default();
    while let Some(part) = bundle.next_part()? {
        match part.kind.as_str() {
            "changegroup" => {
                let version = CgVersion::from_param(part.param("version"))?;
                let mut payload = bundle.payload();
                let mut cg = CgReader::new(&mut payload, version);
                let a = apply::apply(repo, tr, &mut cg, progress)?;
                got.applied.changesets += a.changesets;
                got.applied.manifests += a.manifests;
                got.applied.files += a.files;
                got.applied.file_revisions += a.file_revisions;
            }
            "listkeys" => {
                let ns = String::from_utf8_lossy(part.param("namespace").unwrap_or_default())
                    .into_owned();
                let data = read_payload(bundle)?;
                got.listkeys.push((ns, decode_keys(&data)));
            }
            "output" => {
                let data = read_payload(bundle)?;
                got.output.extend_from_slice(&data);
            }
            "error:abort" => {
                let text = |k: &str| {
                    part.param(k)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                };
                return Err(BundleError::Remote {
                    message: text("message").unwrap_or_default(),
                    hint: text("hint"),
                });
            }
            kind if part.mandatory => {
                return Err(BundleError::Unsupported(format!("bundle2 part {kind}")));
            }
            _ => {}
        }
    }
    Ok(got)
}

/// `hg unbundle` of bundle2 stream `input` into the repository at `root`: under the
/// repository's locks, in one transaction that is rolled back on any error. Phases and
/// bookmarks the server listed are the caller's to write ([`Received::keys`]).
pub fn unbundle<R: Read + 'static>(
    root: &std::path::Path,
    input: R,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Received, BundleError> {
    let repo = Repo::open(root)?;
    let _locks = crate::lock::RepoLocks::acquire(&repo)?;
    let repo = Repo::open(root)?;
    let mut bundle = Bundle2Reader::new(input)?;
    let mut tr = Transaction::begin(&repo)?;
    match receive(&repo, &mut tr, &mut bundle, progress) {
        Ok(got) => {
            tr.close()?;
            Ok(got)
        }
        Err(e) => {
            // What the bundle wrote goes; the error is the bundle's, not the rollback's.
            if let Err(undo) = tr.abort() {
                tracing::error!("rolling back an unbundle: {undo}");
            }
            Err(e)
        }
    }
}
