#!/usr/bin/env python3
"""Benchmark (not a test): the hot paths of two revfs binaries side by side, in one run,
on one corpus, in alternating order (A B B A ...), so that a change can be shown to cost
nothing where it must not.

Usage: tests/bench/ab_hot_paths.py BIN_A BIN_B CORPUS [--runs N] [--status-runs N]

Clean `revfs status`: both binaries mounted at once, each on its own mount, called in
turns (A B A B ...) --status-runs times each, without a shell; the median of each.
Then for each binary and each run, on a fresh mount of the corpus tip (store in the page
cache):
  find MOUNT -type f | wc -l         (first pass: every lookup and readdir reaches the daemon)
  tar cf - . | wc -c  on another fresh mount (first pass: every file read once)
Prints medians per binary and the ratio B/A as a markdown table.
"""
import argparse, os, statistics, subprocess, tempfile, time

ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='', REVFS_CONFIG='')


def run(cmd, env, cwd=None):
    subprocess.run(cmd, shell=True, check=True, env=env, cwd=cwd,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def timed(cmd, env, cwd=None):
    t = time.perf_counter()
    run(cmd, env, cwd)
    return time.perf_counter() - t


class Mount:
    def __init__(self, binary, repo):
        self.bin, self.repo = binary, repo
        self.state = tempfile.mkdtemp(prefix='revfs-ab-state-', dir='/var/tmp')
        self.dir = tempfile.mkdtemp(prefix='revfs-ab-mnt-', dir='/var/tmp')
        self.env = dict(ENV, REVFS_STATE_DIR=self.state)
        run('%s mount %s %s' % (self.bin, repo, self.dir), self.env)

    def close(self):
        run('%s unmount %s' % (self.bin, self.dir), self.env)
        subprocess.run(['rm', '-rf', self.state, self.dir], check=True)


def one_run(binary, repo):
    m = Mount(binary, repo)
    try:
        find = timed('find . -type f | wc -l', m.env, cwd=m.dir)
    finally:
        m.close()
    m = Mount(binary, repo)
    try:
        tar = timed('tar cf - . | wc -c', m.env, cwd=m.dir)
    finally:
        m.close()
    return {'find': find, 'tar': tar}


def status_in_turns(bins, repo, runs):
    mounts = {k: Mount(b, repo) for k, b in bins.items()}
    times = {k: [] for k in bins}
    try:
        for i in range(runs + 10):
            for k in ('AB' if i % 2 == 0 else 'BA'):
                m = mounts[k]
                t = time.perf_counter()
                subprocess.run([m.bin, 'status'], cwd=m.dir, env=m.env, check=True,
                               stdout=subprocess.DEVNULL)
                if i >= 10:  # warm-up
                    times[k].append(time.perf_counter() - t)
    finally:
        for m in mounts.values():
            m.close()
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('a')
    ap.add_argument('b')
    ap.add_argument('corpus')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--status-runs', type=int, default=200)
    args = ap.parse_args()
    bins = {'A': os.path.abspath(args.a), 'B': os.path.abspath(args.b)}
    # Warm the page cache with the store once.
    run('cat .hg/store/00manifest.* .hg/store/00changelog.* > /dev/null; '
        'find .hg/store -type f -print0 | xargs -0 cat > /dev/null', ENV, cwd=args.corpus)
    status = status_in_turns(bins, args.corpus, args.status_runs)
    print('status: A %.2f ms, B %.2f ms' % (status['A'] * 1000, status['B'] * 1000), flush=True)
    results = {'A': [], 'B': []}
    for i in range(args.runs):
        order = 'AB' if i % 2 == 0 else 'BA'
        for k in order:
            r = one_run(bins[k], args.corpus)
            r['status'] = status[k]
            results[k].append(r)
            print('run %d %s: find %.3f s, tar %.3f s' % (i, k, r['find'], r['tar']), flush=True)
    print()
    print('A = %s\nB = %s\ncorpus = %s, %d runs (alternating); status: median of %d calls each, in turns\n'
          % (bins['A'], bins['B'], args.corpus, args.runs, args.status_runs))
    print('| measure | A median | B median | B / A |')
    print('|---|---|---|---|')
    for key, unit, scale in (('status', 'ms', 1000), ('find', 's', 1), ('tar', 's', 1)):
        a = statistics.median(r[key] for r in results['A']) * scale
        b = statistics.median(r[key] for r in results['B']) * scale
        fmt = '%.2f %s' if unit == 'ms' else '%.3f %s'
        print('| %s | %s | %s | %.2fx |' % (key, fmt % (a, unit), fmt % (b, unit), b / a))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
