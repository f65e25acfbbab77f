#!/usr/bin/env bash
# The whole test suite: installs what it needs on a fresh Debian machine (Mercurial, FUSE),
# builds the workspace, builds the fixture repositories with real hg, runs every test and
# the demo, and ends with one summary line: "tests: N passed, N failed".
# Usage: tests/run.sh            (from anywhere; CI calls exactly this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/deps.sh
. tests/deps.sh
prepare_suite

# What a run must not leave behind: revfs mounts, revfs daemons of this checkout, files
# and directories in /dev/shm. Those there before the run are not this run's.
leftovers() {
  awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break
         if ($(i+1) ~ /^fuse/ && $(i+2) ~ /^revfs:/) print "mount " $5 " " $3 }' /proc/self/mountinfo
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null) || continue
    case $cmd in "$PWD"/target/*/revfs\ mount\ --foreground\ *) echo "daemon ${p#/proc/} $cmd" ;; esac
  done
  # Everything in /dev/shm but POSIX semaphores (sem.*), which other programs make too.
  find /dev/shm -mindepth 1 -maxdepth 1 ! -name 'sem.*' 2>/dev/null | sed 's/^/dir /' || true
}
# Ends what leftovers() lists: aborts the mount's FUSE connection and detaches it, kills the
# daemon, removes the directory.
clean_up() {
  local kind what extra
  while read -r kind what extra; do
    case $kind in
      mount) echo 1 > "/sys/fs/fuse/connections/${extra#*:}/abort" 2>/dev/null || true
             umount -l "$what" 2>/dev/null || fusermount3 -uz "$what" 2>/dev/null || true ;;
      daemon) kill -9 "$what" 2>/dev/null || true ;;
      dir) rm -rf "$what" ;;
    esac
  done
}
before=$(leftovers | sort)
# What the run must not leave in the checkout either: every test writes into temporary
# directories, so `git status` is the same after the run as before (build output is ignored).
checkout_state() { git status --porcelain --untracked-files=all 2>/dev/null | sort || true; }
checkout_before=$(checkout_state)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked --no-fail-fast -- --test-threads="$(nproc)" 2>&1 | tee "$log" || status=$?
demo=0
# The demo, on the debug build just tested (see tests/demo.sh). It mounts too: if it has not
# ended after 10 minutes, its new mounts are ended.
REVFS=$PWD/target/debug/revfs bash tests/demo.sh >/dev/null &
demo_pid=$!
for ((i = 0; i < 600; i++)); do kill -0 "$demo_pid" 2>/dev/null || break; sleep 1; done
if kill -0 "$demo_pid" 2>/dev/null; then
  echo "demo: no end after 600 s: ending its mounts" >&2
  comm -13 <(echo "$before") <(leftovers | sort) | grep '^mount ' | clean_up
  kill -9 "$demo_pid" 2>/dev/null || true
fi
wait "$demo_pid" || demo=1
[ $demo -eq 0 ] && echo "demo: ok" || echo "demo: FAILED"
after=$(leftovers | sort)
left=$(comm -13 <(echo "$before") <(echo "$after") | sed '/^$/d')
if [ -n "$left" ]; then
  echo "left behind by the run (now removed):"
  echo "$left" | sed 's/^/  /'
  echo "$left" | clean_up
  status=1
fi
checkout_left=$(comm -13 <(echo "$checkout_before") <(checkout_state) | sed '/^$/d')
if [ -n "$checkout_left" ]; then
  echo "left in the checkout by the run (git status):"
  echo "$checkout_left" | sed 's/^/  /'
  status=1
fi
read -r passed failed < <(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } } END { print p + 0, f + 0 }' "$log")
passed=$((passed + 1 - demo)); failed=$((failed + demo))
[ -z "$left" ] || failed=$((failed + 1))
[ -z "$checkout_left" ] || failed=$((failed + 1))
echo "tests: $passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
