#!/usr/bin/env bash
# The whole test suite: installs what it needs on a fresh Debian machine (Mercurial, FUSE),
# builds the workspace, builds the fixture repositories with real hg, runs every test and
# the demo, and ends with one summary line: "tests: N passed, N failed".
# Usage: tests/run.sh            (from anywhere; CI calls exactly this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/deps.sh
. tests/deps.sh
install_deps
install_test_deps
cargo build --workspace --locked
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked --no-fail-fast -- --test-threads="$(nproc)" 2>&1 | tee "$log" || status=$?
demo=0
bash tests/demo.sh >/dev/null || demo=1
[ $demo -eq 0 ] && echo "demo: ok" || echo "demo: FAILED"
read -r passed failed < <(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } } END { print p + 0, f + 0 }' "$log")
passed=$((passed + 1 - demo)); failed=$((failed + demo))
echo "tests: $passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
