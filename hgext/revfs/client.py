"""The mount and its daemon, as hg in a mount sees them: the requirement that makes a
share a mount (_inmount), the control-socket client of the daemon (client, the protocol
version it speaks, DaemonLost when the daemon does not answer, and the way paths travel
in its requests), the kernel's mount table (_mounted), and the aborts of what a mount
does not support yet. It depends on no other module of the extension.

Written against Mercurial 6.3.2 (error.Abort's hint, ui.config), the same in 6.3-7.2."""

import json
import os
import socket
import time

from mercurial.i18n import _
from mercurial.node import short
from mercurial import (
    encoding,
    error,
)


REQUIREMENT = b'revfs-dirstate-v1'
# The control protocol version this extension speaks (docs/FORMATS.md).
PROTOCOL = 9
# The daemon closes a connection idle for 30 s; reconnect well before.
REUSE_IDLE = 20.0


def _inmount(repo):
    return REQUIREMENT in getattr(repo, 'requirements', ())


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
