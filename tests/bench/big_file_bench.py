#!/usr/bin/env python3
"""Benchmark (not a test): reading big files, side by side in one run.

Usage: tests/bench/big_file_bench.py [--dir DIR] [--revfs BIN] [--runs N] [--sizes 100,1024]
                                     [--chain 50]

Builds (once; kept in DIR, default /var/tmp/revfs-bench/big) one hg repository per
compression (zlib, zstd), each with a file of every size in --sizes (MiB, two revisions: a
delta chain of 2) and a --sizes[0] MiB file with a chain of --chain revisions. Contents are
lines of hex (hg's line deltas stay small). Then, for every file, median of --runs:

  first read   cat MOUNT/FILE > /dev/null on a fresh mount with an empty state directory
               (the text is rebuilt into the text cache while it is read)
  second read  cat again on that mount (the kernel's page cache)
  revfs cat    revfs cat -r tip FILE > /dev/null
  hg cat       hg cat -r tip FILE > /dev/null
  native cat   cat of the file in the repository's own checkout (page cache warm)

and the daemon's peak RSS (VmHWM) after the first read. Prints a markdown table.
"""
import argparse, os, shutil, statistics, subprocess, tempfile, time

ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='', REVFS_CONFIG='', HGUSER='bench <bench@example.org>')
MB = 1 << 20


def sh(cmd, cwd=None, env=ENV, out=subprocess.DEVNULL):
    subprocess.run(cmd, shell=True, check=True, cwd=cwd, env=env, stdout=out)


def timed(cmd, cwd=None, env=ENV):
    t = time.perf_counter()
    sh(cmd, cwd=cwd, env=env)
    return time.perf_counter() - t


def write_text(path, size, seed):
    """size bytes of hex lines, deterministic, written in blocks."""
    import random
    rnd = random.Random(seed)
    line = 34
    with open(path, 'wb') as f:
        left = size
        while left > 0:
            n = min(left, 4 * MB) // line * line or left
            block = b''.join(b'%016x %016x\n' % (rnd.getrandbits(64), rnd.getrandbits(64))
                             for _ in range(n // line + 1))[:n]
            f.write(block)
            left -= len(block)


def edit(path, seed, count=8):
    import random
    rnd = random.Random(seed)
    size = os.path.getsize(path)
    with open(path, 'r+b') as f:
        for _ in range(count):
            at = rnd.randrange(0, max(1, size - 40)) // 34 * 34
            f.seek(at)
            f.write(b'%016x' % rnd.getrandbits(64))


def build(dir, compression, sizes, chain):
    repo = os.path.join(dir, 'repo-' + compression)
    if os.path.exists(os.path.join(repo, '.bench-done')):
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    sh('hg init --config format.revlog-compression=%s %s' % (compression, repo))
    for s in sizes:
        write_text(os.path.join(repo, 'f%d.txt' % s), s * MB, s)
    write_text(os.path.join(repo, 'chain.txt'), sizes[0] * MB, 1)
    sh('hg commit -qAm r0 -d "0 0"', cwd=repo)
    for r in range(1, chain):
        if r == 1:
            for s in sizes:
                edit(os.path.join(repo, 'f%d.txt' % s), 1000 + s)
        edit(os.path.join(repo, 'chain.txt'), r)
        sh('hg commit -qm r%d -d "0 0"' % r, cwd=repo)
    open(os.path.join(repo, '.bench-done'), 'w').close()
    return repo


def peak_rss_kb(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1])
    return -1


def first_read(revfs, repo, name):
    state = tempfile.mkdtemp(prefix='revfs-bench-state-', dir='/var/tmp')
    mnt = tempfile.mkdtemp(prefix='revfs-bench-mnt-', dir='/var/tmp')
    env = dict(ENV, REVFS_STATE_DIR=state)
    try:
        sh('%s mount %s %s' % (revfs, repo, mnt), env=env)
        pid = int(open(next(os.path.join(state, 'mounts', d, 'daemon.pid')
                            for d in os.listdir(os.path.join(state, 'mounts')))).read())
        first = timed('cat %s > /dev/null' % os.path.join(mnt, name))
        rss = peak_rss_kb(pid)
        second = timed('cat %s > /dev/null' % os.path.join(mnt, name))
        sh('%s unmount %s' % (revfs, mnt), env=env)
        return first, second, rss
    finally:
        subprocess.run(['fusermount3', '-uz', mnt], stderr=subprocess.DEVNULL)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(mnt, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--dir', default='/var/tmp/revfs-bench/big')
    ap.add_argument('--revfs', default=os.path.join(here, '..', '..', 'target', 'release', 'revfs'))
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--sizes', default='100,1024')
    ap.add_argument('--chain', type=int, default=50)
    args = ap.parse_args()
    revfs = os.path.abspath(args.revfs)
    sizes = [int(s) for s in args.sizes.split(',')]
    os.makedirs(args.dir, exist_ok=True)
    rows = []
    for compression in ('zlib', 'zstd'):
        t = time.perf_counter()
        repo = build(args.dir, compression, sizes, args.chain)
        print('%s: repository ready (%.0f s)' % (compression, time.perf_counter() - t), flush=True)
        files = [('f%d.txt' % s, '%d MiB, 2 revisions' % s) for s in sizes]
        files.append(('chain.txt', '%d MiB, %d revisions' % (sizes[0], args.chain)))
        for name, what in files:
            firsts, seconds, rsss, rcat, hcat, ncat = [], [], [], [], [], []
            for _ in range(args.runs):
                f, s, r = first_read(revfs, repo, name)
                firsts.append(f)
                seconds.append(s)
                rsss.append(r)
                rcat.append(timed('%s cat -r tip %s > /dev/null' % (revfs, name), cwd=repo))
                hcat.append(timed('hg cat -r tip %s > /dev/null' % name, cwd=repo))
                ncat.append(timed('cat %s > /dev/null' % name, cwd=repo))
            row = (compression, name, what, statistics.median(firsts), statistics.median(seconds),
                   statistics.median(rcat), statistics.median(hcat), statistics.median(ncat),
                   max(rsss) // 1024)
            rows.append(row)
            print('%s %s: first %.2f s, second %.3f s, revfs cat %.2f s, hg cat %.2f s, '
                  'native %.3f s, daemon peak RSS %d MiB' % (row[0], row[1], *row[3:]), flush=True)
    print()
    print('revfs = %s, %d runs each (medians), repositories in %s\n' % (revfs, args.runs, args.dir))
    print('| compression | file | first read (mount) | second read | revfs cat | hg cat '
          '| native cat | first / revfs cat | daemon peak RSS |')
    print('|---|---|---:|---:|---:|---:|---:|---:|---:|')
    for c, name, what, first, second, rcat, hcat, ncat, rss in rows:
        print('| %s | %s (%s) | %.2f s | %.3f s | %.2f s | %.2f s | %.3f s | %.2fx | %d MiB |'
              % (c, name, what, first, second, rcat, hcat, ncat, first / rcat, rss))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
