#!/usr/bin/env python3
"""A day of hg work on a real project's history, in a revfs mount and in an hg clone side
by side: the same commands (updates across the history, edits, renames, copies, commits,
shelve, replayed merges, rebase, graft, backout, histedit, purge, then local changes
carried across updates with --merge, resolve, addremove, amend, revert, backout), their
output, errors and exit codes compared byte for byte, the two roots' paths blanked.

    tests/real_history/day.py HGREPO [REVFS] [SEED] [START]

HGREPO is an hg repository, for instance a public git repository converted with
`hg --config extensions.convert= convert GITDIR HGREPO` (merges, renames, tags); START a
revision to begin from (default 2.0.0, a tag of the pallets projects). TRACE=1 prints each
command, CHECK=1 compares `hg status -C` after each command of the second part. Prints each
difference, and `N commands, N differences` at the end. Works in a temporary directory
under /var/tmp, unmounted and removed at the end. docs/RELIABILITY.md has its results.
"""
import os, shutil, subprocess, sys, random

SRC = sys.argv[1]
REVFS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', 'target', 'release', 'revfs'))
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 1
import atexit, tempfile
W = tempfile.mkdtemp(prefix='revfs-real-day-', dir='/var/tmp')


def cleanup():
    try:
        subprocess.run([REVFS, 'unmount', W + '/mnt'],
                       env=dict(os.environ, REVFS_STATE_DIR=W + '/state'), capture_output=True)
    except OSError:
        pass
    if not os.path.ismount(W + '/mnt'):
        shutil.rmtree(W, ignore_errors=True)


atexit.register(cleanup)
rc = os.path.join(W, 'hgrc')
with open(rc, 'w') as f:
    f.write('[ui]\nusername = Day <day@example.org>\nmerge = internal:merge\n'
            '[extensions]\nrebase =\nshelve =\nhistedit =\npurge =\n'
            '[devel]\ndefault-date = 0 0\n')
ENV = dict(os.environ, HGRCPATH=rc, LC_ALL='C.UTF-8', HGENCODING='utf-8',
           REVFS_STATE_DIR=os.path.join(W, 'state'), REVFS_CONFIG='')
ENV.pop('HGPLAIN', None)
ENV['HGEDITOR'] = 'true'


def run(args, cwd, check=False):
    p = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, timeout=300)
    if check and p.returncode:
        raise SystemExit('%s: %s' % (args, p.stderr.decode()))
    return p


subprocess.run(['hg', 'clone', '-q', '-U', SRC, W + '/clone'], env=ENV, check=True)
subprocess.run(['hg', 'clone', '-q', '-U', SRC, W + '/backing'], env=ENV, check=True)
start = '2.0.0' if len(sys.argv) <= 4 else sys.argv[4]
run(['hg', 'update', '-q', start], W + '/clone', check=True)
os.makedirs(W + '/mnt')
run([REVFS, 'mount', '-r', start, W + '/backing', W + '/mnt'], W, check=True)
SIDES = {'clone': W + '/clone', 'mount': W + '/mnt'}
diffs = 0
n = 0


def norm(b, root):
    return b.replace(root.encode(), b'ROOT')


CHECK = False


def same(*args, show=False):
    r = same1(*args, show=show)
    if CHECK and args[0] != 'status':
        same1('status', '-C')
    return r


def same1(*args, show=False):
    global diffs, n
    n += 1
    if os.environ.get('TRACE'):
        print('CMD hg %s' % ' '.join(args))
    outs = {}
    for name, root in SIDES.items():
        p = run(['hg'] + list(args), root)
        outs[name] = (p.returncode, norm(p.stdout, root), norm(p.stderr, root))
    if outs['clone'] != outs['mount']:
        diffs += 1
        print('DIFF hg %s' % ' '.join(args))
        cl = outs['clone'][1].splitlines(); ml = outs['mount'][1].splitlines()
        print('  only clone: %r' % [l for l in cl if l not in ml][:20])
        print('  only mount: %r' % [l for l in ml if l not in cl][:20])
        for name in SIDES:
            rcode, o, e = outs[name]
            print('  %s: rc=%d\n    out=%r\n    err=%r' % (name, rcode, o[:1500], e[:800]))
    if outs['clone'][0] != 0:
        print('  (rc=%d both) hg %s: %r' % (outs['clone'][0], ' '.join(args), outs['clone'][2][:200]))
    if show:
        print('same hg %s: rc=%d %r' % (' '.join(args), outs['clone'][0], outs['clone'][1][:200]))
    return outs['clone']


def edit(fn):
    if os.environ.get('TRACE'):
        print('EDIT %s' % getattr(fn, '__name__', fn))
    for root in SIDES.values():
        fn(root)


def write(rel, text):
    def f(root):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'w') as fh:
            fh.write(text)
    edit(f)


def append(rel, text):
    def f(root):
        with open(os.path.join(root, rel), 'a') as fh:
            fh.write(text)
    edit(f)


def remove(rel):
    def f(root):
        if os.path.lexists(os.path.join(root, rel)):
            os.remove(os.path.join(root, rel))
    edit(f)


rng = random.Random(SEED)
LOG = ['log', '-T', '{rev}:{node|short} {p1rev} {p2rev} {branch} {tags} {bookmarks} {desc|firstline}\n']

same('status', '-A')
same('summary')
same('log', '-l', '5')
same('log', '-G', '-l', '40', '-T', '{rev} {desc|firstline}\n')
same('tags')
same('bookmarks')
same('branches')
same('parents')
same('id')
same('files')
tags = [l.split()[0] for l in same('tags', '-q')[1].decode().splitlines() if l.split()[0] != 'tip']
copied = sorted({c.split(' (')[0] for c in same('log', '-T', '{file_copies % "{name} ({source})\\n"}')[1].decode().splitlines() if c})
# History of renamed files (those the working copy has).
here = set(same('files')[1].decode().splitlines())
for f in rng.sample(sorted(set(copied) & here), min(4, len(set(copied) & here))):
    same('log', '-f', '-T', '{rev} {file_copies}\n', f)
    same('annotate', '-n', f)
a, b = sorted(rng.sample(tags, 2))
same('status', '--rev', a, '--rev', b)
same('diff', '-r', a, '-r', b, '--stat')
same('diff', '--git', '-r', a, '-r', b)

# Updates across the history, with status and diff each time.
for rev in rng.sample(tags, min(5, len(tags))) + ['tip', '10', start]:
    same('update', rev)
    same('status', '-A')
    same('id', '-n')
    same('summary')

# Edits, renames, a commit.
same('update', '-C', start)
same('purge', '--all')
files = sorted(l for l in same('files')[1].decode().splitlines())
py = [f for f in files if f.endswith('.py') or f.endswith('.rst') or f.endswith('.txt')]
for f in rng.sample(py, 3):
    append(f, '\n# edited today\n')
moved, copied_from = rng.sample([f for f in files if f not in py], 2)
same('mv', moved, moved + '.moved')
same('cp', copied_from, 'copy_of_' + os.path.basename(copied_from))
write('newdir/new.txt', 'new file\n')
write('junk.pyc', 'junk\n')
same('status')
same('add')
same('status', '-C')
same('diff', '--git')
same('commit', '-m', 'a day: edits and a rename')
same(*LOG, '-l', '3')
same('status', '-A')
# More edits, revert of some.
victim = rng.choice(py)
append(victim, 'more\n')
remove('copy_of_' + os.path.basename(copied_from))
same('status')
same('revert', victim)
same('status')
same('remove', '--after', 'copy_of_' + os.path.basename(copied_from))
same('status')
same('commit', '-m', 'a day: remove the copy')
same('log', '-G', '-l', '5', '-T', '{rev} {desc|firstline}\n')

# Shelve and unshelve.
append(victim, 'shelved change\n')
write('shelved-new.txt', 'x\n')
same('add', 'shelved-new.txt')
same('shelve', '-n', 'today')
same('status')
same('shelve', '--list')
same('unshelve', 'today')
same('status')
same('commit', '-m', 'a day: from the shelf')

# A historical merge replayed: update to a merge's first parent, merge its second.
merges = [l.split() for l in same('log', '-r', 'merge()', '-T', '{rev} {p1rev} {p2rev}\n')[1].decode().splitlines()]
for m, p1, p2 in rng.sample(merges, min(3, len(merges))):
    same('update', '-C', p1)
    r = same('merge', p2)
    same('status')
    same('resolve', '-l')
    same('diff', '--stat')
    if r[0] == 0:
        same('commit', '-m', 'replayed merge of %s' % m)
    else:
        same('merge', '--abort')
        same('update', '-C', '.')
    same('status', '-A')

# Rebase today's commits onto the tip.
same('update', '-C', 'tip')
same(*LOG, '-l', '8')
same('rebase', '-s', 'desc("a day: edits")', '-d', 'tip')
same(*LOG, '-l', '6')
same('status', '-A')

# Graft and backout.
g = rng.choice(tags)
same('update', '-C', g)
same('graft', '-r', 'last(descendants(%s) and not merge())' % g)
same('status', '-A')
same('backout', '--no-commit', '-r', '.')
same('status')
same('update', '-C', '.')

# Histedit: fold today's last two.
same('update', '-C', 'max(desc("a day"))')
lines = same('log', '-r', 'desc("a day")', '-T', '{node|short}\n')[1].decode().split()
if len(lines) >= 2:
    cmds = os.path.join(W, 'histedit-cmds')
    with open(cmds, 'w') as f:
        f.write('pick %s\nfold %s\n' % (lines[-2], lines[-1]))
    same('histedit', '--commands', cmds, lines[-2])
    same(*LOG, '-l', '4')
    same('status', '-A')

# Purge, update back and forth, a last status.
write('untracked/a.txt', 'u\n')
same('status')
same('purge')
same('status', '-A')
for rev in ['0', 'tip', rng.choice(tags), 'tip']:
    same('update', '-C', rev)
    same('status', '-A')
same('verify', '-q')


# Phase 2: local changes carried across history.
CHECK = os.environ.get('CHECK') == '1'
same('update', '-C', start)
same('purge', '--all')
files = sorted(same('files')[1].decode().splitlines())
renamed = [l for l in same('log', '-r', '%s::' % start, '-T', '{file_copies % "{name}\\0{source}\\n"}')[1].decode().splitlines() if l]
srcs = [l.split('\0')[1] for l in renamed if l.split('\0')[1] in files]
for f in rng.sample(srcs, min(3, len(srcs))):
    append(f, '\nlocal change before a rename\n')
texts = [f for f in files if f.endswith(('.py', '.rst', '.txt', '.cfg', '.toml'))]
for f in rng.sample(texts, min(4, len(texts))):
    append(f, '\nanother local change\n')
# A whole directory removed by hand, one chmod, one removal by hg.
dirs = sorted({f.rsplit('/', 1)[0] for f in files if '/' in f})
gone = rng.choice(dirs)
edit(lambda root: shutil.rmtree(os.path.join(root, gone), ignore_errors=True))
x = rng.choice(texts)
edit(lambda root: os.chmod(os.path.join(root, x), 0o755))
same('remove', rng.choice([f for f in files if not f.startswith(gone + '/')]))
same('status')
same('diff', '--git', '--stat')
later = rng.sample(tags, min(3, len(tags)))
for rev in later + ['tip']:
    same('update', '--merge', rev)
    same('status', '-C')
    same('resolve', '-l')
    same('resolve', '--all', '--tool', 'internal:local')
    same('summary')
same('diff', '--git')
same('addremove', '-s', '50')
same('status', '-C')
same('commit', '-m', 'a day: carried changes')
same('commit', '--amend', '-m', 'a day: carried changes, amended')
same(*LOG, '-l', '3')
same('revert', '-r', rng.choice(tags), '--all')
same('status')
same('update', '-C', '.')
same('backout', '-r', '.', '-m', 'backed out')
same(*LOG, '-l', '3')
same('status', '-A')
same('verify', '-q')

print('%d commands, %d differences' % (n, diffs))
sys.exit(1 if diffs else 0)
