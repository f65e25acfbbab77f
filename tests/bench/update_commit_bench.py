#!/usr/bin/env python3
"""Benchmark (not a test) of `revfs update` and `revfs commit` against `hg update`/`hg commit`
and `git checkout`/`git commit` on native checkouts of the same tree, in the same run.

Usage: tests/bench/update_commit_bench.py CORPUS [--scratch DIR] [--runs N]
CORPUS comes from ../shared/corpus/make-corpus.sh (GIT=1 for the git baseline): revision 0 is
the tree, revision 1 changes 1% of its files. update: r1 -> r0 and r0 -> r1 (each run is
prepared by going the other way first). commit: of 1 and of 1,000 modified files (each run is
prepared by appending a line to those files). Commits go to copies of the repositories.
Prints a markdown table of hyperfine medians (seconds) and ratios.
"""
import argparse, json, os, shutil, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='', HGUSER='bench <bench@example.org>',
           GIT_AUTHOR_NAME='bench', GIT_AUTHOR_EMAIL='bench@example.org',
           GIT_COMMITTER_NAME='bench', GIT_COMMITTER_EMAIL='bench@example.org')


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=kw.pop('env', ENV), **kw)


def out(cmd, cwd):
    return subprocess.run(cmd, shell=True, check=True, env=ENV, cwd=cwd,
                          capture_output=True, text=True).stdout.strip()


def hyperfine(cmds, runs):
    """cmds: (name, prepare, command)."""
    path = tempfile.mktemp(suffix='.json')
    args = ['hyperfine', '-N', '-w', '1', '-r', str(runs), '--export-json', path]
    for name, prep, cmd in cmds:
        args += ['-n', name, '--prepare', prep, cmd]
    subprocess.run(args, check=True, env=ENV, stdout=subprocess.DEVNULL)
    res = {r['command']: r['median'] for r in json.load(open(path))['results']}
    os.unlink(path)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--scratch', default='/work/bench/scratch')
    ap.add_argument('--runs', type=int, default=10)
    a = ap.parse_args()
    corpus = os.path.abspath(a.corpus)
    name = os.path.basename(corpus)
    os.makedirs(a.scratch, exist_ok=True)
    r0, r1 = out('hg log -r 0 -T {node}', corpus), out('hg log -r 1 -T {node}', corpus)
    hgwc = os.path.join(a.scratch, name + '-uc-hg')
    if not os.path.isdir(hgwc):
        sh('hg clone -q %s %s' % (corpus, hgwc))
    trees = {'hg': hgwc}
    if os.path.isdir(corpus + '.git'):
        gwc = os.path.join(a.scratch, name + '-uc-git')
        if not os.path.isdir(gwc):
            sh('git clone -q %s.git %s' % (corpus, gwc))
        trees['git'] = gwc
        g0 = out('git rev-list --max-parents=0 HEAD', gwc)
        g1 = out('git rev-parse HEAD', gwc)
    # revfs writes to its own copy of the store (real copies, no hard links).
    rrepo = os.path.join(a.scratch, name + '-uc-revfs')
    if not os.path.isdir(rrepo):
        os.makedirs(rrepo)
        sh('cp -r %s/.hg %s/.hg' % (corpus, rrepo))
    state = tempfile.mkdtemp(prefix='revfs-uc-state-')
    mnt = tempfile.mkdtemp(prefix='revfs-uc-mnt-')
    renv = dict(ENV, REVFS_STATE_DIR=state)
    sh('%s mount -r %s %s %s' % (REVFS, r1, rrepo, mnt), env=renv)
    rv = 'env REVFS_STATE_DIR=%s %s -R %s' % (state, REVFS, mnt)
    rows = []
    try:
        # The worst case for revfs: every directory already built.
        sh('find %s > /dev/null' % mnt)
        for (frm, to, label) in ((r1, r0, 'update r1 -> r0'), (r0, r1, 'update r0 -> r1')):
            cmds = [('revfs', '%s update -q -r %s' % (rv, frm), '%s update -q -r %s' % (rv, to)),
                    ('hg', 'hg -R %s update -q -r %s' % (hgwc, frm), 'hg -R %s update -q -r %s' % (hgwc, to))]
            if 'git' in trees:
                gf, gt = (g1, g0) if frm == r1 else (g0, g1)
                cmds.append(('git', 'git -C %s checkout -q %s' % (gwc, gf), 'git -C %s checkout -q %s' % (gwc, gt)))
            rows.append((label, hyperfine(cmds, a.runs)))
        # The same tree everywhere at r1 again, then commits.
        sh('%s update -q -r %s' % (rv, r1))
        sh('hg -R %s update -q -r %s' % (hgwc, r1))
        if 'git' in trees:
            sh('git -C %s checkout -q -B bench %s' % (gwc, g1))
        files = out('hg files -r %s' % r1, corpus).splitlines()
        files = [f for f in files if not os.path.islink(os.path.join(corpus, f))]
        for n in (1, 1000):
            lists = {}
            for t, d in (('revfs', mnt), ('hg', hgwc), ('git', trees.get('git'))):
                if d is None:
                    continue
                path = os.path.join(a.scratch, 'uc-list-%s-%d' % (t, n))
                with open(path, 'w') as fh:
                    fh.write('\n'.join(os.path.join(d, f) for f in files[:n]) + '\n')
                lists[t] = "sh -c 'while read f; do echo bench >> \"$f\"; done < %s'" % path
            cmds = [('revfs', lists['revfs'], '%s commit -q -m bench' % rv),
                    ('hg', lists['hg'], 'hg -R %s commit -q -m bench' % hgwc)]
            if 'git' in trees:
                cmds.append(('git', lists['git'], 'git -C %s commit -q -a -m bench' % gwc))
            rows.append(('commit %d file%s' % (n, 's' if n > 1 else ''), hyperfine(cmds, a.runs)))
        v = subprocess.run(['hg', 'verify', '-q'], cwd=rrepo, env=ENV, capture_output=True, text=True)
        assert v.returncode == 0, 'hg verify after revfs commits: ' + v.stdout + v.stderr
    finally:
        sh('%s unmount --force %s' % (REVFS, mnt), env=renv)
    print('corpus: %s (%d files)\n' % (corpus, len(files)))
    names = [n for n, _, _ in cmds]
    print('| operation | ' + ' | '.join(names) + ' |')
    print('|---|' + '---:|' * len(names))
    for label, res in rows:
        print('| %s | ' % label + ' | '.join('%.4f' % res[n] if n in res else '-' for n in names) + ' |')
    print()
    for label, res in rows:
        r = res['revfs']
        print('- %s: ' % label + ', '.join('%s / revfs = %.1fx' % (n, res[n] / r) for n in names if n != 'revfs' and n in res))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
