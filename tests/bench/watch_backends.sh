#!/usr/bin/env bash
# What VS Code's file watcher (@parcel/watcher, its inotify back end) and chokidar (webpack's,
# many dev servers') report of hg's update in a mount and in a clone of the same repository,
# side by side: the events each heard during the update, deduplicated and sorted.
#
#   tests/bench/watch_backends.sh [REVFS]     (default: target/release/revfs)
#
# Installs nodejs and npm (Debian) when missing, and the two packages from the npm registry
# into its scratch folder. Results: docs/ARCHITECTURE.md, "Watchers".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../deps.sh"
install_programs node:nodejs npm:npm
bin=$(realpath "${1:-$here/../../target/release/revfs}")
export HGPLAIN=1 HGRCPATH=
work=$(mktemp -d /var/tmp/revfs-watch-backends.XXXXXX)
export REVFS_STATE_DIR=$work/state
trap 'fusermount3 -uz "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT

(cd "$work" && npm install --silent --no-audit --no-fund @parcel/watcher@2.6.0 chokidar@3.6.0 >/dev/null)
cat >"$work/watch.js" <<'EOF'
// Subscribes to ROOT with both watchers, runs CMD in ROOT, waits for their debounces, and
// prints what each heard: "type path" lines, deduplicated and sorted.
const parcel = require('@parcel/watcher');
const chokidar = require('chokidar');
const { execFileSync } = require('child_process');
const path = require('path');
const [root, ...cmd] = process.argv.slice(2);
(async () => {
  const p = [], c = [];
  const sub = await parcel.subscribe(root, (err, evs) => {
    for (const e of evs) p.push(`${e.type} ${path.relative(root, e.path)}`);
  }, { ignore: ['.hg'], backend: 'inotify' });
  const w = chokidar.watch(root, { ignored: /(^|\/)\.hg(\/|$)/, ignoreInitial: true });
  w.on('all', (ev, f) => c.push(`${ev} ${path.relative(root, f)}`));
  await new Promise(r => w.on('ready', r));
  execFileSync(cmd[0], cmd.slice(1), { cwd: root, stdio: 'inherit' });
  await new Promise(r => setTimeout(r, 1500));
  await sub.unsubscribe();
  await w.close();
  const show = a => [...new Set(a)].sort().join(', ');
  console.log(`  @parcel/watcher: ${show(p)}\n  chokidar:        ${show(c)}`);
})();
EOF

# The watchers test's repository: a file changed, one removed, two added (one empty), a mode
# changed, a symlink pointed elsewhere, a directory with a subdirectory removed, one added.
repo=$work/repo
hg init "$repo"
mkdir -p "$repo/keep" "$repo/gone/sub"
for f in keep/a.txt keep/b.txt keep/same.txt gone/x.txt gone/sub/y.txt; do echo "$f" >"$repo/$f"; done
printf '#!/bin/sh\n' >"$repo/keep/mode.sh"
ln -s a.txt "$repo/keep/link"
hg -R "$repo" commit -qAm r0 -d '0 0'
echo changed >"$repo/keep/a.txt"
rm "$repo/keep/b.txt" "$repo/keep/link"
echo c >"$repo/keep/c.txt"
: >"$repo/keep/empty"
chmod +x "$repo/keep/mode.sh"
ln -s same.txt "$repo/keep/link"
rm -r "$repo/gone"
mkdir "$repo/new" && echo z >"$repo/new/z.txt"
hg -R "$repo" commit -qAm r1 -d '1 0'

hg clone -q "$repo" "$work/clone"
hg -R "$work/clone" update -q -r 0
mkdir "$work/mnt"
"$bin" mount -r 0 "$repo" "$work/mnt" >/dev/null

for step in "hg update -q -r 1" "hg update -q -r 0"; do
  for side in clone mnt; do
    echo "$step, in the $([ $side = mnt ] && echo mount || echo clone):"
    # shellcheck disable=SC2086
    timeout 120 node "$work/watch.js" "$work/$side" $step
  done
done
echo "revfs update -r 1, in the mount:"
timeout 120 node "$work/watch.js" "$work/mnt" "$bin" update -r 1
"$bin" unmount "$work/mnt"
