//! `revfs copy` (`cp`) and `revfs rename` (`move`, `mv`) in a mount: Mercurial 6.3's
//! `cmdutil.copy`, with its messages, warnings and exit codes.
//!
//! `SOURCE... DEST`: each source is a file or a directory (its tracked files, recursively)
//! or a `glob:`/`re:` pattern; with several sources, or a pattern, DEST must be an existing
//! directory. Files are copied through the mount's own paths (a symlink as a symlink, a
//! file with its mode; a rename moves the file with `rename(2)`, which keeps its mode and
//! times as hg's copy-then-delete does, and then removes the directories it left empty).
//! The daemon then records, as hg's dirstate would: the destination tracked with its copy
//! source (the original source when the source is itself a copy; none, with hg's warning,
//! when the source is only added), the source of a rename removed (or forgotten when it
//! was only added). `-A/--after` records a copy or rename already made, `-f/--force`
//! overwrites a file hg would not, `-n/--dry-run` only prints, `--forget` unmarks copies,
//! `-v` prints `copying a to b` / `moving a to b` for explicitly named files too (hg prints
//! it for files found in directories and patterns always).
//!
//! Exit status 1 when a file could not be copied, 255 for hg's aborts (`no source or
//! destination specified`, `no files to copy`, `with multiple sources, destination must be
//! an existing directory`, ...). Not supported: `--at-rev`, `-I`/`-X`.

use crate::commands::{open_workspace, Workspace};
use anyhow::{bail, Result};
use clap::Args;
use revfs_hg::config::{parse_bool, strerror, Config, ConfigError};
use revfs_hg::date::py_bytes_repr;
use revfs_hg::matcher::is_pattern;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_hg::paths::{basename, checkwinfilename, is_under, join, normpath, shellquote, split};
use revfs_vfs::control::Request;
use revfs_vfs::journal::Track;
use revfs_vfs::store::manifest::Manifest;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct CopyArgs {
    /// Unmark a destination file as copied
    #[arg(long)]
    forget: bool,
    /// Record a copy that has already occurred
    #[arg(short = 'A', long)]
    after: bool,
    /// Forcibly copy over an existing managed file
    #[arg(short = 'f', long)]
    force: bool,
    /// Do not perform actions, just print output
    #[arg(short = 'n', long = "dry-run")]
    dry_run: bool,
    /// Enable additional output
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Suppress output
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Sources, then the destination
    #[arg(value_name = "SOURCE... DEST")]
    files: Vec<String>,
}

/// `hg copy`.
pub fn copy(cli: &crate::Cli, args: &CopyArgs) -> Result<u8> {
    run(cli, args, false)
}

/// `hg rename`.
pub fn rename(cli: &crate::Cli, args: &CopyArgs) -> Result<u8> {
    run(cli, args, true)
}

/// A path's dirstate state, as hg's copy code looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
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
    fn tracked(self) -> bool {
        matches!(self, State::Added | State::Normal)
    }
}

/// A change for the daemon, sent in order at the end.
enum Op {
    Track(Vec<u8>, Track),
    Copy(Vec<u8>, Option<Vec<u8>>),
}

/// One run of copy or rename: the working copy as the daemon reports it, with the
/// changes made so far.
struct Copier<'a> {
    ws: &'a Workspace,
    cfg: Config,
    display: PathContext,
    /// The canonical root, as hg's `repo.root`.
    root: Vec<u8>,
    /// The current directory under the root (`""` at the root or outside it).
    cwd: Vec<u8>,
    /// Whether the process's current directory is inside the root.
    cwd_inside: bool,
    base: Manifest,
    letters: BTreeMap<Vec<u8>, char>,
    states: BTreeMap<Vec<u8>, State>,
    copies: BTreeMap<Vec<u8>, Vec<u8>>,
    ops: Vec<Op>,
    rename: bool,
    verbose: bool,
    quiet: bool,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

fn warn(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// What went wrong copying one file's bytes.
enum CopyFailure {
    /// The source is gone (hg: "deleted in working directory", not an error).
    SourceMissing,
    Other(std::io::Error),
}

impl<'a> Copier<'a> {
    fn new(ws: &'a Workspace, rename: bool, args: &CopyArgs) -> Result<Copier<'a>> {
        let cfg = Config::load(Some(ws.repo.root()))?;
        let display = PathContext::new(&ws.root)?;
        let root_path = std::fs::canonicalize(&ws.root).unwrap_or_else(|_| ws.root.clone());
        let cwd_path = std::env::current_dir()?;
        let cwd_path = std::fs::canonicalize(&cwd_path).unwrap_or(cwd_path);
        let (cwd, cwd_inside) = match cwd_path.strip_prefix(&root_path) {
            Ok(rel) => (rel.as_os_str().as_bytes().to_vec(), true),
            Err(_) => (Vec::new(), false),
        };
        let base = ws.repo.manifest_of(ws.resolve_single(Some("."))?)?;
        let status = crate::commands::wc::fetch(ws, false, false, true)?;
        let letters = status.entries.into_iter().map(|(l, p)| (p, l)).collect();
        // ui's flags: --debug implies --verbose and cancels --quiet; both together cancel.
        let debug = cfg.get_bool("ui", "debug")?.unwrap_or(false);
        let mut verbose = debug || args.verbose || cfg.get_bool("ui", "verbose")?.unwrap_or(false);
        let mut quiet = !debug && (args.quiet || cfg.get_bool("ui", "quiet")?.unwrap_or(false));
        if verbose && quiet {
            verbose = false;
            quiet = false;
        }
        Ok(Copier {
            ws,
            cfg,
            display,
            root: root_path.as_os_str().as_bytes().to_vec(),
            cwd,
            cwd_inside,
            base,
            letters,
            states: BTreeMap::new(),
            copies: status.copies,
            ops: Vec::new(),
            rename,
            verbose,
            quiet,
        })
    }

    fn in_base(&self, p: &[u8]) -> bool {
        matches!(self.base.find(p), Ok(Some(_)))
    }

    fn state(&self, p: &[u8]) -> State {
        if let Some(s) = self.states.get(p) {
            return *s;
        }
        let in_base = self.in_base(p);
        match self.letters.get(p) {
            Some('R') => State::Removed,
            Some('A') => State::Added,
            _ if in_base => State::Normal,
            Some('!') => State::Added,
            _ => State::Unknown,
        }
    }

    /// A repository path as shown to the user (relative to the current directory).
    fn rel(&self, p: &[u8]) -> String {
        lossy(&self.display.display(p))
    }

    /// The file a repository path names, through the mount.
    fn disk(&self, p: &[u8]) -> PathBuf {
        self.ws.root.join(os(p))
    }

    /// A user argument as the file system path hg would use (relative to the current
    /// directory; to the root when running from outside the mount).
    fn os_path(&self, arg: &[u8]) -> PathBuf {
        if arg.starts_with(b"/") {
            return PathBuf::from(os(arg));
        }
        let mut p = if self.cwd_inside {
            self.ws.root.join(os(&self.cwd))
        } else {
            self.ws.root.clone()
        };
        if arg.is_empty() {
            return p;
        }
        let mut s = p.into_os_string();
        s.push("/");
        s.push(os(arg));
        p = PathBuf::from(s);
        p
    }

    fn lexists(path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }

    /// `pathutil.canonpath(root, cwd, name)` with its path auditor.
    fn canonpath(&self, name: &[u8]) -> Result<Vec<u8>> {
        let joined = if name.starts_with(b"/") {
            name.to_vec()
        } else {
            join(&join(&self.root, &self.cwd), name)
        };
        let full = normpath(&joined);
        let mut rootsep = self.root.clone();
        if !rootsep.ends_with(b"/") {
            rootsep.push(b'/');
        }
        if full == self.root {
            return Ok(Vec::new());
        }
        if full != rootsep && full.starts_with(&rootsep) {
            let rel = full[rootsep.len()..].to_vec();
            self.audit(&rel)?;
            return Ok(rel);
        }
        bail!("{} not under root '{}'", lossy(name), lossy(&self.root))
    }

    /// `pathutil.pathauditor`: no `.hg` component, no `..`, no symbolic link or nested
    /// repository on the way.
    fn audit(&self, path: &[u8]) -> Result<()> {
        let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
        let lower: Vec<Vec<u8>> = parts.iter().map(|p| p.to_ascii_lowercase()).collect();
        if matches!(lower[0].as_slice(), b".hg" | b".hg." | b"") || parts.contains(&&b".."[..]) {
            bail!("path contains illegal component: {}", lossy(path));
        }
        for p in &parts {
            if let Some((first, last)) = p.split_once_byte(b'~') {
                let upper = first.to_ascii_uppercase();
                if !last.is_empty()
                    && last.iter().all(u8::is_ascii_digit)
                    && (upper == b"HG" || upper == b"HG8B6C")
                {
                    bail!("path contains illegal component: {}", lossy(path));
                }
            }
        }
        for bad in [&b".hg"[..], b".hg."] {
            if let Some(pos) = lower.iter().skip(1).position(|p| p == bad) {
                let base = parts[..pos + 1].join(&b'/');
                bail!(
                    "path '{}' is inside nested repo {}",
                    lossy(path),
                    py_bytes_repr(&base)
                );
            }
        }
        for i in 0..parts.len().saturating_sub(1) {
            let prefix = parts[..=i].join(&b'/');
            let cur = self.disk(&prefix);
            let Ok(meta) = std::fs::symlink_metadata(&cur) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                bail!(
                    "path {} traverses symbolic link {}",
                    py_bytes_repr(path),
                    py_bytes_repr(&prefix)
                );
            }
            if meta.is_dir() && cur.join(".hg").is_dir() {
                bail!(
                    "path '{}' is inside nested repo {}",
                    lossy(path),
                    py_bytes_repr(&prefix)
                );
            }
        }
        Ok(())
    }

    /// `scmutil.checkportable`.
    fn checkportable(&self, f: &[u8]) -> Result<()> {
        if f.contains(&b'\r') || f.contains(&b'\n') {
            bail!(
                "'\\n' and '\\r' disallowed in filenames: {}",
                py_bytes_repr(f)
            );
        }
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
        if abort || warn_ {
            if let Some(msg) = checkwinfilename(f) {
                let msg = format!("{msg}: {}", shellquote(f));
                if abort {
                    bail!("{msg}");
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
    fn set_tracked(&mut self, p: &[u8]) -> bool {
        match self.state(p) {
            State::Unknown => {
                self.set_state(p, State::Added);
                self.ops.push(Op::Track(p.to_vec(), Track::Added));
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
    fn set_untracked(&mut self, p: &[u8]) -> bool {
        let s = self.state(p);
        self.copies.remove(p);
        match s {
            State::Unknown => return false,
            State::Added => {
                self.set_state(p, State::Unknown);
                self.ops.push(Op::Track(p.to_vec(), Track::Default));
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
    fn mark_copy(&mut self, source: Option<&[u8]>, dest: &[u8]) {
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

    /// Sends the recorded changes to the daemon, in order.
    fn flush(&mut self) -> Result<()> {
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
                    })?;
                }
                Op::Copy(..) => {
                    let mut copies = Vec::new();
                    while let Some(Op::Copy(d, s)) = ops.get(i) {
                        copies.push((d.clone(), s.clone()));
                        i += 1;
                    }
                    self.ws.request(&Request::Copy { copies })?;
                }
            }
        }
        Ok(())
    }

    /// `ui.status`: standard output unless quiet.
    fn status(&self, text: &str) {
        if !self.quiet {
            let mut out = std::io::stdout();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }

    /// `ctx.walk(match)` for one pattern: the dirstate's files it matches, plus a named
    /// file on disk that the dirstate does not know; with whether each was named exactly.
    /// A name that matches nothing anywhere gets hg's "No such file or directory".
    fn walk(&self, pat: &str) -> Result<Sources> {
        let m = Matcher::new(&self.display, &[pat.to_owned()])?;
        let mut found: BTreeSet<Vec<u8>> = BTreeSet::new();
        let known = |p: &[u8]| self.state(p) != State::Unknown;
        let explicit = m.args().first().cloned();
        let candidates_in = |dir: &[u8], out: &mut BTreeSet<Vec<u8>>| -> Result<()> {
            if !dir.is_empty() && self.in_base(dir) {
                out.insert(dir.to_vec());
            }
            let mut prefix = dir.to_vec();
            if !prefix.is_empty() {
                prefix.push(b'/');
            }
            let iter = if prefix.is_empty() {
                self.base.iter()
            } else {
                self.base.iter_prefix(&prefix)
            };
            for e in iter {
                out.insert(e?.path.to_vec());
            }
            for p in self.letters.keys().chain(self.states.keys()) {
                if p == dir || is_under(p, dir) {
                    out.insert(p.clone());
                }
            }
            Ok(())
        };
        match &explicit {
            Some(p) => {
                let mut cands = BTreeSet::new();
                candidates_in(p, &mut cands)?;
                found.extend(cands.into_iter().filter(|c| known(c)));
                let meta = std::fs::symlink_metadata(self.disk(p));
                let on_disk = meta.is_ok() || p.is_empty();
                if meta.is_ok_and(|m| !m.is_dir()) {
                    found.insert(p.clone());
                }
                if !on_disk && found.is_empty() {
                    warn(&format!("{}: No such file or directory\n", self.rel(p)));
                }
            }
            None => {
                let mut cands = BTreeSet::new();
                candidates_in(b"", &mut cands)?;
                found.extend(cands.into_iter().filter(|c| known(c) && m.matches(c)));
            }
        }
        Ok(found
            .into_iter()
            .map(|f| {
                let exact = explicit.as_ref() == Some(&f);
                (f, exact)
            })
            .collect())
    }

    /// `walkpat`: the sources a pattern gives, with hg's warnings for the others.
    fn walkpat(&self, pat: &str, after: bool) -> Result<Sources> {
        let mut srcs = Vec::new();
        for (abs, exact) in self.walk(pat)? {
            match self.state(&abs) {
                State::Added | State::Normal => {}
                State::Removed => {
                    if !after {
                        if exact {
                            warn(&format!(
                                "{}: not copying - file has been marked for remove\n",
                                self.rel(&abs)
                            ));
                        }
                        continue;
                    }
                }
                State::Unknown => {
                    if exact {
                        warn(&format!(
                            "{}: not copying - file is not managed\n",
                            self.rel(&abs)
                        ));
                    }
                    continue;
                }
            }
            srcs.push((abs, exact));
        }
        Ok(srcs)
    }
}

trait SplitOnce {
    fn split_once_byte(&self, b: u8) -> Option<(&[u8], &[u8])>;
}

impl SplitOnce for [u8] {
    fn split_once_byte(&self, b: u8) -> Option<(&[u8], &[u8])> {
        let i = self.iter().position(|&c| c == b)?;
        Some((&self[..i], &self[i + 1..]))
    }
}

/// Sources found for one pattern: (repository path, named exactly).
type Sources = Vec<(Vec<u8>, bool)>;

/// How a source maps to its target (hg's `targetpathfn` / `targetpathafterfn`): the
/// destination (as typed) joined with a suffix of the source's repository path.
enum TargetFn {
    /// `dest/<source[strip..]>`.
    Strip(usize),
    /// `dest/<basename of source>`.
    Basename,
    /// `dest` itself.
    Dest,
}

impl TargetFn {
    fn apply(&self, dest: &[u8], src: &[u8]) -> Vec<u8> {
        match self {
            TargetFn::Strip(n) => join(dest, src.get(*n..).unwrap_or_default()),
            TargetFn::Basename => join(dest, basename(src)),
            TargetFn::Dest => dest.to_vec(),
        }
    }
}

fn run(cli: &crate::Cli, args: &CopyArgs, rename: bool) -> Result<u8> {
    let ws = open_workspace(cli)?;
    if ws.mount.is_none() {
        // Outside a mount: the same error as the other working-copy commands.
        ws.request(&Request::Ping)?;
    }
    let mut c = Copier::new(&ws, rename, args)?;
    if args.forget && args.dry_run {
        bail!("cannot specify both --forget and --dry-run");
    }
    if args.forget {
        return forget(&mut c, &args.files);
    }
    let mut pats = args.files.clone();
    if pats.is_empty() {
        bail!("no source or destination specified");
    }
    if pats.len() == 1 {
        bail!("no destination specified");
    }
    let dest = pats.pop().unwrap_or_default();
    let destb = dest.as_bytes();
    let dest_path = c.os_path(destb);
    // isdir and not islink (a trailing slash makes lstat follow the link, as in Python).
    let destdirexists = std::fs::symlink_metadata(&dest_path).is_ok_and(|m| m.is_dir());
    if !destdirexists {
        if pats.len() > 1 || is_pattern(&pats[0]) {
            bail!("with multiple sources, destination must be an existing directory");
        }
        if dest.ends_with('/') {
            bail!("destination {dest} is not a directory");
        }
    }
    let mut copylist: Vec<(TargetFn, Sources)> = Vec::new();
    for pat in &pats {
        let srcs = c.walkpat(pat, args.after)?;
        if srcs.is_empty() {
            continue;
        }
        let tfn = if args.after {
            target_after(&c, pat, destb, destdirexists, &srcs)?
        } else {
            target_copy(&c, pat, destdirexists)?
        };
        copylist.push((tfn, srcs));
    }
    if copylist.is_empty() {
        if rename {
            bail!("no files to copy\n(maybe you meant to use --after --at-rev=.)");
        }
        bail!("no files to copy");
    }
    let mut targets: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut errors = 0;
    for (tfn, srcs) in &copylist {
        for (abssrc, exact) in srcs {
            let otarget = tfn.apply(destb, abssrc);
            match copyfile(&mut c, args, &mut targets, abssrc, &otarget, *exact) {
                Ok(true) => errors += 1,
                Ok(false) => {}
                Err(e) => {
                    c.flush()?;
                    return Err(e);
                }
            }
        }
    }
    c.flush()?;
    Ok(if errors != 0 { 1 } else { 0 })
}

/// `targetpathfn`.
fn target_copy(c: &Copier, pat: &str, destdirexists: bool) -> Result<TargetFn> {
    if c.os_path(pat.as_bytes()).is_dir() {
        let abspfx = c.canonpath(pat.as_bytes())?;
        let mut striplen = if destdirexists {
            split(&abspfx).0.len()
        } else {
            abspfx.len()
        };
        if striplen > 0 {
            striplen += 1;
        }
        Ok(TargetFn::Strip(striplen))
    } else if destdirexists {
        Ok(TargetFn::Basename)
    } else {
        Ok(TargetFn::Dest)
    }
}

/// `targetpathafterfn`.
fn target_after(
    c: &Copier,
    pat: &str,
    dest: &[u8],
    destdirexists: bool,
    srcs: &[(Vec<u8>, bool)],
) -> Result<TargetFn> {
    if is_pattern(pat) {
        return Ok(TargetFn::Basename);
    }
    let abspfx = c.canonpath(pat.as_bytes())?;
    let first_len = srcs.first().map_or(0, |s| s.0.len());
    if abspfx.len() < first_len {
        // A directory: the target may or may not contain its last component.
        let evalpath = |striplen: usize| {
            srcs.iter()
                .filter(|(s, _)| {
                    let t = join(dest, s.get(striplen..).unwrap_or_default());
                    Copier::lexists(&c.os_path(&t))
                })
                .count()
        };
        let mut striplen = abspfx.len();
        if striplen > 0 {
            striplen += 1;
        }
        if c.os_path(&join(dest, split(&abspfx).1)).is_dir() {
            let score = evalpath(striplen);
            let mut striplen1 = split(&abspfx).0.len();
            if striplen1 > 0 {
                striplen1 += 1;
            }
            if evalpath(striplen1) > score {
                striplen = striplen1;
            }
        }
        Ok(TargetFn::Strip(striplen))
    } else if destdirexists {
        Ok(TargetFn::Basename)
    } else {
        Ok(TargetFn::Dest)
    }
}

/// hg's `copyfile`: true when this file failed.
fn copyfile(
    c: &mut Copier,
    args: &CopyArgs,
    targets: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    abssrc: &[u8],
    otarget: &[u8],
    exact: bool,
) -> Result<bool> {
    let rename = c.rename;
    let abstarget = c.canonpath(otarget)?;
    let reltarget = c.rel(&abstarget);
    let relsrc = c.rel(abssrc);
    let target = c.disk(&abstarget);
    let src = c.disk(abssrc);
    let already_committed = c.state(&abstarget) == State::Normal;
    c.checkportable(&abstarget)?;

    if let Some(prevsrc) = targets.get(&abstarget) {
        warn(&format!(
            "{reltarget}: not overwriting - {} collides with {}\n",
            c.rel(abssrc),
            c.rel(prevsrc)
        ));
        return Ok(true);
    }

    let exists = Copier::lexists(&target);
    if ((!args.after && exists) || (args.after && already_committed)) && !args.force {
        let (what, hint) = if already_committed {
            let looks_like_copy = looks_like_copy_in_parent(c, abssrc, &abstarget)?;
            let cmd = if rename { "rename" } else { "copy" };
            let hint = if looks_like_copy {
                format!(
                    "('hg {cmd} --at-rev .' to record the {cmd} in the parent of the working copy)\n"
                )
            } else {
                let flags = if args.after {
                    "--after --force"
                } else {
                    "--force"
                };
                format!("('hg {cmd} {flags}' to replace the file by recording a {cmd})\n")
            };
            ("file already committed", hint)
        } else if rename {
            (
                "file exists",
                "('hg rename --after' to record the rename)\n".to_owned(),
            )
        } else {
            (
                "file exists",
                "('hg copy --after' to record the copy)\n".to_owned(),
            )
        };
        warn(&format!("{reltarget}: not overwriting - {what}\n"));
        warn(&hint);
        return Ok(true);
    }

    let mut srcexists = true;
    let mut moved = false;
    if args.after {
        if !exists {
            let what = if rename { "move" } else { "copy" };
            warn(&format!(
                "{relsrc}: not recording {what} - {reltarget} does not exist\n"
            ));
            return Ok(true);
        }
    } else if !args.dry_run {
        match copy_bytes(&src, &target, exists, rename) {
            Ok(()) => moved = rename,
            Err(CopyFailure::SourceMissing) => {
                warn(&format!("{relsrc}: deleted in working directory\n"));
                srcexists = false;
            }
            Err(CopyFailure::Other(e)) => {
                warn(&format!("{relsrc}: cannot copy - {}\n", strerror(&e)));
                return Ok(true);
            }
        }
    }

    if c.verbose || !exact {
        let verb = if rename { "moving" } else { "copying" };
        c.status(&format!("{verb} {relsrc} to {reltarget}\n"));
    }
    targets.insert(abstarget.clone(), abssrc.to_vec());

    dirstatecopy(c, abssrc, &abstarget, args.dry_run)?;
    if rename && !args.dry_run {
        if !args.after && srcexists {
            if !moved {
                let _ = std::fs::remove_file(&src);
            }
            if c.cfg
                .get_bool("experimental", "removeemptydirs")?
                .unwrap_or(true)
            {
                remove_empty_parents(c, abssrc);
            }
        }
        if !c.set_untracked(abssrc) {
            warn(&format!("{} not tracked!\n", c.rel(abssrc)));
        }
    }
    Ok(false)
}

/// hg's hint test: the target was added in the parent and the source existed before it.
fn looks_like_copy_in_parent(c: &Copier, abssrc: &[u8], abstarget: &[u8]) -> Result<bool> {
    if !c.in_base(abstarget) {
        return Ok(false);
    }
    let rev = c.ws.resolve_single(Some("."))?;
    if rev < 0 {
        return Ok(false);
    }
    let [p1, p2] = c.ws.repo.changelog().parents(rev)?;
    let mut parents = vec![p1];
    if p2 >= 0 {
        parents.push(p2);
    }
    for p in parents {
        let m = c.ws.repo.manifest_of(p)?;
        if m.find(abssrc)?.is_some() && m.find(abstarget)?.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The copy itself (hg's `os.unlink`, `os.makedirs`, `util.copyfile`), or the move.
fn copy_bytes(src: &Path, target: &Path, exists: bool, rename: bool) -> Result<(), CopyFailure> {
    let fail = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CopyFailure::SourceMissing
        } else {
            CopyFailure::Other(e)
        }
    };
    if exists {
        std::fs::remove_file(target).map_err(fail)?;
    }
    if let Some(dir) = target.parent() {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
    }
    let meta = std::fs::symlink_metadata(src).map_err(fail)?;
    if meta.is_dir() {
        return Err(CopyFailure::Other(std::io::Error::from_raw_os_error(
            libc::EISDIR,
        )));
    }
    if rename {
        return std::fs::rename(src, target).map_err(fail);
    }
    if meta.file_type().is_symlink() {
        let link = std::fs::read_link(src).map_err(fail)?;
        return std::os::unix::fs::symlink(link, target).map_err(fail);
    }
    std::fs::copy(src, target).map(|_| ()).map_err(fail)
}

/// `util.unlinkpath(rmdir=True)`: the directories a removal left empty go too.
fn remove_empty_parents(c: &Copier, path: &[u8]) {
    let mut p = path;
    while let Some(i) = p.iter().rposition(|&b| b == b'/') {
        p = &p[..i];
        if std::fs::remove_dir(c.disk(p)).is_err() {
            break;
        }
    }
}

/// `scmutil.dirstatecopy`.
fn dirstatecopy(c: &mut Copier, src: &[u8], dst: &[u8], dryrun: bool) -> Result<()> {
    let origsrc = c.copies.get(src).cloned().unwrap_or_else(|| src.to_vec());
    if dst == origsrc.as_slice() {
        let s = c.state(dst);
        if (s == State::Added || !s.tracked()) && !dryrun {
            c.set_tracked(dst);
        }
        return Ok(());
    }
    if c.state(&origsrc) == State::Added && origsrc.as_slice() == src {
        if !c.quiet {
            warn(&format!(
                "{} has not been committed yet, so no copy data will be stored for {}.\n",
                c.rel(&origsrc),
                c.rel(dst)
            ));
        }
        if !c.state(dst).tracked() && !dryrun {
            wctx_add(c, dst)?;
        }
    } else if !dryrun {
        wctx_copy(c, &origsrc, dst);
    }
    Ok(())
}

/// `workingctx.add([f])`.
fn wctx_add(c: &mut Copier, f: &[u8]) -> Result<()> {
    c.checkportable(f)?;
    let Ok(meta) = std::fs::symlink_metadata(c.disk(f)) else {
        warn(&format!("{} does not exist!\n", c.rel(f)));
        return Ok(());
    };
    let limit = c
        .cfg
        .get_bytes("ui", "large-file-limit")?
        .unwrap_or(10_000_000);
    if limit != 0 && meta.len() > limit {
        warn(&format!(
            "{}: up to {} MB of RAM may be required to manage this file\n\
             (use 'hg revert {}' to cancel the pending addition)\n",
            lossy(f),
            3 * meta.len() / 1_000_000,
            c.rel(f)
        ));
    }
    let ft = meta.file_type();
    if !(ft.is_file() || ft.is_symlink()) {
        warn(&format!(
            "{} not added: only files and symlinks supported currently\n",
            c.rel(f)
        ));
    } else if !c.set_tracked(f) {
        warn(&format!("{} already tracked!\n", c.rel(f)));
    }
    Ok(())
}

/// `workingctx.copy(source, dest)`.
fn wctx_copy(c: &mut Copier, source: &[u8], dest: &[u8]) {
    let meta = match std::fs::symlink_metadata(c.disk(dest)) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            warn(&format!("{} does not exist!\n", c.rel(dest)));
            return;
        }
        Err(_) => return,
    };
    let ft = meta.file_type();
    if !(ft.is_file() || ft.is_symlink()) {
        warn(&format!(
            "copy failed: {} is not a file or a symbolic link\n",
            c.rel(dest)
        ));
        return;
    }
    c.set_tracked(dest);
    c.mark_copy(Some(source), dest);
}

/// `hg copy --forget FILE...`: unmark copies (every copy without arguments).
fn forget(c: &mut Copier, pats: &[String]) -> Result<u8> {
    // The walk of all patterns together; warnings use repository paths (hg's
    // `getuipathfn` without the legacy relative value), "No such file" relative ones.
    let mut walked: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
    if pats.is_empty() {
        for dst in c.copies.keys() {
            walked.insert(dst.clone(), false);
        }
    } else {
        for pat in pats {
            for (f, exact) in c.walk(pat)? {
                *walked.entry(f).or_insert(false) |= exact;
            }
        }
    }
    for (f, exact) in walked {
        // ctx.p1copies(): recorded copies of tracked files from files of the parent.
        let current = c
            .copies
            .get(&f)
            .is_some_and(|src| c.in_base(src) && c.state(&f).tracked());
        if current {
            c.mark_copy(None, &f);
        } else if exact {
            warn(&format!(
                "{}: not unmarking as copy - file is not marked as copied\n",
                lossy(&f)
            ));
        }
    }
    c.flush()?;
    Ok(0)
}
