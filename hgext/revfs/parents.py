"""revfsdirstate's parent changes (_parentsmixin): the parents and the files' state hg
sets (commit, amend, strip --keep, merges, resolve), kept until hg writes its dirstate,
then sent to the daemon (set_parent), after the transaction is final; write().

Its methods serve the dirstate interface of hg 6.3 to 7.2 (setparents, update_file,
update_file_p1, rebuild, write: the same signatures in each)."""

from mercurial.i18n import _
from mercurial.node import hex, nullid
from mercurial import error

from .compat import CHANGE_SCOPES, in_parent_change, requires_changing_parents
from .client import (
    DaemonLost,
    _lostparent,
    unsupported,
)


class _parentsmixin(object):
    """revfsdirstate's parent changes (a base of revfsdirstate, dirstate.py, whose
    state they change)."""

    # -- parents: a new parent with the files kept (commit, amend, strip --keep) --------

    def _refuse(self, *args, **kwargs):
        raise error.Abort(
            _(b'hg cannot do this in a revfs mount yet'),
            hint=_(b'use the revfs command of the same name, or hg in a clone'),
        )

    clear = requires_changing_parents(_refuse)

    @requires_changing_parents
    def update_file_p1(self, filename, p1_tracked):
        """hg 6.3.2's update_file_p1 (movedirstate: uncommit, unamend, split, fix,
        shelve --keep): the file keeps its working-copy tracking under the new parent."""
        if self._revfs_newparent is None or not in_parent_change(self):
            raise error.ProgrammingError(b'update_file_p1 outside of a parent change')
        wc = bool(self.get_entry(filename).tracked)
        self._revfs_files[filename] = (wc, bool(p1_tracked), False)
        self._revfs_states.pop(filename, None)
        self._revfs_changes = None
        self._dirty = True

    @requires_changing_parents
    def setparents(self, p1, p2=None):
        if p2 is None:
            p2 = nullid
        if not in_parent_change(self):
            raise ValueError(
                b"cannot set dirstate parent outside of "
                b"dirstate.parentchange context manager"
            )
        oldp2 = self._pl[1]
        copies = {}
        if oldp2 != nullid and p2 == nullid:
            # hg drops the merge information of the merge's files and their copy sources,
            # and returns those (hg 6.3.2's dirstatemap.setparents; localrepository's
            # records them again for files the new parent lacks, as graft and rebase do).
            for f in self._revfs_mergedfiles():
                source = self.copied(f)
                if source:
                    copies[f] = source
            for f in sorted(copies):
                self._revfs_queue('copy', f, None)
        self._revfs_moveparent(p1)
        self._revfs_newp2 = p2
        return copies

    def _revfs_mergedfiles(self):
        """The files hg marked as merged or taken from the second parent (p2_info)."""
        changed = sorted(p for p, l in self._changes()[0].items() if l in 'M!')
        return [p for p, s in zip(changed, self._states(changed)) if s.get('p2')]

    @requires_changing_parents
    def update_file(
        self,
        filename,
        wc_tracked,
        p1_tracked,
        p2_info=False,
        possibly_dirty=False,
        parentfiledata=None,
    ):
        # Sent with the parents when hg writes its dirstate (hg resolve sets no parent: the
        # current ones).
        self._revfs_files[filename] = (bool(wc_tracked), bool(p1_tracked), bool(p2_info))
        self._revfs_states.pop(filename, None)
        self._revfs_changes = None
        self._dirty = True

    @requires_changing_parents
    def rebuild(self, parent, allfiles, changedfiles=None):
        if changedfiles is None:
            # debugrebuilddirstate: the whole manifest; the daemon's state needs no rebuild.
            raise unsupported(b'debugrebuilddirstate')
        self._revfs_moveparent(parent)
        for f in changedfiles:
            self._revfs_files[f] = (f in allfiles, f in allfiles, False)

    def _revfs_followed(self, node):
        """The daemon made node the parent itself (an update): nothing to send."""
        self._revfs_dropparent()
        self._revfs_parent = node
        self._revfs_p2 = nullid
        self._revfs_states = {}
        self._revfs_changes = None

    def _revfs_sendparent(self, pending=False):
        """The daemon makes the parent hg set its own, the files kept as they are.
        `pending`: the parent may be a changeset of the transaction under way."""
        node, p2, files = self._revfs_newparent, self._revfs_newp2, self._revfs_files
        if node is None:
            return
        if self._revfs_sending:
            return
        self._revfs_sending = True
        try:
            self._revfs_sendparent1(node, p2, files, pending)
        finally:
            self._revfs_sending = False

    def _revfs_confirmparent(self):
        """The transaction inside which the parent was sent is closed: the daemon reads it
        again from the committed changelog (and journals it)."""
        if self._revfs_provisional and self._revfs_newparent is None:
            p1, p2 = self._pl
            self._revfs_newparent, self._revfs_newp2 = p1, p2
            self._revfs_sendparent()

    def _revfs_sendparent1(self, node, p2, files, pending):
        # The tracking changes made before the parent moved, the parent, then those made
        # after it (under the new parent).
        self._revfs_flush(asking=False)
        self._revfs.request(
            {
                'cmd': 'set_parent',
                'pending': pending,
                'node': hex(node).decode('ascii'),
                'files': [[list(f), wc] for f, (wc, _p1, _p2) in sorted(files.items())],
                'p2': None if p2 == nullid else hex(p2).decode('ascii'),
                'from_p2': [list(f) for f, (_wc, _p1, p2i) in sorted(files.items()) if p2i],
                'in_p1': [list(f) for f, (_wc, p1, _p2) in sorted(files.items()) if p1],
            }
        )
        self._revfs_dropparent()
        self._revfs_parent = node
        self._revfs_p2 = p2
        self._revfs_provisional = pending
        if pending:
            self._revfs_touched()
        self._revfs_flush(asking=False)
        self._revfs_states = {}
        self._revfs_changes = None

    def write(self, tr):
        try:
            self._revfs_write(tr)
        finally:
            # 6.4-7.2: hg refuses a transaction, a status scope, while the dirstate is
            # dirty.
            self._dirty = False

    def _revfs_write(self, tr):
        if self._revfs_newparent is None and self._revfs_files:
            # update_file without a parent move (hg resolve): sent with the parents as they
            # are.
            p1, p2 = self._pl
            self._revfs_moveparent(p1)
            self._revfs_newp2 = p2
        self._revfs_flush(asking=False)
        if self._revfs_newparent is not None or (tr and self._revfs_provisional):
            if tr:
                # After the transaction's finalization, when the changelog holds the new
                # revision for the daemon to read (hg writes its dirstate there too).
                def generate(f):
                    node = self._revfs_newparent or self._pl[0]
                    if getattr(f, '_atomictempfile__name', b'').endswith(b'.pending'):
                        # tr.writepending (before pretxn hooks, or ours): the parent is
                        # still a changeset of the open transaction.
                        self._revfs_sendparent(pending=True)
                        f.write(hex(node) + b'\n')
                        return
                    try:
                        if self._revfs_newparent is None:
                            self._revfs_confirmparent()
                        else:
                            self._revfs_sendparent()
                    except DaemonLost as e:
                        # The daemon may have moved the parent before it died: the
                        # changeset stays (a rollback could leave the parent on a revision
                        # that is gone), and hg stops once the transaction is closed, as
                        # in a clone interrupted between its commit and its dirstate.
                        self._revfs_dropparent()
                        self._revfs_pending = []
                        # Python unbinds `e` when this block ends: the callback keeps
                        # its own reference.
                        lost = e
                        tr.addpostclose(
                            b'revfs-lost', lambda tr: _lostparent(self._ui, node, lost)
                        )
                    f.write(hex(node) + b'\n')

                tr.addfilegenerator(
                    b'revfs-dirstate',
                    (b'revfs-parent',),
                    generate,
                    location=b'plain',
                    post_finalize=True,
                )
            else:
                self._revfs_sendparent()
                self._revfs_confirmparent()
        if not tr:
            # After a transaction closed (localrepository's releasefn writes with None).
            self._revfs_confirmtracking()
            if CHANGE_SCOPES and self._revfs_provisional and not self._revfs_intransaction():
                # 6.4-7.2: after a transaction aborted keeping the dirstate (shelve's).
                self._revfs_confirmparent()
