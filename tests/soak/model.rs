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
    /// or the error that the mount gave (a failure of the soak).
    pub fn step(&mut self, rng: &mut Rng) -> Result<String, String> {
        let done = self.operate(rng);
        match &done {
            Ok(op) => self.history.push(op.clone()),
            Err(e) => self.history.push(format!("failed: {e}")),
        }
        done
    }

    fn operate(&mut self, rng: &mut Rng) -> Result<String, String> {
        let op = if self.names.len() < 8 {
            0
        } else {
            rng.below(10)
        };
        let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
        match op {
            0 | 1 => {
                let name = self.new_name();
                let n = rng.below(64 << 10);
                let data = bytes(rng, n);
                std::fs::write(self.path(&name), &data).map_err(|e| io(&name, e))?;
                self.files.push(data);
                self.names.insert(name.clone(), self.files.len() - 1);
                Ok(format!("create {name}"))
            }
            2..=4 => {
                let name = self.pick(rng).expect("names");
                let id = self.names[&name];
                let len = self.files[id].len();
                let at = rng.below(len + 4096).min(MAX_LEN);
                let n = 1 + rng.below(16 << 10);
                let data = bytes(rng, n);
                let data = &data[..data.len().min(MAX_LEN - at)];
                let f = OpenOptions::new()
                    .write(true)
                    .open(self.path(&name))
                    .map_err(|e| io(&name, e))?;
                f.write_all_at(data, at as u64).map_err(|e| io(&name, e))?;
                let file = &mut self.files[id];
                if file.len() < at + data.len() {
                    file.resize(at + data.len(), 0);
                }
                file[at..at + data.len()].copy_from_slice(data);
                Ok(format!("write {name} {at}+{}", data.len()))
            }
            5 => {
                let name = self.pick(rng).expect("names");
                let id = self.names[&name];
                let len = rng.below(self.files[id].len() + 8192).min(MAX_LEN);
                let f = OpenOptions::new()
                    .write(true)
                    .open(self.path(&name))
                    .map_err(|e| io(&name, e))?;
                f.set_len(len as u64).map_err(|e| io(&name, e))?;
                self.files[id].resize(len, 0);
                Ok(format!("truncate {name} {len}"))
            }
            6 => {
                let from = self.pick(rng).expect("names");
                // Over an existing name one time in three.
                let to = match rng.below(3) {
                    0 => self.pick(rng).expect("names"),
                    _ => self.new_name(),
                };
                std::fs::rename(self.path(&from), self.path(&to)).map_err(|e| io(&from, e))?;
                // A rename between two names of one file does nothing (rename(2)).
                if self.names.get(&to) != Some(&self.names[&from]) {
                    let id = self.names.remove(&from).expect("picked");
                    self.names.insert(to.clone(), id);
                }
                Ok(format!("rename {from} {to}"))
            }
            7 => {
                let from = self.pick(rng).expect("names");
                let to = self.new_name();
                std::fs::hard_link(self.path(&from), self.path(&to)).map_err(|e| io(&from, e))?;
                let id = self.names[&from];
                self.names.insert(to.clone(), id);
                Ok(format!("link {from} {to}"))
            }
            8 => {
                let name = self.pick(rng).expect("names");
                std::fs::remove_file(self.path(&name)).map_err(|e| io(&name, e))?;
                self.names.remove(&name);
                Ok(format!("unlink {name}"))
            }
            _ => {
                let name = self.pick(rng).expect("names");
                let f = std::fs::File::open(self.path(&name)).map_err(|e| io(&name, e))?;
                f.sync_all().map_err(|e| io(&name, e))?;
                Ok(format!("fsync {name}"))
            }
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
