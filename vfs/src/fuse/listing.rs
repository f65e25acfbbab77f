//! Directory listings as the kernel asks for them: READDIR (names), and READDIRPLUS, whose
//! entries carry their attributes while a program reads files (`readers.rs`) and are names
//! alone otherwise (node id 0: the kernel makes no entry), and the control directory's.

use crate::wc::EntryType;
use fuser::{Generation, INodeNo, ReplyDirectory, ReplyDirectoryPlus, Request};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use super::reply::*;
use super::revfs::RevFs;
use super::synthetic::*;

impl RevFs {
    pub(super) fn list(&self, req: &Request, ino: INodeNo, offset: u64, mut reply: ReplyDirectory) {
        if ino.0 == CONTROL_DIR_INO {
            for (i, (ino, kind, name)) in control_entries()
                .into_iter()
                .enumerate()
                .skip(offset as usize)
            {
                if reply.add(INodeNo(ino), i as u64 + 1, kind, name) {
                    break;
                }
            }
            return reply.ok();
        }
        let (parent, children) = match self.wc.readdir(ino.0) {
            Ok(x) => x,
            Err(e) => return reply.error(errno("readdir", &e)),
        };
        let dots = [
            (ino.0, EntryType::Dir, &b"."[..]),
            (parent, EntryType::Dir, &b".."[..]),
        ];
        let all = dots
            .into_iter()
            .chain(children.iter().map(|(n, i, t)| (*i, *t, &n[..])));
        for (i, (child, t, name)) in all.enumerate().skip(offset as usize) {
            if reply.add(
                INodeNo(child),
                i as u64 + 1,
                file_type(t),
                OsStr::from_bytes(name),
            ) {
                break;
            }
        }
        self.listed(req, ino.0, offset);
        reply.ok()
    }

    pub(super) fn list_plus(
        &self,
        req: &Request,
        ino: INodeNo,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        if ino.0 == CONTROL_DIR_INO {
            // Names only (node id 0), as readdir gives them.
            for (i, (child, kind, name)) in control_entries()
                .into_iter()
                .enumerate()
                .skip(offset as usize)
            {
                if reply.add(
                    INodeNo(0),
                    i as u64 + 1,
                    name,
                    &TTL,
                    &name_only(child, kind),
                    Generation(0),
                ) {
                    break;
                }
            }
            return reply.ok();
        }
        let (parent, children) = match self.wc.readdir(ino.0) {
            Ok(x) => x,
            Err(e) => return reply.error(errno("readdirplus", &e)),
        };
        // Entries with attributes only while a program reads files (`readers.rs`): each is
        // a lookup (the kernel counts it as one) and thaws the entry. Otherwise node id 0:
        // the kernel takes the name and makes no entry, as for a plain readdir.
        let plus = self.readers.active();
        let dots = [
            (ino.0, EntryType::Dir, &b"."[..]),
            (parent, EntryType::Dir, &b".."[..]),
        ];
        let all = dots
            .into_iter()
            .chain(children.iter().map(|(n, i, t)| (*i, *t, &n[..])));
        for (i, (child, t, name)) in all.enumerate().skip(offset as usize) {
            // A name the events helper is about to remove or make gets no entry
            // (`events.rs`).
            let looked_up = if plus && i >= 2 && !self.events.being_told(ino.0, name) {
                match self.wc.lookup(ino.0, name) {
                    Ok(Some(a)) => Some(a),
                    // Gone since the listing.
                    Ok(None) => continue,
                    // Its attributes cannot be had (its filelog is missing or damaged):
                    // the name alone, as a plain listing gives it. Its own lookup fails
                    // then, not the whole listing.
                    Err(_) => None,
                }
            } else {
                None
            };
            let full = match &looked_up {
                Some(a) => reply.add(
                    INodeNo(a.ino),
                    i as u64 + 1,
                    OsStr::from_bytes(name),
                    &TTL,
                    &self.file_attr(a),
                    Generation(0),
                ),
                None => reply.add(
                    INodeNo(0),
                    i as u64 + 1,
                    OsStr::from_bytes(name),
                    &TTL,
                    &name_only(child, file_type(t)),
                    Generation(0),
                ),
            };
            if full {
                if let Some(a) = looked_up {
                    self.wc.forget(a.ino, 1);
                }
                break;
            }
        }
        // A program reading files lists the directory it reads next.
        self.listed(req, ino.0, offset);
        reply.ok()
    }
}
