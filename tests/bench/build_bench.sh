#!/usr/bin/env bash
# Benchmark (not a test): a kernel build in a mount of the linux corpus against the same
# build in a native copy of the tree, every cache dropped before each, in one run. Both are
# of revision 0 (revision 1 appends a comment line to 1% of the files, Kconfig files among
# them, which the build refuses).
# Usage: tests/bench/build_bench.sh CORPUS [REVFS] (default target/release/revfs; RUNS=1)
# CORPUS is the linux corpus of ../shared/corpus/make-corpus.sh. Each build is
# `make allnoconfig` then `make -j$(nproc)` (vmlinux and friends), in a fresh native copy, then
# on fresh mounts with mount.passthrough off and on (the objects are written into the
# overlay: a build's write-heavy phase). Prints the wall times of both steps, medians of RUNS,
# and each run's. PT="false" builds on the default mount only (default: "false true").
set -euo pipefail
. "$(dirname "$0")/common.sh"
bench_init build-bench "$1" "${2:-}"
runs=${RUNS:-1}
t() { local s e; s=$(date +%s.%N); "$@" >"$work/out.log" 2>&1 || { tail -20 "$work/out.log" >&2; exit 1; }; e=$(date +%s.%N); echo "$e - $s" | bc; }
build() { # dir -> "config_seconds build_seconds"
  drop
  local c b
  c=$(cd "$1" && t make allnoconfig)
  b=$(cd "$1" && t make -j"$(nproc)")
  echo "$c $b"
}
declare -A res
for ((r = 0; r < runs; r++)); do
  nat="$work/native"; rm -rf "$nat"; mkdir -p "$nat"
  rmdir "$nat"; hg -R "$corpus" archive -q -r 0 --config ui.archivemeta=false "$nat"
  res[native]+="$(build "$nat");"
  rm -rf "$nat"
  for pt in ${PT:-false true}; do
    export REVFS_STATE_DIR="$work/state-$pt" REVFS_CONFIG="$work/config-$pt.toml"
    printf '[mount]\npassthrough = %s\n' "$pt" > "$REVFS_CONFIG"
    m="$work/mnt-$pt"; mkdir -p "$m"
    timeout 60 "$bin" mount -r 0 "$corpus" "$m"
    res[$pt]+="$(build "$m");"
    timeout 300 "$bin" unmount "$m"
    rm -rf "$REVFS_STATE_DIR" "$m"
  done
done
med() { tr ';' '\n' | sed '/^$/d' | awk -v f="$1" '{print $f}' | median; }
read -ra modes <<< "${PT:-false true}"
header="| step | native |"; rule="|---|---:|"
for pt in "${modes[@]}"; do
  [ "$pt" = false ] && header+=" mount, passthrough off |" || header+=" mount, passthrough on |"
  rule+="---:|"
done
echo "$header"; echo "$rule"
for f in 1 2; do
  [ $f = 1 ] && name="make allnoconfig" || name="make -j$(nproc)"
  n=$(echo "${res[native]}" | med $f)
  row=$(printf '| %s | %.1f s |' "$name" "$n")
  for pt in "${modes[@]}"; do
    m=$(echo "${res[$pt]}" | med $f)
    row+=$(printf ' %.1f s (%.2fx) |' "$m" "$(echo "$m / $n" | bc -l)")
  done
  echo "$row"
done
echo "each run (allnoconfig build):"
for k in native "${modes[@]}"; do echo "  $k: ${res[$k]}"; done
