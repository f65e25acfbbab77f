#!/usr/bin/env python3
"""Benchmark (not a test) of hg's working-copy commands inside a revfs mount against the
same commands on a native checkout, in the same run: `hg update` between the corpus's two
revisions and back, `hg add` of one new file, `hg commit` of 1 and of 1,000 modified files.

Usage: tests/bench/hg_commit_update_bench.py CORPUS... [--scratch DIR] [--runs N]
CORPUS comes from ../shared/corpus/make-corpus.sh (two revisions, r1 changes 1% of the
files). The native side is a clone of CORPUS, the mount's repository a clone without a
working copy (so that commits never touch CORPUS); both are made in --scratch and removed
at the end. hyperfine -N, 2 warm-ups; each command runs as `hg --cwd DIR ...`, and the update pair
also as `chg --cwd DIR ...` (hg's command server, one per tree).
"""
import argparse, json, os, shutil, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=kw.pop('env', ENV), **kw)


def hyperfine(name, cmd, runs, env, prepare=None):
    path = tempfile.mktemp(suffix='.json')
    args = ['hyperfine', '-N', '-w', '2', '-r', str(runs), '--export-json', path, '-n', name]
    if prepare:
        args += ['--prepare', prepare]
    args.append(cmd)
    subprocess.run(args, check=True, env=env, stdout=subprocess.DEVNULL)
    res = json.load(open(path))['results'][0]['median']
    os.unlink(path)
    return res


def bench(corpus, a):
    name = os.path.basename(corpus)
    work = tempfile.mkdtemp(prefix='revfs-cu-%s-' % name, dir=a.scratch)
    native = os.path.join(work, 'native')
    repo = os.path.join(work, 'repo')
    mnt = os.path.join(work, 'mnt')
    state = os.path.join(work, 'state')
    os.makedirs(mnt)
    renv = dict(ENV, REVFS_STATE_DIR=state)
    sh('hg clone -q -r tip %s %s' % (corpus, native))
    sh('hg clone -q -U %s %s' % (corpus, repo))
    sh('%s mount -r tip %s %s' % (REVFS, repo, mnt), env=renv)
    files = subprocess.run(['hg', 'files', '-r', 'tip'], cwd=native, env=ENV, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    files = [f for f in files if not os.path.islink(os.path.join(native, f))]
    listing = os.path.join(work, 'thousand')
    with open(listing, 'w') as fh:
        fh.write('\n'.join(files[:1000]) + '\n')
    rows = []
    chg_env = {}
    try:
        for d in (native, mnt):
            sh('hg --cwd %s status -q' % d, env=renv, stdout=subprocess.DEVNULL)
        trees = [('native', native), ('mount', mnt)]

        def both(label, cmd, prepare=None, runs=a.runs):
            r = {}
            for side, d in trees:
                r[side] = hyperfine(label, cmd.replace('DIR', d), runs, renv,
                                    prepare and prepare.replace('DIR', d))
            rows.append((label, r['native'], r['mount']))

        both('hg update 0, then back to 1', "sh -c 'hg --cwd DIR update -q 0 && hg --cwd DIR update -q 1'")
        # The same under chg, hg's command server (one per tree, started by the warm-ups):
        # no Python start-up per command, which is most of an update in a mount.
        for side, d in trees:
            chg_env[side] = dict(renv, CHGSOCKNAME=os.path.join(work, 'chg-%s' % side))
        r = {side: hyperfine('chg update', "sh -c 'chg --cwd %s update -q 0 && chg --cwd %s update -q 1'"
                             % (d, d), a.runs, chg_env[side]) for side, d in trees}
        rows.append(('chg update 0, then back to 1', r['native'], r['mount']))
        both('hg add of one new file', 'hg --cwd DIR add bench-new-file',
             prepare="sh -c 'hg --cwd DIR forget -q bench-new-file 2>/dev/null; echo new > DIR/bench-new-file'")
        sh("hg --cwd %s forget -q bench-new-file; rm %s/bench-new-file" % (native, native))
        sh("hg --cwd %s forget -q bench-new-file; rm %s/bench-new-file" % (mnt, mnt), env=renv)
        one = files[0]
        both('hg commit of 1 file', "hg --cwd DIR commit -q -m one -u bench -d '0 0'",
             prepare="sh -c 'echo line >> \"DIR/%s\"'" % one)
        both('hg commit of 1,000 files', "hg --cwd DIR commit -q -m many -u bench -d '0 0'",
             prepare="sh -c 'cd DIR && while IFS= read -r f; do echo line >> \"$f\"; done < %s'" % listing,
             runs=max(3, a.runs // 2))
        # Same history on both sides: the same commits made the same hashes.
        ids = [subprocess.run(['hg', '--cwd', d, 'id', '-i'], env=renv, check=True,
                              capture_output=True).stdout for _, d in trees]
        assert ids[0] == ids[1], ids
    finally:
        for env in chg_env.values():
            # The server's socket is CHGSOCKNAME.PID (chg --kill-chg-daemon misses it).
            subprocess.run(['pkill', '-f', '--', '--address %s' % env['CHGSOCKNAME']])
        sh('%s unmount %s' % (REVFS, mnt), env=renv)
        shutil.rmtree(work)
    return name, len(files), rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus', nargs='+')
    ap.add_argument('--scratch', default='/work/bench/scratch')
    ap.add_argument('--runs', type=int, default=10)
    a = ap.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    results = [bench(os.path.abspath(c), a) for c in a.corpus]
    print('| tree | files | command | native checkout | mount | native / mount |')
    print('|---|---:|---|---:|---:|---:|')
    for name, n, rows in results:
        for label, nat, mnt in rows:
            print('| %s | %d | %s | %.3f | %.3f | %.2fx |' % (name, n, label, nat, mnt, nat / mnt))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
