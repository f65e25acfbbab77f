"""The mount as an hg share of its repository: hg unshare refused, and push and pull
between a mount and a repository (the mount's requirement, which exchange checks).

Written against Mercurial 6.3.2's hg.unshare, exchange.push and exchange.pull, the same
in 6.3-7.2 (7.2's unshare is cmd_impls.clone's: compat.UNSHARE)."""

import os

from mercurial.i18n import _
from mercurial import error

from .client import (
    REQUIREMENT,
    _inmount,
)


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
