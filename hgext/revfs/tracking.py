"""revfsdirstate's tracking changes and backups (_trackingmixin): add, forget, remove,
copy and the others, kept until hg writes its dirstate, then journaled by the daemon;
the tracking state hg backs up and restores around a transaction or a dirstateguard.

Its methods serve hg 6.3.2's dirstate interface (set_tracked, set_untracked, copy,
savebackup, restorebackup, ...): 6.3.x."""

import json

from mercurial.i18n import _
from mercurial.node import bin, nullid
from mercurial import (
    error,
    pathutil,
    pycompat,
    scmutil,
)

from .client import _paths


class _trackingmixin(object):
    """revfsdirstate's tracking changes and backups (a base of revfsdirstate,
    dirstate.py, whose state they change)."""

    # -- tracking: kept until write(), then journaled by the daemon ---------------------

    def set_tracked(self, filename, reset_copy=False):
        """hg 6.3.2's set_tracked: True when filename was not tracked before."""
        if reset_copy:
            self._revfs_queue('copy', filename, None)
        s = self._states([filename])[0]
        if s['wc']:
            return False
        self._check_new_tracked_filename(filename)
        self._revfs_queue('track', filename, 'default' if s['p1'] else 'added')
        return True

    def set_untracked(self, filename):
        """hg 6.3.2's set_untracked: True when filename was tracked (its copy source goes
        with it)."""
        s = self._states([filename])[0]
        if not s['wc']:
            return False
        self._revfs_queue('track', filename, 'removed' if s['p1'] else 'default')
        return True

    def copy(self, source, dest):
        if source == dest:
            return
        if source is not None:
            self._check_sparse(source)
        self._revfs_queue('copy', dest, source)

    def set_clean(self, filename, parentfiledata):
        # Clean or not is the daemon's answer from the content; nothing to record.
        pass

    def set_possibly_dirty(self, filename):
        pass

    def _check_new_tracked_filename(self, filename):
        # hg 6.3.2's checks, asked of the daemon (a directory of tracked files cannot
        # become a file, nor a tracked file a directory).
        scmutil.checkfilename(filename)
        dirs = list(pathutil.finddirs(filename))
        states = self._states([filename] + dirs)
        if states[0]['dir']:
            raise error.Abort(
                _(b'directory %r already in dirstate') % pycompat.bytestr(filename)
            )
        for d, s in zip(dirs, states[1:]):
            if s['dir']:
                break
            if s['wc']:
                raise error.Abort(
                    _(b'file %r in dirstate clashes with %r')
                    % (pycompat.bytestr(d), pycompat.bytestr(filename))
                )
        self._check_sparse(filename)

    def _revfs_case_variants(self, path):
        self._revfs_flush()
        resp = self._revfs.request({'cmd': 'case_variants', 'paths': _paths([path])})
        return resp['entries'][0]

    # -- backups: what hg restores when a transaction or a dirstateguard fails ---------

    def _revfs_snapshot(self):
        """The tracking state as hg would back it up: the added and removed files and the
        copies (the parent cannot change yet)."""
        changes, copies = self._changes()
        entries = [(l, p) for p, l in changes.items()]
        maybe = [p for l, p in entries if l == '!']
        added = {p for l, p in entries if l == 'A'}
        added.update(p for p, s in zip(maybe, self._states(maybe)) if s['wc'] and not s['p1'])
        return {
            'version': 1,
            'parent': self._pl[0].hex(),
            'p2': self._pl[1].hex(),
            'added': sorted(p.decode('utf-8', 'surrogateescape') for p in added),
            'removed': sorted(
                p.decode('utf-8', 'surrogateescape') for l, p in entries if l == 'R'
            ),
            'copies': sorted(
                [d.decode('utf-8', 'surrogateescape'), s.decode('utf-8', 'surrogateescape')]
                for d, s in copies.items()
            ),
        }

    def savebackup(self, tr, backupname):
        snap = json.dumps(self._revfs_snapshot(), sort_keys=True).encode('ascii')
        self._opener.write(backupname, snap, atomictemp=True)

    def restorebackup(self, tr, backupname):
        self._revfs_pending = []
        self._revfs_dropparent()
        try:
            snap = json.loads(self._opener.read(backupname))
        except (IOError, OSError, ValueError):
            self.invalidate()
            return
        if snap.get('version') != 1:
            raise error.Abort(
                _(b'revfs: cannot restore the dirstate backup %s') % backupname
            )
        then = (bin(snap['parent']), bin(snap.get('p2', nullid.hex())))
        if then != self._pl or self._revfs_provisional:
            # A transaction rolled back after hg moved the parent inside it (the daemon
            # has it as provisional): back to the parents of the backup, the files as they
            # are, as hg restores its dirstate file.
            self._revfs_newparent, self._revfs_newp2 = then
            self._revfs_sendparent()
        self._revfs_provisional = False
        now = self._revfs_snapshot()
        enc = lambda p: p.encode('utf-8', 'surrogateescape')
        want = {}
        for p in now['added'] + now['removed']:
            want[p] = 'default'
        for p in snap['added']:
            want[p] = 'added'
        for p in snap['removed']:
            want[p] = 'removed'
        have = dict((p, 'added') for p in now['added'])
        have.update((p, 'removed') for p in now['removed'])
        for p in sorted(want):
            if have.get(p, 'default') != want[p]:
                self._revfs_pending.append(('track', enc(p), want[p]))
        copies_now, copies_then = dict(map(tuple, now['copies'])), dict(
            map(tuple, snap['copies'])
        )
        for d in sorted(set(copies_now) | set(copies_then)):
            if copies_now.get(d) != copies_then.get(d):
                s = copies_then.get(d)
                self._revfs_pending.append(('copy', enc(d), None if s is None else enc(s)))
        self._revfs_flush(asking=False)
        self._revfs_confirmtracking()
        self._opener.unlink(backupname)
        self.invalidate()

    def clearbackup(self, tr, backupname):
        self._opener.tryunlink(backupname)
