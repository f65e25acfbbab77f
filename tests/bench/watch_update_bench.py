#!/usr/bin/env python3
"""Benchmark (not a test): hg's update of a corpus's two revisions (the linux corpus: 886 files
change) in a revfs mount and in a clone, each with and without a recursive inotify watcher
on the whole tree (`inotifywait -m -r`, as editors and build watchers watch), and revfs's own
update in the mount with the watcher. The configurations take turns within each run (A B C D
E, A B C D E, ...); each run updates r0 -> r1, then back. Prints medians (min-max), the
events each watcher heard, and ratios.

Usage: tests/bench/watch_update_bench.py CORPUS [--runs N] [--scratch DIR]
CORPUS comes from ../shared/corpus/make-corpus.sh. Uses target/release/revfs.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdeps  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVFS = os.path.join(ROOT, 'target', 'release', 'revfs')
ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='', HGUSER='bench <bench@example.org>')


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=kw.pop('env', ENV), **kw)


def out(cmd, cwd):
    return subprocess.run(cmd, shell=True, check=True, env=ENV, cwd=cwd,
                          capture_output=True, text=True).stdout.strip()


class Watcher:
    """inotifywait -m -r over `root` (`.hg` left out), its events to a file."""

    def __init__(self, root, log):
        self.log = log
        self.proc = subprocess.Popen(
            ['inotifywait', '-m', '-r', '--exclude', r'(^|/)\.hg(/|$)', '-e',
             'create,delete,modify,attrib,close_write,moved_from,moved_to,delete_self',
             '-o', log, root], stderr=subprocess.PIPE, text=True)
        # It says on stderr when every directory is watched.
        for line in self.proc.stderr:
            if 'Watches established' in line:
                break
        else:
            raise SystemExit('inotifywait ended before its watches were set up')

    def stop(self):
        time.sleep(0.5)  # its last reads
        self.proc.terminate()
        self.proc.wait()
        with open(self.log, 'rb') as f:
            n = sum(1 for _ in f)
        os.unlink(self.log)
        return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('corpus')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--scratch', default='/var/tmp')
    a = ap.parse_args()
    benchdeps.install()
    corpus = os.path.abspath(a.corpus)
    r0, r1 = out('hg log -r 0 -T {node}', corpus), out('hg log -r 1 -T {node}', corpus)
    changed = len(out('hg status --rev 0 --rev 1', corpus).splitlines())
    work = tempfile.mkdtemp(prefix='revfs-watch-update-', dir=a.scratch)
    clone, mnt, state = (os.path.join(work, n) for n in ('clone', 'mnt', 'state'))
    os.makedirs(mnt)
    renv = dict(ENV, REVFS_STATE_DIR=state)
    times = {}
    events = {}
    try:
        sh('hg clone -q -U %s %s && hg -R %s update -q -r %s' % (corpus, clone, clone, r0))
        sh('%s mount -r %s %s %s' % (REVFS, r0, corpus, mnt), env=renv)
        # Both trees seen whole first (a watcher lists every directory anyway).
        sh('find %s %s -name .hg -prune -o -print > /dev/null' % (clone, mnt))
        revfs = 'env REVFS_STATE_DIR=%s %s -R %s' % (state, REVFS, mnt)
        configs = [
            ('hg update, mount', mnt, False, 'hg -R %s update -q -r %%s' % mnt),
            ('hg update, mount, watched', mnt, True, 'hg -R %s update -q -r %%s' % mnt),
            ('hg update, clone', clone, False, 'hg -R %s update -q -r %%s' % clone),
            ('hg update, clone, watched', clone, True, 'hg -R %s update -q -r %%s' % clone),
            ('revfs update, mount, watched', mnt, True, revfs + ' update -q -r %s'),
        ]
        for run in range(a.runs):
            for name, root, watched, cmd in configs:
                for frm, to, label in ((r0, r1, '0 -> 1'), (r1, r0, '1 -> 0')):
                    w = Watcher(root, os.path.join(work, 'events')) if watched else None
                    t = time.perf_counter()
                    sh(cmd % to, env=renv)
                    times.setdefault((name, label), []).append(time.perf_counter() - t)
                    if w:
                        events.setdefault((name, label), []).append(w.stop())
            print('run %d done' % run, file=sys.stderr, flush=True)
    finally:
        subprocess.run(['fusermount3', '-u', mnt])
        time.sleep(0.5)
        with open('/proc/self/mountinfo') as f:
            if any(l.split()[4] == mnt for l in f):
                subprocess.run(['fusermount3', '-uz', mnt])
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    print('%s: %d files change between revisions 0 and 1; %d runs in turns, medians (min-max)'
          % (os.path.basename(corpus), changed, a.runs))
    print()
    print('| update | 0 -> 1 | 1 -> 0 | events heard (0 -> 1, 1 -> 0) |')
    print('|---|---:|---:|---:|')
    for name, *_ in configs:
        cells = []
        for label in ('0 -> 1', '1 -> 0'):
            v = times[(name, label)]
            cells.append('%.3f s (%.3f-%.3f)' % (med[(name, label)], min(v), max(v)))
        ev = ', '.join('%d' % statistics.median(events[(name, l)])
                       for l in ('0 -> 1', '1 -> 0')) if (name, '0 -> 1') in events else ''
        print('| %s | %s | %s | %s |' % (name, cells[0], cells[1], ev))
    print()
    for label in ('0 -> 1', '1 -> 0'):
        m = lambda n: med[(n, label)]
        print('%s: the watcher costs the mount\'s update %.2fx and the clone\'s %.2fx; '
              'watched, the mount\'s hg update is %.2fx the clone\'s, revfs update %.2fx' % (
                  label, m('hg update, mount, watched') / m('hg update, mount'),
                  m('hg update, clone, watched') / m('hg update, clone'),
                  m('hg update, mount, watched') / m('hg update, clone, watched'),
                  m('revfs update, mount, watched') / m('hg update, clone, watched')))


if __name__ == '__main__':
    main()
