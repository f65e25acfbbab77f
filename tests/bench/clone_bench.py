#!/usr/bin/env python3
"""Benchmark (not a test) of a working copy from a server (issue 52): `revfs clone` of a
corpus served by `hg serve` on loopback (Mercurial's bundled remotefilelog in server mode),
side by side with what a user does without it, `hg clone` + `revfs mount`, in the same run,
taken in turns (A B A B).

Usage: tests/bench/clone_bench.py CORPUS [--runs N] [--delay-ms MS] [--ssh] [--no-tar]
                                        [--clone-once] [--server-cache DIR] [--cold-server]
                                        [--out FILE]
With --no-tar, only the time and bytes to a readable working copy (for the 1M corpus, whose
tar through a lazy mount takes the server many minutes).
CORPUS is a tree made by ../shared/corpus/make-corpus.sh. With --delay-ms, every byte
between the clients and the server arrives that much later each way (a round trip: twice
it), through a proxy of this script's own: the kernels here have no netem (sch_netem), so
the delay is added in user space, as latency only (each chunk is sent when its time comes,
not after the one before: no cap on throughput).

With --ssh, the lazy clones go over ssh:// instead (a fake ssh of this script's own that
runs the command here, as Mercurial's tests do: `hg -R CORPUS serve --stdio` with
remotefilelog's server mode and the same server cache; file revisions come with
`x_rfl_getfiles`); the full clone stays `hg clone` over HTTP.

First, one lazy clone and tar fills the server's remotefilelog cache, which a server keeps
for its later clients: its tar is reported as the first client's (the server builds every
blob). Then, medians of --runs, in turns:
  time and bytes to a readable working copy: `hg clone -U URL` + `revfs mount`, against
  `revfs clone URL` (repository, cache and state directory counted);
  the first `tar cf - . | wc -c` of the tree through a mount of the full clone and through
  the lazy mount (page cache dropped first; then, unless --cold-server, the server's blob
  cache read back into memory, as a server on a machine of its own keeps it), and the
  requests the lazy one made;
  the data packs the lazy tar left, and after the daemon merged them (it does once fetches
  stop; the script waits until their number holds for 10 s);
  `revfs status` and `hg status` in each mount, after the tar;
  `hg cat` of every 100th file (at most 2,000) in each mount, after the tar: hg's own reads
  from revlogs against its reads from the packs the lazy tar left (their number reported),
  with hg's peak memory.
Prints a markdown table; raw numbers to --out as JSON.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')
sys.path.insert(0, HERE)
import benchdeps  # noqa: E402


def sh(cmd, env=None, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=env or ENV, **kw)


def timed(cmd, env=None):
    t = time.perf_counter()
    sh(cmd, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def drop_caches():
    sh('sync')
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('3\n')


def warm_server(srvcache):
    """Reads the server's blob cache back into memory (the seconds it took). The server here
    shares the client's machine, so the page cache dropped for the client's first tar is
    the server's too; a server on its own machine keeps its memory when a client drops its
    own. Each blob is a loose file there (remotefilelog's server cache), read back from the
    disk one by one: without this, the tar measures the server's disk."""
    from concurrent.futures import ThreadPoolExecutor

    def read_dir(d):
        todo, n = [d], 0
        while todo:
            with os.scandir(todo.pop()) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        todo.append(e.path)
                    elif e.is_file(follow_symlinks=False):
                        with open(e.path, 'rb') as f:
                            while f.read(1 << 20):
                                pass
                        n += 1
        return n

    t = time.perf_counter()
    tops = [e.path for e in os.scandir(srvcache) if e.is_dir(follow_symlinks=False)]
    with ThreadPoolExecutor(8) as pool:
        sum(pool.map(read_dir, tops))
    return time.perf_counter() - t


def cpu_seconds(pid):
    """User and system CPU of process `pid` so far (0 when it is gone)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError):
        return 0.0


def hg_cat(mnt, listfile):
    """Seconds and peak RSS (MB) of `hg cat` of the files listed in `listfile`, in `mnt`."""
    t = time.perf_counter()
    p = subprocess.Popen(['hg', 'cat', '-r', '.', 'listfile:' + listfile], cwd=mnt, env=ENV,
                         stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit('hg cat in %s exited %d' % (mnt, p.returncode))
    return time.perf_counter() - t, usage.ru_maxrss / 1024


def daemon_of(mnt):
    """The pid of the revfs daemon serving mount point `mnt` (its command line names it)."""
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % d, 'rb') as f:
                argv = f.read().split(b'\0')
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b'revfs' and mnt.encode() in argv:
            return int(d)
    return None


def du(*paths):
    total = 0
    for p in paths:
        out = subprocess.run(['du', '-sb', p], capture_output=True, text=True)
        if out.returncode == 0:
            total += int(out.stdout.split()[0])
    return total


class Server:
    """hg serve of the corpus, with remotefilelog's server mode and its cache outside it."""

    def __init__(self, corpus, work, srvcache):
        self.log = os.path.join(work, 'access.log')
        cmd = ['hg', 'serve', '-R', corpus, '-a', '127.0.0.1',
               '-p', '0', '-A', self.log, '-E', os.path.join(work, 'error.log'),
               '--config', 'extensions.remotefilelog=', '--config', 'remotefilelog.server=True',
               '--config', 'remotefilelog.servercachepath=' + srvcache]
        self.proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        port = line.rsplit(':', 1)[1].strip().rstrip(')')
        self.url = 'http://127.0.0.1:%s/' % port

    def requests(self, cmd):
        with open(self.log) as f:
            return sum(1 for l in f if 'cmd=' + cmd in l)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class DelayProxy:
    """A TCP proxy on 127.0.0.1 that delivers what it reads `delay` seconds later, in order,
    both ways."""

    def __init__(self, upstream_port, delay):
        import socket, threading
        self.delay = delay
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.upstream = upstream_port
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        import socket, threading
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(('127.0.0.1', self.upstream))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, src, dst):
        import queue, socket, threading
        q = queue.Queue()

        def send():
            while True:
                due, data = q.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=send, daemon=True).start()
        while True:
            try:
                data = src.recv(1 << 16)
            except OSError:
                data = b''
            q.put((time.monotonic() + self.delay, data))
            if not data:
                return

    def close(self):
        self.sock.close()


def unmount_all(mounts):
    """Unmounts each, waiting out read-ahead's last files (a busy mount) for a while."""
    for mnt, state in mounts:
        for _ in range(50):
            if subprocess.run([REVFS, 'unmount', mnt], env=mount_env(state),
                              stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.2)
        else:
            subprocess.run([REVFS, 'unmount', '--force', mnt], env=mount_env(state))


def mount_env(state):
    return dict(ENV, REVFS_STATE_DIR=state)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--delay-ms', type=int, default=0)
    ap.add_argument('--ssh', action='store_true')
    ap.add_argument('--no-tar', action='store_true',
                    help='time and bytes to a working copy only (no first client, no tar)')
    ap.add_argument('--clone-once', action='store_true',
                    help='make the full clone once (its time and bytes from the first run) and '
                         'mount it afresh each run: a 1M clone costs minutes a run, and a new '
                         'mount after dropped caches is as cold for the first tar')
    ap.add_argument('--server-cache', metavar='DIR',
                    help="the server's blob cache, kept after the run: when it holds blobs "
                         "already, the first client's tar (which fills it) is skipped")
    ap.add_argument('--cold-server', action='store_true',
                    help="leave the server's blob cache out of memory for the lazy tar (by "
                         "default it is read back after the page cache is dropped: a server "
                         "on its own machine keeps its memory when a client drops its own)")
    ap.add_argument('--out')
    a = ap.parse_args()
    benchdeps.install()
    corpus = os.path.abspath(a.corpus)
    work = tempfile.mkdtemp(prefix='revfs-clone-bench-', dir='/var/tmp')
    raw = {k: [] for k in ['full_time', 'full_bytes', 'lazy_time', 'lazy_bytes', 'tar_full',
                           'tar_lazy', 'batches', 'dirs', 'st_revfs_full', 'st_revfs_lazy',
                           'st_hg_full', 'st_hg_lazy', 'cpu_daemon_full', 'cpu_daemon_lazy',
                           'cpu_server_lazy', 'cat_full', 'cat_lazy', 'cat_rss_full',
                           'cat_rss_lazy', 'packs', 'packs_before_merge', 'merge_time',
                           'server_warm']}
    mounts = []
    server = None
    try:
        srvcache = os.path.abspath(a.server_cache) if a.server_cache else os.path.join(work, 'srvcache')
        warm = bool(a.server_cache) and os.path.isdir(srvcache) and any(os.scandir(srvcache))
        server = Server(corpus, work, srvcache)
        if a.delay_ms:
            proxy = DelayProxy(int(server.url.rsplit(':', 1)[1].strip('/')), a.delay_ms / 1000)
            server.url = 'http://127.0.0.1:%d/' % proxy.port
        lazy_url, lazy_env = server.url, {}
        if a.ssh:
            ssh, hgrc = os.path.join(work, 'dummyssh'), os.path.join(work, 'hgrc')
            remote = os.path.join(work, 'hg-server')
            with open(ssh, 'w') as f:
                f.write('#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -p) shift 2;; *) break;; esac; done\n'
                        'shift\nexec /bin/sh -c "$*"\n')
            # hg refuses `serve --stdio` with any argument but `-R PATH`: the server's
            # settings come from a configuration file of its own.
            server_rc = os.path.join(work, 'server-hgrc')
            with open(server_rc, 'w') as f:
                f.write('[extensions]\nremotefilelog =\n[remotefilelog]\nserver = True\n'
                        'servercachepath = %s\n' % srvcache)
            with open(remote, 'w') as f:
                f.write('#!/bin/sh\nHGRCPATH=%s exec hg "$@"\n' % server_rc)
            for x in (ssh, remote):
                os.chmod(x, 0o755)
            with open(hgrc, 'w') as f:
                f.write('[ui]\nssh = %s\nremotecmd = %s\n' % (ssh, remote))
            lazy_url, lazy_env = 'ssh://bench@localhost/%s' % corpus, {'HGRCPATH': hgrc}
        dirs = int(subprocess.run('hg -R %s files -r tip | sed "s,/[^/]*$,," | sort -u | wc -l' % corpus,
                                  shell=True, capture_output=True, text=True, env=ENV).stdout)
        files = subprocess.run(['hg', 'files', '-r', 'tip'], cwd=corpus, capture_output=True,
                               env=ENV, check=True).stdout.splitlines()
        sample = os.path.join(work, 'cat-files')
        with open(sample, 'wb') as f:
            f.write(b''.join(b'path:' + x + b'\n' for x in files[::100][:2000]))
        raw['cat_n'] = len(files[::100][:2000])
        # The first client: the server builds every blob (its cache is warm afterwards).
        d = os.path.join(work, 'first')
        if not a.no_tar and not warm:
            os.makedirs(os.path.join(d, 'lmnt'))
            sh('%s clone %s %s --repo %s' % (REVFS, lazy_url, os.path.join(d, 'lmnt'), os.path.join(d, 'lazy')),
               env=dict(mount_env(os.path.join(d, 'lstate')), **lazy_env), stdout=subprocess.DEVNULL)
            mounts.append((os.path.join(d, 'lmnt'), os.path.join(d, 'lstate')))
            drop_caches()
            raw['tar_first_client'] = [timed('cd %s && tar cf - . | wc -c' % os.path.join(d, 'lmnt'))]
            unmount_all(mounts)
            mounts = []
            shutil.rmtree(d, ignore_errors=True)
        for run in range(a.runs):
            # A: hg clone + revfs mount.
            d = os.path.join(work, 'run%d' % run)
            os.makedirs(d)
            full, fstate, fmnt = os.path.join(d, 'full'), os.path.join(d, 'fstate'), os.path.join(d, 'fmnt')
            if a.clone_once:
                full = os.path.join(work, 'full-once')
            os.makedirs(fmnt)
            drop_caches()
            t = time.perf_counter()
            cloned = not (a.clone_once and run > 0)
            if cloned:
                sh('hg clone -q -U %s %s' % (server.url, full), stdout=subprocess.DEVNULL)
            sh('%s mount %s %s' % (REVFS, full, fmnt), env=mount_env(fstate))
            if cloned:
                raw['full_time'].append(time.perf_counter() - t)
            mounts.append((fmnt, fstate))
            if cloned:
                raw['full_bytes'].append(du(full, fstate))
            # B: revfs clone.
            lazy, lstate, lmnt = os.path.join(d, 'lazy'), os.path.join(d, 'lstate'), os.path.join(d, 'lmnt')
            os.makedirs(lmnt)
            drop_caches()
            before = server.requests('batch')
            t = time.perf_counter()
            sh('%s clone %s %s --repo %s' % (REVFS, lazy_url, lmnt, lazy),
               env=dict(mount_env(lstate), **lazy_env), stdout=subprocess.DEVNULL)
            raw['lazy_time'].append(time.perf_counter() - t)
            mounts.append((lmnt, lstate))
            raw['lazy_bytes'].append(du(lazy, lstate))
            if a.no_tar:
                unmount_all(mounts)
                mounts = []
                shutil.rmtree(d, ignore_errors=True)
                continue
            # First tar: the full clone's mount, then the lazy one.
            fpid, lpid = daemon_of(fmnt), daemon_of(lmnt)
            drop_caches()
            c = cpu_seconds(fpid) if fpid else 0.0
            raw['tar_full'].append(timed('cd %s && tar cf - . | wc -c' % fmnt))
            raw['cpu_daemon_full'].append((cpu_seconds(fpid) - c) if fpid else 0.0)
            drop_caches()
            if not a.cold_server:
                raw['server_warm'].append(warm_server(srvcache))
            c, cs = (cpu_seconds(lpid) if lpid else 0.0), cpu_seconds(server.proc.pid)
            raw['tar_lazy'].append(timed('cd %s && tar cf - . | wc -c' % lmnt))
            raw['cpu_daemon_lazy'].append((cpu_seconds(lpid) - c) if lpid else 0.0)
            raw['cpu_server_lazy'].append(cpu_seconds(server.proc.pid) - cs)
            raw['batches'].append(server.requests('batch') - before)
            # The daemon merges small packs once fetches stop (3 s of quiet): hg is measured
            # after that, as a user who runs hg a little after the tar would find it.
            def count_packs():
                return sum(1 for _, _, names in os.walk(lstate) for n in names
                           if n.endswith('.datapack'))
            raw['packs_before_merge'].append(count_packs())
            t = time.perf_counter()
            last, stable_since = count_packs(), time.perf_counter()
            while time.perf_counter() - stable_since < 10 and time.perf_counter() - t < 1200:
                time.sleep(0.5)
                n = count_packs()
                if n != last:
                    last, stable_since = n, time.perf_counter()
            raw['merge_time'].append(stable_since - t)
            print('run %d: first tar %.2f s full, %.2f s lazy (%.2fx)' % (
                run, raw['tar_full'][-1], raw['tar_lazy'][-1],
                raw['tar_lazy'][-1] / raw['tar_full'][-1]), file=sys.stderr, flush=True)
            raw['dirs'].append(dirs)
            for name, mnt in [('full', fmnt), ('lazy', lmnt)]:
                raw['st_revfs_' + name].append(timed('cd %s && %s status' % (mnt, REVFS)))
                raw['st_hg_' + name].append(timed('cd %s && hg status' % mnt))
                secs, rss = hg_cat(mnt, sample)
                raw['cat_' + name].append(secs)
                raw['cat_rss_' + name].append(rss)
            raw['packs'].append(sum(1 for _, _, names in os.walk(lstate) for n in names
                                    if n.endswith('.datapack')))
            unmount_all(mounts)
            mounts = []
            shutil.rmtree(d, ignore_errors=True)
    finally:
        if server:
            server.stop()  # also when a step failed: no server outlives the benchmark
        for mnt, state in mounts:
            subprocess.run(['fusermount3', '-uz', mnt])
        # Nothing is removed through a mount: rmtree would walk into one left behind.
        with open('/proc/self/mountinfo') as f:
            left = [l.split()[4] for l in f if l.split()[4].startswith(work)]
        for m in left:
            subprocess.run(['fusermount3', '-uz', m])
        time.sleep(0.5)
        with open('/proc/self/mountinfo') as f:
            if any(l.split()[4].startswith(work) for l in f):
                print('mounts left under %s: not removed' % work, file=sys.stderr)
            else:
                shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in raw.items() if isinstance(v, list) and v}
    print('| %s, %s%s | hg clone + revfs mount | revfs clone | ratio |' % (
        os.path.basename(corpus), 'loopback' if not a.delay_ms else '+%d ms each way' % a.delay_ms,
        ', lazy over ssh' if a.ssh else ''))
    print('|---|---|---|---|')
    print('| time to a readable working copy | %.2f s | %.2f s | %.3f |' % (
        med['full_time'], med['lazy_time'], med['lazy_time'] / med['full_time']))
    print('| bytes on disk | %.1f MB | %.1f MB | %.3f |' % (
        med['full_bytes'] / 1e6, med['lazy_bytes'] / 1e6, med['lazy_bytes'] / med['full_bytes']))
    if a.no_tar:
        if a.out:
            with open(a.out, 'w') as f:
                json.dump(raw, f, indent=1)
        return
    print('| first tar of the tree (the server\'s blob cache %s) | %.2f s | %.2f s | %.2f |' % (
        'on its disk' if a.cold_server else 'in its memory',
        med['tar_full'], med['tar_lazy'], med['tar_lazy'] / med['tar_full']))
    if 'tar_first_client' in raw:
        print('| first tar, the server\'s first client (one run) | %.2f s | %.2f s | %.2f |' % (
            med['tar_full'], med['tar_first_client'], med['tar_first_client'] / med['tar_full']))
    print('| CPU of the daemon during the tar (of the server) | %.1f s | %.1f s (%.1f s) | |' % (
        med['cpu_daemon_full'], med['cpu_daemon_lazy'], med['cpu_server_lazy']))
    print('| requests of the lazy tar (directories) | | %d (%d) | |' % (med['batches'], med['dirs']))
    print('| revfs status after the tar | %.1f ms | %.1f ms | %.2f |' % (
        med['st_revfs_full'] * 1e3, med['st_revfs_lazy'] * 1e3, med['st_revfs_lazy'] / med['st_revfs_full']))
    print('| hg status after the tar | %.1f ms | %.1f ms | %.2f |' % (
        med['st_hg_full'] * 1e3, med['st_hg_lazy'] * 1e3, med['st_hg_lazy'] / med['st_hg_full']))
    print('| data packs the lazy tar left, then merged (merge time) | | %d, %d (%.1f s) | |' % (
        med['packs_before_merge'], med['packs'], med['merge_time']))
    print('| hg cat of %d files after the tar (data packs) | %.2f s | %.2f s (%d) | %.2f |' % (
        raw['cat_n'],
        med['cat_full'], med['cat_lazy'], med['packs'], med['cat_lazy'] / med['cat_full']))
    print('| hg\'s peak memory in that cat | %.0f MB | %.0f MB | %.2f |' % (
        med['cat_rss_full'], med['cat_rss_lazy'], med['cat_rss_lazy'] / med['cat_rss_full']))
    if a.out:
        with open(a.out, 'w') as f:
            json.dump(raw, f, indent=1)


if __name__ == '__main__':
    main()
