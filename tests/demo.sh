#!/usr/bin/env bash
# The main job, end to end: build revfs, make a sample Mercurial repository with hg, read it
# back with revfs (log, files, cat), mount it, edit through the mount, status, diff, commit
# (read back by hg), update back and forth, revert, unmount; each answer checked with hg.
# Usage: tests/demo.sh [WORKDIR]
#   REVFS=PATH   run this revfs binary instead of building the release one (tests/run.sh
#                passes the debug build it has just built and tested: a release build of
#                its own would add 2.5 minutes to CI, which must stay under 25)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
. tests/deps.sh
install_deps
if [ -n "${REVFS:-}" ]; then
  revfs=$REVFS
else
  cargo build --release --locked -q
  revfs=$here/target/release/revfs
fi
# A work directory of its own goes at the end, whatever happens (the mount first).
made=
if [ -n "${1:-}" ]; then work=$1; else work=$(mktemp -d); made=1; fi
mnt=
finish() {
  if [ -n "$mnt" ]; then "$revfs" unmount --force "$mnt" 2>/dev/null || true; fi
  if [ -n "$made" ]; then cd / && rm -rf "$work"; fi
}
trap finish EXIT
repo=$work/sample
export HGPLAIN=1 HGRCPATH= HGUSER="Demo <demo@example.org>"
rm -rf "$repo"
hg init "$repo"
cd "$repo"
mkdir -p src docs
printf 'int main(void) { return 0; }\n' > src/main.c
printf '# Sample\n' > docs/README.md
hg add -q && hg commit -q -m "initial import" -d "1700000000 0"
printf 'int helper(void);\n' > src/helper.h
printf 'int main(void) { return helper(); }\n' > src/main.c
hg add -q && hg commit -q -m "add a helper" -d "1700003600 -3600"
hg cp -q docs/README.md docs/COPY.md && hg commit -q -m "copy the readme" -d "1700007200 0"

echo "== revfs log"
"$revfs" log
echo "== revfs files -r 1"
"$revfs" files -r 1
echo "== revfs cat -r 0 src/main.c"
"$revfs" cat -r 0 src/main.c
for cmd in "log" "log -v -T json" "files -r 1" "cat -r 0 src/main.c" "cat -r tip docs/COPY.md"; do
  # shellcheck disable=SC2086
  if ! diff <(hg $cmd) <("$revfs" $cmd) >/dev/null; then
    echo "MISMATCH with hg: $cmd" >&2
    exit 1
  fi
done
echo "== every answer above equals hg's"

echo "== revfs mount: the tip as a lazy, read-only directory"
mkdir -p "$work/mnt"
mnt=$work/mnt
export REVFS_STATE_DIR=$work/state
"$revfs" mount "$repo" "$mnt"
"$revfs" list
ls -la "$mnt" "$mnt/src"
cmp <(cat "$mnt/src/main.c") <(hg cat -r tip src/main.c)

echo "== edit through the mount, then revfs status / diff"
cd "$mnt"
printf 'int helper(void) { return 0; }\n' > src/helper.c
printf '/* edited */\n' >> src/main.c
"$revfs" remove docs/COPY.md
"$revfs" add src/helper.c
"$revfs" status
"$revfs" diff src/main.c
echo "== revfs commit, read back by hg"
"$revfs" commit -m "helper implementation; main edited; copy dropped" -d "1700010800 0"
"$revfs" status
"$revfs" log -r . -T '{rev}:{node|short} {desc|firstline} ({files})\n'
hg -R "$repo" verify -q
[ "$(hg -R "$repo" log -r tip -T '{files}')" = "docs/COPY.md src/helper.c src/main.c" ]
cmp <(cat "$mnt/src/helper.c") <(hg -R "$repo" cat -r tip "$repo/src/helper.c")
echo "== revfs update 1: back in time, in place"
"$revfs" update 1
ls "$mnt/src" "$mnt/docs"
cmp <(cat "$mnt/src/main.c") <(hg -R "$repo" cat -r 1 "$repo/src/main.c")
echo "== revfs update tip"
"$revfs" update tip
"$revfs" parents -T '{rev}:{node|short}\n'
echo "== an uncommitted change, then revfs revert --all"
printf '/* again */\n' >> src/main.c
"$revfs" status
"$revfs" revert --all --no-backup
"$revfs" status
cd "$work"
echo "== revfs unmount"
"$revfs" unmount "$mnt"
mnt=
echo "== done"
