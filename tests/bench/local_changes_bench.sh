#!/usr/bin/env bash
# Benchmark (not a test): what local changes cost status and update on a mount.
# Usage: tests/bench/local_changes_bench.sh CORPUS [REVFS ...]   (default: target/release/revfs)
# CORPUS comes from ../shared/corpus/make-corpus.sh (revisions 0 and 1). Per binary, each on
# a fresh mount of tip, with hyperfine (RUNS, default 20):
#   status: `revfs status` after 1,000 files (every 78th of `hg files`) were rewritten
#           with their own bytes (overlay files equal to their revision);
#   update: `revfs update -q 1` (prepared by `revfs update -q 0`) on the fresh mount, then
#           after the same 1,000 files were edited and `hg revert --all` put them back
#           (leaving 1,000 `.orig` files around).
set -euo pipefail
bash "$(dirname "$0")/install-deps.sh"
corpus=$(cd "$1" && pwd); shift
[ $# -gt 0 ] || set -- "$(cd "$(dirname "$0")/../.." && pwd)/target/release/revfs"
runs=${RUNS:-20}
export HGPLAIN=1 HGRCPATH=
work=$(mktemp -d /var/tmp/revfs-local-bench.XXXXXX)
trap 'for m in "$work"/mnt*; do fusermount3 -uz "$m" 2>/dev/null || true; done; rm -rf "$work"' EXIT
mean() { hyperfine -N -w 2 -r "$runs" --export-json "$work/h.json" "$@" >/dev/null 2>&1
         python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; print('%.1f ms ± %.1f' % (r['mean']*1000, r['stddev']*1000))" "$work/h.json"; }
echo "| build | status, 1,000 files written back | update 0 -> 1, fresh | update 0 -> 1, 1,000 reverted edits and .orig files |"
echo "|---|---:|---:|---:|"
n=0
for bin in "$@"; do
  n=$((n + 1))
  export REVFS_STATE_DIR="$work/state$n"
  m="$work/mnt$n-a"; mkdir -p "$m"
  timeout 60 "$bin" mount "$corpus" "$m"
  (cd "$m" && hg files | awk 'NR%78==0' | head -1000 > "$work/files")
  (cd "$m" && while read -r f; do c=$(cat "$f"; echo .); printf '%s' "${c%.}" > "$f"; done < "$work/files")
  [ -z "$(cd "$m" && "$bin" status)" ] || { echo "status not clean after writing back" >&2; exit 1; }
  status=$(cd "$m" && mean "$bin status")
  timeout 60 "$bin" unmount "$m"
  m="$work/mnt$n-b"; mkdir -p "$m"
  timeout 60 "$bin" mount "$corpus" "$m"
  cd "$m"
  fresh=$(mean --prepare "$bin update -q 0" "$bin update -q 1")
  while read -r f; do echo x >> "$f"; done < "$work/files"
  timeout 300 hg revert -q --all
  around=$(mean --prepare "$bin update -q 0" "$bin update -q 1")
  cd /
  timeout 60 "$bin" unmount "$m"
  echo "| $bin | $status | $fresh | $around |"
done
