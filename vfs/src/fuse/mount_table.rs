//! The kernel's mount table (`/proc/self/mountinfo`) as far as revfs mounts go: where they
//! are, what they serve, and their FUSE connection. Read without touching any mount (a
//! frozen daemon's mount would make the reader wait).

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A revfs mount as the kernel's mount table shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMount {
    /// The mountpoint, as the kernel names it (canonical).
    pub mountpoint: PathBuf,
    /// The mount's source: `revfs:REPO`.
    pub source: String,
    /// The FUSE connection number (the minor of the mount's device).
    pub conn: Option<u32>,
}

/// The mounts the kernel knows of whose type is `fuse.revfs`.
pub fn revfs_mounts() -> std::io::Result<Vec<KernelMount>> {
    Ok(parse_mountinfo(&read_mountinfo()?))
}

/// `/proc/self/mountinfo`, in one read into a buffer that fits a usual table: the kernel
/// formats the whole table again for each read of a /proc file, and a growing buffer would
/// read it in pieces.
fn read_mountinfo() -> std::io::Result<String> {
    let mut text = String::with_capacity(64 * 1024);
    std::fs::File::open("/proc/self/mountinfo")?.read_to_string(&mut text)?;
    Ok(text)
}

fn parse_mountinfo(text: &str) -> Vec<KernelMount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut r = right.split(' ');
        let (fstype, source) = (r.next().unwrap_or(""), r.next().unwrap_or(""));
        // fusermount3 records the subtype only with libfuse; the source name is ours anyway.
        if !(fstype == "fuse.revfs" || (fstype.starts_with("fuse") && source.starts_with("revfs:")))
        {
            continue;
        }
        let fields: Vec<&str> = left.split(' ').collect();
        let Some(mp) = fields.get(4) else { continue };
        let conn = fields
            .get(2)
            .and_then(|dev| dev.split_once(':'))
            .and_then(|(_, minor)| minor.parse().ok());
        out.push(KernelMount {
            mountpoint: PathBuf::from(std::ffi::OsStr::from_bytes(&unescape_mountinfo(mp))),
            source: String::from_utf8_lossy(&unescape_mountinfo(source)).into_owned(),
            conn,
        });
    }
    out
}

/// Every mountpoint strictly below `dir` (a bind mount inside a revfs mount: a
/// redirection), from the kernel's mount table.
pub fn mountpoints_below(dir: &std::path::Path) -> std::io::Result<Vec<PathBuf>> {
    Ok(below(&read_mountinfo()?, dir))
}

fn below(text: &str, dir: &std::path::Path) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|mp| PathBuf::from(std::ffi::OsStr::from_bytes(&unescape_mountinfo(mp))))
        .filter(|mp| mp != dir && mp.starts_with(dir))
        .collect()
}

/// Undoes the octal escapes (`\040` for a space) of /proc/self/mountinfo.
fn unescape_mountinfo(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountpoints_below_a_directory_are_the_ones_strictly_inside_it() {
        let text = "\
36 35 98:0 / / rw - ext4 /dev/vda rw
120 29 0:63 / /tmp/m rw - fuse.revfs revfs:/r rw
130 120 98:0 /var/tmp/s/redirections/ab /tmp/m/out\\040dir rw - ext4 /dev/vda rw
131 36 98:0 / /tmp/mm rw - ext4 /dev/vda rw
";
        assert_eq!(
            below(text, std::path::Path::new("/tmp/m")),
            [PathBuf::from("/tmp/m/out dir")]
        );
    }

    #[test]
    fn mountinfo_gives_revfs_mounts_with_their_connection() {
        let text = "\
36 35 98:0 / /mnt1 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
120 29 0:63 / /tmp/a\\040b/mnt rw,nosuid,nodev,noatime - fuse.revfs revfs:/src/repo rw,user_id=0,group_id=0
121 29 0:64 / /tmp/other rw - fuse.sshfs host:/x rw
122 29 0:65 / /tmp/c rw - fuse revfs:/r rw
";
        assert_eq!(
            parse_mountinfo(text),
            [
                KernelMount {
                    mountpoint: "/tmp/a b/mnt".into(),
                    source: "revfs:/src/repo".into(),
                    conn: Some(63)
                },
                KernelMount {
                    mountpoint: "/tmp/c".into(),
                    source: "revfs:/r".into(),
                    conn: Some(65)
                }
            ]
        );
    }
}
