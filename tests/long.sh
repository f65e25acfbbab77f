#!/usr/bin/env bash
# The long forms of the suite's sweeps, which CI runs short to stay under 25 minutes on 2
# cores: more seeds of the random-operation tests against hg, more kills of the crash tests,
# longer oracle sequences. Each line of docs/RELIABILITY.md's "Long runs" table is one run
# of this script. Ends with one line: "long: N passed, N failed".
#
# Usage: tests/long.sh [SCALE]   (SCALE 1, the default, is about an hour on 2 cores;
#                                 the counts grow with it)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/deps.sh
. tests/deps.sh
prepare_suite all

scale=${1:-1}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
run() { # NAME ENV... -- CARGO-TEST-ARGS...
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  echo "== $name: ${envs[*]}"
  local started=$SECONDS
  env "${envs[@]}" cargo test -q -p revfs-tests --locked "$@" 2>&1 | tee -a "$log" | grep -E '^test result|panicked|FAILED' || status=1
  echo "   $((SECONDS - started)) s"
}

run "the store and the mount against hg, every revision of every format" REVFS_FORMAT_REV_STEP=1 REVFS_MOUNT_REV_STEP=1 \
  -- --test store_vs_hg --test mount_read
run "status against hg, random operations" REVFS_SEED_COUNT=$((200 * scale)) \
  -- --test status_vs_hg status_and_bytes_match_hg_after_random_operations
run "status against hg, kernel forgetting inodes" REVFS_SEED_COUNT=$((40 * scale)) \
  -- --test status_vs_hg the_kernel_forgetting_inodes_between_operations_changes_nothing
run "status against hg, remounts" REVFS_SEED_COUNT=$((30 * scale)) \
  -- --test status_vs_hg the_journal_survives_remounts_in_the_middle_of_a_sequence
run "status against hg, kernel passthrough" REVFS_SEED_COUNT=$((40 * scale)) \
  -- --test status_vs_hg status_and_bytes_match_hg_with_kernel_passthrough
run "status against hg, requests from /dev/fuse" REVFS_SEED_COUNT=$((40 * scale)) \
  -- --test status_vs_hg status_and_bytes_match_hg_through_dev_fuse
run "hg in the mount against a clone" REVFS_SEED_COUNT=$((10 * scale)) REVFS_HG_OPS=40 \
  -- --test status_vs_hg hg_in_the_mount_agrees_with_a_clone_after_each_random_operation
run "commits and updates against hg" REVFS_ORACLE_STEPS=$((600 * scale)) \
  -- --test commit_vs_hg
run "edit, commit, update cycles" REVFS_CYCLES=$((1000 * scale)) REVFS_CONCURRENT_ROUNDS=$((200 * scale)) \
  -- --test commit_update
run "kill -9: commits, updates, fsync'd writes" REVFS_COMMIT_CRASH_ROUNDS=$((100 * scale)) \
  REVFS_UPDATE_CRASH_ROUNDS=$((100 * scale)) REVFS_CRASH_ROUNDS=$((100 * scale)) \
  -- --test commit_crash --test crash -- --test-threads=1
run "the CLI against hg" REVFS_CLI_SEEDS=100..$((100 + 50 * scale)) REVFS_CLI_COMMANDS=80 \
  -- --test cli_vs_hg random_commands
run "every Mercurial release served, a day of work against a clone; rhg" REVFS_HG_VERSIONS=all \
  "REVFS_RHG=$PWD/target/hg-versions/rhg-$RHG_VERSION/bin/rhg" \
  -- --test hg_versions
run "commit dates against hg in five time zones" REVFS_DATE_ZONES=all \
  -- --test commit_identity dates_match_hg_commit
run "the daemon's memory after a walk of 200,000 files" REVFS_TEST_MEMORY_FILES=200000 \
  -- --test memory the_daemons_peak_memory
run "100,000 new files under a 1,024-descriptor limit" REVFS_TEST_MANY_FILES=100000 \
  -- --test many_files many_new_files
run "a watcher of 100,000 files during an update of 1,000" REVFS_TEST_WATCH_FILES=100000 \
  -- --test watchers a_watcher_of_a_big_tree
# hg_in_mount.rs whole with each release but Debian's (which the suite runs); chg is
# Debian's, for Debian's hg only.
for v in "${HG_WHEELS[@]}" "${HG_SDISTS[@]}"; do
  [ "$v" = 6.2.3 ] && continue
  run "hg in the mount against a clone, Mercurial $v" "PATH=$PWD/target/hg-versions/$v/bin:$PATH" \
    -- --test hg_in_mount -- --skip chg_in_a_mount
done

read -r passed failed < <(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } } END { print p + 0, f + 0 }' "$log")
echo "long: $passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
