#!/usr/bin/env bash
# The soak (tests/soak/main.rs) on the linux corpus, once per mode: passthrough off and on,
# each with requests through io_uring and through /dev/fuse. Not run by CI: its latest
# results are the table in docs/RELIABILITY.md, "The soak".
# Usage: tests/soak/run.sh [MINUTES_PER_MODE] [SEED] [MODE...]
#   MODE: pt-off-uring pt-on-uring pt-off-dev pt-on-dev (default: all four)
# The corpus is built once (about 4 minutes) at $REVFS_SOAK_CORPUS, by default
# /var/tmp/revfs-soak-linux (on disk: it is 1.3 GB), and kept for the next run.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/deps.sh
. tests/deps.sh
install_deps
install_test_deps
minutes=${1:-10}
seed=${2:-1}
shift $(($# < 2 ? $# : 2))
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(pt-off-uring pt-on-uring pt-off-dev pt-on-dev)
corpus=${REVFS_SOAK_CORPUS:-/var/tmp/revfs-soak-linux}
../shared/corpus/make-corpus.sh linux "$corpus" >/dev/null
cargo build --workspace --locked -q
cargo build -p revfs-tests --bin revfs-soak --locked -q
config=$(mktemp)
trap 'rm -f "$config"' EXIT
status=0
for mode in "${modes[@]}"; do
  case $mode in
    pt-off-uring) printf '[mount]\npassthrough = false\nio_uring = true\n' ;;
    pt-on-uring) printf '[mount]\npassthrough = true\nio_uring = true\n' ;;
    pt-off-dev) printf '[mount]\npassthrough = false\nio_uring = false\n' ;;
    pt-on-dev) printf '[mount]\npassthrough = true\nio_uring = false\n' ;;
    *) echo "unknown mode: $mode" >&2; exit 2 ;;
  esac >"$config"
  echo "== $mode: $minutes minutes, seed $seed, $(git rev-parse --short HEAD), $(date -u '+%F %T') UTC"
  # Every step's line goes to the log; what is printed is the steps that failed and the end.
  log=/var/tmp/revfs-soak-$mode.log
  target/debug/revfs-soak "$corpus" --revs 0,1 --seed "$seed" --minutes "$minutes" \
    --config "$config" >"$log" 2>&1 || status=1
  grep -v ', ok$' "$log" || true
  echo "(every step: $log)"
done
exit $status
