"""hg debugstate in a mount: the daemon's entries, as a clone's dirstate holds them.

Written against Mercurial 6.3.2's debugstate command (dirstatemap.debug_iter), the same
in 6.3-7.2."""

import os

from mercurial import util

from .compat import DirstateItem
from .dirstate import revfsdirstate


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
