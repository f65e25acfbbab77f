#!/usr/bin/env python3
"""Benchmark (not a test): a package manager's install into a mount against ext4, side by side.

Usage: tests/bench/install_bench.py [--revfs BIN] [--dir DIR] [--runs 5] [--packages P ...]
                                    [--latency]

A virtualenv made by Debian's python3 (`python3 -m venv`, python3-venv), then
`pip install --no-index --find-links WHEELS` of a real package set (default: django, numpy,
requests and what they need; their wheels downloaded once into DIR/wheels, so that the
network is not measured), on ext4 (a directory in DIR) and in a fresh revfs mount of an
empty repository (its state in DIR, the same disk), in turns. Each step is followed by a
sync, timed with it. Prints a markdown table of medians and ratios, and the files the
install made. --latency adds a target: a mount with `mount.cpu_latency_us = 0` (idle CPUs
poll while requests come).
"""
import argparse, os, shutil, statistics, subprocess, tempfile, time

ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='', REVFS_CONFIG='', PIP_DISABLE_PIP_VERSION_CHECK='1')
PYTHON = '/usr/bin/python3'


def sh(args, cwd=None, env=ENV):
    subprocess.run(args, check=True, cwd=cwd, env=env, stdout=subprocess.DEVNULL)


def timed(args, cwd=None):
    t = time.perf_counter()
    sh(args, cwd=cwd)
    sh(['sync'])
    return time.perf_counter() - t


def wheels(d, packages):
    w = os.path.join(d, 'wheels')
    if os.path.isdir(w) and os.listdir(w):
        return w
    tmp = tempfile.mkdtemp(dir=d)
    try:
        sh([PYTHON, '-m', 'venv', os.path.join(tmp, 'env')])
        sh([os.path.join(tmp, 'env', 'bin', 'pip'), 'download', '-q', '-d', w + '.tmp']
           + packages)
        os.rename(w + '.tmp', w)
    finally:
        shutil.rmtree(tmp)
    return w


def install(target, w, packages):
    out = {}
    env = os.path.join(target, 'env')
    out['python3 -m venv'] = timed([PYTHON, '-m', 'venv', env])
    out['pip install'] = timed([os.path.join(env, 'bin', 'pip'), 'install', '-q', '--no-index',
                                '--find-links', w] + packages)
    files = sum(len(f) for _, _, f in os.walk(env))
    out['rm -rf'] = timed(['rm', '-rf', env])
    return out, files


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument('--revfs', default=os.path.join(here, '..', '..', 'target', 'release', 'revfs'))
    ap.add_argument('--dir', default='/var/tmp/revfs-bench/install')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--packages', nargs='+', default=['django', 'numpy', 'requests'])
    ap.add_argument('--latency', action='store_true')
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    w = wheels(a.dir, a.packages)
    kinds = ['ext4', 'revfs'] + (['revfs+lat'] if a.latency else [])
    results = {k: [] for k in kinds}
    files = 0
    for run in range(a.runs):
        for kind in kinds[run % len(kinds):] + kinds[:run % len(kinds)]:
            work = tempfile.mkdtemp(dir=a.dir)
            try:
                if kind == 'ext4':
                    out, files = install(work, w, a.packages)
                else:
                    repo, mnt = os.path.join(work, 'repo'), os.path.join(work, 'mnt')
                    sh(['hg', 'init', repo])
                    os.mkdir(mnt)
                    env = dict(ENV, REVFS_STATE_DIR=os.path.join(work, 'state'))
                    if kind == 'revfs+lat':
                        cfg = os.path.join(work, 'config.toml')
                        with open(cfg, 'w') as f:
                            f.write('[mount]\ncpu_latency_us = 0\n')
                        env['REVFS_CONFIG'] = cfg
                    sh([a.revfs, 'mount', repo, mnt], env=env)
                    try:
                        out, files = install(mnt, w, a.packages)
                    finally:
                        sh([a.revfs, 'unmount', mnt], env=env)
                results[kind].append(out)
            finally:
                shutil.rmtree(work)
            print(kind, run, {k: round(v, 2) for k, v in out.items()}, flush=True)
    print()
    mounts = kinds[1:]
    print(f'| {" ".join(a.packages)} ({files:,} files); seconds, median of {a.runs} | ext4 | '
          + ' | '.join(mounts) + ' | ' + ' | '.join(f'{m} / ext4' for m in mounts) + ' |')
    print('|---|' + '---:|' * (1 + 2 * len(mounts)))
    for k in results['ext4'][0]:
        e = statistics.median(r[k] for r in results['ext4'])
        ms = [statistics.median(r[k] for r in results[m]) for m in mounts]
        print(f'| {k} | {e:.2f} | ' + ' | '.join(f'{m:.2f}' for m in ms) + ' | '
              + ' | '.join(f'{m / e:.2f}x' for m in ms) + ' |')


if __name__ == '__main__':
    import benchdeps
    benchdeps.install()
    main()
