#!/usr/bin/env python3
"""Benchmark (not a test) of a first touch of a tree: a mount's first read of every file,
side by side with the corpus's own checkout (native), in the same run.

Usage: tests/bench/first_touch_bench.py CORPUS [--bin REVFS[::CONFIG] ...] [--runs N]
                                        [--only warm,stat,grep,rg,list,cold,parallel,readers,
                                        latency]
                                        [--out FILE]
CORPUS is a tree made by ../shared/corpus/make-corpus.sh (an hg repository with a working
copy at tip). Each --bin (default target/release/revfs) is measured on fresh mounts of tip;
CONFIG is a revfs configuration file (REVFS_CONFIG), so one build with two configurations
compares in one run (read-ahead on and off, say). Per run:

  warm      `tar cf - . | wc -c` on a fresh mount, the store in the page cache (read once
            before), against the same tar of the native checkout, warm (`.hg` excluded);
  stat      `find . -type f -size +1k | wc -l` on a fresh mount (every file's size: what
            `ls -l`, rsync's scan or a build's stat of every source asks), against the same
            find on the native checkout (`.hg` left out), warm;
  grep      `grep -r` of a string found nowhere (reads every file, no stat after a read, as
            a code search or an indexer does) on a fresh mount, against native, warm;
  rg        `rg -uuu` of a string found nowhere, with its own parallel walk (one thread a
            CPU: directories in the order its threads take them, not the listing's), on a
            fresh mount, against native, warm;
  list      `find . -type f | wc -l` on a fresh mount (names only: readdir's types, no
            stat), against native, warm;
  cold      the same with every cache dropped before (`echo 3 > /proc/sys/vm/drop_caches`),
            the native checkout too;
  parallel  the top-level directories split into 8 groups of about equal size: one tar per
            group at once (8 readers), against one tar of the same groups one after
            another (1 reader), each on a fresh mount, warm store; and native;
  readers   1, 2, 4 and 8 readers at once, each a tar of its share of the tree (its
            directories split in groups of about equal bytes, a big directory split into
            what it holds), on a fresh mount, warm
            store, against the same on the native checkout; with the CPU time the whole
            machine was busy meanwhile (/proc/stat), which says whether one reader already
            keeps every CPU busy;
  latency   a foreground reader's first reads while read-ahead works: one process reads
            the first file of the corpus's biggest directories (each starts a round of
            read-ahead), while another reads the files of other directories one by one
            and times each read from open to the last byte; reported as median and 99th
            percentile, in microseconds.

Prints a markdown table of medians (seconds) and ratios; raw numbers go to --out as JSON.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, threading, time

ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')


def sh(cmd, env=None, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=env or ENV, **kw)


def timed(cmd, cwd, env=None):
    t = time.perf_counter()
    sh(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def drop_caches():
    sh('sync; echo 3 > /proc/sys/vm/drop_caches')


class Mounted:
    def __init__(self, revfs, config, corpus):
        self.revfs = revfs
        self.state = tempfile.mkdtemp(prefix='revfs-bench-state-', dir='/var/tmp')
        self.dir = tempfile.mkdtemp(prefix='revfs-bench-mnt-', dir='/var/tmp')
        self.env = dict(ENV, REVFS_STATE_DIR=self.state, REVFS_CONFIG=config or '')
        try:
            sh('timeout 60 %s mount %s %s' % (revfs, corpus, self.dir), env=self.env)
        except BaseException:
            sh('rm -rf %s %s' % (self.state, self.dir))
            raise

    def close(self):
        subprocess.run('timeout 60 %s unmount %s' % (self.revfs, self.dir), shell=True,
                       env=self.env)
        sh('rm -rf %s %s' % (self.state, self.dir))


def groups(corpus, n=8, split=False):
    """The top-level directories and files split into n groups of about equal bytes. With
    split, a directory bigger than a quarter of a group's share is replaced by what it holds
    (again and again), so that one big directory (linux's drivers/) does not make a group
    of its own that the others wait for."""
    if split:
        du = subprocess.run(['du', '-b', '--exclude=.hg', '.'], cwd=corpus, capture_output=True,
                            text=True, check=True).stdout
        dirs = {}
        for line in du.splitlines():
            size, path = line.split('\t', 1)
            dirs[os.path.normpath(path)] = int(size)
    sizes = []
    for name in sorted(os.listdir(corpus)):
        if name.startswith('.hg') or name == '.corpus-done':
            continue
        if split:
            path = os.path.join(corpus, name)
            size = dirs.get(name) if os.path.isdir(path) else os.lstat(path).st_size
        else:
            out = subprocess.run(['du', '-sb', name], cwd=corpus, capture_output=True, text=True)
            size = int(out.stdout.split()[0])
        sizes.append((size, name))
    if split:
        total = sum(size for size, _ in sizes)
        while True:
            size, name = max(sizes)
            path = os.path.join(corpus, name)
            if size <= total / (4 * n) or os.path.islink(path) or not os.path.isdir(path):
                break
            sizes.remove((size, name))
            for child in sorted(os.listdir(path)):
                rel = os.path.join(name, child)
                full = os.path.join(corpus, rel)
                isdir = os.path.isdir(full) and not os.path.islink(full)
                sizes.append((dirs.get(rel, 0) if isdir else os.lstat(full).st_size, rel))
    sizes.sort(reverse=True)
    out = [[] for _ in range(n)]
    load = [0] * n
    for size, name in sizes:
        i = load.index(min(load))
        out[i].append(name)
        load[i] += size
    return [sorted(g) for g in out if g]


def tar_of(names):
    return 'tar cf - %s | wc -c' % ' '.join("'%s'" % n for n in names)


def busy_cpu():
    """Seconds of CPU time the machine has spent busy (user, nice, system, irq, softirq)."""
    with open('/proc/stat') as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf('SC_CLK_TCK')


def parallel(cwd, gs):
    t = time.perf_counter()
    procs = [subprocess.Popen(tar_of(g), shell=True, cwd=cwd, env=ENV,
                              stdout=subprocess.DEVNULL) for g in gs]
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError('tar failed')
    return time.perf_counter() - t


def biggest_dirs(corpus, n):
    counts = []
    for root, dirs, files in os.walk(corpus):
        if '.hg' in dirs:
            dirs.remove('.hg')
        counts.append((len(files), os.path.relpath(root, corpus), sorted(files)))
    counts.sort(reverse=True)
    return counts[:n], counts[n:]


def latency(mnt, corpus):
    """Per-file first-read times (us) of a reader while another starts read-ahead rounds."""
    big, rest = biggest_dirs(corpus, 40)
    stop = threading.Event()

    def starter():
        for _, d, files in big:
            if stop.is_set():
                return
            with open(os.path.join(mnt, d, files[0]), 'rb') as f:
                f.read(1)
            time.sleep(0.005)

    # Files of directories the starter does not touch, a few per directory.
    targets = []
    for _, d, files in rest[::7]:
        targets.extend(os.path.join(mnt, d, f) for f in files[:3])
        if len(targets) >= 1500:
            break
    t = threading.Thread(target=starter)
    t.start()
    times = []
    for path in targets:
        t0 = time.perf_counter()
        try:
            with open(path, 'rb') as f:
                while f.read(1 << 20):
                    pass
        except OSError:
            continue
        times.append((time.perf_counter() - t0) * 1e6)
    stop.set()
    t.join()
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--bin', action='append')
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--only', default='warm,stat,cold,parallel,latency')
    ap.add_argument('--out')
    a = ap.parse_args()
    corpus = os.path.abspath(a.corpus)
    bins = a.bin or [os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), 'target', 'release', 'revfs')]
    only = set(a.only.split(','))
    native_tar = "tar cf - --exclude=./.hg --exclude=./.corpus-done . | wc -c"
    mount_tar = 'tar cf - . | wc -c'
    gs = groups(corpus) if 'parallel' in only else []
    res = {}

    def add(key, v):
        res.setdefault(key, []).append(v)

    for run in range(a.runs):
        for spec in bins:
            revfs, _, config = spec.partition('::')
            label = spec
            def side_by_side(kind, native_cmd, mount_cmd, before=None):
                """`native_cmd` in the corpus, then `mount_cmd` on a fresh mount, each
                after `before()` (the mount's after it is mounted)."""
                if before:
                    before()
                add((kind, 'native'), timed(native_cmd, corpus))
                m = Mounted(revfs, config, corpus)
                try:
                    if before:
                        before()
                    add((kind, label), timed(mount_cmd, m.dir))
                finally:
                    m.close()

            def warm_store():
                timed(native_tar, corpus)  # the store and checkout in the page cache

            if 'warm' in only:
                warm_store()
                side_by_side('warm', native_tar, mount_tar)
            if 'stat' in only:
                find = "find . -type f -size +1k -not -path './.hg/*' | wc -l"
                side_by_side('stat', find, find)
            if 'grep' in only:
                grep = "grep -r --exclude-dir=.hg revfs_bench_matches_nothing . | wc -l"
                warm_store()
                side_by_side('grep', grep, grep)
            if 'rg' in only:
                rg = "rg -uuu -g '!.hg' -c revfs_bench_matches_nothing . | wc -l"
                warm_store()
                side_by_side('rg', rg, rg)
            if 'list' in only:
                names = "find . -type f -not -path './.hg/*' | wc -l"
                side_by_side('list', names, names)
            if 'cold' in only:
                side_by_side('cold', native_tar, mount_tar, before=drop_caches)
            if 'parallel' in only:
                timed(native_tar, corpus)
                add(('1 reader', 'native'), timed(tar_of(sum(gs, [])), corpus))
                add(('8 readers', 'native'), parallel(corpus, gs))
                for kind in ('1 reader', '8 readers'):
                    m = Mounted(revfs, config, corpus)
                    try:
                        t = timed(tar_of(sum(gs, [])), m.dir) if kind == '1 reader' \
                            else parallel(m.dir, gs)
                        add((kind, label), t)
                    finally:
                        m.close()
            if 'readers' in only:
                timed(native_tar, corpus)
                for n in (1, 2, 4, 8):
                    gn = groups(corpus, n, split=True)
                    b = busy_cpu()
                    add(('%d readers' % n, 'native'), parallel(corpus, gn))
                    add(('%d readers, busy CPU s' % n, 'native'), busy_cpu() - b)
                    m = Mounted(revfs, config, corpus)
                    try:
                        b = busy_cpu()
                        add(('%d readers' % n, label), parallel(m.dir, gn))
                        add(('%d readers, busy CPU s' % n, label), busy_cpu() - b)
                    finally:
                        m.close()
            if 'latency' in only:
                m = Mounted(revfs, config, corpus)
                try:
                    p50, p99 = latency(m.dir, corpus)
                    add(('latency p50 us', label), p50)
                    add(('latency p99 us', label), p99)
                finally:
                    m.close()
            print('run %d %s done' % (run + 1, spec), file=sys.stderr)
    labels = ['native'] + bins
    kinds = []
    for (k, _) in res:
        if k not in kinds:
            kinds.append(k)
    print('| workload | ' + ' | '.join(labels) + ' |')
    print('|---|' + '---:|' * len(labels))
    for k in kinds:
        row = []
        nat = res.get((k, 'native'))
        for l in labels:
            v = res.get((k, l))
            if not v:
                row.append('')
                continue
            med = statistics.median(v)
            if 'busy CPU' in k:
                row.append('%.1f' % med)
            elif 'us' in k:
                row.append('%.0f' % med)
            elif nat and l != 'native':
                row.append('%.2f s (%.1fx)' % (med, med / statistics.median(nat)))
            else:
                row.append('%.2f s' % med)
        print('| %s | %s |' % (k, ' | '.join(row)))
    if a.out:
        with open(a.out, 'w') as f:
            json.dump({'%s|%s' % k: v for k, v in res.items()}, f, indent=1)


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
