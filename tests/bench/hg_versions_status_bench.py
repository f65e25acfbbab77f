#!/usr/bin/env python3
"""Benchmark (not a test) of `hg status` in a revfs mount against native checkouts of the
same tree, by Mercurial release and front end, in one run: Debian's hg 6.3.2 and its chg;
hg 7.2.4 with its Rust extensions, its chg, and rhg 7.2.4 (in the mount rhg refuses the
mount's requirement and hands the command to hg 7.2.4: `rhg.on-unsupported=fallback`).
The native checkouts are each release's best: dirstate-v1 made by 6.3.2, dirstate-v2 made
by 7.2.4 (its Rust status, and rhg's). With 0 and 1,000 modified files (a line appended to
the same files in every tree).

Usage: tests/bench/hg_versions_status_bench.py CORPUS... [--anchors DIR] [--scratch DIR]
                                                [--runs N] [--warmup N]
CORPUS comes from ../shared/corpus/make-corpus.sh; --anchors is where
../shared/corpus/build-anchors.sh put rhg and hg 7.2.4 (hg72/bin/hg), with 7.2.4's chg built
beside them (bin/chg72: `make -C contrib/chg HGPATH=DIR/hg72/bin/hg` in its source).

Every command is a whole process started from this script (no shell), run with `--cwd DIR`
as a user in DIR would. The commands of one tree run in turns (A B C ... A B C ...), --runs
rounds after --warmup rounds, and the medians are printed as markdown tables with their
ratios. Before timing, the script checks that each front end prints in the mount exactly
what it prints natively.

Floors, measured in the same rounds: each front end's start-up (`--version`; rhg's
`--help`), its status in an empty repository, and `revfs status` in the mount (the
daemon's answer alone, a whole process).
"""
import argparse, os, statistics, subprocess, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=kw.pop('env', ENV), **kw)


def out(argv, env):
    r = subprocess.run(argv, env=env, capture_output=True)
    return r.returncode, r.stdout


def timed(cmds, runs, warmup):
    """cmds: [(name, argv, env)]; the medians in seconds, taken in turns."""
    times = {name: [] for name, _, _ in cmds}
    for i in range(warmup + runs):
        for name, argv, env in cmds:
            t0 = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t1 = time.perf_counter()
            if i >= warmup:
                times[name].append(t1 - t0)
    return {k: statistics.median(v) for k, v in times.items()}


class Fronts:
    """The front ends: (name, argv prefix, env, native tree kind)."""

    def __init__(self, a, scratch):
        self.hg72 = os.path.join(a.anchors, 'hg72', 'bin', 'hg')
        self.rhg = os.path.join(a.anchors, 'bin', 'rhg')
        self.chg72 = os.path.join(a.anchors, 'bin', 'chg72')
        for p in (self.hg72, self.rhg, self.chg72):
            if not os.path.exists(p):
                raise SystemExit('%s: missing (see --help: build-anchors.sh, chg72)' % p)
        self.socks = tempfile.mkdtemp(prefix='chg-', dir=scratch)
        chg63 = dict(ENV, CHGSOCKNAME=os.path.join(self.socks, 'chg63'))
        chg72 = dict(ENV, CHGSOCKNAME=os.path.join(self.socks, 'chg72'))
        rhg = ['--config', 'rhg.on-unsupported=fallback',
               '--config', 'rhg.fallback-executable=' + self.hg72]
        self.list = [
            ('hg 6.3.2', ['hg'], ENV, 'v1'),
            ('chg 6.3.2', ['chg'], chg63, 'v1'),
            ('hg 7.2.4+Rust', [self.hg72], ENV, 'v2'),
            ('chg 7.2.4', [self.chg72], chg72, 'v2'),
            ('rhg 7.2.4', [self.rhg] + rhg, ENV, 'v2'),
        ]

    def stop(self):
        # A chg server names its socket on its command line.
        for s in ('chg63', 'chg72'):
            subprocess.run(['pkill', '-f', '--', '--address ' + os.path.join(self.socks, s)])
        for n in os.listdir(self.socks):
            try:
                os.unlink(os.path.join(self.socks, n))
            except OSError:
                pass
        os.rmdir(self.socks)


def bench(corpus, a, fronts):
    name = os.path.basename(corpus)
    files = subprocess.run(['hg', 'files', '-r', 'tip'], cwd=corpus, env=ENV, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    files = [f for f in files if not os.path.islink(os.path.join(corpus, f))]
    wc = {'v1': os.path.join(a.scratch, name + '-st-hg'),
          'v2': os.path.join(a.scratch, name + '-st-rhg')}
    if not os.path.isdir(wc['v1']):
        sh('hg clone -q %s %s' % (corpus, wc['v1']))
    if not os.path.isdir(wc['v2']):
        sh('%s clone -q -U --config format.use-dirstate-v2=yes --config '
           'format.use-persistent-nodemap=no %s %s' % (fronts.hg72, corpus, wc['v2']))
        sh('%s -R %s update -q tip' % (fronts.hg72, wc['v2']))
    state = tempfile.mkdtemp(prefix='revfs-hgv-state-', dir=a.scratch)
    mnt = tempfile.mkdtemp(prefix='revfs-hgv-mnt-', dir=a.scratch)
    renv = dict(ENV, REVFS_STATE_DIR=state)
    sh('%s mount -r tip %s %s' % (REVFS, corpus, mnt), env=renv)
    rows = []
    try:
        cmds = []
        for f, argv, env, kind in fronts.list:
            menv = dict(env, REVFS_STATE_DIR=state)
            cmds.append((f + ' mount', argv + ['--cwd', mnt, 'status'], menv))
            cmds.append((f + ' native', argv + ['--cwd', wc[kind], 'status'], env))
        cmds.append(('revfs status', [REVFS, '-R', mnt, 'status'], renv))
        # Settle: one status each (hg's dirstate fix-ups, the chg servers) before timing.
        for _, argv, env in cmds:
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        done = 0
        for nmod in (0, 1000):
            for f in files[done:nmod]:
                for t in (mnt, wc['v1'], wc['v2']):
                    with open(os.path.join(t, f), 'ab') as fh:
                        fh.write(b'/* revfs hg-versions benchmark */\n')
            done = max(done, nmod)
            want = out(['hg', '--cwd', wc['v1'], 'status'], ENV)
            assert len(want[1].splitlines()) == nmod, (nmod, want)
            for cname, argv, env in cmds:
                got = out(argv, env)
                assert got == want, '%s prints otherwise (%d modified): %r' % (cname, nmod, got[1][:300])
            rows.append((nmod, timed(cmds, a.runs, a.warmup)))
    finally:
        sh('%s unmount %s' % (REVFS, mnt), env=renv)
        os.rmdir(mnt)
        # Put the native checkouts back for the next run.
        sh('hg --cwd %s revert -q --no-backup -a' % wc['v1'])
        sh('%s --cwd %s revert -q --no-backup -a' % (fronts.hg72, wc['v2']))
    return name, len(files), rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus', nargs='+')
    ap.add_argument('--anchors', default='/work/bench/anchors')
    ap.add_argument('--scratch', default='/work/bench/scratch')
    ap.add_argument('--runs', type=int, default=9)
    ap.add_argument('--warmup', type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    fronts = Fronts(a, a.scratch)
    try:
        empty = os.path.join(a.scratch, 'empty-repo')
        if not os.path.isdir(empty):
            sh('hg init %s' % empty)
        floor_cmds = []
        for f, argv, env, _ in fronts.list:
            start = ['--help'] if f.startswith('rhg') else ['--version']
            floor_cmds.append((f + ': start-up', argv + start, env))
            floor_cmds.append((f + ': status, empty repository', argv + ['--cwd', empty, 'status'], env))
        floors = timed(floor_cmds, a.runs, a.warmup)
        results = [bench(os.path.abspath(c), a, fronts) for c in a.corpus]
    finally:
        fronts.stop()
    print('Medians in seconds; ratio: native / mount (above 1: the mount is faster).')
    print()
    print('| tree | files | modified | front end | in the mount | native | native / mount |')
    print('|---|---:|---:|---|---:|---:|---:|')
    for name, n, rows in results:
        for nmod, r in rows:
            for f, _, _, _ in fronts.list:
                m, nat = r[f + ' mount'], r[f + ' native']
                print('| %s | %d | %d | %s | %.4f | %.4f | %.2fx |' % (name, n, nmod, f, m, nat, nat / m))
            print('| %s | %d | %d | revfs status | %.4f | | |' % (name, n, nmod, r['revfs status']))
    print()
    print('The fastest in the mount against the fastest native, by release:')
    print()
    print('| tree | modified | release | fastest in the mount | fastest native | native / mount |')
    print('|---|---:|---|---|---|---:|')
    for name, n, rows in results:
        for nmod, r in rows:
            for rel in ('6.3.2', '7.2.4'):
                fs = [f for f, _, _, _ in fronts.list if rel in f]
                bm = min(fs, key=lambda f: r[f + ' mount'])
                bn = min(fs, key=lambda f: r[f + ' native'])
                print('| %s | %d | %s | %s %.4f | %s %.4f | %.2fx |' % (
                    name, nmod, rel, bm, r[bm + ' mount'], bn, r[bn + ' native'],
                    r[bn + ' native'] / r[bm + ' mount']))
    print()
    print('| floor | median (s) |')
    print('|---|---:|')
    for k, v in floors.items():
        print('| %s | %.4f |' % (k, v))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
