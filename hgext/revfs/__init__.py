# revfs: real hg inside a revfs mount.
#
# Serves Mercurial 6.3 to 7.2 (compat.py names what differs between them); written
# against 6.3.2 (Debian 12's), then each minor release to 7.2.4.
# Any other version is refused (the share's requirement stays unknown to it).
#
# The extension is this package. This module holds what hg looks up on an extension
# (the help below, the versions, uisetup, extsetup, reposetup) and featuresetup (hg
# calls it only as a function of the extension's own module); extsetup wires in the
# wrappers the other modules hold:
#   compat.py    what depends on hg's version: the version test, what is wrapped
#   client.py    the requirement, the daemon's control socket, the mount table
#   dirstate.py  revfsdirstate, the dirstate the daemon answers, with its bases
#                walk.py (status, walk), tracking.py (tracking changes, backups) and
#                parents.py (parent changes, write)
#   update.py    update, merge and strip
#   share.py     unshare, push and pull
#   debug.py     debugstate
# Imports between them: __init__ -> all; dirstate -> walk, tracking, parents;
# debug -> dirstate; each -> client, compat as it needs; client, compat and walk
# import none of them. No cycle.
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

import os
import sys
import weakref

from mercurial.i18n import _
from mercurial import (
    error,
    extensions,
    localrepo,
    requirements as requirementsmod,
    util,
)

from . import (
    client,
    compat,
    debug,
    dirstate,
    share,
    update,
)
from .client import REQUIREMENT
from .compat import _tested_version
from .dirstate import revfsdirstate

testedwith = b'6.3.2 6.4.5 6.5.3 6.6.3 6.7.4 6.8.2 6.9.5 7.0.3 7.1.2 7.2.4'
# No minimumhgversion: hg would disable the extension on an older release, which would then
# refuse the mount's requirement by name only; reposetup refuses it naming the range.


def featuresetup(ui, supported):
    # Every hg that loads the extension knows the requirement: one of a version the
    # extension does not serve then stops in reposetup, with the versions it serves.
    supported.add(REQUIREMENT)


def _cachebytecode():
    """Writes the bytecode cache of the package's modules when Python may not
    (PYTHONDONTWRITEBYTECODE): it would otherwise compile them at every hg command in a
    mount (~10 ms). The cache is in the mount's state directory, which is revfs's own;
    the daemon removes it when it writes a new version of the extension."""
    if not sys.dont_write_bytecode:
        return
    try:
        import importlib.util

        here = os.path.dirname(__file__)
        for name in sorted(os.listdir(here)):
            if not name.endswith('.py'):
                continue
            path = os.path.join(here, name)
            if not os.path.exists(importlib.util.cache_from_source(path)):
                import py_compile

                py_compile.compile(path, doraise=True)
    except Exception:
        pass


# The mount hg is about to open, when its share's hgrc names it (uisetup is given the
# configuration of the repository found, the command's --config included): (ui, root,
# source), taken by the first hg.repository of the process.
_early = {}


def uisetup(ui):
    _cachebytecode()
    root, source = ui.config(b'revfs', b'root'), ui.config(b'revfs', b'source')
    if root and source and ui.config(b'revfs', b'socket'):
        _early[b'mount'] = (ui, root, source)


def _repository(orig, ui, *args, **kwargs):
    """hg.repository (6.3-7.2): the daemon of the mount hg opens answers a ping first,
    within the command's deadline. hg's opening stats the mount's root (hg.py, _local),
    which needs the daemon whenever the kernel's copy of the root's attributes is stale
    (a listing of the root from the daemon marks its atime stale; the soak caught hg there):
    a frozen daemon would hang hg there in the kernel, past the deadline, instead of the
    abort the deadline gives (tests/tests/hg_frozen_mount.rs)."""
    early = _early.pop(b'mount', None)
    path = kwargs.get('path', args[0] if args else b'')
    if early is not None and path:
        lui, root, source = early
        if os.path.abspath(path) == root:
            client.client(lui, root, source).request({'cmd': 'ping'})
    return orig(ui, *args, **kwargs)


def extsetup(ui):
    localrepo.featuresetupfuncs.add(featuresetup)
    if not _tested_version():
        # Nothing of another version is wrapped: reposetup refuses its mounts.
        return
    # Before hg opens a mount's repository, its daemon answers (a frozen one: the abort).
    extensions.wrapfunction(*compat.REPOSITORY, _repository)
    # A working-directory requirement: never copied into the repository's store.
    requirementsmod.WORKING_DIR_REQUIREMENTS.add(REQUIREMENT)
    # Every update, merge, rebase, graft... goes through _update, and applyupdates when hg
    # writes files: the daemon takes the part of an update it does better.
    extensions.wrapfunction(*compat.UPDATE, update._update)
    extensions.wrapfunction(*compat.APPLYUPDATES, update._applyupdates)
    compat.no_rust_update()
    extensions.wrapfunction(*compat.STRIP, update._strip)
    extensions.wrapfunction(*compat.PUSH, share._push)
    extensions.wrapfunction(*compat.PULL, share._pull)
    # hg unshare (share's command) would copy the store into the mount's .hg.
    extensions.wrapfunction(*compat.UNSHARE, share._unshare)
    # hg debugdirstate reads the dirstate file's entries: the daemon's instead.
    extensions.wrapcommand(*compat.DEBUGSTATE, debug._debugstate)
    extensions.wrapfunction(
        *compat.CASECOLLISIONAUDITOR, dirstate._casecollisionauditor
    )
    extensions.wrapfunction(*compat.RESTOREBACKUP, update._restorebackup)


def reposetup(ui, repo):
    if not repo.local() or REQUIREMENT not in repo.requirements:
        return
    if not _tested_version():
        raise error.Abort(
            _(b'this revfs mount needs Mercurial %s, not %s')
            % (compat.supported_range(), util.version())
        )

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

        if compat.CHANGE_SCOPES:
            # 6.4-7.2: hg takes no dirstate backup; what a transaction's abort and hg
            # rollback bring the daemon back to is taken when it opens
            # (revfsdirstate._revfs_attach, all_file_names, _revfs_rolledback).
            def transaction(self, *args, **kwargs):
                outer = self.currenttransaction() is None
                tr = super(revfsrepo, self).transaction(*args, **kwargs)
                if outer:
                    self.dirstate._revfs_attach(tr)
                return tr

            def _rollback(self, *args, **kwargs):
                ds = self.dirstate
                ds._revfs_rollingback = True
                try:
                    return super(revfsrepo, self)._rollback(*args, **kwargs)
                finally:
                    ds._revfs_rollingback = False

    repo.__class__ = revfsrepo
    _allow_source_dirstate_v2(repo)


def _allow_source_dirstate_v2(repo):
    """hg opens the mount's repository itself for the bookmarks the mount shares
    (hg.sharedreposource), with the base configuration. When that repository's own
    working copy is dirstate-v2, an hg without its Rust extensions refuses to open it
    unless storage.dirstate-v2.slow-path allows it; only its bookmarks are read there."""
    try:
        with open(os.path.join(repo.sharedpath, b'requires'), 'rb') as f:
            theirs = f.read().splitlines()
    except OSError:
        return
    if b'dirstate-v2' in theirs:
        repo.baseui.setconfig(
            b'storage', b'dirstate-v2.slow-path', b'allow', b'revfs'
        )
