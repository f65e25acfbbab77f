#!/usr/bin/env python3
"""Benchmark (not a test) of `revfs status` against `hg status`, `rhg status` and `git status`
on native checkouts of the same tree, in the same run, with 0, 10 and 1,000 modified files.

Usage: tests/bench/status_bench.py CORPUS [--anchors DIR] [--scratch DIR] [--runs N]
                                          [--in-place]
CORPUS comes from ../shared/corpus/make-corpus.sh (GIT=1 for the git baseline); --anchors is
where ../shared/corpus/build-anchors.sh put rhg and hg 7.2 (rhg needs a dirstate-v2 checkout
made by hg 7.2). Prints a markdown table of hyperfine medians (seconds) and ratios.

--in-place (for a million files, where each checkout costs many minutes): no checkouts are
made; hg and rhg run in CORPUS's own checkout (a dirstate-v1 one made by hg 6.3: rhg reads
it, without v2's cached directory times) and git in the same files through CORPUS.git as
GIT_DIR. The modified files are appended to once and put back (hg revert) at the end.
"""
import argparse, json, os, shutil, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=kw.pop('env', ENV), **kw)


def hyperfine(cmds, runs):
    out = tempfile.mktemp(suffix='.json')
    args = ['hyperfine', '-N', '-w', '3', '-r', str(runs), '--export-json', out]
    for name, cmd in cmds:
        args += ['-n', name, cmd]
    subprocess.run(args, check=True, env=ENV, stdout=subprocess.DEVNULL)
    res = {r['command']: r['median'] for r in json.load(open(out))['results']}
    os.unlink(out)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--anchors', default='/work/bench/anchors')
    ap.add_argument('--scratch', default='/work/bench/scratch')
    ap.add_argument('--runs', type=int, default=15)
    ap.add_argument('--in-place', action='store_true')
    a = ap.parse_args()
    corpus = os.path.abspath(a.corpus)
    name = os.path.basename(corpus)
    os.makedirs(a.scratch, exist_ok=True)
    files = subprocess.run(['hg', 'files', '-r', 'tip'], cwd=corpus, env=ENV, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    files = [f for f in files if not os.path.islink(os.path.join(corpus, f))]
    trees = {}
    hg72 = os.path.join(a.anchors, 'hg72', 'bin', 'hg')
    rhg = os.path.join(a.anchors, 'bin', 'rhg')
    git = 'git status --porcelain'
    if a.in_place:
        hgwc = corpus
        trees['hg'] = corpus
        if os.path.exists(rhg):
            trees['rhg'] = corpus
        if os.path.isdir(corpus + '.git'):
            git = 'git --git-dir=%s.git --work-tree=%s status --porcelain' % (corpus, corpus)
            sh('git --git-dir=%s.git config core.untrackedCache true' % corpus)
            trees['git'] = corpus
    else:
        hgwc = os.path.join(a.scratch, name + '-st-hg')
        if not os.path.isdir(hgwc):
            sh('hg clone -q %s %s' % (corpus, hgwc))
        trees['hg'] = hgwc
    if not a.in_place and os.path.exists(hg72) and os.path.exists(rhg):
        rwc = os.path.join(a.scratch, name + '-st-rhg')
        if not os.path.isdir(rwc):
            sh('%s clone -q -U --config format.use-dirstate-v2=yes --config format.use-persistent-nodemap=no %s %s' % (hg72, corpus, rwc))
            sh('%s -R %s update -q tip' % (hg72, rwc))
        trees['rhg'] = rwc
    if not a.in_place and os.path.isdir(corpus + '.git'):
        gwc = os.path.join(a.scratch, name + '-st-git')
        if not os.path.isdir(gwc):
            sh('git clone -q %s.git %s' % (corpus, gwc))
            sh('git -C %s config core.untrackedCache true' % gwc)
        trees['git'] = gwc
    state = tempfile.mkdtemp(prefix='revfs-st-state-')
    mnt = tempfile.mkdtemp(prefix='revfs-st-mnt-')
    renv = dict(ENV, REVFS_STATE_DIR=state)
    sh('%s mount -r tip %s %s' % (REVFS, corpus, mnt), env=renv)
    trees['revfs'] = mnt
    # Settle: one status each (dirstate fix-ups, untracked cache) before timing.
    for t, d in trees.items():
        cmd = {'hg': 'hg status', 'rhg': '%s status' % rhg, 'git': git, 'revfs': '%s status' % REVFS}[t]
        sh(cmd, cwd=d, env=renv, stdout=subprocess.DEVNULL)
    rows = []
    done = 0
    try:
        for nmod in (0, 10, 1000):
            for f in files[done:nmod]:
                for d in set(trees.values()):
                    with open(os.path.join(d, f), 'ab') as fh:
                        fh.write(b'/* revfs status benchmark */\n')
            done = max(done, nmod)
            cmds = [('revfs status', 'sh -c "cd %s && REVFS_STATE_DIR=%s %s status > /dev/null"' % (mnt, state, REVFS)),
                    ('hg status', 'sh -c "cd %s && hg status > /dev/null"' % hgwc)]
            if 'rhg' in trees:
                cmds.append(('rhg status', 'sh -c "cd %s && %s status > /dev/null"' % (trees['rhg'], rhg)))
            if 'git' in trees:
                cmds.append(('git status', 'sh -c "cd %s && %s > /dev/null"' % (trees['git'], git)))
            cmds.append(('sh -c true (process start-up)', 'sh -c true'))
            res = hyperfine(cmds, a.runs)
            rows.append((nmod, res))
            # Same answer as hg?
            ours = subprocess.run([REVFS, 'status'], cwd=mnt, env=renv, capture_output=True).stdout
            theirs = subprocess.run(['hg', 'status'], cwd=hgwc, env=ENV, capture_output=True).stdout
            if a.in_place:
                # make-corpus.sh's mark, unknown to hg in the corpus's checkout only.
                theirs = theirs.replace(b'? .corpus-done\n', b'')
            assert ours == theirs, 'revfs status differs from hg status'
    finally:
        sh('%s unmount --force %s' % (REVFS, mnt), env=renv)
        for t in ('hg', 'rhg', 'git'):
            if a.in_place and t != 'hg':
                continue
            if t in trees:
                if t == 'git':
                    sh('git -C %s checkout -q -- .' % trees[t])
                else:
                    sh('%s -R %s revert -q --all --no-backup' % ('hg' if t == 'hg' else os.path.join(a.anchors, 'hg72', 'bin', 'hg'), trees[t]))
    print('corpus: %s (%d files)\n' % (corpus, len(files)))
    names = [n for n, _ in cmds]
    print('| modified files | ' + ' | '.join(names) + ' |')
    print('|---:|' + '---:|' * len(names))
    for nmod, res in rows:
        print('| %d | ' % nmod + ' | '.join('%.4f' % res[n] for n in names) + ' |')
    print()
    for nmod, res in rows:
        r = res['revfs status']
        parts = ['%s / revfs = %.1fx' % (n.split()[0], res[n] / r) for n in names if n not in ('revfs status',) and not n.startswith('sh ')]
        print('- %d modified: %s' % (nmod, ', '.join(parts)))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
