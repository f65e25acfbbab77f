//! revfs-hg: Mercurial's semantics that are neither the store's (revfs-store) nor the working
//! copy's (revfs-vfs), ported from Mercurial 6.3.2 so that revfs prints and reads exactly what
//! hg does. One module per thing it owns:
//!
//! * [`diff`]: bdiff's line matching, unified and git diffs, byte for byte as `hg diff`
//!   (with the colour labels of diff text);
//! * [`date`]: dates as `hg commit -d` reads them and as hg makes them;
//! * [`config`]: hg's configuration files (which, in what order, their syntax) and the
//!   committer's name;
//! * [`paths`]: Python's `os.path` on bytes, as hg uses it;
//! * [`matcher`]: paths and file patterns as typed on hg's command line, and paths as hg
//!   prints them (relative to the current directory);
//! * [`ignore`]: `.hgignore` files and hg's pattern kinds, compiled to regular expressions
//!   as hg's pure-Python matcher does (with Python's `re` syntax translated);
//! * [`template`]: the part of hg's template language `log -T` takes;
//! * [`color`]: hg's colour settings and labels (`--color`, `[color]`, `HGPLAIN`).
//! * [`mergestate`]: the unresolved files of `.hg/merge`.
//! * [`newrepo`]: the format of a repository hg creates (its revlog compression).
//!
//! No dependency on the other revfs crates: `cli -> hg` and `vfs -> hg` (status asks the
//! ignore matcher).

pub mod color;
pub mod config;
pub mod date;
pub mod diff;
pub mod ignore;
pub mod matcher;
pub mod mergestate;
pub mod newrepo;
#[cfg(test)]
mod oracle;
pub mod paths;
mod pattern;
pub mod template;
