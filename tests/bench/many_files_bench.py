#!/usr/bin/env python3
"""Benchmark (not a test): many new files in a mount against ext4, side by side in one run.

Usage: tests/bench/many_files_bench.py CORPUS [--revfs BIN] [--before BIN] [--dir DIR] [--n 100000]
                                        [--runs 3] [--passthrough] [--redirect] [--latency]
                                        [--only one,tree,tar]

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
markdown table of medians and ratios. --passthrough adds a target, a mount with
`mount.passthrough = true`, --latency one with `mount.cpu_latency_us = 0` (idle CPUs poll
while requests come), --redirect one whose work goes into a redirection of a mount
(`revfs redirect add work`: a bind mount from the state directory's disk), and --before another, a mount by another build (an earlier
commit's); the order of the targets rotates from run to run. For each
mount, the requests the daemon got during each step, per file made (its `stats` answer's
counts by opcode), from the first run.
"""
import argparse, os, shutil, statistics, subprocess, tarfile, tempfile, time
import daemon_stats

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


def requests(state):
    """The daemon's request counts by opcode (None for ext4)."""
    if state is None:
        return None
    answer = daemon_stats.stats(state)
    return None if answer is None else answer.get('requests', {})


def workload(target, n, tar, only, state=None, counts=None):
    out = {}

    def step(name, args, files):
        before = requests(state)
        out[name] = timed(args)
        after = requests(state)
        if counts is not None and before is not None and after is not None and files:
            counts[name] = {k: (v - before.get(k, 0)) / files for k, v in sorted(after.items())
                            if v - before.get(k, 0) > 0 and 'forget' not in k}

    if 'one' in only:
        step('one dir', ['python3', '-c', LOOP, os.path.join(target, 'one'), str(n), 'one'], n)
    if 'tree' in only:
        step('tree', ['python3', '-c', LOOP, os.path.join(target, 'tree'), str(n), 'tree'], n)
    if 'one' in only or 'tree' in only:
        out['rm -rf (both)'] = timed(['rm', '-rf', os.path.join(target, 'one'),
                                      os.path.join(target, 'tree')])
    if 'tar' in only:
        os.mkdir(os.path.join(target, 'src'))
        with tarfile.open(tar) as t:
            files = sum(1 for m in t if m.isfile())
        step('tar xf corpus', ['tar', 'xf', tar, '-C', os.path.join(target, 'src')], files)
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
    ap.add_argument('--passthrough', action='store_true')
    ap.add_argument('--redirect', action='store_true')
    ap.add_argument('--latency', action='store_true')
    ap.add_argument('--before')
    ap.add_argument('--only', default='one,tree,tar')
    a = ap.parse_args()
    only = set(a.only.split(','))
    os.makedirs(a.dir, exist_ok=True)
    tar = os.path.join(a.dir, 'corpus.tar')
    archive(a.corpus, tar)
    kinds = ['ext4', 'revfs'] + (['revfs+pt'] if a.passthrough else []) \
        + (['revfs+lat'] if a.latency else []) \
        + (['redirect'] if a.redirect else []) + (['before'] if a.before else [])
    results = {k: [] for k in kinds}
    counts = {k: {} for k in kinds}
    for run in range(a.runs):
        for kind in kinds[run % len(kinds):] + kinds[:run % len(kinds)]:
            work = tempfile.mkdtemp(dir=a.dir)
            try:
                if kind == 'ext4':
                    target = os.path.join(work, 'ext4')
                    os.mkdir(target)
                    results[kind].append(workload(target, a.n, tar, only))
                else:
                    repo, mnt = os.path.join(work, 'repo'), os.path.join(work, 'mnt')
                    sh(['hg', 'init', repo])
                    os.mkdir(mnt)
                    state = os.path.join(work, 'state')
                    env = dict(ENV, REVFS_STATE_DIR=state)
                    setting = {'revfs+pt': 'passthrough = true',
                               'revfs+lat': 'cpu_latency_us = 0'}.get(kind)
                    if setting:
                        cfg = os.path.join(work, 'config.toml')
                        with open(cfg, 'w') as f:
                            f.write('[mount]\n%s\n' % setting)
                        env['REVFS_CONFIG'] = cfg
                    binary = a.before if kind == 'before' else a.revfs
                    sh([binary, 'mount', repo, mnt], env=env)
                    try:
                        target = mnt
                        if kind == 'redirect':
                            sh([binary, 'redirect', 'add', 'work'], cwd=mnt, env=env)
                            target = os.path.join(mnt, 'work')
                        results[kind].append(workload(target, a.n, tar, only, state,
                                                      counts[kind] if run < len(kinds) else None))
                    finally:
                        sh([binary, 'unmount', mnt], env=env)
            finally:
                shutil.rmtree(work)
            print(kind, run, {k: round(v, 2) for k, v in results[kind][-1].items()}, flush=True)
    print()
    mounts = kinds[1:]
    what = f'{a.n:,} files; ' if only & {'one', 'tree'} else ''
    print(f'| {what}seconds, median of {a.runs} | ext4 | '
          + ' | '.join(mounts) + ' | ' + ' | '.join(f'{m} / ext4' for m in mounts) + ' |')
    print('|---|' + '---:|' * (1 + 2 * len(mounts)))
    for k in results['ext4'][0]:
        e = statistics.median(r[k] for r in results['ext4'])
        ms = [statistics.median(r[k] for r in results[m]) for m in mounts]
        print(f'| {k} | {e:.2f} | ' + ' | '.join(f'{m:.2f}' for m in ms) + ' | '
              + ' | '.join(f'{m / e:.2f}x' for m in ms) + ' |')
    for m in mounts:
        for step, c in counts[m].items():
            print(f'{m}, {step}: requests per file: '
                  + ', '.join(f'{k} {v:.2f}' for k, v in c.items()))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
