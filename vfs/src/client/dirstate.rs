//! The working copy's dirstate as hg's commands change it (Mercurial 6.3.2's
//! `dirstate.set_tracked`/`set_untracked`/`copy` and `workingctx.add`/`forget`), over the
//! mount's daemon: each file's state from the daemon's status and the parent's manifest,
//! the changes a command makes (kept in order, sent to the daemon by [`Dirstate::flush`]),
//! and hg's warnings about file names (`scmutil.checkportable`, the case-folding auditor)
//! and about files it cannot add.

use super::error::{abort, Result};
use super::status::Status;
use super::{lossy, Workspace};
use crate::service::control::Request;
use crate::wc::fold_case;
use crate::wc::journal::Track;
use revfs_hg::config::{parse_bool, Config, ConfigError};
use revfs_hg::date::py_bytes_repr;
use revfs_hg::matcher::PathContext;
use revfs_hg::paths::{checkwinfilename, shellquote};
use revfs_store::manifest::Manifest;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A path's dirstate state, as hg's commands look at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not in the dirstate.
    Unknown,
    /// Tracked, not in the parent (`entry.added`).
    Added,
    /// Tracked and in the parent (clean, modified or missing).
    Normal,
    /// In the parent, marked removed.
    Removed,
}

impl State {
    /// `entry.tracked`: in the working copy's next commit.
    pub fn tracked(self) -> bool {
        matches!(self, State::Added | State::Normal)
    }
}

/// A change for the daemon, sent in order by [`Dirstate::flush`].
enum Op {
    Track(Vec<u8>, Track),
    Copy(Vec<u8>, Option<Vec<u8>>),
}

/// The dirstate of one command's run: what the daemon reported, with the changes made
/// so far.
pub struct Dirstate<'a> {
    pub ws: &'a Workspace,
    pub cfg: Config,
    /// Paths as the user gives and sees them.
    pub display: PathContext,
    /// The working copy parent's manifest.
    pub base: Manifest,
    /// The daemon's status letters (the clean files only when asked for).
    pub letters: BTreeMap<Vec<u8>, char>,
    /// States changed by this command.
    pub states: BTreeMap<Vec<u8>, State>,
    /// Copy sources, by destination.
    pub copies: BTreeMap<Vec<u8>, Vec<u8>>,
    ops: Vec<Op>,
    /// `ui.verbose` and `ui.quiet` (`--debug` implies verbose; both together cancel).
    pub verbose: bool,
    pub quiet: bool,
}

/// hg's `ui.warn`: standard error, at once.
pub fn warn(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

impl<'a> Dirstate<'a> {
    /// The dirstate over `status` (as fetched from the daemon); `verbose` and `quiet` are
    /// the command's flags, added to the configuration's.
    pub fn new(
        ws: &'a Workspace,
        display: PathContext,
        status: &Status,
        verbose: bool,
        quiet: bool,
    ) -> Result<Dirstate<'a>> {
        let cfg = Config::load(Some(ws.repo_root()))?;
        let base = ws.repo()?.manifest_of(ws.resolve_single(Some("."))?)?;
        let letters = status
            .entries
            .iter()
            .map(|(l, p)| (p.clone(), *l))
            .collect();
        let debug = cfg.get_bool("ui", "debug")?.unwrap_or(false);
        let mut verbose = debug || verbose || cfg.get_bool("ui", "verbose")?.unwrap_or(false);
        let mut quiet = !debug && (quiet || cfg.get_bool("ui", "quiet")?.unwrap_or(false));
        if verbose && quiet {
            verbose = false;
            quiet = false;
        }
        Ok(Dirstate {
            ws,
            cfg,
            display,
            base,
            letters,
            states: BTreeMap::new(),
            copies: status.copies.clone(),
            ops: Vec::new(),
            verbose,
            quiet,
        })
    }

    pub fn in_base(&self, p: &[u8]) -> bool {
        matches!(self.base.find(p), Ok(Some(_)))
    }

    pub fn state(&self, p: &[u8]) -> State {
        if let Some(s) = self.states.get(p) {
            return *s;
        }
        let in_base = self.in_base(p);
        match self.letters.get(p) {
            Some('R') => State::Removed,
            Some('A') => State::Added,
            // hg's dirstate has no entry for it, although the parent has it.
            Some('?' | 'I') => State::Unknown,
            _ if in_base => State::Normal,
            Some('!') => State::Added,
            _ => State::Unknown,
        }
    }

    /// A repository path as shown to the user (relative to the current directory).
    pub fn rel(&self, p: &[u8]) -> String {
        lossy(&self.display.display(p))
    }

    /// The file a repository path names, through the mount.
    pub fn disk(&self, p: &[u8]) -> PathBuf {
        self.ws.root.join(OsStr::from_bytes(p))
    }

    /// `os.removedirs` of a removed file's directory, as hg's `unlinkpath` does: up to
    /// the first directory that is not empty.
    pub fn remove_empty_parents(&self, path: &[u8]) {
        let mut p = path;
        while let Some(i) = p.iter().rposition(|&b| b == b'/') {
            p = &p[..i];
            if std::fs::remove_dir(self.disk(p)).is_err() {
                break;
            }
        }
    }

    /// `ui.status`: standard output unless quiet.
    pub fn status(&self, text: &str) {
        if !self.quiet {
            let mut out = std::io::stdout();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }

    /// `ui.portablefilenames`: (abort, warn), as `scmutil.checkportabilityalert`.
    fn portability(&self) -> Result<(bool, bool)> {
        let val = self
            .cfg
            .get("ui", "portablefilenames")
            .unwrap_or(b"warn")
            .to_vec();
        let lval = val.to_ascii_lowercase();
        let bval = parse_bool(&val);
        let abort = lval == b"abort";
        let warn_ = bval == Some(true) || lval == b"warn";
        if bval.is_none() && !(warn_ || abort || lval == b"ignore") {
            return Err(ConfigError::Invalid(format!(
                "ui.portablefilenames value is invalid ('{}')",
                lossy(&val)
            ))
            .into());
        }
        Ok((abort, warn_))
    }

    /// `scmutil.checkportable`.
    pub fn checkportable(&self, f: &[u8]) -> Result<()> {
        if f.contains(&b'\r') || f.contains(&b'\n') {
            return Err(abort(format!(
                "'\\n' and '\\r' disallowed in filenames: {}",
                py_bytes_repr(f)
            )));
        }
        let (abort_, warn_) = self.portability()?;
        if abort_ || warn_ {
            if let Some(msg) = checkwinfilename(f) {
                let msg = format!("{msg}: {}", shellquote(f));
                if abort_ {
                    return Err(abort(msg));
                }
                warn(&format!("warning: {msg}\n"));
            }
        }
        Ok(())
    }

    fn set_state(&mut self, p: &[u8], s: State) {
        self.states.insert(p.to_vec(), s);
    }

    /// `dirstate.set_tracked`: true when the file was not tracked before.
    pub fn set_tracked(&mut self, p: &[u8]) -> bool {
        match self.state(p) {
            State::Unknown => {
                self.set_state(p, State::Added);
                // Added although the parent has it (hg's dirstate had no entry for it).
                let track = if self.in_base(p) {
                    Track::Readded
                } else {
                    Track::Added
                };
                self.ops.push(Op::Track(p.to_vec(), track));
                true
            }
            State::Removed => {
                self.set_state(p, State::Normal);
                self.copies.remove(p);
                self.ops.push(Op::Track(p.to_vec(), Track::Default));
                true
            }
            _ => false,
        }
    }

    /// `dirstate.set_untracked`: false when the file was not in the dirstate.
    pub fn set_untracked(&mut self, p: &[u8]) -> bool {
        let s = self.state(p);
        self.copies.remove(p);
        match s {
            State::Unknown => return false,
            State::Added => {
                self.set_state(p, State::Unknown);
                // An added file the parent has anyway loses its entry, as in hg.
                let track = if self.in_base(p) {
                    Track::Dropped
                } else {
                    Track::Default
                };
                self.ops.push(Op::Track(p.to_vec(), track));
            }
            State::Normal => {
                self.set_state(p, State::Removed);
                self.ops.push(Op::Track(p.to_vec(), Track::Removed));
            }
            State::Removed => {}
        }
        true
    }

    /// `dirstate.copy(source, dest)`.
    pub fn mark_copy(&mut self, source: Option<&[u8]>, dest: &[u8]) {
        if source == Some(dest) {
            return;
        }
        match source {
            Some(s) => {
                self.copies.insert(dest.to_vec(), s.to_vec());
            }
            None => {
                self.copies.remove(dest);
            }
        }
        self.ops
            .push(Op::Copy(dest.to_vec(), source.map(<[u8]>::to_vec)));
    }

    /// `workingctx.add(files)`: hg's warnings, and the files it rejected.
    pub fn add(&mut self, files: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let mut rejected = Vec::new();
        let limit = self
            .cfg
            .get_bytes("ui", "large-file-limit")?
            .unwrap_or(10_000_000);
        for f in files {
            self.checkportable(f)?;
            let Ok(meta) = std::fs::symlink_metadata(self.disk(f)) else {
                warn(&format!("{} does not exist!\n", self.rel(f)));
                rejected.push(f.clone());
                continue;
            };
            if limit != 0 && meta.len() > limit {
                warn(&format!(
                    "{}: up to {} MB of RAM may be required to manage this file\n\
                     (use 'hg revert {}' to cancel the pending addition)\n",
                    lossy(f),
                    3 * meta.len() / 1_000_000,
                    self.rel(f)
                ));
            }
            let ft = meta.file_type();
            if !(ft.is_file() || ft.is_symlink()) {
                warn(&format!(
                    "{} not added: only files and symlinks supported currently\n",
                    self.rel(f)
                ));
                rejected.push(f.clone());
            } else if !self.set_tracked(f) {
                warn(&format!("{} already tracked!\n", self.rel(f)));
            }
        }
        Ok(rejected)
    }

    /// `workingctx.forget(files)`: the files that were not tracked.
    pub fn forget(&mut self, files: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut rejected = Vec::new();
        for f in files {
            if !self.set_untracked(f) {
                warn(&format!("{} not tracked!\n", self.rel(f)));
                rejected.push(f.clone());
            }
        }
        rejected
    }

    /// `scmutil.casecollisionauditor` over the files in the dirstate (the parent's and the
    /// added ones): a check of each new file, warning (or aborting, with
    /// `ui.portablefilenames=abort`) when another file differs from it only in case.
    pub fn case_auditor(&self) -> Result<Option<CaseAuditor<'_, 'a>>> {
        let (abort, warn_) = self.portability()?;
        if !(abort || warn_) {
            return Ok(None);
        }
        Ok(Some(CaseAuditor {
            ds: self,
            abort,
            lowered: None,
            new: BTreeSet::new(),
        }))
    }

    /// Sends the recorded changes to the daemon, in order.
    pub fn flush(&mut self) -> Result<()> {
        let ops = std::mem::take(&mut self.ops);
        let mut i = 0;
        while i < ops.len() {
            match &ops[i] {
                Op::Track(_, track) => {
                    let mut paths = Vec::new();
                    while let Some(Op::Track(p, t)) = ops.get(i) {
                        if t != track {
                            break;
                        }
                        paths.push(p.clone());
                        i += 1;
                    }
                    self.ws.request(&Request::Track {
                        paths,
                        track: *track,
                        txn: false,
                    })?;
                }
                Op::Copy(..) => {
                    let mut copies = Vec::new();
                    while let Some(Op::Copy(d, s)) = ops.get(i) {
                        copies.push((d.clone(), s.clone()));
                        i += 1;
                    }
                    self.ws.request(&Request::Copy { copies, txn: false })?;
                }
            }
        }
        Ok(())
    }
}

/// See [`Dirstate::case_auditor`].
pub struct CaseAuditor<'d, 'a> {
    ds: &'d Dirstate<'a>,
    abort: bool,
    /// The lowered names of the dirstate's files, read on the first check.
    lowered: Option<BTreeSet<Vec<u8>>>,
    new: BTreeSet<Vec<u8>>,
}

impl CaseAuditor<'_, '_> {
    pub fn check(&mut self, f: &[u8]) -> Result<()> {
        if self.new.contains(f) {
            return Ok(());
        }
        if self.lowered.is_none() {
            let mut set = BTreeSet::new();
            for e in self.ds.base.iter() {
                let path = e?.path;
                // Not a file hg's dirstate has no entry for (unknown although the parent
                // has it).
                if !matches!(self.ds.letters.get(path), Some('?' | 'I')) {
                    set.insert(fold_case(path));
                }
            }
            for (p, l) in &self.ds.letters {
                if *l == 'A' || *l == '!' {
                    set.insert(fold_case(p));
                }
            }
            self.lowered = Some(set);
        }
        let fl = fold_case(f);
        let lowered = self.lowered.get_or_insert_with(BTreeSet::new);
        if lowered.contains(&fl) && self.ds.state(f) == State::Unknown {
            let msg = format!("possible case-folding collision for {}", lossy(f));
            if self.abort {
                return Err(abort(msg));
            }
            warn(&format!("warning: {msg}\n"));
        }
        lowered.insert(fl);
        self.new.insert(f.to_vec());
        Ok(())
    }
}

/// A working-copy file's bytes (a symlink's target), read through the directory it is
/// seen in.
pub fn read_working(root: &std::path::Path, p: &[u8]) -> std::io::Result<Vec<u8>> {
    let f = root.join(OsStr::from_bytes(p));
    let meta = std::fs::symlink_metadata(&f)?;
    if meta.file_type().is_symlink() {
        return Ok(std::fs::read_link(&f)?.as_os_str().as_bytes().to_vec());
    }
    std::fs::read(&f)
}
