//! Killing the set-user-ID and set-group-ID bits, which the kernel leaves to the daemon
//! (`FUSE_HANDLE_KILLPRIV_V2`, asked for at INIT). With it, the kernel says when: WRITE's
//! `FUSE_WRITE_KILL_SUIDGID` (a writer without CAP_FSETID), SETATTR's
//! `FATTR_KILL_SUIDGID` (a truncate by such a caller, or any chown of a non-directory).
//! Without it, the kernel asked the daemon on every write whether the file had a
//! `security.capability` attribute (it may cache "no security attributes" on an inode only
//! when the daemon handles the killing), and fetched the attributes before every chown:
//! `tar xf` sent 4.3 GETXATTR and 2 GETATTR a file, now 2 and 1 (docs/BENCHMARKS.md).
//! Removing `security.capability` stays the kernel's (it sends a REMOVEXATTR). With
//! passthrough on, a set-user-ID or set-group-ID file opened for writing is not passed
//! through (`handlers.rs`'s `open`): the kernel writes a backing file without asking.
//!
//! The rule is the VFS's (`setattr_should_drop_suidgid`, Linux 6.2 and later): set-user-ID
//! goes; set-group-ID goes with group execute, and without it (where it marks mandatory
//! locking) only when the caller is neither in the file's group nor privileged, which is
//! asked only then (`in_group_or_capable`: it reads the caller's groups).

/// The mode without the bits a write, truncate or chown kills; `None` when nothing goes.
pub fn killed(mode: u32, in_group_or_capable: impl FnOnce() -> bool) -> Option<u32> {
    let mut out = mode & !libc::S_ISUID;
    if mode & libc::S_ISGID != 0 && (mode & libc::S_IXGRP != 0 || !in_group_or_capable()) {
        out &= !libc::S_ISGID;
    }
    (out != mode).then_some(out)
}

/// Whether the process `pid` (a thread's id, as FUSE gives it), whose file-system user and
/// group are `uid` and `gid`, is root or in group `group` (its own, or one of its
/// supplementary groups, from `/proc/PID/status`; unknown: not).
pub fn in_group_or_root(pid: u32, uid: u32, gid: u32, group: u32) -> bool {
    if uid == 0 || gid == group {
        return true;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .is_some_and(|groups| {
            groups
                .split_whitespace()
                .any(|g| g.parse::<u32>() == Ok(group))
        })
}

#[cfg(test)]
mod tests {
    use super::killed;

    #[test]
    fn set_user_id_goes_and_set_group_id_with_group_execute_or_outside_the_group() {
        let member = || true;
        let stranger = || false;
        assert_eq!(killed(0o100755, member), None);
        assert_eq!(killed(0o104755, member), Some(0o100755));
        assert_eq!(killed(0o102755, member), Some(0o100755));
        assert_eq!(killed(0o106755, member), Some(0o100755));
        // Set-group-ID without group execute stays for a member of the group only.
        assert_eq!(killed(0o102745, member), None);
        assert_eq!(killed(0o106745, member), Some(0o102745));
        assert_eq!(killed(0o102745, stranger), Some(0o100745));
        // The sticky bit is not touched.
        assert_eq!(killed(0o105755, member), Some(0o101755));
    }

    #[test]
    fn this_process_is_in_its_own_groups() {
        use super::in_group_or_root;
        let pid = std::process::id();
        // SAFETY: getegid and getgroups have no preconditions.
        let gid = unsafe { libc::getegid() };
        assert!(in_group_or_root(pid, 12345, gid, gid));
        assert!(in_group_or_root(pid, 0, gid, gid.wrapping_add(1)));
        assert!(!in_group_or_root(pid, 12345, gid, 4_000_000_000));
    }
}
