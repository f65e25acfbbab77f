#!/usr/bin/env bash
# Installs what the benchmarks run (tests/deps.sh's DEPS_MAIN, DEPS_TEST and DEPS_BENCH) when
# it is missing. The shell benchmarks call it through common.sh, the Python ones through
# benchdeps.py. The corpora and the anchors (rhg, hg 7.2) come from ../shared/corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/deps.sh
install_bench_deps
