#!/usr/bin/env python3
"""Benchmark (not a test) of hg's merge family inside a revfs mount against a native
checkout of the same history, in the same run: `hg rebase` of a 3-commit stack over 100
upstream commits, `hg update` over 1,000 locally modified files (100 of which the
update changes too, so that hg merges them), `hg shelve` then `hg unshelve` of those
1,000 changes, then `hg status` after it all.

Usage: tests/bench/hg_merge_bench.py CORPUS [--scratch DIR] [--runs N]
CORPUS comes from ../shared/corpus/make-corpus.sh. The native side is a clone of CORPUS;
the history (a stack of 3 commits on the corpus's tip, 100 upstream commits beside it) is
made there and pushed to the mount's repository, a clone without a working copy, so that
both sides have the same changesets. hyperfine -N, 2 warm-ups; each rebase runs with
--keep from the stack's tip (the prepare step updates back there), each update pair goes
to the upstream tip and back with the 1,000 changed files carried along.
"""
import argparse, os, shutil, subprocess, tempfile

from hg_commit_update_bench import hyperfine, sh

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')
RC = ['--config', 'extensions.rebase=']
USER = '--config ui.username=bench'


def hg(d, *args, env=ENV):
    return subprocess.run(['hg', '--cwd', d] + list(args), check=True, env=env,
                          capture_output=True, text=True).stdout


def append(root, files, line):
    for f in files:
        with open(os.path.join(root, f), 'a') as fh:
            fh.write(line)


def prepend(root, f, line):
    p = os.path.join(root, f)
    data = open(p, 'rb').read()
    with open(p, 'wb') as fh:
        fh.write(line + data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--scratch', default='/work/bench/scratch')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--only', help='measure only the rows whose label contains this')
    ap.add_argument('--keep', action='store_true',
                    help='leave the mount and the scratch trees for a look afterwards')
    a = ap.parse_args()
    corpus = os.path.abspath(a.corpus)
    os.makedirs(a.scratch, exist_ok=True)
    work = tempfile.mkdtemp(prefix='revfs-merge-', dir=a.scratch)
    native, repo, mnt = (os.path.join(work, n) for n in ('native', 'repo', 'mnt'))
    state = os.path.join(work, 'state')
    os.makedirs(mnt)
    renv = dict(ENV, REVFS_STATE_DIR=state)
    rows = []
    mounted = False
    try:
        sh('hg clone -q -r tip %s %s' % (corpus, native))
        files = [f for f in hg(native, 'files', '-r', 'tip').splitlines()
                 if not os.path.islink(os.path.join(native, f))]
        base = hg(native, 'id', '-i').strip()
        # The stack: 3 commits on the tip, each changing 3 files of its own.
        for i in range(3):
            append(native, files[2000 + 3 * i:2003 + 3 * i], 'stack %d\n' % i)
            hg(native, 'commit', '-q', '-m', 'stack %d' % i, '-u', 'bench', '-d', '%d 0' % i)
        stack = hg(native, 'id', '-i').strip()
        # Upstream: 100 commits beside it, each adding a first line to one of the 1,000
        # files the update below carries changes to (appended lines: clean merges).
        hg(native, 'update', '-q', base)
        for i in range(100):
            prepend(native, files[i * 10], b'upstream %d\n' % i)
            hg(native, 'commit', '-q', '-m', 'up %d' % i, '-u', 'bench', '-d', '%d 0' % (10 + i))
        upstream = hg(native, 'id', '-i').strip()
        sh('hg clone -q -U %s %s' % (corpus, repo))
        sh('hg --cwd %s push -q -f %s' % (native, repo))
        for d in (native, repo):
            hg(d, 'phase', '--draft', '--force', '-r', 'all()')
        hg(native, 'update', '-q', stack)
        sh('%s mount -r %s %s %s' % (REVFS, stack, repo, mnt), env=renv)
        mounted = True
        trees = [('native', native), ('mount', mnt)]
        for _side, d in trees:
            hg(d, 'status', '-q', env=renv)

        def both(label, cmd, prepare=None):
            if a.only and a.only not in label:
                for _side, d in trees:
                    for c in (prepare, cmd):
                        if c:
                            sh(c.replace('DIR', d), env=renv, stdout=subprocess.DEVNULL)
                return
            r = {side: hyperfine(label, cmd.replace('DIR', d), a.runs, renv,
                                 prepare and prepare.replace('DIR', d))
                 for side, d in trees}
            rows.append((label, r['native'], r['mount']))

        both('hg rebase --keep of a 3-commit stack over 100 upstream commits',
             "hg --cwd DIR %s rebase -q --keep -s 'children(%s) and ::%s' -d %s"
             % (' '.join(RC), base, stack, upstream),
             prepare='hg --cwd DIR update -q -C %s' % stack)
        for _side, d in trees:
            hg(d, 'update', '-q', '-C', base, env=renv)
            append(d, files[:1000], 'local\n')
        both('hg update over 1,000 modified files (100 merged), there and back',
             "sh -c 'hg --cwd DIR update -q %s && hg --cwd DIR update -q %s'" % (upstream, base))
        # shelve bundles every draft ancestor of its commit: the corpus's history is
        # public, as a shared repository's would be.
        for _side, d in trees:
            hg(d, 'phase', '--public', '-r', base, env=renv)
        both('hg shelve then hg unshelve of 1,000 modified files',
             "sh -c 'hg --cwd DIR %s shelve -q && hg --cwd DIR %s unshelve -q'"
             % (USER, USER))
        both('hg status after it all', 'hg --cwd DIR status -q')
        # The same trees and the same history.
        outs = [(hg(d, 'log', '-T', '{node}\\n', env=renv), hg(d, 'status', env=renv),
                 hg(d, 'diff', '--git', env=renv)) for _, d in trees]
        assert outs[0] == outs[1], 'the two sides differ'
    finally:
        if a.keep:
            print('kept: %s (mounted at %s, REVFS_STATE_DIR=%s)' % (work, mnt, state))
        elif mounted:
            sh('%s unmount %s' % (REVFS, mnt), env=renv)
        if not a.keep:
            shutil.rmtree(work)
    print('| command | native checkout | mount | native / mount |')
    print('|---|---:|---:|---:|')
    for label, nat, m in rows:
        print('| %s | %.3f | %.3f | %.2fx |' % (label, nat, m, nat / m))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
