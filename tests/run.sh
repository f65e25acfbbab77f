#!/usr/bin/env bash
# The whole test suite: installs what it needs on a fresh Debian machine (Mercurial, FUSE),
# builds the workspace, builds the fixture repositories with real hg, and runs every test.
# Usage: tests/run.sh            (from anywhere; CI calls exactly this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/deps.sh
. tests/deps.sh
install_deps
cargo build --workspace --locked
cargo test --workspace --locked --no-fail-fast -- --test-threads="$(nproc)"
bash tests/demo.sh >/dev/null
echo "demo: ok"
