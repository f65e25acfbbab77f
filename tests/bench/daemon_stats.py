"""The daemon's `stats` answer (docs/FORMATS.md, "Control protocol"), for the benches: asked
on the control socket of the (first) mount whose state directory is STATE."""
import glob, json, os, socket


def stats(state):
    """The parsed answer, or None when no mount of STATE has a control socket."""
    for sock in glob.glob(os.path.join(state, 'mounts', '*', 'control.sock')):
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        s.sendall(b'{"cmd":"stats"}\n')
        s.shutdown(socket.SHUT_WR)
        data = b''
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        return json.loads(data.splitlines()[-1])
    return None
