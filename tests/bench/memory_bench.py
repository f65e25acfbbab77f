#!/usr/bin/env python3
"""Benchmark (not a test) of what the daemon holds in memory on a corpus tree, side by side
with hg and git status on the corpus's own checkout, in the same run.

Usage: tests/bench/memory_bench.py CORPUS [--bin REVFS[::CONFIG] ...] [--runs N] [--out FILE]
CORPUS is a tree made by ../shared/corpus/make-corpus.sh (an hg repository with a working
copy at tip; CORPUS.git, a bare repository of the same tree, is used when present). Each
--bin (default: target/release/revfs) is measured on fresh mounts, so that two builds (or one with two configurations: CONFIG is a
revfs configuration file, given as REVFS_CONFIG) compare in one run.

Per binary and run: the time of a first mount of tip (the corpus's manifest cache,
.hg/cache/revfs, removed before; unmounted once the daemon has kept its manifest there) and
the daemon's peak RSS by then, then
on a fresh mount of tip (which maps the kept manifest): mount time; the daemon's RSS (VmRSS,
and in parentheses its anonymous part, RssAnon: the rest is mapped files, page cache the
kernel can take back) after the mount, after `find . -type f | wc -l` and after
`tar cf - . | wc -c`, its peak (VmHWM); the time of each walk; the entries and frozen files the daemon reports (`stats`). The anchors:
`hg status` and `git status` on the corpus checkout, time and peak RSS (/usr/bin/time).
Prints a markdown table with medians; the raw numbers go to --out as JSON.
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')


def sh(cmd, env=None, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=env or ENV, **kw)


def status_kb(pid, key):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1])
    return -1


def daemon(state):
    mounts = os.path.join(state, 'mounts')
    for d in os.listdir(mounts):
        p = os.path.join(mounts, d, 'daemon.pid')
        if os.path.exists(p):
            return int(open(p).read()), os.path.join(mounts, d, 'control.sock')
    raise RuntimeError('no daemon pid')


def stats(sock):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(b'{"cmd":"stats"}\n')
    data = b''
    while not data.endswith(b'\n'):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return json.loads(data.decode().strip().splitlines()[-1])


def timed(cmd, cwd):
    t = time.perf_counter()
    sh(cmd, cwd=cwd, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def peak(cmd, cwd):
    """(seconds, peak RSS in KiB) of a command, by /usr/bin/time."""
    t = time.perf_counter()
    out = subprocess.run(['/usr/bin/time', '-f', '%M', 'sh', '-c', cmd], cwd=cwd, env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    return time.perf_counter() - t, int(out.stderr.decode().strip().splitlines()[-1])


def mount(revfs, config, corpus):
    """(seconds, state directory, mountpoint, environment) of a fresh mount of tip."""
    state = tempfile.mkdtemp(prefix='revfs-bench-state-', dir='/var/tmp')
    mnt = tempfile.mkdtemp(prefix='revfs-bench-mnt-', dir='/var/tmp')
    env = dict(ENV, REVFS_STATE_DIR=state)
    if config:
        env['REVFS_CONFIG'] = config
    t = time.perf_counter()
    sh('%s mount %s %s' % (revfs, corpus, mnt), env=env)
    return time.perf_counter() - t, state, mnt, env


def first_mount(revfs, config, corpus):
    """(seconds, the daemon's peak RSS in KiB) of a mount with no manifest kept; returns
    once the daemon kept it (or 10 s)."""
    cache = os.path.join(corpus, '.hg', 'cache', 'revfs')
    kept = os.path.join(cache, 'manifests')
    sh('rm -rf %s' % cache)
    took, state, mnt, env = mount(revfs, config, corpus)
    deadline = time.time() + 10
    while time.time() < deadline and not (
            os.path.isdir(kept) and any(f.endswith('.manifest') for f in os.listdir(kept))):
        time.sleep(0.05)
    time.sleep(1)
    pid, _ = daemon(state)
    hwm = status_kb(pid, 'VmHWM')
    sh('%s unmount %s' % (revfs, mnt), env=env)
    sh('rm -rf %s %s' % (state, mnt))
    return took, hwm


def rss(pid):
    return status_kb(pid, 'VmRSS'), status_kb(pid, 'RssAnon')


def one_run(revfs, config, corpus):
    r = {}
    r['mount_first_s'], r['hwm_first_kb'] = first_mount(revfs, config, corpus)
    r['mount_s'], state, mnt, env = mount(revfs, config, corpus)
    try:
        pid, sock = daemon(state)
        time.sleep(0.2)
        r['rss_mount_kb'], r['anon_mount_kb'] = rss(pid)
        r['find_s'] = timed('find . -type f | wc -l', mnt)
        r['rss_find_kb'], r['anon_find_kb'] = rss(pid)
        r['stats_find'] = stats(sock)
        r['tar_s'] = timed('tar cf - . | wc -c', mnt)
        r['rss_tar_kb'], r['anon_tar_kb'] = rss(pid)
        r['stats_tar'] = stats(sock)
        r['hwm_kb'] = status_kb(pid, 'VmHWM')
    finally:
        sh('%s unmount %s' % (revfs, mnt), env=env)
        sh('rm -rf %s %s' % (state, mnt))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--bin', action='append')
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--out')
    a = ap.parse_args()
    corpus = os.path.abspath(a.corpus)
    bins = a.bin or [os.path.join(ROOT, 'target', 'release', 'revfs')]
    raw = {'bins': {}, 'anchors': {}}
    for _ in range(a.runs):
        for key in bins:
            b, _, c = key.partition('::')
            raw['bins'].setdefault(key, []).append(one_run(b, c or None, corpus))
            print(key, raw['bins'][key][-1], file=sys.stderr, flush=True)
        git = 'git --git-dir=%s.git --work-tree=%s status --porcelain' % (corpus, corpus)
        for name, cmd, cwd in [('hg status', 'hg status', corpus), ('git status', git, corpus)]:
            if name == 'hg status' or os.path.isdir(corpus + '.git'):
                raw['anchors'].setdefault(name, []).append(peak(cmd, cwd))
    med = statistics.median
    mib = lambda kb: '%d MiB' % (kb // 1024)
    print('| binary | first mount (peak RSS) | mount | RSS (anon) after mount | find -type f | RSS (anon) after find '
          '| entries / frozen after find | tar | RSS (anon) after tar | entries / frozen after tar '
          '| peak RSS |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    for b, runs in raw['bins'].items():
        m = lambda k: med([r[k] for r in runs])
        s = lambda k, f: int(med([r[k].get(f, 0) for r in runs]))
        both = lambda k: '%s (%s)' % (mib(m('rss_' + k)), mib(m('anon_' + k)))
        print('| %s | %.0f ms (%s) | %.0f ms | %s | %.2f s | %s | %d / %d | %.1f s | %s | %d / %d | %s |' % (
            b, m('mount_first_s') * 1000, mib(m('hwm_first_kb')), m('mount_s') * 1000, both('mount_kb'), m('find_s'),
            both('find_kb'), s('stats_find', 'entries'), s('stats_find', 'frozen'), m('tar_s'),
            both('tar_kb'), s('stats_tar', 'entries'), s('stats_tar', 'frozen'),
            mib(m('hwm_kb'))))
    for name, runs in raw['anchors'].items():
        print('| %s (checkout) | %.2f s, peak RSS %s |' % (
            name, med([r[0] for r in runs]), mib(med([r[1] for r in runs]))))
    if a.out:
        with open(a.out, 'w') as f:
            json.dump(raw, f, indent=1)


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
