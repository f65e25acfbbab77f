//! The soak's model of what its writer did: each name in the writer's directory and the
//! file it names (hard links share one), with the bytes that file must hold. Every change
//! is made in the mount and in the model together; after a step the mount must hold the
//! model exactly.

use revfs_tests::Rng;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The most bytes one file of the writer's grows to.
const MAX_LEN: usize = 256 << 10;

pub struct Model {
    /// The writer's directory in the mount (untracked: hg's updates leave it alone).
    dir: PathBuf,
    /// Name -> file id.
    names: BTreeMap<String, usize>,
    /// File id -> its bytes.
    files: Vec<Vec<u8>>,
    next_name: usize,
    /// The operations made, for the lines of a difference (the last ones naming its file).
    history: Vec<String>,
    /// The operation that failed, when a kill is why: made or not, [`Model::settle`] says.
    pending: Option<Op>,
}

/// One operation of the writer.
enum Op {
    Create(String, Vec<u8>),
    Write(String, usize, Vec<u8>),
    Truncate(String, usize),
    Rename(String, String),
    Link(String, String),
    Unlink(String),
    Fsync(String),
}

impl Op {
    /// The names whose state it changes.
    fn names(&self) -> Vec<&str> {
        match self {
            Op::Create(n, _) | Op::Write(n, _, _) | Op::Truncate(n, _) | Op::Unlink(n) => {
                vec![n]
            }
            Op::Rename(a, b) | Op::Link(a, b) => vec![a, b],
            Op::Fsync(_) => vec![],
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Op::Create(n, d) => write!(f, "create {n} {}", d.len()),
            Op::Write(n, at, d) => write!(f, "write {n} {at}+{}", d.len()),
            Op::Truncate(n, len) => write!(f, "truncate {n} {len}"),
            Op::Rename(a, b) => write!(f, "rename {a} {b}"),
            Op::Link(a, b) => write!(f, "link {a} {b}"),
            Op::Unlink(n) => write!(f, "unlink {n}"),
            Op::Fsync(n) => write!(f, "fsync {n}"),
        }
    }
}

impl Model {
    pub fn new(dir: PathBuf) -> Model {
        std::fs::create_dir_all(&dir).expect("the writer's directory");
        Model {
            dir,
            names: BTreeMap::new(),
            files: Vec::new(),
            next_name: 0,
            history: Vec::new(),
            pending: None,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn new_name(&mut self) -> String {
        self.next_name += 1;
        format!("w{:05}", self.next_name)
    }

    fn pick(&self, rng: &mut Rng) -> Option<String> {
        let n = self.names.len();
        (n > 0).then(|| {
            self.names
                .keys()
                .nth(rng.below(n))
                .cloned()
                .expect("a name below the count")
        })
    }

    /// One random operation, made in the mount and the model: what it was (for the log),
    /// or the error that the mount gave (a failure of the soak). `durable`: each operation
    /// is followed by an fsync of its file and of the directory, so that a kill in the
    /// middle of a step leaves only the operation under way in doubt; when an operation
    /// fails, it is kept as that one ([`Model::settle`]).
    pub fn step(&mut self, rng: &mut Rng, durable: bool) -> Result<String, String> {
        let op = self.plan(rng);
        let what = op.to_string();
        let done = self.make(&op, durable);
        match &done {
            Ok(()) => {
                self.apply(&op);
                self.history.push(what.clone());
            }
            Err(e) => {
                self.history.push(format!("failed: {what}: {e}"));
                self.pending = Some(op);
            }
        }
        done.map(|()| what)
    }

    /// The next operation, its names and bytes chosen.
    fn plan(&mut self, rng: &mut Rng) -> Op {
        let op = if self.names.len() < 8 {
            0
        } else {
            rng.below(10)
        };
        match op {
            0 | 1 => {
                let name = self.new_name();
                let n = rng.below(64 << 10);
                Op::Create(name, bytes(rng, n))
            }
            2..=4 => {
                let name = self.pick(rng).expect("names");
                let len = self.files[self.names[&name]].len();
                let at = rng.below(len + 4096).min(MAX_LEN);
                let n = 1 + rng.below(16 << 10);
                let mut data = bytes(rng, n);
                data.truncate(MAX_LEN - at);
                Op::Write(name, at, data)
            }
            5 => {
                let name = self.pick(rng).expect("names");
                let len = rng
                    .below(self.files[self.names[&name]].len() + 8192)
                    .min(MAX_LEN);
                Op::Truncate(name, len)
            }
            6 => {
                let from = self.pick(rng).expect("names");
                // Over an existing name one time in three.
                let to = match rng.below(3) {
                    0 => self.pick(rng).expect("names"),
                    _ => self.new_name(),
                };
                Op::Rename(from, to)
            }
            7 => Op::Link(self.pick(rng).expect("names"), self.new_name()),
            8 => Op::Unlink(self.pick(rng).expect("names")),
            _ => Op::Fsync(self.pick(rng).expect("names")),
        }
    }

    /// Makes `op` in the mount.
    fn make(&self, op: &Op, durable: bool) -> Result<(), String> {
        let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
        let open = |name: &str| {
            OpenOptions::new()
                .write(true)
                .open(self.path(name))
                .map_err(|e| io(name, e))
        };
        let touched = match op {
            Op::Create(name, data) => {
                std::fs::write(self.path(name), data).map_err(|e| io(name, e))?;
                Some(name)
            }
            Op::Write(name, at, data) => {
                open(name)?
                    .write_all_at(data, *at as u64)
                    .map_err(|e| io(name, e))?;
                Some(name)
            }
            Op::Truncate(name, len) => {
                open(name)?.set_len(*len as u64).map_err(|e| io(name, e))?;
                Some(name)
            }
            Op::Rename(from, to) => {
                std::fs::rename(self.path(from), self.path(to)).map_err(|e| io(from, e))?;
                None
            }
            Op::Link(from, to) => {
                std::fs::hard_link(self.path(from), self.path(to)).map_err(|e| io(from, e))?;
                None
            }
            Op::Unlink(name) => {
                std::fs::remove_file(self.path(name)).map_err(|e| io(name, e))?;
                None
            }
            Op::Fsync(name) => {
                let f = std::fs::File::open(self.path(name)).map_err(|e| io(name, e))?;
                f.sync_all().map_err(|e| io(name, e))?;
                None
            }
        };
        if durable {
            if let Some(name) = touched {
                let f = std::fs::File::open(self.path(name)).map_err(|e| io(name, e))?;
                f.sync_all().map_err(|e| io(name, e))?;
            }
            let d = std::fs::File::open(&self.dir).map_err(|e| io("the directory", e))?;
            d.sync_all().map_err(|e| io("the directory", e))?;
        }
        Ok(())
    }

    /// Takes `op` into the model (the mount made it).
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Create(name, data) => {
                self.files.push(data.clone());
                self.names.insert(name.clone(), self.files.len() - 1);
            }
            Op::Write(name, at, data) => {
                let file = &mut self.files[self.names[name]];
                if file.len() < at + data.len() {
                    file.resize(at + data.len(), 0);
                }
                file[*at..at + data.len()].copy_from_slice(data);
            }
            Op::Truncate(name, len) => self.files[self.names[name]].resize(*len, 0),
            Op::Rename(from, to) => {
                // A rename between two names of one file does nothing (rename(2)).
                if self.names.get(to) != Some(&self.names[from]) {
                    let id = self.names.remove(from).expect("a name of the model");
                    self.names.insert(to.clone(), id);
                }
            }
            Op::Link(from, to) => {
                let id = self.names[from];
                self.names.insert(to.clone(), id);
            }
            Op::Unlink(name) => {
                self.names.remove(name);
            }
            Op::Fsync(_) => {}
        }
    }

    /// After a kill in the middle of a step and a mount again: the operation that was under
    /// way is taken as made or not made, whichever the mount shows (a write may have
    /// reached part of its pages: each byte must then be the old or the new one, and the
    /// length between the two). An error's text when the mount shows neither.
    pub fn settle(&mut self) -> Result<Option<String>, String> {
        let Some(op) = self.pending.take() else {
            return Ok(None);
        };
        let mut after = self.clone_state();
        after.apply(&op);
        let names = op.names();
        let shows = |m: &Model| names.iter().all(|n| m.mount_has(n));
        if shows(&after) {
            *self = after;
            return Ok(Some(format!("{op}: made")));
        }
        if shows(self) {
            return Ok(Some(format!("{op}: not made")));
        }
        if let Op::Create(name, data) = &op {
            // Made, but its bytes cut short: a prefix of them.
            if let Ok(got) = std::fs::read(self.path(name)) {
                if data.starts_with(&got) {
                    self.files.push(got);
                    self.names.insert(name.clone(), self.files.len() - 1);
                    return Ok(Some(format!("{op}: made in part")));
                }
            }
        }
        if let Op::Write(name, _, _) = &op {
            let id = self.names[name];
            let (old, new) = (&self.files[id], &after.files[id]);
            if let Ok(got) = std::fs::read(self.path(name)) {
                let between =
                    got.len() >= old.len().min(new.len()) && got.len() <= old.len().max(new.len());
                let each = got
                    .iter()
                    .enumerate()
                    .all(|(i, b)| *b == old.get(i).copied().unwrap_or(0) || Some(b) == new.get(i));
                if between && each {
                    self.files[id] = got;
                    return Ok(Some(format!("{op}: made in part")));
                }
            }
        }
        Err(format!(
            "after the kill, the mount shows {op} neither made nor not made: {}",
            names
                .iter()
                .map(|n| match std::fs::symlink_metadata(self.path(n)) {
                    Ok(m) => format!("{n} {} bytes", m.len()),
                    Err(e) => format!("{n}: {e}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    fn clone_state(&self) -> Model {
        Model {
            dir: self.dir.clone(),
            names: self.names.clone(),
            files: self.files.clone(),
            next_name: self.next_name,
            history: self.history.clone(),
            pending: None,
        }
    }

    /// Whether the mount holds what the model says of `name`: there or not, its bytes.
    fn mount_has(&self, name: &str) -> bool {
        match (self.names.get(name), std::fs::read(self.path(name))) {
            (Some(&id), Ok(got)) => got == self.files[id],
            (None, Err(e)) => e.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        }
    }

    /// Every file and the directory fsync'd: the state a kill must not lose.
    pub fn sync(&self) -> Result<(), String> {
        for name in self.names.keys() {
            let f = std::fs::File::open(self.path(name)).map_err(|e| format!("{name}: {e}"))?;
            f.sync_all().map_err(|e| format!("fsync {name}: {e}"))?;
        }
        let d = std::fs::File::open(&self.dir).map_err(|e| format!("the directory: {e}"))?;
        d.sync_all()
            .map_err(|e| format!("fsync the directory: {e}"))
    }

    /// The differences between the mount's directory and the model, each a line.
    pub fn check(&self) -> Vec<String> {
        let mut wrong = Vec::new();
        let mut seen = Vec::new();
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                for e in entries {
                    match e {
                        Ok(e) => seen.push(e.file_name().to_string_lossy().into_owned()),
                        Err(e) => wrong.push(format!("{}: listing: {e}", self.dir.display())),
                    }
                }
            }
            Err(e) => wrong.push(format!("{}: {e}", self.dir.display())),
        }
        seen.sort();
        let want: Vec<&String> = self.names.keys().collect();
        if seen.iter().collect::<Vec<_>>() != want {
            let differing = diff_names(&seen, &want);
            wrong.push(format!(
                "the writer's directory lists {} names, the model {}: {differing:?}",
                seen.len(),
                want.len(),
            ));
            for d in &differing {
                let name = &d[1..];
                let stat = match std::fs::symlink_metadata(self.path(name)) {
                    Ok(m) => format!("{} bytes", m.len()),
                    Err(e) => e.to_string(),
                };
                wrong.push(format!(
                    "  {name} now: {stat}; its operations (of {}):",
                    self.history.len()
                ));
                let named = self
                    .history
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| h.split(' ').any(|w| w == name));
                for (i, h) in named {
                    wrong.push(format!("    #{i} {h}"));
                }
            }
        }
        let mut inos: BTreeMap<usize, u64> = BTreeMap::new();
        for (name, &id) in &self.names {
            let p = self.path(name);
            match std::fs::read(&p) {
                Ok(got) if got == self.files[id] => {}
                Ok(got) => wrong.push(first_difference(&p, &got, &self.files[id])),
                Err(e) => wrong.push(format!("{}: {e}", p.display())),
            }
            // Names of one file share its inode.
            if let Ok(meta) = std::fs::metadata(&p) {
                use std::os::unix::fs::MetadataExt;
                let ino = *inos.entry(id).or_insert(meta.ino());
                if ino != meta.ino() {
                    wrong.push(format!(
                        "{}: not the same file as its other names",
                        p.display()
                    ));
                }
            }
        }
        wrong
    }
}

fn diff_names(seen: &[String], want: &[&String]) -> Vec<String> {
    let mut out: Vec<String> = seen
        .iter()
        .filter(|s| !want.contains(s))
        .map(|s| format!("+{s}"))
        .collect();
    out.extend(
        want.iter()
            .filter(|w| !seen.contains(w))
            .map(|w| format!("-{w}")),
    );
    out.truncate(10);
    out
}

/// Where `got` first differs from `want`, as a line.
pub fn first_difference(path: &Path, got: &[u8], want: &[u8]) -> String {
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    format!(
        "{}: {} bytes, {} wanted, first difference at byte {at}",
        path.display(),
        got.len(),
        want.len()
    )
}

/// `n` bytes from `rng`, text-like runs so that a misplaced page shows.
fn bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let word = rng.next_u64().to_le_bytes();
        v.extend_from_slice(&word);
    }
    v.truncate(n);
    v
}
