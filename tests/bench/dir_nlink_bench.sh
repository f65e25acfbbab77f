#!/bin/bash
# Directory link-count benchmark (docs/BENCHMARKS.md): first-pass find, and ls -l of the
# top-level directories, each on a fresh mount, with the revfs binary BIN.
# usage: dir_nlink_bench.sh BIN CORPUS RUNS  -> prints first-pass find times and ls -l of root dirs
BIN=$1; CORPUS=$2; RUNS=$3
bash "$(dirname "$0")/install-deps.sh"
for i in $(seq $RUNS); do
  M=$(mktemp -d); S=$(mktemp -d)
  REVFS_STATE_DIR=$S $BIN mount $CORPUS $M >/dev/null
  /usr/bin/time -f "%e" -o ${TMPDIR:-/tmp}/revfs-bench-t1 find $M -type f > /dev/null
  REVFS_STATE_DIR=$S $BIN unmount $M >/dev/null
  REVFS_STATE_DIR=$S $BIN mount $CORPUS $M >/dev/null
  # stat of every directory found below the root without listing them first (ls -l of the
  # root, then of each top-level directory): subdirectory counts come from the manifest.
  /usr/bin/time -f "%e" -o ${TMPDIR:-/tmp}/revfs-bench-t2 sh -c "ls -l $M >/dev/null; for d in $M/*/; do ls -l \$d > /dev/null; done"
  REVFS_STATE_DIR=$S $BIN unmount $M >/dev/null
  echo "$(cat ${TMPDIR:-/tmp}/revfs-bench-t1) $(cat ${TMPDIR:-/tmp}/revfs-bench-t2)"
  rm -rf $M $S
done
