"""revfsdirstate, the dirstate of a mount, answered by its daemon: its state (what hg
has not written yet, the daemon's last answers), the requests that send hg's changes
and ask the daemon what it knows, and the reads; its status and walk, its tracking
changes and its parent changes are in walk.py, tracking.py and parents.py, its bases.
Also hg add's case-collision check (_casecollisionauditor), asked of the daemon.

Serves the dirstate interface and scmutil.casecollisionauditor of hg 6.3 to 7.2 (the
change scopes of 6.4 and later are the base class's; compat.py names what differs)."""

import os

from mercurial.i18n import _
from mercurial.node import bin, nullid
from mercurial import (
    dirstate as dirstatemod,
    encoding,
    error,
    util,
)

from .client import (
    PROTOCOL,
    _path,
    _paths,
    client,
)
from .compat import DirstateItem, in_parent_change
from .parents import _parentsmixin
from .tracking import _trackingmixin
from .walk import _statusmixin


# Its bases hold its status and walk (walk.py), its tracking changes and backups
# (tracking.py) and its parent changes (parents.py); no name is in two of them.
class revfsdirstate(
    _statusmixin, _trackingmixin, _parentsmixin, dirstatemod.dirstate
):
    """hg's dirstate, answered by the daemon (hg 6.3.2's dirstate interface)."""

    # A mount is case-sensitive: never probe it (hg stats .HG, a lookup the daemon would
    # have to answer even when hg only reads).
    _checkcase = False

    def __init__(self, reporef, *args):
        super(revfsdirstate, self).__init__(*args)
        self._reporef = reporef
        self._revfs = client(
            self._ui, self._root, os.path.dirname(reporef().sharedpath)
        )
        # Tracking changes were sent inside a transaction (the daemon journals them once
        # told it is over: confirm_tracking). Kept across invalidate(): the daemon has them.
        self._revfs_tentative = False
        # 6.4-7.2: the transaction under way's snapshot (tracking.py, _revfs_attach), and
        # whether hg rollback is under way (_revfs_rolledback). Kept across invalidate().
        self._revfs_txn = None
        self._revfs_rollingback = False
        self._revfs_reset()

    def _revfs_reset(self):
        self._revfs_sending = False
        # _revfs_status's scope and its last answer (see there).
        self._revfs_scope = False
        self._revfs_lastfull = None
        self._revfs_parent = None
        self._revfs_p2 = nullid
        self._revfs_states = {}
        self._revfs_changes = None
        # Tracking changes not yet sent, in order: ('track', path, how) and
        # ('copy', dest, source or None). Dropped by invalidate(), as hg drops a
        # dirstate it did not write.
        self._revfs_pending = []
        # The daemon's parent is provisional: sent (set_parent or update) from inside a
        # transaction, maybe a changeset of it; confirmed once the transaction is closed,
        # sent back to the backup's when it is rolled back.
        self._revfs_provisional = False
        self._revfs_dropparent()

    def _revfs_dropparent(self):
        # A parent set by hg (setparents, rebuild) and hg's word on the files whose state
        # changed with it, (tracked in the working copy, in the new parent) by path, until
        # written; and how many pending changes came before the parent changed (the later
        # ones are sent after set_parent, which drops the copies of the files it names:
        # hg's movedirstate sets them again).
        self._revfs_newparent = None
        self._revfs_newp2 = nullid
        self._revfs_files = {}
        self._revfs_mark = None

    def _revfs_moveparent(self, node):
        if self._revfs_newparent is None:
            self._revfs_mark = len(self._revfs_pending)
        self._revfs_newparent = node
        self._revfs_states = {}
        self._revfs_changes = None
        self._dirty = True

    def _revfs_queue(self, op, path, arg):
        self._revfs_pending.append((op, path, arg))
        self._revfs_states.pop(path, None)
        self._revfs_changes = None
        self._dirty = True

    def _revfs_intransaction(self):
        repo = self._reporef()
        tr = repo.currenttransaction() if repo is not None else None
        return tr is not None and tr.running()

    def _revfs_confirmtracking(self):
        """The transaction inside which tracking changes were sent is over (closed, or
        rolled back and the dirstate restored): the daemon journals them as they stand."""
        if self._revfs_tentative and not self._revfs_intransaction():
            self._revfs.request({'cmd': 'confirm_tracking'})
            self._revfs_tentative = False

    def _revfs_transaction(self):
        """The transaction under way, its uncommitted changesets written where others can
        read them (hg's pending changelog, as for its pretxn hooks); None without one."""
        repo = self._reporef()
        tr = repo.currenttransaction() if repo is not None else None
        if tr is None or not tr.running():
            return None
        tr.writepending()
        return tr

    def _revfs_flush(self, asking=True):
        """Sends the pending tracking changes, in order, consecutive ones of a kind in one
        request: the daemon journals them as revfs add, forget and copy do. When hg is
        about to ask the daemon something (`asking`) after it moved the parent inside a
        transaction it has not closed (shelve and unshelve commit, update and roll back),
        the daemon moves to the parent first, read from the pending changelog: its answers
        are then about hg's parent. Not while hg is still changing the parent (inside its
        parentchange, where it only asks about the working copy's own tracking)."""
        if (
            asking
            and self._revfs_newparent is not None
            and self._revfs_newparent != self._revfs_parent
            and not self._revfs_sending
            and not in_parent_change(self)
            and self._revfs_transaction() is not None
        ):
            self._revfs_sendparent(pending=True)
            return
        if (
            self._revfs_newparent is not None
            and self._revfs_newparent == self._revfs_parent
            and not self._revfs_sending
        ):
            # Only the second parent or the files' state changed (a merge that rebase or
            # graft ends by dropping its second parent, then commits): nothing new for the
            # daemon to read, so it hears of it before it is asked anything (read from the
            # pending changelog still if it was sent so).
            self._revfs_sendparent(pending=self._revfs_provisional)
            return
        if self._revfs_newparent is not None and self._revfs_mark is not None:
            pending = self._revfs_pending[: self._revfs_mark]
            self._revfs_pending = self._revfs_pending[self._revfs_mark :]
            self._revfs_mark = 0
        else:
            pending, self._revfs_pending = self._revfs_pending, []
        # Inside a transaction the daemon keeps them out of its journal until the
        # transaction is over: a daemon killed meanwhile comes back with the tracking of
        # before, as hg's rollback restores its dirstate backup.
        txn = bool(pending) and self._revfs_intransaction()
        if txn:
            self._revfs_tentative = True
            self._revfs_touched()
        i = 0
        while i < len(pending):
            op, _p, arg = pending[i]
            j = i
            while j < len(pending) and pending[j][0] == op and (
                op == 'copy' or pending[j][2] == arg
            ):
                j += 1
            group = pending[i:j]
            if op == 'track':
                self._revfs.request(
                    {
                        'cmd': 'track',
                        'paths': _paths(p for _o, p, _a in group),
                        'track': arg,
                        'txn': txn,
                    }
                )
            else:
                self._revfs.request(
                    {
                        'cmd': 'copy',
                        'copies': [
                            [list(d), None if s is None else list(s)]
                            for _o, d, s in group
                        ],
                        'txn': txn,
                    }
                )
            i = j
        if pending:
            self._revfs_states = {}
            self._revfs_changes = None

    # -- what the daemon knows -------------------------------------------------------

    def _revfs_status(self, clean=False, ignored=False, unknown=False, warn=True, dirs=None):
        """The daemon's status: (letter, path) entries and copies. With dirs (a list), the
        directories that may be empty once unknown and ignored files are gone are added
        to it (protocol 6).

        Inside an update over local changes (_update's scope, where nothing writes to the
        working copy until the update's actions), the first status asks for unknown and
        ignored files too and answers the others: hg asks three times (its dirty check,
        the working manifest, the split of the actions)."""
        self._revfs_flush()
        reuse = dirs is None and not clean and self._revfs_scope
        last = self._revfs_lastfull
        if reuse and last is not None and last[3] is self._revfs_changes:
            entries, copies, warnings = last[0], last[1], last[2]
        else:
            req = {
                'cmd': 'status',
                'clean': bool(clean),
                'ignored': bool(ignored or reuse),
                'unknown': bool(unknown or reuse),
            }
            if dirs is not None:
                req['dirs'] = True
            if req['ignored'] or req['unknown']:
                # This command's ignore files (--config, HGRCPATH), not the daemon's.
                req['ignore_files'] = self._revfs_ignorefiles()
            resp = self._revfs.request(req)
            if resp.get('reply') != 'status':
                raise error.Abort(b'revfs: unexpected answer from the daemon')
            warnings = resp.get('warnings', [])
            entries = [(l, _path(p)) for l, p in resp['entries']]
            copies = {_path(d): _path(s) for d, s in resp['copies']}
            if dirs is not None:
                dirs.extend(_path(d) for d in resp.get('dirs', []))
        if warnings and warn and (ignored or unknown):
            # hg's own reading of the ignore files prints its warnings, once, as in a
            # clone (its matcher is cached until the dirstate is invalidated).
            self._ignore
        # What _changes() asks for, known now: hg commit needs status, its transaction's
        # backup and the copy sources, each of which asked the daemon again (45 ms for a
        # thousand changed files).
        self._revfs_changes = (dict((p, l) for l, p in entries if l in 'MAR!'), copies)
        if reuse:
            self._revfs_lastfull = (entries, copies, warnings, self._revfs_changes)
            entries = [
                (l, p)
                for l, p in entries
                if not (l == '?' and not unknown or l == 'I' and not ignored)
            ]
        return entries, copies

    def _revfs_ignorefiles(self):
        """The ignore files ui.ignore and ui.ignore.* name (hg's _ignorefiles after the
        root .hgignore, in all of 6.3 to 7.2), relative to the root when inside it."""
        files = []
        for name, path in self._ui.configitems(b'ui'):
            if name == b'ignore' or name.startswith(b'ignore.'):
                p = os.path.join(self._rootdir, util.expandpath(path))
                if p.startswith(self._rootdir):
                    p = p[len(self._rootdir):]
                files.append(list(p))
        return files

    def _changes(self):
        """The tracked files that are not clean, and the copies (asked once)."""
        if self._revfs_changes is None or self._revfs_changes[0] is None:
            self._revfs_status()  # sets it
        return self._revfs_changes

    def _copies(self):
        """The copy sources, by destination: asked alone (protocol 7) when no status is
        known (hg's setparents asks for them after an update's actions)."""
        if self._revfs_changes is None:
            self._revfs_flush()
            resp = self._revfs.request({'cmd': 'copies'})
            if resp.get('reply') != 'copies':
                raise error.Abort(b'revfs: unexpected answer from the daemon')
            copies = {_path(d): _path(s) for d, s in resp['copies']}
            self._revfs_changes = (None, copies)
        return self._revfs_changes[1]

    def _states(self, paths):
        self._revfs_flush()
        want = [p for p in paths if p not in self._revfs_states]
        if want:
            resp = self._revfs.request({'cmd': 'lookup', 'paths': _paths(want)})
            for p, e in zip(want, resp['entries']):
                self._revfs_states[p] = e
        return [self._revfs_states[p] for p in paths]

    def _tracked(self):
        """Every file of the dirstate (tracked, or removed) with its status letter."""
        entries, copies = self._revfs_status(clean=True)
        return [(l, p) for l, p in entries if l in 'CMAR!']

    # -- reads -----------------------------------------------------------------------

    @property
    def _pl(self):
        if self._revfs_newparent is not None:
            return self._revfs_newparent, self._revfs_newp2
        if self._revfs_parent is None:
            info = self._revfs.request({'cmd': 'info'})
            if info.get('protocol', 1) < PROTOCOL:
                raise error.Abort(
                    _(b'the revfs daemon of %s speaks protocol %d; this extension needs %d')
                    % (self._root, info.get('protocol', 1), PROTOCOL),
                    hint=_(b'unmount and mount again with this revfs'),
                )
            self._revfs_parent = bin(info['node'].encode('ascii'))
            p2 = info.get('p2')
            self._revfs_p2 = bin(p2.encode('ascii')) if p2 else nullid
        return self._revfs_parent, self._revfs_p2

    @dirstatemod.repocache(b'branch')
    def _branch(self):
        try:
            return self._opener.read(b'branch').strip() or b'default'
        except FileNotFoundError:
            repo = self._reporef()
            p1 = self._pl[0]
            if repo is None or p1 == nullid:
                return b'default'
            return repo.unfiltered().changelog.changelogrevision(p1).branchinfo[0]

    def hasdir(self, d):
        return self._states([d])[0]['dir']

    def get_entry(self, path):
        if self._revfs_newparent is not None and path in self._revfs_files:
            # Under the parent hg is moving to (the daemon does not know it yet).
            wc, p1, p2 = self._revfs_files[path]
            if not (wc or p1 or p2):
                return DirstateItem()
            return DirstateItem(wc_tracked=wc, p1_tracked=p1, p2_info=p2)
        s = self._states([path])[0]
        p2 = s.get('p2', False)
        if not (s['p1'] or s['wc'] or p2):
            return DirstateItem()
        return DirstateItem(wc_tracked=s['wc'], p1_tracked=s['p1'], p2_info=p2)

    def __contains__(self, key):
        return self.get_entry(key).any_tracked

    def __iter__(self):
        return iter(sorted(p for l, p in self._tracked()))

    def items(self):
        paths = sorted(p for l, p in self._tracked())
        self._states(paths)  # one request for all
        return [(p, self.get_entry(p)) for p in paths]

    iteritems = items

    def copied(self, file):
        return self._copies().get(file, None)

    def copies(self):
        return dict(self._copies())

    def matches(self, match):
        files = [p for l, p in self._tracked()]
        if match.always():
            return files
        return [f for f in files if match(f)]

    def identity(self):
        return (b'revfs', self._revfs_parent)

    def invalidate(self):
        super(revfsdirstate, self).invalidate()
        self._revfs_reset()
        if self._revfs_rollingback:
            self._revfs_rolledback()


def _casecollisionauditor(orig, ui, abort, ds):
    if isinstance(ds, revfsdirstate):
        return _mountauditor(ui, abort, ds)
    return orig(ui, abort, ds)


class _mountauditor(object):
    """hg 6.3.2's scmutil.casecollisionauditor without folding every tracked path: the
    daemon names the case variants of each new file."""

    def __init__(self, ui, abort, ds):
        self._ui, self._abort, self._ds = ui, abort, ds
        self._lowered = set()
        self._newfiles = set()

    def __call__(self, f):
        if f in self._newfiles:
            return
        fl = encoding.lower(f)
        if (fl in self._lowered or self._ds._revfs_case_variants(f)) and f not in self._ds:
            msg = _(b'possible case-folding collision for %s') % f
            if self._abort:
                raise error.StateError(msg)
            self._ui.warn(_(b"warning: %s\n") % msg)
        self._lowered.add(fl)
        self._newfiles.add(f)
