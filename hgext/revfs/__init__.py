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

Commands that would change the dirstate (add, commit, update...) are not yet
supported in a mount and stop with an abort before they change anything; the revfs
commands of the same names do that work.
"""

import json
import os
import socket
import stat
import time
import weakref

from mercurial.i18n import _
from mercurial.node import bin, nullid
from mercurial import (
    commands,
    dirstate,
    encoding,
    error,
    extensions,
    localrepo,
    merge as mergemod,
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
PROTOCOL = 2
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


def uisetup(ui):
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
    # Every update, merge, rebase, graft... writes files before it moves the parents:
    # stopped before it starts (an in-memory merge writes nothing).
    extensions.wrapfunction(mergemod, '_update', _update)
    extensions.wrapfunction(repair, 'strip', _strip)
    for name in CHANGING_COMMANDS:
        try:
            extensions.wrapcommand(commands.table, name, _refusecommand(name))
        except error.UnknownCommand:
            pass


# hg 6.3.2's commands that change the working copy's files before they tell the
# dirstate (remove deletes, revert writes...): stopped before they start.
CHANGING_COMMANDS = (
    b'add',
    b'addremove',
    b'copy',
    b'forget',
    b'import',
    b'purge',
    b'remove',
    b'rename',
    b'revert',
)


def _refusecommand(name):
    def wrapper(orig, ui, repo, *args, **kwargs):
        if _inmount(repo):
            raise unsupported(name)
        return orig(ui, repo, *args, **kwargs)

    return wrapper


def _inmount(repo):
    return REQUIREMENT in getattr(repo, 'requirements', ())


def _update(orig, repo, *args, **kwargs):
    wc = kwargs.get('wc')
    if _inmount(repo) and not (wc is not None and wc.isinmemory()):
        raise unsupported(b'update')
    return orig(repo, *args, **kwargs)


def _strip(orig, ui, repo, *args, **kwargs):
    if _inmount(repo):
        raise unsupported(b'strip')
    return orig(ui, repo, *args, **kwargs)


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

        def commit(self, *args, **kwargs):
            raise unsupported(b'commit')

    repo.__class__ = revfsrepo


def unsupported(what):
    return error.Abort(
        _(b'hg %s does not work in a revfs mount yet') % what,
        hint=_(b'use revfs %s, or hg in a clone') % what,
    )


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
        raise error.Abort(
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
            raise error.Abort(
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
        self._revfs_reset()

    def _revfs_reset(self):
        self._revfs_parent = None
        self._revfs_states = {}
        self._revfs_changes = None

    # -- what the daemon knows -------------------------------------------------------

    def _revfs_status(self, clean=False, ignored=False, unknown=False):
        resp = self._revfs.request(
            {'cmd': 'status', 'clean': clean, 'ignored': ignored, 'unknown': unknown}
        )
        if resp.get('reply') != 'status':
            raise error.Abort(b'revfs: unexpected answer from the daemon')
        for w in resp.get('warnings', []):
            self._ui.warn(w.encode('utf-8', 'surrogateescape') + b'\n')
        entries = [(l, _path(p)) for l, p in resp['entries']]
        copies = {_path(d): _path(s) for d, s in resp['copies']}
        return entries, copies

    def _changes(self):
        """The tracked files that are not clean, and the copies (asked once)."""
        if self._revfs_changes is None:
            entries, copies = self._revfs_status()
            self._revfs_changes = (dict((p, l) for l, p in entries), copies)
        return self._revfs_changes

    def _states(self, paths):
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
        if self._revfs_parent is None:
            info = self._revfs.request({'cmd': 'info'})
            if info.get('protocol', 1) < PROTOCOL:
                raise error.Abort(
                    _(b'the revfs daemon of %s speaks protocol %d; this extension needs %d')
                    % (self._root, info.get('protocol', 1), PROTOCOL),
                    hint=_(b'unmount and mount again with this revfs'),
                )
            self._revfs_parent = bin(info['node'].encode('ascii'))
        return self._revfs_parent, nullid

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
        s = self._states([path])[0]
        if not (s['p1'] or s['wc']):
            return DirstateItem()
        return DirstateItem(wc_tracked=s['wc'], p1_tracked=s['p1'])

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
        return self._changes()[1].get(file, None)

    def copies(self):
        return dict(self._changes()[1])

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
        if match.traversedir is not None:
            # purge: it wants every directory the walk sees.
            self.walk(match, subrepos, unknown, ignored)
        entries, copies = self._revfs_status(clean=clean, ignored=ignored, unknown=unknown)
        roots, named = self._explicit(match, dict((p, l) for l, p in entries))
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
        results come only when a caller reads one."""
        entries, copies = self._revfs_status(clean=True, ignored=ignored, unknown=unknown)
        roots, named = self._explicit(match, dict((p, l) for l, p in entries))
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
            results[p] = None if l in '!R' else _lazystat(self._join(p))
        return results

    # -- changes: not yet (the next step); refused before anything is written ---------

    def _refuse(self, *args, **kwargs):
        raise error.Abort(
            _(b'hg cannot change the working copy of a revfs mount yet'),
            hint=_(b'use the revfs command of the same name, or hg in a clone'),
        )

    set_tracked = set_untracked = set_clean = set_possibly_dirty = _refuse
    copy = setparents = setbranch = update_file = update_file_p1 = _refuse
    rebuild = clear = _refuse

    def write(self, tr):
        # Nothing to write: the daemon keeps the dirstate, and no change is accepted.
        self._dirty = False

    def savebackup(self, tr, backupname):
        pass

    def restorebackup(self, tr, backupname):
        self.invalidate()

    def clearbackup(self, tr, backupname):
        pass
