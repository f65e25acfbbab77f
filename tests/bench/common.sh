# Sourced by the shell benchmarks (not run): what they share. `bench_init NAME CORPUS [REVFS]`
# sets $corpus (absolute), $bin (REVFS, default target/release/revfs) and $work (a scratch
# folder in /var/tmp, removed on exit with any mount left in it detached), and plain hg.
# `drop` empties the kernel's caches; `median` prints the median of the numbers on stdin.
bench_init() {
  bash "$(dirname "${BASH_SOURCE[0]}")/install-deps.sh"
  corpus=$(cd "$2" && pwd)
  bin=${3:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/release/revfs}
  export HGPLAIN=1 HGRCPATH=
  work=$(mktemp -d "/var/tmp/revfs-$1.XXXXXX")
  trap 'for m in "$work"/mnt*; do fusermount3 -uz "$m" 2>/dev/null || true; done; rm -rf "$work"' EXIT
}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
