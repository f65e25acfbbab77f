"""hg's updates in a mount: the wrappers of merge._update and merge.applyupdates (the
daemon's in-place update, whole or for the files without local changes), of
mergestate._restore_backup, and of repair.strip (which must not take the working copy's
parent away).

Written against Mercurial 6.3.2's merge, mergestate and repair, the same in 6.3-7.2 but
for the names compat.py gives (7.2: merge_utils.update's apply_updates, UpdateResult)."""

from mercurial.i18n import _
from mercurial.node import nullid
from mercurial import (
    encoding,
    error,
    obsutil,
)

from .client import (
    _inmount,
    _paths,
    unsupported,
)
from . import compat
from .compat import (
    mergemod,
    mergestatemod,
)


def _update(
    orig,
    repo,
    node,
    branchmerge,
    force,
    ancestor=None,
    mergeancestor=False,
    labels=None,
    matcher=None,
    mergeforce=False,
    updatedirstate=True,
    updatecheck=None,
    wc=None,
):
    """hg 6.3.2's merge._update: a clean update (or one whose local changes are not in
    the way) is the daemon's in-place update. One over local changes is hg's, which merges
    them (and writes its conflicts) through the mount, while the daemon updates the files
    nobody changed (_applyupdates). Branch merges are hg's own."""
    args = (repo, node, branchmerge, force)
    kwargs = dict(
        ancestor=ancestor,
        mergeancestor=mergeancestor,
        labels=labels,
        matcher=matcher,
        mergeforce=mergeforce,
        updatedirstate=updatedirstate,
        updatecheck=updatecheck,
        wc=wc,
    )
    if not _inmount(repo) or (wc is not None and wc.isinmemory()):
        return orig(*args, **kwargs)
    partial = not (matcher is None or matcher.always())
    if branchmerge or ancestor is not None or mergeforce or partial or not updatedirstate:
        # A merge (merge, graft, rebase, backout, unshelve), or an update of some files
        # only: hg's own, writing through the mount; the parents reach the daemon when hg
        # writes its dirstate.
        return orig(*args, **kwargs)
    with repo.wlock():
        ds = repo.dirstate
        # Until the update's actions nothing writes to the working copy (a preupdate hook
        # might): hg's statuses are answered by one (_revfs_status).
        ds._revfs_scope = not _hashook(repo.ui, b'preupdate')
        ds._revfs_lastfull = None
        try:
            stats = _daemonupdate(repo, repo[node], force, updatecheck)
            if stats is not None:
                return stats
            # Local changes (or untracked files) in the way: hg's merge, with its checks,
            # messages and conflicts, around the daemon's update of everything else.
            ds._revfs_merging = True
            try:
                return orig(*args, **kwargs)
            finally:
                ds._revfs_merging = False
        finally:
            ds._revfs_scope = False
            ds._revfs_lastfull = None


# hg's actions that only make a file what the target has: the daemon's, for the files
# without a local change.
_DAEMON_ACTIONS = (
    mergestatemod.ACTION_GET,
    mergestatemod.ACTION_REMOVE,
    mergestatemod.ACTION_EXEC,
)


def _applyupdates(orig, repo, mresult, wctx, mctx, overwrite, wantfiledata, **kwargs):
    """hg 6.3.2's merge.applyupdates in an update over local changes: hg applies its
    actions on the files that have a local change (merges, conflicts, prompts, untracked
    files in the way); the daemon updates the others in place, lazily, as in a clean
    update, first (a refusal comes before anything changed)."""
    ds = repo.dirstate
    if (
        not _inmount(repo)
        or not getattr(ds, '_revfs_merging', False)
        or wctx.isinmemory()
        or overwrite
    ):
        return orig(repo, mresult, wctx, mctx, overwrite, wantfiledata, **kwargs)
    entries, _copies = ds._revfs_status(unknown=True, ignored=True)
    # From here on the working copy changes: statuses are asked afresh.
    ds._revfs_scope = False
    ds._revfs_lastfull = None
    local = set(p for l, p in entries)
    # A file another action names (a merge's other or ancestor name) stays hg's.
    named = _actionpaths(mresult, args_only=True)
    theirs = [
        (f, a)
        for f, a in mresult.filemap(sort=True)
        if a[0] in _DAEMON_ACTIONS and f not in local and f not in named
    ]
    for f, _a in theirs:
        mresult.removefile(f)
    req = {
        'cmd': 'update',
        'node': mctx.hex().decode('ascii'),
        'clean': False,
        'keep': _paths(sorted(_actionpaths(mresult))),
        'pending': ds._revfs_transaction() is not None,
    }
    # The daemon first: it changes nothing when it refuses, and it never touches hg's
    # paths, which hg's actions then read and write as they are (hg asks the dirstate
    # nothing while it applies them).
    if ds._revfs.request(req).get('reply') != 'updated':
        # Something hg's actions do not name is in the daemon's way: hg does it all (the
        # files it writes are copied into the overlay) and the parent moves at write().
        for f, (m, args, msg) in theirs:
            mresult.addfile(f, m, args, msg)
        return orig(repo, mresult, wctx, mctx, overwrite, wantfiledata, **kwargs)
    # The daemon's parent is the target now; hg sets it next, with its word on its files.
    # Sent inside a transaction, it stays provisional until the transaction ends.
    ds._revfs_provisional = req['pending']
    if req['pending']:
        ds._revfs_touched()
    ds._revfs_states = {}
    ds._revfs_changes = None
    stats, getfiledata, extra = orig(
        repo, mresult, wctx, mctx, overwrite, wantfiledata, **kwargs
    )
    # hg's counts of the actions the daemon did (they are hg's words).
    removed = sum(1 for _f, a in theirs if a[0] == mergestatemod.ACTION_REMOVE)
    stats = compat.UpdateResult(
        stats.updatedcount + len(theirs) - removed,
        stats.mergedcount,
        stats.removedcount + removed,
        stats.unresolvedcount,
    )
    return stats, getfiledata, extra


# The paths an action's arguments name besides its file (hg 6.3.2's mergestate actions):
# a merge's local and other names and its ancestor's (a rename's source is removed by it).
_ACTION_PATHS = {
    mergestatemod.ACTION_MERGE: (0, 1, 2),
    mergestatemod.ACTION_CHANGED_DELETED: (0, 1, 2),
    mergestatemod.ACTION_DELETED_CHANGED: (0, 1, 2),
    mergestatemod.ACTION_DIR_RENAME_MOVE_LOCAL: (0,),
    mergestatemod.ACTION_LOCAL_DIR_RENAME_GET: (0,),
    mergestatemod.ACTION_PATH_CONFLICT: (0, 1),
    mergestatemod.ACTION_PATH_CONFLICT_RESOLVE: (0, 1),
}


def _actionpaths(mresult, args_only=False):
    """Every path hg's actions touch (or only those their arguments name)."""
    paths = set()
    for f, (m, args, _msg) in mresult.filemap():
        if not args_only:
            paths.add(f)
        for i in _ACTION_PATHS.get(m, ()):
            if args and i < len(args) and isinstance(args[i], bytes):
                paths.add(args[i])
    return paths


def _hashook(ui, name):
    return any(k.split(b'.', 1)[0] == name for k, v in ui.configitems(b'hooks') if v)


# The daemon's answers that leave an update to hg's merge: local changes in the way
# ('conflicts'), or subrepositories on either side ('subrepos': hg's update visits them,
# and refuses git's and svn's unless allowed, which the daemon's update does not).
_HGS = ('conflicts', 'subrepos')


def _daemonupdate(repo, p2, force, updatecheck):
    """hg's checks of a non-merge update, then the daemon's update (O(changes), nothing
    materialized), then hg's bookkeeping: updatestate, the parent, the branch, the hooks.
    None, with nothing done, when local changes or untracked files are in the way, or
    subrepositories are on either side."""
    wc = repo[None]
    p1 = wc.p1()
    ds = repo.dirstate
    if not force:
        if len(wc.parents()) > 1:
            raise error.StateError(_(b"outstanding uncommitted merge"))
        ms = wc.mergestate()
        if ms.unresolvedcount():
            raise error.StateError(
                _(b"outstanding merge conflicts"), hint=_(b"use 'hg resolve' to resolve")
            )
        if p1 == p2:
            repo.hook(b'preupdate', throw=True, parent1=p2.hex(), parent2=b'')
            repo.hook(b'update', parent1=p2.hex(), parent2=b'', error=0)
            return compat.UpdateResult(0, 0, 0, 0)
        if updatecheck in (None, mergemod.UPDATECHECK_LINEAR):
            pas = [p1.ancestor(p2)]
            if pas not in ([p1], [p2]) and wc.dirty(missing=True):
                if p2.node() not in obsutil.foreground(repo, [p1.node()]):
                    raise error.UpdateAbort(
                        _(b"uncommitted changes"),
                        hint=_(b"commit or update --clean to discard changes"),
                    )
    if not force:
        changes, copies = ds._changes()
        if copies or any(l in 'R!' for l in changes.values()):
            # Local copies, or removed files: hg's copy tracing may find a rename on one
            # side of files deleted or renamed on the other, and print its notes.
            return None
    xp2 = p2.hex()
    ds._revfs_flush()
    req = {'cmd': 'update', 'node': xp2.decode('ascii'), 'clean': bool(force)}
    if ds._revfs_transaction() is not None:
        # The target may be a changeset of the transaction under way (unshelve's).
        req['pending'] = True
    if not force and _hashook(repo.ui, b'preupdate'):
        # hg's merge runs the hook itself when something is in the way: once only.
        if ds._revfs.request(dict(req, dry_run=True)).get('reply') in _HGS:
            return None
    repo.hook(b'preupdate', throw=True, parent1=xp2, parent2=b'')
    repo.vfs.write(b'updatestate', xp2)
    resp = ds._revfs.request(req)
    if resp.get('reply') in _HGS:
        repo.vfs.unlink(b'updatestate')
        return None
    # As hg's applyupdates: an update ends any merge state (update --clean after
    # conflicts).
    mergestatemod.mergestate.clean(repo)
    if resp.get('reply') != 'updated':
        raise error.Abort(b'revfs: unexpected answer from the daemon')
    # Inside a transaction the daemon's parent stays provisional until it ends.
    ds._revfs_provisional = bool(req.get('pending'))
    if req.get('pending'):
        ds._revfs_touched()
    # The daemon read the target's changeset: its branch saves hg a second read (31 ms
    # for a changeset that lists 78,000 files).
    branch = resp.get('branch')
    branch = encoding.tolocal(bytes(branch)) if branch else p2.branch()
    with compat.changing_parents(ds, repo):
        ds._revfs_followed(p2.node())
        compat.setbranch(ds, branch, repo.currenttransaction())
    # As localrepository.setparents: repo['.'] is looked up again.
    repo._quick_access_changeid_invalidate()
    repo.vfs.unlink(b'updatestate')
    repo.hook(b'update', parent1=xp2, parent2=b'', error=0)
    return compat.UpdateResult(resp['updated'], 0, resp['removed'], 0)


def _strip(orig, ui, repo, nodelist, *args, **kwargs):
    # hg moves the working copy's parent off what it strips first (strip's update, amend's
    # and --keep's set_parent, histedit's and rebase's updates): a strip that would still
    # take the parent away from under the daemon is refused.
    if _inmount(repo):
        p1 = repo.dirstate.p1()
        if p1 != nullid and repo.unfiltered().revs(b'%ln::%n', nodelist, p1):
            raise unsupported(b'strip')
    return orig(ui, repo, nodelist, *args, **kwargs)


def _restorebackup(orig, self, fctx, localkey, flags):
    """hg 6.3.2's mergestate._restore_backup writes the local side of a file back before
    merging it (for `hg resolve` after an edit). A working file of a mount that holds those
    bytes with those flags already, as before each file's first merge, is left as it is:
    rewriting it costs an unlink, a create and a write through the filesystem, and leaves
    the same file."""
    if _inmount(self._repo):
        try:
            same = (
                fctx.lexists()
                and fctx.flags() == flags
                and fctx.data() == self._repo.vfs.read(b'merge/' + localkey)
            )
        except (IOError, OSError):
            same = False
        if same:
            return
    return orig(self, fctx, localkey, flags)
