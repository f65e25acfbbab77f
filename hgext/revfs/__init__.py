# revfs: real hg inside a revfs mount.
#
# Written against Mercurial 6.3.2 (Debian 12's, module policy "c": the Python dirstate).
# Any other version is refused (the share's requirement stays unknown to it).
"""hg in a revfs mount: the working copy's dirstate is the revfs daemon

A mount's .hg is an hg share of its repository whose requires file holds
revfs-dirstate-v1; its hgrc enables this extension. The extension replaces the
dirstate (localrepository._makedirstate, hg's documented extension point) with one
that asks the mount's daemon, over its control socket, for the parents, the status
and what is tracked: no hg command lists a directory of the mount or stats an
unchanged file to learn them. It holds no state: the daemon decides.

Tracking (add, forget, remove, copy, rename, addremove, revert) goes to the daemon:
hg's changes are kept in memory until hg writes its dirstate, then journaled as revfs
add, forget and copy journal them, so that revfs and hg see one working copy. Backups
(a transaction's, a dirstateguard's) are the tracking state written to the share.
commit, commit --amend and strip --keep move the parent with the files kept: the
daemon's set_parent, sent after the transaction is final. An update that is not a
merge is the daemon's in-place update, with hg's checks, hooks and bookkeeping around
it. An update over local changes is hg's merge for the files that have one and the
daemon's update for the others. Branch merges (merge, rebase, graft, backout) are hg's
own, writing through the mount; the daemon keeps their second parent and each file's
merge information. Commands a mount does not support yet stop with an abort before they
change anything.
"""

import json
import os
import socket
import stat
import sys
import time
import weakref

from mercurial.i18n import _
from mercurial.node import bin, hex, nullid, short
from mercurial import (
    commands,
    pathutil,
    pycompat,
    dirstate,
    encoding,
    error,
    exchange,
    extensions,
    hg,
    obsutil,
    localrepo,
    merge as mergemod,
    mergestate as mergestatemod,
    policy,
    repair,
    requirements as requirementsmod,
    scmutil,
    util,
)

testedwith = b'6.3.2'
minimumhgversion = b'6.3'

REQUIREMENT = b'revfs-dirstate-v1'
# The control protocol version this extension speaks (docs/FORMATS.md).
PROTOCOL = 7
# The daemon closes a connection idle for 30 s; reconnect well before.
REUSE_IDLE = 20.0

DirstateItem = policy.importmod('parsers').DirstateItem


def _tested_version():
    v = util.version()
    return v == b'6.3' or v.startswith(b'6.3.') or v.startswith(b'6.3+')


def featuresetup(ui, supported):
    # Only an hg this was written against may open a mount; any other stops with hg's
    # unknown-requirement abort, after the warning of uisetup.
    if _tested_version():
        supported.add(REQUIREMENT)


def _cachebytecode():
    """Writes this file's bytecode cache when Python may not (PYTHONDONTWRITEBYTECODE):
    it would otherwise compile it at every hg command in a mount (~10 ms). The cache is
    in the mount's state directory, which is revfs's own; the daemon removes it when it
    writes a new version of this file."""
    if not sys.dont_write_bytecode:
        return
    try:
        import importlib.util

        if not os.path.exists(importlib.util.cache_from_source(__file__)):
            import py_compile

            py_compile.compile(__file__, doraise=True)
    except Exception:
        pass


def uisetup(ui):
    _cachebytecode()
    if not _tested_version():
        ui.warn(
            _(
                b'revfs: this extension was written for Mercurial 6.3.x, '
                b'not %s: hg cannot use a revfs mount\n'
            )
            % util.version()
        )


def extsetup(ui):
    localrepo.featuresetupfuncs.add(featuresetup)
    # A working-directory requirement: never copied into the repository's store.
    requirementsmod.WORKING_DIR_REQUIREMENTS.add(REQUIREMENT)
    # Every update, merge, rebase, graft... goes through _update, and applyupdates when hg
    # writes files: the daemon takes the part of an update it does better.
    extensions.wrapfunction(mergemod, '_update', _update)
    extensions.wrapfunction(mergemod, 'applyupdates', _applyupdates)
    extensions.wrapfunction(repair, 'strip', _strip)
    extensions.wrapfunction(exchange, 'push', _push)
    extensions.wrapfunction(exchange, 'pull', _pull)
    # hg unshare (share's command) would copy the store into the mount's .hg.
    extensions.wrapfunction(hg, 'unshare', _unshare)
    # hg debugdirstate reads the dirstate file's entries: the daemon's instead.
    extensions.wrapcommand(commands.table, b'debugstate', _debugstate)
    extensions.wrapfunction(scmutil, 'casecollisionauditor', _casecollisionauditor)
    extensions.wrapfunction(mergestatemod.mergestate, '_restore_backup', _restorebackup)


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


def _debugstate(orig, ui, repo, **opts):
    """hg 6.3.2's debugstate prints repo.dirstate._map.debug_iter(): in a mount, the
    daemon's entries, as a clone's dirstate holds them once hg status has looked at every
    file (a clean file with its mode, size and time, from lstat; a modified one with its
    parent's mode and size, as recorded when it was last clean)."""
    ds = repo.dirstate
    if not isinstance(ds, revfsdirstate) or opts.get('docket'):
        return orig(ui, repo, **opts)
    saved = ds.__dict__.get('_map')
    ds.__dict__['_map'] = _debugmap(repo, ds)
    try:
        return orig(ui, repo, **opts)
    finally:
        if saved is None:
            del ds.__dict__['_map']
        else:
            ds.__dict__['_map'] = saved


class _debugmap(object):
    def __init__(self, repo, ds):
        self._repo, self._ds = repo, ds

    def debug_iter(self, all):
        ds = self._ds
        entries, _copies = ds._revfs_status(clean=True)
        letters = dict((p, l) for l, p in entries)
        parent = None
        for f, item in ds.items():
            letter = letters.get(f)
            data = None
            if letter in ('C', 'M') and item.p1_tracked and not item.p2_info:
                try:
                    st = os.lstat(ds._join(f))
                except OSError:
                    st = None
                if st is not None and letter == 'C':
                    data = (st.st_mode, st.st_size)
                elif st is not None:
                    if parent is None:
                        parent = self._repo[b'.']
                    fctx = parent[f]
                    flags = fctx.flags()
                    mode = 0o120777 if b'l' in flags else 0o100755 if b'x' in flags else 0o100644
                    data = (mode & ~util.umask, fctx.size())
                if data is not None:
                    mtime = (int(st.st_mtime), st.st_mtime_ns % 1000000000, False)
                    item = DirstateItem(
                        wc_tracked=True, p1_tracked=True, parentfiledata=data + (mtime,)
                    )
            yield (f, item.state, item.mode, item.size, item.mtime)


def _unshare(orig, ui, repo, *args, **kwargs):
    if _inmount(repo):
        raise error.Abort(
            _(b'a revfs mount cannot be unshared'),
            hint=_(b'clone its repository instead: hg clone %s') % os.path.dirname(repo.sharedpath),
        )
    return orig(ui, repo, *args, **kwargs)


# exchange.push and exchange.pull (hg 6.3.2) refuse a local peer whose requirements the
# other side does not support, working-directory ones included. revfs-dirstate-v1 is the
# mount's working directory's only (never the store's): a repository exchanging
# changesets with a mount supports it.
def _push(orig, repo, remote, *args, **kwargs):
    peerrepo = remote.local()
    if peerrepo and _inmount(repo):
        peerrepo.supported.add(REQUIREMENT)
    return orig(repo, remote, *args, **kwargs)


def _pull(orig, repo, remote, *args, **kwargs):
    peerrepo = remote.local()
    if peerrepo and _inmount(peerrepo):
        repo.supported.add(REQUIREMENT)
    return orig(repo, remote, *args, **kwargs)


def _inmount(repo):
    return REQUIREMENT in getattr(repo, 'requirements', ())


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
    ds._revfs_states = {}
    ds._revfs_changes = None
    stats, getfiledata, extra = orig(
        repo, mresult, wctx, mctx, overwrite, wantfiledata, **kwargs
    )
    # hg's counts of the actions the daemon did (they are hg's words).
    removed = sum(1 for _f, a in theirs if a[0] == mergestatemod.ACTION_REMOVE)
    stats = mergemod.updateresult(
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


def _daemonupdate(repo, p2, force, updatecheck):
    """hg's checks of a non-merge update, then the daemon's update (O(changes), nothing
    materialized), then hg's bookkeeping: updatestate, the parent, the branch, the hooks.
    None, with nothing done, when local changes or untracked files are in the way."""
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
            return mergemod.updateresult(0, 0, 0, 0)
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
        if ds._revfs.request(dict(req, dry_run=True)).get('reply') == 'conflicts':
            return None
    repo.hook(b'preupdate', throw=True, parent1=xp2, parent2=b'')
    repo.vfs.write(b'updatestate', xp2)
    resp = ds._revfs.request(req)
    if resp.get('reply') == 'conflicts':
        repo.vfs.unlink(b'updatestate')
        return None
    # As hg's applyupdates: an update ends any merge state (update --clean after
    # conflicts).
    mergestatemod.mergestate.clean(repo)
    if resp.get('reply') != 'updated':
        raise error.Abort(b'revfs: unexpected answer from the daemon')
    # Inside a transaction the daemon's parent stays provisional until it ends.
    ds._revfs_provisional = bool(req.get('pending'))
    # The daemon read the target's changeset: its branch saves hg a second read (31 ms
    # for a changeset that lists 78,000 files).
    branch = resp.get('branch')
    branch = encoding.tolocal(bytes(branch)) if branch else p2.branch()
    with ds.parentchange():
        ds._revfs_followed(p2.node())
        ds.setbranch(branch)
    # As localrepository.setparents: repo['.'] is looked up again.
    repo._quick_access_changeid_invalidate()
    repo.vfs.unlink(b'updatestate')
    repo.hook(b'update', parent1=xp2, parent2=b'', error=0)
    return mergemod.updateresult(resp['updated'], 0, resp['removed'], 0)


def _strip(orig, ui, repo, nodelist, *args, **kwargs):
    # hg moves the working copy's parent off what it strips first (strip's update, amend's
    # and --keep's set_parent, histedit's and rebase's updates): a strip that would still
    # take the parent away from under the daemon is refused.
    if _inmount(repo):
        p1 = repo.dirstate.p1()
        if p1 != nullid and repo.unfiltered().revs(b'%ln::%n', nodelist, p1):
            raise unsupported(b'strip')
    return orig(ui, repo, nodelist, *args, **kwargs)


def reposetup(ui, repo):
    if not repo.local() or REQUIREMENT not in repo.requirements:
        return

    class revfsrepo(repo.__class__):
        def _makedirstate(self):
            sparsematchfn = None
            return revfsdirstate(
                weakref.ref(self),
                self.vfs,
                self.ui,
                self.root,
                self._dirstatevalidate,
                sparsematchfn,
                self.nodeconstants,
                False,
            )

    repo.__class__ = revfsrepo


def unsupported(what):
    return error.Abort(
        _(b'hg %s does not work in a revfs mount yet') % what,
        hint=_(b'use revfs %s, or hg in a clone') % what,
    )


class DaemonLost(error.Abort):
    """The daemon did not answer: whether it did what was asked is not known."""


class client(object):
    """One connection to the mount's daemon per process, made when first needed (a
    forked process makes its own), with the deadline of every revfs command."""

    def __init__(self, ui, root, source):
        self._path = ui.config(b'revfs', b'socket')
        self._root = root
        self._source = source
        self._timeout = float(ui.config(b'revfs', b'timeout') or 5)
        self._sock = None
        self._pid = None
        self._used = 0.0
        self._buf = b''

    def _hint(self, mounted=True):
        """The way out: a mount whose daemon is frozen or gone is freed first."""
        resume = _(b'revfs mount %s %s resumes the working copy') % (
            self._source,
            self._root,
        )
        if mounted:
            resume = _(b'free the mount with: revfs unmount --force %s; then %s') % (
                self._root,
                resume,
            )
        return resume + _(b' (revfs doctor tells more)')

    def _fail(self, why):
        raise DaemonLost(
            _(b'the revfs daemon of %s is not answering: %s') % (self._root, why),
            hint=self._hint(),
        )

    def _connect(self):
        if not self._path:
            raise error.Abort(_(b'revfs: no control socket configured (revfs.socket)'))
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self._timeout)
        try:
            s.connect(self._path)
        except socket.timeout:
            s.close()
            self._fail(_(b'nothing heard for %g s') % self._timeout)
        except OSError as e:
            s.close()
            # Killed or crashed, the kernel still holds the dead mount.
            raise DaemonLost(
                _(b'the revfs daemon of %s is not running (%s)')
                % (self._root, encoding.strtolocal(e.strerror or str(e))),
                hint=self._hint(_mounted(self._root)),
            )
        self._sock, self._pid, self._buf = s, os.getpid(), b''

    def request(self, req):
        now = time.monotonic()
        if (
            self._sock is None
            or self._pid != os.getpid()
            or now - self._used > REUSE_IDLE
        ):
            if self._sock is not None and self._pid == os.getpid():
                self._sock.close()
            self._connect()
        self._used = now
        line = json.dumps(req).encode('ascii') + b'\n'
        try:
            self._sock.sendall(line)
            while b'\n' not in self._buf:
                chunk = self._sock.recv(1 << 16)
                if not chunk:
                    self._sock = None
                    self._fail(_(b'it closed the connection'))
                self._buf += chunk
        except socket.timeout:
            self._sock = None
            self._fail(_(b'nothing heard for %g s') % self._timeout)
        except OSError as e:
            self._sock = None
            self._fail(encoding.strtolocal(e.strerror or str(e)))
        answer, self._buf = self._buf.split(b'\n', 1)
        resp = json.loads(answer)
        if resp.get('reply') == 'error':
            raise error.Abort(
                b'revfs: %s' % resp.get('message', '').encode('utf-8', 'replace')
            )
        return resp


def _lostparent(ui, node, err):
    ui.warn(
        _(b'revfs: changeset %s is committed; the daemon died before it confirmed it as '
          b'the parent of the working copy\n') % short(node)
    )
    raise err


def _unescape(field):
    """A mountinfo field with its octal escapes (a space is \\040) undone."""
    out, i = bytearray(), 0
    while i < len(field):
        if field[i : i + 1] == b'\\' and field[i + 1 : i + 4].isdigit():
            out.append(int(field[i + 1 : i + 4], 8))
            i += 4
        else:
            out += field[i : i + 1]
            i += 1
    return bytes(out)


def _mounted(root):
    """Whether the kernel still lists a revfs mount at root (read from the mount table,
    never by touching the mount)."""
    try:
        with open('/proc/self/mountinfo', 'rb') as f:
            for line in f:
                left, sep, right = line.partition(b' - ')
                fields = left.split(b' ')
                kind = right.split(b' ')[:2]
                # fusermount3 records the subtype only with libfuse: the source is ours.
                if (
                    sep
                    and len(fields) > 4
                    and len(kind) == 2
                    and kind[0].startswith(b'fuse')
                    and kind[1].startswith(b'revfs:')
                    and _unescape(fields[4]) == root
                ):
                    return True
    except (IOError, OSError):
        pass
    return False


def _path(p):
    return bytes(p)


def _paths(ps):
    return [list(p) for p in ps]


def _badtype(mode):
    kind = _(b'unknown')
    if stat.S_ISCHR(mode):
        kind = _(b'character device')
    elif stat.S_ISBLK(mode):
        kind = _(b'block device')
    elif stat.S_ISFIFO(mode):
        kind = _(b'fifo')
    elif stat.S_ISSOCK(mode):
        kind = _(b'socket')
    elif stat.S_ISDIR(mode):
        kind = _(b'directory')
    return _(b'unsupported file type (type is %s)') % kind


def _lstat_file(path):
    """path's lstat when it is a file or a symlink, else None (hg's walk results)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
        return st
    return None


class _lazystat(object):
    """An lstat result, made when first read (most walk callers only want names)."""

    def __init__(self, path):
        self._path = path
        self._st = None

    def __getattr__(self, name):
        if self._st is None:
            self._st = os.lstat(self._path)
        return getattr(self._st, name)

    def __getitem__(self, i):
        if self._st is None:
            self._st = os.lstat(self._path)
        return self._st[i]


class revfsdirstate(dirstate.dirstate):
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
            and self._parentwriters == 0
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
            resp = self._revfs.request(req)
            if resp.get('reply') != 'status':
                raise error.Abort(b'revfs: unexpected answer from the daemon')
            warnings = resp.get('warnings', [])
            entries = [(l, _path(p)) for l, p in resp['entries']]
            copies = {_path(d): _path(s) for d, s in resp['copies']}
            if dirs is not None:
                dirs.extend(_path(d) for d in resp.get('dirs', []))
        for w in warnings if warn and (ignored or unknown) else []:
            self._ui.warn(w.encode('utf-8', 'surrogateescape') + b'\n')
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

    @dirstate.repocache(b'branch')
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

    def status(self, match, subrepos, ignored, clean, unknown):
        dirs = [] if match.traversedir is not None else None
        entries, copies = self._revfs_status(
            clean=clean, ignored=ignored, unknown=unknown, dirs=dirs
        )
        roots, named = self._explicit(match, dict((p, l) for l, p in entries))
        if dirs is not None:
            self._traversed(match, roots, dirs, unknown, ignored)
        always = match.always()

        def walked(f):
            return roots is None or f in named or any(f.startswith(r) for r in roots)

        lists = {l: [] for l in 'MAR!?IC'}
        for l, p in entries:
            if not (always or match(p)):
                continue
            if l in '?I' and not walked(p):
                continue
            lists[l].append(p)
        st = scmutil.status(
            lists['M'], lists['A'], lists['R'], lists['!'], lists['?'], lists['I'], lists['C']
        )
        return [], st, None

    def _traversed(self, match, roots, dirs, unknown, ignored):
        """hg's walk tells match.traversedir of every directory it enters (hg purge removes
        those it then finds empty). A directory nothing changed below holds its files, so
        the daemon's changed directories (dirs) stand for the whole tree's: those the walk
        enters are told, as hg's walk (dirstate.walk, hg 6.3.2) would: the directories
        named, and below them (or the root) those neither ignored nor in an ignored one
        (any, when ignored files are listed; none when neither unknown nor ignored are)."""
        tell = match.traversedir
        named = [r[:-1] for r in roots] if roots is not None else []
        for d in named:
            tell(d)
        if not (unknown or ignored):
            return
        ignore = util.never if ignored else self._ignore
        seen = {}

        def entered(d):
            if d not in seen:
                parent = d.rsplit(b'/', 1)[0] if b'/' in d else b''
                seen[d] = not ignore(d) and (not parent or entered(parent))
            return seen[d]

        named = set(named)
        for d in dirs:
            if d in named:
                continue
            if roots is not None and not any(d.startswith(r) for r in roots):
                continue
            if entered(d):
                tell(d)

    def _explicit(self, match, letters):
        """The walk's explicit part (hg's dirstate._walkexplicit): the directories named
        (unknown files are seen below them only), the files named, and hg's warnings for
        the names that are nothing hg tracks. (None, ...) when the whole tree is walked."""
        files = match.files()
        if match.always() or not files or b'' in files:
            return None, set()
        roots, named = [], set()
        for f in sorted(files):
            try:
                st = os.lstat(self._join(f))
            except OSError as inst:
                if letters.get(f, '?') not in '?I':
                    continue
                s = self._states([f])[0]
                if not (s['p1'] or s['wc'] or s['dir']):
                    match.bad(f, encoding.strtolocal(inst.strerror))
                continue
            kind = stat.S_IFMT(st.st_mode)
            if kind == stat.S_IFDIR:
                roots.append(f + b'/')
            elif kind in (stat.S_IFREG, stat.S_IFLNK):
                named.add(f)
            else:
                match.bad(f, _badtype(kind))
        return roots, named

    def walk(self, match, subrepos, unknown, ignored, full=True):
        """hg's walk from the daemon's status: the tracked files that match, the unknown
        (or ignored) files that match below a directory walked, the files named. Stat
        results come only when a caller reads one. Clean files are asked for only when
        the caller wants every tracked file (full) and the matcher is more than a list of
        file names (hg add FILE names them; addremove does not want them)."""
        entries, copies = self._revfs_status(ignored=ignored, unknown=unknown)
        roots, named = self._explicit(match, dict((p, l) for l, p in entries))
        names_only = match.isexact() or (match.prefix() and roots == [])
        if full and not names_only:
            entries, copies = self._revfs_status(
                clean=True, ignored=ignored, unknown=unknown, warn=False
            )
        always = match.always()
        results = {}
        for f in sorted(named):
            if always or match(f) or not match.anypats():
                results[f] = _lazystat(self._join(f))
        for l, p in entries:
            if p in results or not (always or match(p)):
                continue
            if l in '?I' and not (
                roots is None or any(p.startswith(r) for r in roots)
            ):
                continue
            if l == '!':
                results[p] = None
            elif l == 'R':
                # A removed file may still be there (forgotten): addremove adds it back.
                # Removed files are few: stat them now.
                results[p] = _lstat_file(self._join(p))
            else:
                results[p] = _lazystat(self._join(p))
        return results

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

    # -- parents: a new parent with the files kept (commit, amend, strip --keep) --------

    def _refuse(self, *args, **kwargs):
        raise error.Abort(
            _(b'hg cannot do this in a revfs mount yet'),
            hint=_(b'use the revfs command of the same name, or hg in a clone'),
        )

    clear = _refuse

    def update_file_p1(self, filename, p1_tracked):
        """hg 6.3.2's update_file_p1 (movedirstate: uncommit, unamend, split, fix,
        shelve --keep): the file keeps its working-copy tracking under the new parent."""
        if self._revfs_newparent is None or self._parentwriters <= 0:
            raise error.ProgrammingError(b'update_file_p1 outside of a parent change')
        wc = bool(self.get_entry(filename).tracked)
        self._revfs_files[filename] = (wc, bool(p1_tracked), False)
        self._revfs_states.pop(filename, None)
        self._revfs_changes = None
        self._dirty = True

    def setparents(self, p1, p2=None):
        if p2 is None:
            p2 = nullid
        if self._parentwriters == 0:
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

    def rebuild(self, parent, allfiles, changedfiles=None):
        if changedfiles is None:
            # debugrebuilddirstate: the whole manifest; the daemon's state needs no rebuild.
            raise unsupported(b'debugrebuilddirstate')
        self._revfs_moveparent(parent)
        for f in changedfiles:
            self._revfs_files[f] = (f in allfiles, f in allfiles, False)

    def _revfs_case_variants(self, path):
        self._revfs_flush()
        resp = self._revfs.request({'cmd': 'case_variants', 'paths': _paths([path])})
        return resp['entries'][0]

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
        self._revfs_flush(asking=False)
        self._revfs_states = {}
        self._revfs_changes = None

    def write(self, tr):
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
                        tr.addpostclose(b'revfs-lost', lambda tr: _lostparent(self._ui, node, e))
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
        self._dirty = False

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
