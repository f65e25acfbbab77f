#!/usr/bin/env python3
"""Benchmark (not a test) of `revfs mount` on a corpus tree, side by side with native
checkouts made by `hg update` and `git checkout` of the same revision, in the same run.

Usage: tests/bench/mount_bench.py CORPUS [--runs N] [--native-runs N] [--out FILE]
CORPUS is a tree made by ../shared/corpus/make-corpus.sh (an hg repository with a working
copy at tip, and CORPUS.git when it was made with GIT=1).

Measures, for the tip revision:
  mount time (median of --runs mounts) and `hg update` null->tip / `git checkout` times;
  daemon RSS right after mount, and after `find MOUNT -type f | wc -l`;
  find on the mount (first pass) against find on the native checkout (cold and warm caches);
  `tar cf - . | wc -c` first and second pass, mount against native (native cold = after
  dropping the page cache);
  eight parallel readers of disjoint file sets against one reader of all of them, on fresh
  mounts.
Prints a markdown table with medians; the raw numbers go to --out as JSON.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='')


def sh(cmd, env=None, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=env or ENV, **kw)


def timed(cmd, **kw):
    t = time.perf_counter()
    sh(cmd, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def drop_caches():
    sh('sync')
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('3\n')


def rss_kb(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return -1


class Mount:
    def __init__(self, repo, state):
        self.repo, self.state = repo, state
        self.dir = tempfile.mkdtemp(prefix='revfs-bench-mnt-')

    def mount(self):
        t = time.perf_counter()
        sh('%s mount %s %s' % (REVFS, self.repo, self.dir), env=dict(ENV, REVFS_STATE_DIR=self.state))
        return time.perf_counter() - t

    def pid(self):
        mounts = os.path.join(self.state, 'mounts')
        for d in os.listdir(mounts):
            p = os.path.join(mounts, d, 'daemon.pid')
            if os.path.exists(p):
                return int(open(p).read())
        raise RuntimeError('no daemon pid')

    def unmount(self):
        sh('%s unmount %s' % (REVFS, self.dir), env=dict(ENV, REVFS_STATE_DIR=self.state))


def file_list(root):
    out = subprocess.run(['hg', 'files', '-r', 'tip', '-0'], cwd=root, env=ENV, check=True,
                         capture_output=True).stdout
    return [p for p in out.split(b'\0') if p]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--runs', type=int, default=10)
    ap.add_argument('--native-runs', type=int, default=1)
    ap.add_argument('--out', default='/tmp/revfs-mount-bench.json')
    ap.add_argument('--scratch', default='/work/bench/scratch', help='disk directory for native checkouts')
    a = ap.parse_args()
    corpus = os.path.abspath(a.corpus)
    name = os.path.basename(corpus)
    res = {'corpus': corpus}
    state = tempfile.mkdtemp(prefix='revfs-bench-state-')
    os.makedirs(a.scratch, exist_ok=True)
    files = file_list(corpus)
    res['files'] = len(files)

    # Native checkouts from null, on disk.
    hgwc = os.path.join(a.scratch, name + '-hg')
    res['hg_update'] = []
    for _ in range(a.native_runs):
        shutil.rmtree(hgwc, ignore_errors=True)
        sh('hg clone -q -U %s %s' % (corpus, hgwc))
        drop_caches()
        res['hg_update'].append(timed('hg -R %s update -q tip' % hgwc))
    gitdir = corpus + '.git'
    if os.path.isdir(gitdir):
        gitwc = os.path.join(a.scratch, name + '-git')
        res['git_checkout'] = []
        for _ in range(a.native_runs):
            shutil.rmtree(gitwc, ignore_errors=True)
            os.makedirs(gitwc)
            drop_caches()
            res['git_checkout'].append(timed('git --git-dir=%s --work-tree=%s checkout -q -f HEAD -- .' % (gitdir, gitwc),
                                             env=dict(ENV, GIT_INDEX_FILE=os.path.join(a.scratch, name + '-git.index'))))

    # Mount time, cold store cache for the first, then repeated.
    m = Mount(corpus, state)
    res['mount'] = []
    for i in range(a.runs):
        if i == 0:
            drop_caches()
        res['mount'].append(m.mount())
        if i < a.runs - 1:
            m.unmount()
    pid = m.pid()
    res['rss_after_mount_kb'] = rss_kb(pid)
    res['find_mount_first'] = timed('find %s -type f | wc -l' % m.dir)
    res['rss_after_find_kb'] = rss_kb(pid)
    res['find_mount_second'] = timed('find %s -type f | wc -l' % m.dir)
    drop_caches()
    res['find_native_cold'] = timed('find %s -type f -not -path "*/.hg/*" | wc -l' % hgwc)
    res['find_native_warm'] = timed('find %s -type f -not -path "*/.hg/*" | wc -l' % hgwc)
    # Reading everything: first pass (cold), second pass (page cache).
    res['tar_mount_first'] = timed('cd %s && tar cf - . | wc -c' % m.dir)
    res['tar_mount_second'] = timed('cd %s && tar cf - . | wc -c' % m.dir)
    res['rss_after_tar_kb'] = rss_kb(pid)
    drop_caches()
    res['tar_native_first'] = timed('cd %s && tar cf - --exclude=./.hg . | wc -c' % hgwc)
    res['tar_native_second'] = timed('cd %s && tar cf - --exclude=./.hg . | wc -c' % hgwc)
    m.unmount()

    # Parallel readers: the same 8 disjoint shards of files, read by one process or by 8.
    shard_files = files[: min(len(files), 20000)]
    shards = [shard_files[i::8] for i in range(8)]
    lists = []
    for i, s in enumerate(shards):
        p = os.path.join(state, 'shard%d' % i)
        with open(p, 'wb') as f:
            f.write(b'\0'.join(s) + b'\0')
        lists.append(p)
    allp = os.path.join(state, 'all')
    with open(allp, 'wb') as f:
        f.write(b''.join(open(p, 'rb').read() for p in lists))
    res['one_reader'], res['eight_readers'] = [], []
    for _ in range(3):
        m.mount()
        res['one_reader'].append(timed('cd %s && xargs -0 cat < %s > /dev/null' % (m.dir, allp)))
        m.unmount()
        m.mount()
        cmd = ' & '.join('xargs -0 cat < %s > /dev/null' % p for p in lists) + ' & wait'
        res['eight_readers'].append(timed('cd %s && { %s; }' % (m.dir, cmd)))
        m.unmount()
    res['parallel_files'] = len(shard_files)
    shutil.rmtree(state, ignore_errors=True)
    with open(a.out, 'w') as f:
        json.dump(res, f, indent=1)
    med = lambda x: statistics.median(x) if isinstance(x, list) else x
    hgup = med(res['hg_update'])
    rows = [
        ('revfs mount (median of %d)' % a.runs, med(res['mount'])),
        ('hg update null->tip', hgup),
        ('git checkout', med(res.get('git_checkout', [float('nan')]))),
        ('find on mount, first pass', res['find_mount_first']),
        ('find on mount, second pass', res['find_mount_second']),
        ('find on native checkout, cold cache', res['find_native_cold']),
        ('find on native checkout, warm cache', res['find_native_warm']),
        ('tar of mount, first pass', res['tar_mount_first']),
        ('tar of mount, second pass', res['tar_mount_second']),
        ('tar of native checkout, first pass (cold)', res['tar_native_first']),
        ('tar of native checkout, second pass', res['tar_native_second']),
        ('1 reader, %d files (median of 3)' % len(shard_files), med(res['one_reader'])),
        ('8 readers, same files (median of 3)', med(res['eight_readers'])),
    ]
    print('corpus: %s (%d files)\n' % (corpus, len(files)))
    print('| measure | seconds |\n|---|---:|')
    for k, v in rows:
        print('| %s | %.3f |' % (k, v))
    print('\n| ratio | value |\n|---|---:|')
    print('| hg update / revfs mount | %.0fx |' % (hgup / med(res['mount'])))
    print('| find: mount first pass / native cold | %.2fx |' % (res['find_mount_first'] / res['find_native_cold']))
    print('| find: mount first pass / native warm | %.2fx |' % (res['find_mount_first'] / res['find_native_warm']))
    print('| tar second pass: mount / native | %.2fx |' % (res['tar_mount_second'] / res['tar_native_second']))
    print('| 1 reader / 8 readers | %.2fx |' % (med(res['one_reader']) / med(res['eight_readers'])))
    print('\n| daemon RSS | MB |\n|---|---:|')
    for k in ('rss_after_mount_kb', 'rss_after_find_kb', 'rss_after_tar_kb'):
        print('| %s | %.0f |' % (k[:-3].replace('_', ' '), res[k] / 1024))


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
