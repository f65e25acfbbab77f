#!/usr/bin/env bash
# Benchmark (not a test): what FUSE passthrough (mount.passthrough) gains and costs, on a
# mount of CORPUS with it off and on, against the same work on a native directory, in one run.
# Usage: tests/bench/passthrough_bench.sh CORPUS [REVFS] (default target/release/revfs; RUNS=3)
# Per configuration, on a fresh mount each run (medians of RUNS):
#   first tar   `tar cf - . | wc -c` of the whole tree, the store warm: what answering every
#               open costs a first read;
#   write       `tar xf` of drivers/net (6,070 files, 126 MiB) into a new directory: new
#               files written (a build's outputs);
#   read back   `tar cf - OUT | wc -c` of what was written (a linker reading its objects),
#               after the kernel's caches were dropped;
#   1 GiB       `dd` of 1 GiB into a new file (1 MiB blocks, fsync at the end), then a read
#               of it after the caches were dropped.
set -euo pipefail
. "$(dirname "$0")/common.sh"
bench_init pt-bench "$1" "${2:-}"
runs=${RUNS:-3}
(cd "$corpus" && tar cf "$work/net.tar" drivers/net)
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
declare -A res
measure() { # label dir
  local label=$1 d=$2
  res[$label,tar]+="$(cd "$d" && t sh -c "tar cf - --exclude=./.hg --exclude=./.corpus-done . | wc -c") "
  mkdir "$d/out"
  res[$label,write]+="$(t tar xf "$work/net.tar" -C "$d/out") "
  drop
  res[$label,readback]+="$(cd "$d" && t sh -c "tar cf - out | wc -c") "
  res[$label,ddw]+="$(t dd if=/dev/zero of="$d/big.bin" bs=1M count=1024 conv=fsync) "
  drop
  res[$label,ddr]+="$(t dd if="$d/big.bin" of=/dev/null bs=1M) "
}
for ((r = 0; r < runs; r++)); do
  # Native: a copy of the tree, so that the writes do not touch the corpus.
  nat="$work/native"; rm -rf "$nat"; mkdir -p "$nat"
  (cd "$corpus" && tar cf - --exclude=./.hg --exclude=./.corpus-done . | tar xf - -C "$nat")
  (cd "$nat" && tar cf - . | wc -c >/dev/null)
  measure native "$nat"
  rm -rf "$nat"
  for pt in false true; do
    export REVFS_STATE_DIR="$work/state-$pt-$r" REVFS_CONFIG="$work/config-$pt.toml"
    printf '[mount]\npassthrough = %s\n' "$pt" > "$REVFS_CONFIG"
    m="$work/mnt-$pt-$r"; mkdir -p "$m"
    timeout 60 "$bin" mount "$corpus" "$m"
    (cd "$corpus" && tar cf - . | wc -c >/dev/null)   # the store warm
    measure "passthrough=$pt" "$m"
    timeout 120 "$bin" unmount "$m"
    rm -rf "$REVFS_STATE_DIR"
  done
done
echo "| workload | native | passthrough off | passthrough on |"
echo "|---|---:|---:|---:|"
for w in tar write readback ddw ddr; do
  case $w in tar) name="first tar of the tree";; write) name="write: tar xf of drivers/net";;
    readback) name="read back what was written (cold)";; ddw) name="1 GiB written (dd, fsync)";;
    ddr) name="1 GiB read back (cold)";; esac
  row="| $name"
  for l in native passthrough=false passthrough=true; do
    row+=" | $(echo "${res[$l,$w]}" | tr ' ' '\n' | sed '/^$/d' | median) s"
  done
  echo "$row |"
done
