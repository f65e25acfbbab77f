"""What depends on Mercurial's version: the range the extension serves, the Mercurial
modules and classes whose name or place change between versions, the functions and the
command the extension wraps, by the name each version gives them, and the dirstate calls
whose form changed. Each entry names the versions it serves.

Serves Mercurial 6.3 to 7.2 (SUPPORTED); any other version is refused (featuresetup and
uisetup, in __init__.py, ask _tested_version). Another version is taught here first.
The two dirstate protocols:
  6.3.x     parentchange(), _parentwriters, setbranch(branch), and the backups that hg
            takes and restores (savebackup, restorebackup, clearbackup: tracking.py);
  6.4-7.2   changing_parents(repo), changing_files(repo), running_status(repo), a
            transaction's abort callbacks and all_file_names() instead of backups
            (tracking.py), setbranch(branch, tr), refresh().
The research behind each entry: docs/research/hg-versions-extension-apis.md."""

from mercurial import (
    commands,
    dirstate as dirstatemod,
    exchange,
    hg,
    merge as mergemod,
    mergestate as mergestatemod,
    repair,
    scmutil,
    util,
)

# The oldest and the newest (major, minor) release the extension serves, tested in
# tests/tests/hg_versions.rs.
SUPPORTED = ((6, 3), (7, 2))


def _tested_version():
    v = util.versiontuple(n=2)
    return None not in v and SUPPORTED[0] <= v <= SUPPORTED[1]


def supported_range():
    return b'%d.%d to %d.%d' % (SUPPORTED[0] + SUPPORTED[1])


# 6.4-7.2: the dirstate's change scopes (6.3: parentchange, its counter).
CHANGE_SCOPES = hasattr(dirstatemod.dirstate, 'changing_parents')

# hg's dirstate entry, the class hg's own map uses under every module policy (6.3-7.2).
DirstateItem = getattr(dirstatemod, 'DirstateItem', None)

# 6.3-7.1: merge.applyupdates and merge.updateresult; 7.2: merge_utils.update's
# apply_updates and UpdateResult.
try:
    from mercurial.merge_utils import update as _update_utils

    APPLYUPDATES = (_update_utils, 'apply_updates')
    UpdateResult = _update_utils.UpdateResult
except ImportError:
    APPLYUPDATES = (mergemod, 'applyupdates')
    UpdateResult = mergemod.updateresult

# 6.3-7.1: hg.unshare; 7.2: cmd_impls.clone.unshare (hg.unshare a shim that share's
# command no longer calls).
try:
    from mercurial.cmd_impls import clone as _clone_impl

    UNSHARE = (_clone_impl, 'unshare')
except ImportError:
    UNSHARE = (hg, 'unshare')

# What extsetup wraps, the same name in 6.3-7.2: (module or class, function name), and
# for a command (command table, command name). mergemod and mergestatemod are the merge
# and mergestate modules, for the wrappers' use of them (mergestate's ACTION_* names are
# kept in 7.2 as aliases of merge_utils').
UPDATE = (mergemod, '_update')
STRIP = (repair, 'strip')
PUSH = (exchange, 'push')
PULL = (exchange, 'pull')
DEBUGSTATE = (commands.table, b'debugstate')
CASECOLLISIONAUDITOR = (scmutil, 'casecollisionauditor')
RESTOREBACKUP = (mergestatemod.mergestate, '_restore_backup')
REPOSITORY = (hg, 'repository')


def _unchecked(func):
    return func


# 6.4-7.2: hg's checks that each dirstate change is made in its scope (a ProgrammingError
# otherwise), on the base class's methods, which revfsdirstate's replace: applied to
# those too, so that hg in a mount refuses what it refuses in a clone. 6.3 checks nothing.
requires_changing_parents = getattr(
    dirstatemod, 'requires_changing_parents', _unchecked
)
requires_changing_files = getattr(dirstatemod, 'requires_changing_files', _unchecked)
requires_changing_any = getattr(dirstatemod, 'requires_changing_any', _unchecked)
requires_changing_files_or_status = getattr(
    dirstatemod, 'requires_changing_files_or_status', _unchecked
)


def changing_parents(ds, repo):
    """The scope in which hg moves the dirstate's parents."""
    if CHANGE_SCOPES:
        return ds.changing_parents(repo)  # 6.4-7.2
    return ds.parentchange()  # 6.3


def in_parent_change(ds):
    """Whether hg is moving the dirstate's parents."""
    if CHANGE_SCOPES:
        return ds.is_changing_parents  # 6.4-7.2
    return ds._parentwriters > 0  # 6.3


def setbranch(ds, branch, tr):
    if CHANGE_SCOPES:
        return ds.setbranch(branch, tr)  # 6.4-7.2 (optional until 6.6, then required)
    return ds.setbranch(branch)  # 6.3


def no_rust_update():
    """6.9-7.2 with hg's Rust extensions: merge._update's fast paths write hg's own
    dirstate map; the documented switch that extensions turn them off with."""
    if hasattr(mergemod, 'MAYBE_USE_RUST_UPDATE'):
        mergemod.MAYBE_USE_RUST_UPDATE = False
