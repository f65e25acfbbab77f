#!/bin/sh
# Run every fuzz target for SECONDS (default 600), at most JOBS at a time (default 2), and
# print one summary line per target. Logs go to fuzz/logs/TARGET.log, crashes to
# fuzz/artifacts/TARGET/.
#
# Usage: fuzz/run_all.sh [SECONDS] [JOBS] [TARGET...]
# Needs: a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz --locked).
# The seed corpora come from fuzz/make_corpus.py (run here when fuzz/corpus is absent).
set -eu
cd "$(dirname "$0")"
secs=${1:-600}
jobs=${2:-2}
[ $# -ge 2 ] && shift 2 || shift $#
targets=${*:-"revlog_index chunk_decompress mpatch manifest manifest_paths changelog revlog"}

if [ ! -d corpus ]; then
    [ -d ../target/fixtures/history ] ||
        python3 ../tests/fixtures/make_fixtures.py ../target/fixtures
    python3 make_corpus.py ../target/fixtures corpus
fi
cargo +nightly fuzz build
mkdir -p logs

run() {
    t=$1
    start=$(date +%s)
    status=ok
    cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 \
        -print_final_stats=1 >"logs/$t.log" 2>&1 || status="FAILED (see fuzz/logs/$t.log)"
    end=$(date +%s)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -n 1)
    files=$(ls "corpus/$t" | wc -l)
    echo "$t: $((end - start)) s, ${execs:-?} execs, corpus $files files, $status"
}

running=0
for t in $targets; do
    run "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait
        running=0
    fi
done
wait
