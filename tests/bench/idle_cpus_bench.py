#!/usr/bin/env python3
"""Benchmark (not a test): what the machine's idle CPUs cost a mount's round trips.

Usage: tests/bench/idle_cpus_bench.py [--revfs BIN] [--floor BIN] [--dir DIR] [--n 10000]
                                      [--runs 5]

On a KVM guest whose idle driver is haltpoll, an idle CPU halts at once when
`guest_halt_poll_ns` is 0, and waking it is an exit to the hypervisor. This runs the same
steps with it at 0 and at 200000 (the kernel's default), in turns, and puts it back as it
was:
  pipe        a byte sent back and forth between two processes (not pinned): a wake-up each way
  floor       `stat` by path (LOOKUP and GETATTR) in a file system that does no work
              (vfs/examples/fuse_floor, built with `cargo build --release --examples`),
              through io_uring rings (2 threads a CPU, revfs's default) and through /dev/fuse
  create      a Python loop makes --n files in one directory (open, write a line, close),
              on ext4 (a directory in DIR) and in a fresh revfs mount of an empty
              repository (its state in DIR); then a sync, timed apart (it waits for the
              machine's disk, whose times vary a lot); the loop's migrations from CPU to
              CPU a file (`se.nr_migrations` in /proc/self/sched)
  pinned      the same loop in a mount, pinned to CPU 0 (`taskset -c 0`)
  awake       the same loop in a mount, unpinned, while a spinning process at nice 19 is
              pinned to each CPU, so that no CPU is ever idle
  latency     the same loop in a second mount with `mount.cpu_latency_us = 0` (its daemon
              holds a PM QoS request while requests come: idle CPUs poll)
Prints a markdown table of medians and the ratio of 0 to 200000. Needs root.
"""
import argparse, os, shutil, statistics, subprocess, tempfile, time

POLL = '/sys/module/haltpoll/parameters/guest_halt_poll_ns'
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='', REVFS_CONFIG='')
PIPE = """
import os, time
n = 20000
r1, w1 = os.pipe(); r2, w2 = os.pipe()
if os.fork() == 0:
    for i in range(n):
        os.read(r1, 1); os.write(w2, b'x')
    os._exit(0)
t = time.perf_counter()
for i in range(n):
    os.write(w1, b'x'); os.read(r2, 1)
print((time.perf_counter() - t) / n * 1e6)
os.wait()
"""
LOOP = """
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
os.mkdir(root)
for i in range(n):
    with open(os.path.join(root, 'f%06d' % i), 'w') as f:
        f.write('file %d\\n' % i)
with open('/proc/self/sched') as f:
    for line in f:
        if line.startswith('se.nr_migrations'):
            print(int(line.split(':')[1]) / n)
"""
SPIN = 'while True: pass'


def out(args, env=ENV):
    return subprocess.run(args, check=True, env=env, stdout=subprocess.PIPE,
                          text=True).stdout


def floor(binary, rings):
    for line in out([binary, '8', '20000', str(rings)]).splitlines():
        if line.startswith('stat by path'):
            return float(line.split()[-1])
    raise SystemExit('fuse_floor printed no stat line')


def create(target, n, prefix=()):
    """Seconds of the loop, of the sync after it (a sync before it, not timed, so that
    no earlier step's writes are flushed meanwhile), and the loop's migrations a file."""
    out(['sync'])
    t = time.perf_counter()
    migrations = float(out(list(prefix) + ['python3', '-c', LOOP, target, str(n)]))
    made = time.perf_counter()
    out(['sync'])
    return made - t, time.perf_counter() - made, migrations


def spinners():
    """A spinning process at nice 19 pinned to each CPU: no CPU is idle while they run."""
    return [subprocess.Popen(['taskset', '-c', str(cpu), 'nice', '-n', '19', 'python3',
                              '-c', SPIN]) for cpu in sorted(os.sched_getaffinity(0))]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    release = os.path.join(here, '..', '..', 'target', 'release')
    ap = argparse.ArgumentParser()
    ap.add_argument('--revfs', default=os.path.join(release, 'revfs'))
    ap.add_argument('--floor', default=os.path.join(release, 'examples', 'fuse_floor'))
    ap.add_argument('--dir', default='/var/tmp/revfs-bench/idle')
    ap.add_argument('--n', type=int, default=10000)
    ap.add_argument('--runs', type=int, default=5)
    a = ap.parse_args()
    if not os.path.exists(POLL):
        raise SystemExit('not a haltpoll guest (%s): nothing to compare' % POLL)
    os.makedirs(a.dir, exist_ok=True)
    with open(POLL) as f:
        orig = f.read().strip()
    rows = {}

    def add(name, ns, v):
        rows.setdefault(name, {}).setdefault(ns, []).append(v)

    try:
        for run in range(a.runs):
            for ns in (['0', '200000'] if run % 2 == 0 else ['200000', '0']):
                with open(POLL, 'w') as f:
                    f.write(ns)
                add('pipe round trip, us', ns, float(out(['python3', '-c', PIPE])))
                add('`stat` by path, io_uring, us', ns, floor(a.floor, 2))
                add('`stat` by path, /dev/fuse, us', ns, floor(a.floor, 0))
                work = tempfile.mkdtemp(dir=a.dir)
                try:
                    loop, sync, _ = create(os.path.join(work, 'ext4'), a.n)
                    add('%d files, ext4, s' % a.n, ns, loop)
                    add('sync after them, ext4, s', ns, sync)
                    repo, mnt = os.path.join(work, 'repo'), os.path.join(work, 'mnt')
                    out(['hg', 'init', repo])
                    os.mkdir(mnt)
                    env = dict(ENV, REVFS_STATE_DIR=os.path.join(work, 'state'))
                    out([a.revfs, 'mount', repo, mnt], env=env)
                    try:
                        loop, sync, moved = create(os.path.join(mnt, 'one'), a.n)
                        add('%d files, revfs, s' % a.n, ns, loop)
                        add('sync after them, revfs, s', ns, sync)
                        add('migrations a file, revfs', ns, moved)
                        loop, _, _ = create(os.path.join(mnt, 'pinned'), a.n,
                                            ['taskset', '-c', '0'])
                        add('%d files, revfs, pinned to CPU 0, s' % a.n, ns, loop)
                        spin = spinners()
                        try:
                            loop, _, moved = create(os.path.join(mnt, 'awake'), a.n)
                        finally:
                            for p in spin:
                                p.kill()
                                p.wait()
                        add('%d files, revfs, no CPU idle (spinners at nice 19), s' % a.n,
                            ns, loop)
                        add('migrations a file, revfs, no CPU idle', ns, moved)
                    finally:
                        out([a.revfs, 'unmount', mnt], env=env)
                    cfg = os.path.join(work, 'latency.toml')
                    with open(cfg, 'w') as f:
                        f.write('[mount]\ncpu_latency_us = 0\n')
                    env = dict(env, REVFS_CONFIG=cfg, REVFS_STATE_DIR=os.path.join(work, 'st2'))
                    out([a.revfs, 'mount', repo, mnt], env=env)
                    try:
                        loop, _, moved = create(os.path.join(mnt, 'latency'), a.n)
                        add('%d files, revfs, `mount.cpu_latency_us = 0`, s' % a.n, ns, loop)
                        add('migrations a file, revfs, `mount.cpu_latency_us = 0`', ns, moved)
                    finally:
                        out([a.revfs, 'unmount', mnt], env=env)
                finally:
                    shutil.rmtree(work)
                print(run, ns, {k: round(v[ns][-1], 2) for k, v in rows.items()}, flush=True)
    finally:
        with open(POLL, 'w') as f:
            f.write(orig)
    print()
    print('| median of %d | polling 0 (halt at once) | polling 200000 ns | 0 / 200000 |' % a.runs)
    print('|---|---:|---:|---:|')
    for name, by in rows.items():
        z, p = statistics.median(by['0']), statistics.median(by['200000'])
        ratio = '%.2fx' % (z / p) if p else ''
        print('| %s | %.2f | %.2f | %s |' % (name, z, p, ratio))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
