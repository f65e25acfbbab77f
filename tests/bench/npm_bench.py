#!/usr/bin/env python3
"""Benchmark (not a test): `npm ci` of a real lockfile into a mount against ext4, side by side.

Usage: tests/bench/npm_bench.py [--revfs BIN] [--dir DIR] [--runs 5] [--redirect]

A project with a real dependency set (vite, typescript, eslint, react and react-dom: what a
front-end project starts from) is resolved once with `npm install` into DIR/seed, which
writes its package-lock.json and fills npm's cache in DIR/npm-cache, then `npm ci` once
there (the network is not measured after that). Each run copies package.json and package-lock.json into a fresh
directory on ext4 (in DIR), into a fresh revfs mount of an empty repository (its state in
DIR, the same disk), and with --redirect into a mount whose node_modules is a redirection
(`revfs redirect add node_modules`), in turns, then times `npm ci --prefer-offline` there and
the removal of what node_modules holds (`find node_modules -mindepth 1 -delete`), each
followed by a sync. Prints a markdown table of medians and
ratios, and the files node_modules holds.
"""
import argparse, json, os, shutil, statistics, subprocess, tempfile, time

ENV = dict(os.environ, HGPLAIN='1', HGRCPATH='', REVFS_CONFIG='')
PACKAGE = {
    'name': 'revfs-npm-bench',
    'version': '1.0.0',
    'private': True,
    'dependencies': {'react': '^19.0.0', 'react-dom': '^19.0.0'},
    'devDependencies': {'vite': '^7.0.0', 'typescript': '^5.0.0', 'eslint': '^9.0.0'},
}


# From npm's cache, asking the registry only for what it lacks (nothing after the seed).
CI_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error']


def sh(args, cwd=None, env=ENV):
    subprocess.run(args, check=True, cwd=cwd, env=env, stdout=subprocess.DEVNULL)


def timed(args, cwd=None, env=ENV):
    t = time.perf_counter()
    sh(args, cwd=cwd, env=env)
    sh(['sync'])
    return time.perf_counter() - t


def seed(d, env):
    """The project's package.json and package-lock.json, resolved once (network)."""
    s = os.path.join(d, 'seed')
    if os.path.exists(os.path.join(s, 'package-lock.json')):
        return s
    os.makedirs(s, exist_ok=True)
    with open(os.path.join(s, 'package.json'), 'w') as f:
        json.dump(PACKAGE, f, indent=2)
    sh(['npm', 'install', '--no-audit', '--no-fund'], cwd=s, env=env)
    shutil.rmtree(os.path.join(s, 'node_modules'))
    # Once as the runs will: whatever `npm ci` asks that the install did not keep (this
    # machine's npm writes lockfiles without download addresses) is cached now.
    sh(['npm', 'ci'] + CI_FLAGS, cwd=s, env=env)
    shutil.rmtree(os.path.join(s, 'node_modules'))
    return s


def install(app, s, env):
    os.makedirs(app, exist_ok=True)
    for name in ['package.json', 'package-lock.json']:
        shutil.copy(os.path.join(s, name), os.path.join(app, name))
    out = {}
    out['npm ci'] = timed(['npm', 'ci'] + CI_FLAGS, cwd=app, env=env)
    files = sum(len(f) for _, _, f in os.walk(os.path.join(app, 'node_modules')))
    # What node_modules holds (a redirection's own directory is a mountpoint, which no
    # `rm -rf` removes: the same command for every target).
    out['find node_modules -delete'] = timed(['find', os.path.join(app, 'node_modules'),
                                              '-mindepth', '1', '-delete'])
    return out, files


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument('--revfs', default=os.path.join(here, '..', '..', 'target', 'release', 'revfs'))
    ap.add_argument('--dir', default='/var/tmp/revfs-bench/npm')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--redirect', action='store_true')
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    npm_env = dict(ENV, npm_config_cache=os.path.join(a.dir, 'npm-cache'),
                   npm_config_update_notifier='false')
    s = seed(a.dir, npm_env)
    kinds = ['ext4', 'revfs'] + (['redirect'] if a.redirect else [])
    results = {k: [] for k in kinds}
    files = 0
    for run in range(a.runs):
        for kind in kinds[run % len(kinds):] + kinds[:run % len(kinds)]:
            work = tempfile.mkdtemp(dir=a.dir)
            try:
                if kind == 'ext4':
                    out, files = install(os.path.join(work, 'app'), s, npm_env)
                else:
                    repo, mnt = os.path.join(work, 'repo'), os.path.join(work, 'mnt')
                    sh(['hg', 'init', repo])
                    os.mkdir(mnt)
                    env = dict(ENV, REVFS_STATE_DIR=os.path.join(work, 'state'))
                    sh([a.revfs, 'mount', repo, mnt], env=env)
                    try:
                        app = os.path.join(mnt, 'app')
                        if kind == 'redirect':
                            os.mkdir(app)
                            sh([a.revfs, 'redirect', 'add', 'app/node_modules'], cwd=mnt,
                               env=env)
                        out, files = install(app, s, npm_env)
                    finally:
                        sh([a.revfs, 'unmount', mnt], env=env)
                results[kind].append(out)
            finally:
                shutil.rmtree(work)
            print(kind, run, {k: round(v, 2) for k, v in out.items()}, flush=True)
    print()
    mounts = kinds[1:]
    print(f'| npm ci, {len(PACKAGE["dependencies"]) + len(PACKAGE["devDependencies"])} '
          f'dependencies ({files:,} files); seconds, median of {a.runs} | ext4 | '
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
