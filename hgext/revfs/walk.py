"""revfsdirstate's status and walk (_statusmixin): hg's status, and the walk of add,
addremove, purge and the others, answered from the daemon's status, with hg's walk's
stat results (_lazystat, _lstat_file) and its warnings (_badtype).

Its methods serve dirstate.status and dirstate.walk of hg 6.3 to 7.2 (7.2 adds a keyword
to status, and use_rust_status)."""

import os
import stat

from mercurial.i18n import _
from mercurial import (
    encoding,
    scmutil,
    util,
)


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


def _subrepo_filter(subrepos):
    """A test of whether a path is a subrepository's or below one (hg's walk never enters
    them: dirstate._walkexplicit puts them among its results, then drops them), or None
    when there are none."""
    if not subrepos:
        return None
    subs = set(subrepos)
    prefixes = tuple(sr + b'/' for sr in subs)
    return lambda p: p in subs or p.startswith(prefixes)


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


class _statusmixin(object):
    """revfsdirstate's status and walk (a base of revfsdirstate, dirstate.py, whose
    state they read: _revfs_status, _states)."""

    def status(self, match, subrepos, ignored, clean, unknown, **kwargs):
        # 7.2 adds empty_dirs_keep_files (for the Rust status' empty_dirs): the walk's
        # directories are told to match.traversedir instead (_traversed).
        dirs = [] if match.traversedir is not None else None
        entries, copies = self._revfs_status(
            clean=clean, ignored=ignored, unknown=unknown, dirs=dirs
        )
        insub = _subrepo_filter(subrepos)
        if insub is not None:
            entries = [(l, p) for l, p in entries if not insub(p)]
            if dirs is not None:
                dirs = [d for d in dirs if not insub(d)]
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

    def use_rust_status(self, subrepos):
        # 7.2: hg purge would read the Rust status' empty_dirs, which this status does not
        # fill: it reads match.traversedir's.
        return False

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
        insub = _subrepo_filter(subrepos)
        if insub is not None:
            entries = [(l, p) for l, p in entries if not insub(p)]
            named = set(f for f in named if not insub(f))
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
