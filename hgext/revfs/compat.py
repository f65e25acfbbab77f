"""What depends on Mercurial's version: the version test, the Mercurial modules and
classes whose name or place change between versions, and the functions and the command
the extension wraps, by the name each version gives them.

Written against Mercurial 6.3.2 (Debian 12's) and knows 6.3.x only: any other version
is refused (featuresetup and uisetup, in __init__.py, ask _tested_version). Another
version is taught here first. What this module cannot hold is said where it is: the
wrappers take the arguments of 6.3's functions (update.py, share.py, debug.py), and
revfsdirstate implements 6.3's dirstate interface (dirstate.py, walk.py, tracking.py,
parents.py)."""

from mercurial import (
    commands,
    exchange,
    hg,
    merge as mergemod,
    mergestate as mergestatemod,
    policy,
    repair,
    scmutil,
    util,
)


def _tested_version():
    v = util.version()
    return v == b'6.3' or v.startswith(b'6.3.') or v.startswith(b'6.3+')


# hg's dirstate entry (6.3: the parsers module of the module policy).
DirstateItem = policy.importmod('parsers').DirstateItem

# What extsetup wraps: (module or class, function name), and for a command (command
# table, command name), as hg 6.3 names them. mergemod and mergestatemod are 6.3's
# merge and mergestate modules, for the wrappers' use of them.
UPDATE = (mergemod, '_update')
APPLYUPDATES = (mergemod, 'applyupdates')
STRIP = (repair, 'strip')
PUSH = (exchange, 'push')
PULL = (exchange, 'pull')
UNSHARE = (hg, 'unshare')
DEBUGSTATE = (commands.table, b'debugstate')
CASECOLLISIONAUDITOR = (scmutil, 'casecollisionauditor')
RESTOREBACKUP = (mergestatemod.mergestate, '_restore_backup')
