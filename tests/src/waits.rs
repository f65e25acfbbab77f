//! Where a process waits, for a test's failure message: each thread's system call (with the
//! path it names) and its kernel stack, read from /proc (root).

/// Where each thread of process `pid` waits: its system call (with the path it names,
/// read from its memory) and its kernel stack.
pub fn where_it_waits(pid: u32) -> String {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("process {pid} gone");
    };
    for t in tasks.flatten() {
        let dir = t.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let syscall = read("syscall");
        let stack: Vec<String> = read("stack")
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
            .collect();
        out.push(format!(
            "thread {}: syscall {}{}; stack {}",
            t.file_name().to_string_lossy(),
            syscall.trim(),
            syscall_path(pid, &syscall)
                .map(|p| format!(" (path {p:?})"))
                .unwrap_or_default(),
            stack.join(" < ")
        ));
    }
    out.join("; ")
}

/// The path a path-taking system call names, from `/proc/PID/syscall`'s line (x86_64
/// numbers: stat, lstat, access, readlink, openat, newfstatat, statx, faccessat2).
fn syscall_path(pid: u32, line: &str) -> Option<String> {
    let mut f = line.split_whitespace();
    let nr: i64 = f.next()?.parse().ok()?;
    let args: Vec<u64> = f
        .take(6)
        .filter_map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .collect();
    let at = match nr {
        4 | 6 | 21 | 89 => *args.first()?,
        257 | 262 | 332 | 439 => *args.get(1)?,
        _ => return None,
    };
    use std::io::{Read, Seek, SeekFrom};
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    mem.seek(SeekFrom::Start(at)).ok()?;
    let mut buf = vec![0u8; 4096];
    let n = mem.read(&mut buf).ok()?;
    let end = buf[..n].iter().position(|b| *b == 0).unwrap_or(n);
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}
