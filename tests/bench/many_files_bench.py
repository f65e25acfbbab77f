#!/usr/bin/env python3
"""Benchmark (not a test): many new files in a mount against ext4, side by side in one run.

Usage: tests/bench/many_files_bench.py CORPUS [--revfs BIN] [--dir DIR] [--n 100000] [--runs 3]

CORPUS is a corpus working copy (../shared/corpus, e.g. the linux tree): its files, without
.hg, are archived once into DIR/corpus.tar. For each run, on ext4 (a directory in DIR) and in
a fresh revfs mount of an empty repository (its state directory in DIR, so on the same disk),
in turns:

  one dir     a Python loop creates --n files in one directory (open, write, close)
  tree        the same loop in a tree of 100 files per directory
  rm -rf      of both
  tar xf      of the corpus archive
  rm -rf      of what it made

Times are wall clock, each followed by a sync of the target's file system. Prints a
markdown table of medians and ratios.
"""
import argparse, os, shutil, statistics, subprocess, tarfile, tempfile, time

ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='', REVFS_CONFIG='', HGUSER='bench <b@example.org>')

LOOP = """
import os, sys
root, n, tree = sys.argv[1], int(sys.argv[2]), sys.argv[3] == 'tree'
if not tree:
    os.mkdir(root)
for i in range(n):
    if tree:
        d = os.path.join(root, 'd%04d' % (i // 100))
        if i % 100 == 0:
            os.makedirs(d)
    else:
        d = root
    with open(os.path.join(d, 'f%06d' % i), 'w') as f:
        f.write('file %d\\n' % i)
"""


def sh(args, cwd=None, env=ENV):
    subprocess.run(args, check=True, cwd=cwd, env=env, stdout=subprocess.DEVNULL)


def timed(args, cwd=None):
    t = time.perf_counter()
    sh(args, cwd=cwd)
    sh(['sync'])
    return time.perf_counter() - t


def archive(corpus, out):
    if os.path.exists(out):
        return
    tmp = out + '.tmp'
    with tarfile.open(tmp, 'w') as t:
        for name in sorted(os.listdir(corpus)):
            if name != '.hg':
                t.add(os.path.join(corpus, name), arcname=name)
    os.rename(tmp, out)


def workload(target, n, tar):
    out = {}
    out['one dir'] = timed(['python3', '-c', LOOP, os.path.join(target, 'one'), str(n), 'one'])
    out['tree'] = timed(['python3', '-c', LOOP, os.path.join(target, 'tree'), str(n), 'tree'])
    out['rm -rf (both)'] = timed(['rm', '-rf', os.path.join(target, 'one'),
                                  os.path.join(target, 'tree')])
    os.mkdir(os.path.join(target, 'src'))
    out['tar xf corpus'] = timed(['tar', 'xf', tar, '-C', os.path.join(target, 'src')])
    out['rm -rf corpus'] = timed(['rm', '-rf', os.path.join(target, 'src')])
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--revfs', default=os.path.join(here, '..', '..', 'target', 'release', 'revfs'))
    ap.add_argument('--dir', default='/var/tmp/revfs-bench/many')
    ap.add_argument('--n', type=int, default=100000)
    ap.add_argument('--runs', type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    tar = os.path.join(a.dir, 'corpus.tar')
    archive(a.corpus, tar)
    results = {'ext4': [], 'revfs': []}
    for run in range(a.runs):
        for kind in (['ext4', 'revfs'] if run % 2 == 0 else ['revfs', 'ext4']):
            work = tempfile.mkdtemp(dir=a.dir)
            try:
                if kind == 'ext4':
                    target = os.path.join(work, 'ext4')
                    os.mkdir(target)
                    results[kind].append(workload(target, a.n, tar))
                else:
                    repo, mnt = os.path.join(work, 'repo'), os.path.join(work, 'mnt')
                    sh(['hg', 'init', repo])
                    os.mkdir(mnt)
                    env = dict(ENV, REVFS_STATE_DIR=os.path.join(work, 'state'))
                    sh([a.revfs, 'mount', repo, mnt], env=env)
                    try:
                        results[kind].append(workload(mnt, a.n, tar))
                    finally:
                        sh([a.revfs, 'unmount', mnt], env=env)
            finally:
                shutil.rmtree(work)
            print(kind, run, {k: round(v, 2) for k, v in results[kind][-1].items()}, flush=True)
    print()
    print(f'| {a.n:,} files; seconds, median of {a.runs} | ext4 | revfs | revfs / ext4 |')
    print('|---|---:|---:|---:|')
    for k in results['ext4'][0]:
        e = statistics.median(r[k] for r in results['ext4'])
        r = statistics.median(r[k] for r in results['revfs'])
        print(f'| {k} | {e:.2f} | {r:.2f} | {r / e:.1f}x |')


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
