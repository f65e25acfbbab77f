"""revfsdirstate's tracking changes and backups (_trackingmixin): add, forget, remove,
copy and the others, kept until hg writes its dirstate, then journaled by the daemon;
the tracking state hg backs up and restores around a transaction or a dirstateguard.

Its methods serve the dirstate interface of hg 6.3 to 7.2 (set_tracked, set_untracked,
copy: the same in each; savebackup, restorebackup: 6.3 only; all_file_names and a
transaction's abort callback: 6.4-7.2)."""

import json

from mercurial.i18n import _
from mercurial.node import bin, nullid
from mercurial import (
    error,
    pathutil,
    pycompat,
    scmutil,
)

from .client import DaemonLost, _paths
from .compat import (
    requires_changing_any,
    requires_changing_files,
    requires_changing_files_or_status,
)

# 6.4-7.2: the tracking state hg rollback restores (all_file_names).
ROLLBACK_FILE = b'dirstate-revfs'


class _trackingmixin(object):
    """revfsdirstate's tracking changes and backups (a base of revfsdirstate,
    dirstate.py, whose state they change)."""

    # -- tracking: kept until write(), then journaled by the daemon ---------------------

    @requires_changing_files
    def set_tracked(self, filename, reset_copy=False):
        """hg 6.3.2's set_tracked: True when filename was not tracked before."""
        if reset_copy:
            self._revfs_queue('copy', filename, None)
        s = self._states([filename])[0]
        if s['wc']:
            return False
        self._check_new_tracked_filename(filename)
        # A file the parent has and hg's dirstate has no entry for becomes added, as hg
        # has it ('readded'); one the parent lacks, plainly added.
        if s['p1']:
            track = 'default'
        else:
            track = 'readded' if s.get('base') else 'added'
        self._revfs_queue('track', filename, track)
        return True

    @requires_changing_files
    def set_untracked(self, filename):
        """hg 6.3.2's set_untracked: True when filename was tracked (its copy source goes
        with it)."""
        s = self._states([filename])[0]
        if not s['wc']:
            return False
        # An added file the parent has anyway loses its entry, as in hg ('dropped':
        # unknown when on disk); one the parent lacks, its addition.
        if s['p1']:
            track = 'removed'
        else:
            track = 'dropped' if s.get('base') else 'default'
        self._revfs_queue('track', filename, track)
        return True

    @requires_changing_any
    def copy(self, source, dest):
        if source == dest:
            return
        if source is not None:
            self._check_sparse(source)
        self._revfs_queue('copy', dest, source)

    @requires_changing_files_or_status
    def set_clean(self, filename, parentfiledata):
        # Clean or not is the daemon's answer from the content; nothing to record.
        pass

    @requires_changing_files_or_status
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
        """6.3: a backup restored (a failed transaction's, a dirstateguard's, a
        rollback's). What hg had not written yet is dropped by _revfs_restore, or by
        invalidate() when there is no backup."""
        if not self._opener.exists(backupname):
            # hg deletes its dirstate when there is no backup (a transaction of 6.4 or
            # later, which makes none, rolled back by 6.3): an empty one, on the null
            # revision, the files as they are.
            empty = {'version': 1, 'parent': nullid.hex(), 'added': [], 'removed': [], 'copies': []}
            self._revfs_restore(empty, backupname, force_parent=True)
            self.invalidate()
            return
        try:
            snap = json.loads(self._opener.read(backupname))
        except (IOError, OSError, ValueError):
            self.invalidate()
            return
        self._revfs_restore(snap, backupname)
        self._opener.unlink(backupname)
        self.invalidate()

    def _revfs_restore(self, snap, name, force_parent=False):
        """Brings the daemon back to the tracking state `snap` (and its parents), the files
        as they are, as hg restores its dirstate file."""
        self._revfs_pending = []
        self._revfs_dropparent()
        if snap.get('version') != 1:
            raise error.Abort(_(b'revfs: cannot restore the dirstate backup %s') % name)
        then = (bin(snap['parent']), bin(snap.get('p2', nullid.hex())))
        if then != self._pl or self._revfs_provisional or force_parent:
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

    # -- 6.4-7.2: no backups; a transaction's abort callback and all_file_names --------

    def _revfs_attach(self, tr):
        """A transaction opens (6.4-7.2): the tracking state and parents of now are what
        its abort brings the daemon back to (6.3 took the journal.dirstate backup), and
        what hg rollback restores (all_file_names)."""
        txn = {'snap': self._revfs_snapshot(), 'touched': False}
        self._revfs_txn = txn

        def aborted(tr):
            if self._revfs_txn is txn:
                self._revfs_txn = None
            if 'invalidate' in vars(self):
                # shelve and unshelve abort their transaction keeping the dirstate they
                # made, then write it (write(None) confirms it with the daemon).
                return
            if txn['touched']:
                try:
                    self._revfs_restore(txn['snap'], b'(transaction)', force_parent=True)
                except DaemonLost:
                    # A daemon that comes back drops what it held provisionally, as hg
                    # rolls back; the abort goes on (its journal must be played back).
                    self._revfs_pending = []
                    self._revfs_dropparent()

        def closed(tr):
            if self._revfs_txn is txn:
                self._revfs_txn = None

        # Before hg's own dirstate-invalidate callback (abort callbacks run in the order
        # of their names), while the daemon's parent is still the provisional one.
        tr.addabort(b'dirstate-0-revfs', aborted)
        tr.addpostclose(b'dirstate-0-revfs', closed)

    def _revfs_touched(self):
        """Something was sent to the daemon inside the transaction under way."""
        txn = getattr(self, '_revfs_txn', None)
        if txn is not None:
            txn['touched'] = True

    def all_file_names(self):
        """6.4-7.2: the files hg backs up for hg rollback when a transaction closes: the
        branch, and the tracking state of when it opened (a name starting with
        `dirstate`, which rollback restores only when the parent is gone)."""
        txn = getattr(self, '_revfs_txn', None)
        snap = txn['snap'] if txn is not None else self._revfs_snapshot()
        data = json.dumps(snap, sort_keys=True).encode('ascii')
        self._opener.write(ROLLBACK_FILE, data, atomictemp=True)
        return (b'branch', ROLLBACK_FILE)

    def _revfs_rolledback(self):
        """6.4-7.2, after hg rollback's playback: when the daemon's parent is gone from the
        changelog, hg restored the dirstate of before the transaction: the daemon comes
        back to it."""
        repo = self._reporef()
        if repo is None:
            return
        p1, p2 = self._pl
        has = repo.unfiltered().changelog.index.has_node
        if all(p == nullid or has(p) for p in (p1, p2)):
            return
        try:
            snap = json.loads(self._opener.read(ROLLBACK_FILE))
        except (IOError, OSError, ValueError):
            return
        self._revfs_restore(snap, ROLLBACK_FILE, force_parent=True)

    def clearbackup(self, tr, backupname):
        self._opener.tryunlink(backupname)
