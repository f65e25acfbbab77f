#!/usr/bin/env python3
"""Benchmark (not a test): what a first read of a tree asks of the daemon. For each
workload, on a fresh mount with the store warm: the daemon's requests by opcode per file,
read-ahead's counts, and the CPU seconds of the daemon and of its helper processes (the
lease and events helpers, `vfs/src/helper.rs`), with the workload's wall time.

Usage: tests/bench/first_read_requests.py CORPUS [--bin REVFS ...] [--runs N]
                                         [--only tar,grep,rg]
CORPUS is a tree made by ../shared/corpus/make-corpus.sh. Each --bin (default
target/release/revfs) is run in turns (A B A B). Prints one markdown table per workload and
build: medians over the runs (the counts differ from run to run with how far read-ahead
got ahead of the reader).
"""
import argparse, os, statistics, subprocess, sys, time

import daemon_stats
from first_touch_bench import Mounted, sh

WORKLOADS = {
    'tar': 'tar cf - . | wc -c',
    'grep': 'grep -r revfs-needle-not-there . | wc -c',
    'rg': 'rg -uuu revfs-needle-not-there . | wc -c',
}


def stats(state):
    answer = daemon_stats.stats(state)
    if answer is None:
        raise SystemExit('no control socket under %s' % state)
    return answer


def mount_processes(mountpoint):
    """(pid, argv, /proc/PID/stat fields after the command name) of each process whose
    command line names the mountpoint: the daemon and its helpers."""
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                argv = f.read().split(b'\0')
            if mountpoint.encode() not in argv:
                continue
            with open('/proc/%s/stat' % pid) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        yield pid, argv, fields


def cpu_of(mountpoint):
    """CPU seconds (user + system, all threads) of the daemon and of its helpers."""
    tick = os.sysconf('SC_CLK_TCK')
    daemon = helpers = 0.0
    for _pid, argv, fields in mount_processes(mountpoint):
        secs = (int(fields[11]) + int(fields[12])) / tick
        if b'--foreground' in argv:
            daemon += secs
        elif argv[0] == b'/proc/self/exe':
            helpers += secs
    return daemon, helpers


def daemon_memory(mountpoint):
    """The daemon's minor page faults so far and its peak resident memory in MiB."""
    for pid, argv, fields in mount_processes(mountpoint):
        if b'--foreground' not in argv:
            continue
        try:
            with open('/proc/%s/status' % pid) as f:
                hwm = next(int(l.split()[1]) for l in f if l.startswith('VmHWM:'))
        except (OSError, StopIteration, ValueError):
            continue
        return int(fields[7]), hwm / 1024
    return 0, 0.0


def files_in(corpus):
    out = subprocess.run("find . -path ./.hg -prune -o -type f -print | wc -l", shell=True,
                         cwd=corpus, capture_output=True, text=True, check=True)
    return int(out.stdout)


def one_run(revfs, corpus, cmd):
    m = Mounted(revfs, None, corpus)
    try:
        before = stats(m.state).get('requests', {})
        cpu0 = cpu_of(m.dir)
        faults0, _ = daemon_memory(m.dir)
        t = time.perf_counter()
        sh('timeout 600 sh -c %s' % repr(cmd), cwd=m.dir, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        cpu1 = cpu_of(m.dir)
        faults1, peak = daemon_memory(m.dir)
        st = stats(m.state)
        after = st.get('requests', {})
        req = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        return {'wall': wall, 'daemon_cpu': cpu1[0] - cpu0[0],
                'helper_cpu': cpu1[1] - cpu0[1], 'requests': req,
                'faults': faults1 - faults0, 'peak_mib': peak,
                'readahead': st.get('readahead', {})}
    finally:
        m.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--bin', action='append')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--only', default='tar,grep,rg')
    args = ap.parse_args()
    bins = [os.path.abspath(b) for b in (args.bin or ['target/release/revfs'])]
    corpus = os.path.abspath(args.corpus)
    # The store warm: read once.
    sh('tar cf - .hg/store | wc -c', cwd=corpus, stdout=subprocess.DEVNULL)
    nfiles = files_in(corpus)
    for name in args.only.split(','):
        runs = {b: [] for b in bins}
        for _ in range(args.runs):
            for b in bins:
                runs[b].append(one_run(b, corpus, WORKLOADS[name]))
        for b in bins:
            report(name, b, runs[b], nfiles)


def report(name, revfs, runs, nfiles):
    med = statistics.median
    print('\n%s (`%s`) with %s, %d files, median of %d' % (
        name, WORKLOADS[name], revfs, nfiles, len(runs)))
    print('wall %.2f s, daemon CPU %.2f s, helpers CPU %.2f s' % (
        med([r['wall'] for r in runs]), med([r['daemon_cpu'] for r in runs]),
        med([r['helper_cpu'] for r in runs])))
    print('daemon page faults %d, peak memory %.0f MiB' % (
        med([r['faults'] for r in runs]), med([r['peak_mib'] for r in runs])))
    print('| request | a run | a file |')
    print('|---|---:|---:|')
    for op in sorted({k for r in runs for k in r['requests']}):
        n = med([r['requests'].get(op, 0) for r in runs])
        if n:
            print('| %s | %d | %.2f |' % (op, n, n / nfiles))
    total = med([sum(r['requests'].values()) for r in runs])
    print('| all | %d | %.2f |' % (total, total / nfiles))
    for key in ('files', 'pushed', 'used', 'raced', 'dropped', 'leaps'):
        print('read-ahead %s: %d' % (key, med([r['readahead'].get(key, 0) for r in runs])))
    sys.stdout.flush()


if __name__ == '__main__':
    main()
