//! Benchmark helper (not a test): rebuilds every file of a repository's tip from the store,
//! the work a first read of the whole tree asks of the daemon, and prints where the time
//! went. `cargo run --release -p revfs-store --example decode_all -- REPO [--uncached]`
//! (`--uncached`: each file through a fresh filelog, as a daemon whose filelog cache is
//! cold; otherwise through the repository's filelog cache).

use revfs_store::Repo;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = args.first().ok_or("usage: decode_all REPO [--uncached]")?;
    let uncached = args.iter().any(|a| a == "--uncached");
    let repo = Repo::open(std::path::Path::new(root))?;
    let tip = repo.changelog().tip();
    let manifest = repo.manifest_of(tip)?;
    let entries: Vec<(Vec<u8>, revfs_store::Node)> = manifest
        .iter()
        .map(|e| e.map(|e| (e.path.to_vec(), e.node)))
        .collect::<Result<_, _>>()?;
    let (mut open_t, mut read_t, mut bytes) = (0.0, 0.0, 0u64);
    let start = Instant::now();
    for (path, node) in &entries {
        let t = Instant::now();
        let fl = if uncached {
            std::sync::Arc::new(repo.filelog_uncached(path)?)
        } else {
            repo.filelog(path)?
        };
        let rev = fl.rev_of(node)?;
        open_t += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let text = fl.read_uncached(rev)?;
        read_t += t.elapsed().as_secs_f64();
        bytes += text.len() as u64;
    }
    let total = start.elapsed().as_secs_f64();
    println!(
        "{} files, {} bytes: {total:.2} s ({:.1} us a file); open {open_t:.2} s, read {read_t:.2} s",
        entries.len(),
        bytes,
        total * 1e6 / entries.len().max(1) as f64
    );
    Ok(())
}
