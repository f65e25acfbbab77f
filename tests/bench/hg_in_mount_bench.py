#!/usr/bin/env python3
"""Benchmark (not a test) of real `hg status` inside a revfs mount (the share and revfs's
extension, the daemon as dirstate) against `hg status` and `rhg status` on native checkouts
of the same tree, in the same run, with 0 and 1,000 modified files; with hg's own floors.

Usage: tests/bench/hg_in_mount_bench.py CORPUS... [--anchors DIR] [--scratch DIR] [--runs N]
CORPUS comes from ../shared/corpus/make-corpus.sh; --anchors is where
../shared/corpus/build-anchors.sh put rhg and hg 7.2 (rhg needs a dirstate-v2 checkout made by
hg 7.2). Every command runs with `--cwd DIR`, as a user in DIR would, through hyperfine -N
(3 warm-ups). Prints markdown tables of medians (seconds) and ratios, and checks that hg in
the mount prints what hg prints in the native checkout.

Floors, measured in the same run:
  hg --version                        hg's start-up (Python, imports, config)
  hg status in an empty repository    start-up + opening a repository + an empty status
  the same with revfs's extension     + importing the extension (inert outside a mount)
  revfs status in the mount           the daemon's answer alone (socket round trip + status)
"""
import argparse, json, os, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=kw.pop('env', ENV), **kw)


def out(cmd, **kw):
    return sh(cmd, capture_output=True, **kw).stdout


def hyperfine(cmds, runs, env):
    path = tempfile.mktemp(suffix='.json')
    args = ['hyperfine', '-N', '-w', '3', '-r', str(runs), '--export-json', path]
    for name, cmd in cmds:
        args += ['-n', name, cmd]
    subprocess.run(args, check=True, env=env, stdout=subprocess.DEVNULL)
    res = {r['command']: r['median'] for r in json.load(open(path))['results']}
    os.unlink(path)
    return res


def bench(corpus, a, floors):
    name = os.path.basename(corpus)
    files = out('hg files -r tip', cwd=corpus, text=True).splitlines()
    files = [f for f in files if not os.path.islink(os.path.join(corpus, f))]
    hgwc = os.path.join(a.scratch, name + '-st-hg')
    if not os.path.isdir(hgwc):
        sh('hg clone -q %s %s' % (corpus, hgwc))
    trees = {'hg': hgwc}
    hg72 = os.path.join(a.anchors, 'hg72', 'bin', 'hg')
    rhg = os.path.join(a.anchors, 'bin', 'rhg')
    if os.path.exists(hg72) and os.path.exists(rhg):
        rwc = os.path.join(a.scratch, name + '-st-rhg')
        if not os.path.isdir(rwc):
            sh('%s clone -q -U --config format.use-dirstate-v2=yes --config format.use-persistent-nodemap=no %s %s' % (hg72, corpus, rwc))
            sh('%s -R %s update -q tip' % (hg72, rwc))
        trees['rhg'] = rwc
    state = tempfile.mkdtemp(prefix='revfs-hgm-state-', dir=a.scratch)
    mnt = tempfile.mkdtemp(prefix='revfs-hgm-mnt-', dir=a.scratch)
    renv = dict(ENV, REVFS_STATE_DIR=state)
    sh('%s mount -r tip %s %s' % (REVFS, corpus, mnt), env=renv)
    trees['mount'] = mnt
    cmds = {
        'mount': 'hg --cwd %s status' % mnt,
        'hg': 'hg --cwd %s status' % hgwc,
        'rhg': '%s --cwd %s status' % (rhg, trees.get('rhg')),
        'revfs': '%s -R %s status' % (REVFS, mnt),
    }
    rows = []
    try:
        # Settle: one status each (hg's dirstate fix-ups) before timing.
        for t in ('hg', 'rhg', 'mount'):
            if t in trees:
                sh(cmds[t], env=renv, stdout=subprocess.DEVNULL)
        done = 0
        for nmod in (0, 1000):
            for f in files[done:nmod]:
                for t in ('hg', 'rhg', 'mount'):
                    if t in trees:
                        with open(os.path.join(trees[t], f), 'ab') as fh:
                            fh.write(b'/* revfs hg-in-mount benchmark */\n')
            done = max(done, nmod)
            ours, theirs = out(cmds['mount'], env=renv), out(cmds['hg'])
            assert ours == theirs, 'hg status in the mount differs from hg status (%d modified)' % nmod
            assert len(ours.splitlines()) == nmod, (nmod, len(ours.splitlines()))
            run = [(k, cmds[k]) for k in ('mount', 'hg', 'rhg', 'revfs') if k in trees or k == 'revfs']
            rows.append((nmod, hyperfine(run, a.runs, renv)))
    finally:
        sh('%s unmount %s' % (REVFS, mnt), env=renv)
        os.rmdir(mnt)
        # Put the native checkouts back for the next run.
        sh('hg --cwd %s revert -q --no-backup -a' % hgwc)
        if 'rhg' in trees:
            sh('%s --cwd %s revert -q --no-backup -a' % (hg72, trees['rhg']))
    return name, len(files), rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus', nargs='+')
    ap.add_argument('--anchors', default='/work/bench/anchors')
    ap.add_argument('--scratch', default='/work/bench/scratch')
    ap.add_argument('--runs', type=int, default=15)
    a = ap.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    empty = os.path.join(a.scratch, 'empty-repo')
    if not os.path.isdir(empty):
        sh('hg init %s' % empty)
    # The extension as a mount's share carries it (revfs writes it at each mount).
    ext = os.path.join(ROOT, 'hgext', 'revfs')
    floors = hyperfine([
        ('hg --version', 'hg --version'),
        ('hg status, empty repository', 'hg --cwd %s status' % empty),
        ('the same, with the extension', 'hg --cwd %s status --config extensions.revfs=%s' % (empty, ext)),
    ], a.runs, ENV)
    results = [bench(os.path.abspath(c), a, floors) for c in a.corpus]
    print('| tree | files | modified | hg status in the mount | hg status (native) | rhg status (native) | revfs status (the daemon alone) | hg / mount | rhg / mount |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    for name, n, rows in results:
        for nmod, r in rows:
            m = r['mount']
            rh = r.get('rhg')
            print('| %s | %d | %d | %.4f | %.4f | %s | %.4f | %.1fx | %s |' % (
                name, n, nmod, m, r['hg'], '%.4f' % rh if rh else '-', r['revfs'],
                r['hg'] / m, '%.2fx' % (rh / m) if rh else '-'))
    print()
    print('| floor | median (s) |')
    print('|---|---:|')
    for k, v in floors.items():
        print('| %s | %.4f |' % (k, v))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
