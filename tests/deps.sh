#!/usr/bin/env bash
# Installs the programs revfs, its tests and its benchmarks run, when they are missing.
# Sourced by tests/run.sh and tests/demo.sh (and the benchmarks through
# tests/bench/common.sh). Rust itself (>= 1.85, via rustup) must already be there.
#
# Each table lists "program:package" for every program that a bare Debian 12 (debootstrap
# --variant=minbase, the official container image) lacks. What the scripts and tests run
# besides these comes from Debian's Essential and Priority: required packages, present on
# every Debian 12 system (ESSENTIAL below). tests/tests/deps_listed.rs checks that every
# program a test starts is in one of these lists.

# Programs of Debian 12's Essential and Priority: required packages that the tests start:
# coreutils, util-linux (flock, runuser), bsdutils (script), mount, findutils, tar, dash.
ESSENTIAL=(cat chown cp df find flock mkfifo mknod mount rm runuser script sh sleep stat
  tar timeout umount)

# What the main job (tests/demo.sh) and revfs itself need.
DEPS_MAIN=(
  hg:mercurial
  fusermount3:fuse3
  /usr/bin/python3:python3
  python3:python3
  cc:build-essential        # cargo's linker; zstd's C code (zstd-sys)
)
# What the test suite (tests/run.sh) needs beyond DEPS_MAIN.
DEPS_TEST=(
  chg:mercurial
  cmake:cmake               # build_in_mount: zstd's C library, built in a mount
  cc:build-essential        # build_in_mount; cargo install pjdfstest
  make:build-essential      # build_in_mount (cmake's generator)
  fio:fio                   # stress_verify
  stress-ng:stress-ng       # stress_verify
  strace:strace             # hg_in_mount: what chg's server does
  kill:procps               # crash tests: kill -9 (or -STOP) of the daemon
  pkill:procps              # hg_in_mount: chg's servers
  pgrep:procps
  git:git                   # hard_links: a local git clone in a mount
  rsync:rsync               # hard_links: rsync --link-dest in a mount
  gdb:gdb                   # the watchdog's stacks of a hung daemon
  openssl:openssl           # clone_from_server: a test authority and certificate for https
  watchman:watchman         # watchers: hg's fsmonitor in a mount leaves Watchman alone
)
# What the benchmarks (tests/bench/) need beyond DEPS_TEST.
DEPS_BENCH=(
  hyperfine:hyperfine       # read-all.sh
  rg:ripgrep                # first_touch_bench.py: rg's parallel walk
  bc:bc                     # build_bench.sh
  /usr/bin/time:time        # peak RSS
  flex:flex                 # build_bench.sh: a kernel build (make allnoconfig, make)
  bison:bison
  /usr/include/libelf.h:libelf-dev
  node:nodejs               # watch_backends.sh: VS Code's watcher and chokidar
  npm:npm
  inotifywait:inotify-tools # watch_update_bench.py: a recursive watcher
)

# Prints the packages of "program:package" pairs whose program is missing, one a line.
missing_packages() {
  local pair prog
  for pair in "$@"; do
    prog=${pair%%:*}
    if [[ $prog == /* ]]; then [ -e "$prog" ] && continue; else command -v "$prog" >/dev/null 2>&1 && continue; fi
    echo "${pair#*:}"
  done | sort -u
}

# Installs the packages of the pairs given whose program is missing, then checks each one.
install_programs() {
  local missing pair prog
  mapfile -t missing < <(missing_packages "$@")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  mapfile -t missing < <(missing_packages "$@")
  if [ ${#missing[@]} -gt 0 ]; then
    for pair in "$@"; do
      prog=${pair%%:*}
      command -v "$prog" >/dev/null 2>&1 || [ -e "$prog" ] || echo "missing after install: $prog (package ${pair#*:})" >&2
    done
    exit 1
  fi
}

install_deps() {
  install_programs "${DEPS_MAIN[@]}"
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install Rust >= 1.85 with rustup first" >&2
    exit 1
  fi
}

# What only the test suite needs beyond install_deps: the programs above, and pjdfstest
# (crates.io) for tests/tests/pjdfstest.rs.
PJDFSTEST_VERSION=0.2.2
install_test_deps() {
  install_programs "${DEPS_TEST[@]}"
  local bin="${CARGO_HOME:-$HOME/.cargo}/bin/pjdfstest"
  if ! command -v pjdfstest >/dev/null 2>&1 && [ ! -x "$bin" ]; then
    echo "installing: pjdfstest $PJDFSTEST_VERSION (cargo install)" >&2
    cargo install --quiet --locked pjdfstest --version "$PJDFSTEST_VERSION"
  fi
}

# The Mercurial releases the extension serves besides Debian's 6.3.2 (hgext/revfs/compat.py,
# SUPPORTED), one of each minor version, and one it refuses, for tests/tests/hg_versions.rs:
# installed under target/hg-versions/<version> (bin/hg runs it with Debian's python3), from
# PyPI. 6.9 and later as PyPI's wheels (C extensions, no Rust); the sdists of 6.4-6.8 run
# in place, pure Python (HGMODULEPOLICY=py: PyPI has no wheel of them, and building their
# C extensions would cost CI minutes).
HG_WHEELS=(6.9.5 7.0.3 7.1.2 7.2.4)
HG_SDISTS=(6.2.3 6.4.5 6.5.3 6.6.3 6.7.4 6.8.2)
# The ones CI's suite runs (tests/tests/hg_versions.rs, BY_DEFAULT, and the refused one);
# tests/long.sh takes them all.
HG_SUITE=(6.2.3 7.2.4)
DEPS_HG_VERSIONS=(
  /usr/lib/python3/dist-packages/pip/__init__.py:python3-pip
  unzip:unzip
)
install_hg_versions() { # ROOT [VERSION...] (default: every one)
  local root=$1 v dir tmp
  shift
  local versions=("$@")
  [ ${#versions[@]} -gt 0 ] || versions=("${HG_WHEELS[@]}" "${HG_SDISTS[@]}")
  install_programs "${DEPS_HG_VERSIONS[@]}"
  mkdir -p "$root"
  root=$(cd "$root" && pwd)   # the wrappers name it from anywhere
  for v in "${versions[@]}"; do
    dir=$root/$v
    [ -x "$dir/bin/hg" ] && continue
    echo "installing: Mercurial $v (PyPI) in $dir" >&2
    rm -rf "$dir" "$dir.tmp"
    tmp=$dir.tmp
    mkdir -p "$tmp/bin"
    if [[ " ${HG_WHEELS[*]} " == *" $v "* ]]; then
      /usr/bin/python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.11 \
        --implementation cp --platform manylinux_2_17_x86_64 "mercurial==$v" -d "$tmp/dl"
      unzip -q "$tmp"/dl/mercurial-*.whl -d "$tmp/lib"
      printf '#!/bin/sh\nPYTHONPATH=%s/lib exec /usr/bin/python3 %s/lib/mercurial-%s.data/scripts/hg "$@"\n' \
        "$dir" "$dir" "$v" >"$tmp/bin/hg"
    else
      /usr/bin/python3 -m pip download -q --no-deps --no-binary :all: "mercurial==$v" -d "$tmp/dl"
      tar xzf "$tmp"/dl/mercurial-*.tar.gz -C "$tmp"
      mv "$tmp/mercurial-$v" "$tmp/lib"
      printf '#!/bin/sh\nHGMODULEPOLICY=py PYTHONPATH=%s/lib exec /usr/bin/python3 %s/lib/hg "$@"\n' \
        "$dir" "$dir" >"$tmp/bin/hg"
    fi
    rm -rf "$tmp/dl"
    # Its bytecode, which Python would otherwise compile at every command where it may not
    # write it (PYTHONDONTWRITEBYTECODE), as Debian's package ships it.
    /usr/bin/python3 -m compileall -q -j 0 "$tmp/lib" >/dev/null || true
    chmod +x "$tmp/bin/hg"
    mv "$tmp" "$dir"
    "$dir/bin/hg" --version -q >/dev/null
  done
}

# rhg, Mercurial's Rust front end, for hg_versions.rs's rhg test (tests/long.sh): built from
# the sdist's rust/ (PyPI ships no rhg), into target/hg-versions/rhg-<version>/bin/rhg. It
# takes about 2.5 minutes on 2 cores, which CI's suite has not to spare: tests/long.sh runs it.
RHG_VERSION=7.2.4
install_rhg() { # ROOT
  local root=$1 dir tmp
  install_programs "${DEPS_HG_VERSIONS[@]}"
  mkdir -p "$root"
  root=$(cd "$root" && pwd)
  dir=$root/rhg-$RHG_VERSION
  [ -x "$dir/bin/rhg" ] && return 0
  echo "installing: rhg $RHG_VERSION (built from PyPI's source) in $dir" >&2
  tmp=$dir.tmp
  rm -rf "$tmp"
  mkdir -p "$tmp/bin"
  /usr/bin/python3 -m pip download -q --no-deps --no-binary :all: "mercurial==$RHG_VERSION" -d "$tmp/dl"
  tar xzf "$tmp"/dl/mercurial-*.tar.gz -C "$tmp"
  (cd "$tmp/mercurial-$RHG_VERSION/rust" &&
    CARGO_TARGET_DIR="$tmp/target" RUSTFLAGS=-Awarnings cargo build -q --release --locked -p rhg)
  mv "$tmp/target/release/rhg" "$tmp/bin/rhg"
  rm -rf "$tmp/dl" "$tmp/target" "$tmp/mercurial-$RHG_VERSION"
  mv "$tmp" "$dir"
}

# What the installed build (packaging/build.sh) needs beyond install_deps: the static musl
# command's C compiler, strip, and Rust's musl target for this machine.
DEPS_DIST=(
  musl-gcc:musl-tools       # zstd's and mimalloc's C code, for the musl target
  strip:binutils            # STRIP=1
)
musl_target() { echo "$(uname -m)-unknown-linux-musl"; }
install_dist_deps() {
  install_programs "${DEPS_DIST[@]}"
  local target
  target=$(musl_target)
  if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx "$target"; then
    echo "installing: Rust's $target target (rustup)" >&2
    rustup target add "$target" >/dev/null
  fi
}

# What the suite's scripts (tests/run.sh, tests/long.sh) do first: install what the tests
# run, and build the workspace (the tests start target/debug/revfs).
# The Mercurial releases download while the workspace builds. `prepare_suite all` installs
# every release and rhg (tests/long.sh), else HG_SUITE's.
prepare_suite() {
  install_deps
  install_test_deps
  install_programs "${DEPS_HG_VERSIONS[@]}"
  local versions=("${HG_SUITE[@]}")
  [ "${1:-}" = all ] && versions=()
  install_hg_versions "$(dirname "${BASH_SOURCE[0]}")/../target/hg-versions" "${versions[@]}" &
  local releases=$!
  cargo build --workspace --locked
  wait "$releases"
  [ "${1:-}" = all ] && install_rhg "$(dirname "${BASH_SOURCE[0]}")/../target/hg-versions"
  return 0
}

install_bench_deps() {
  install_deps
  install_dist_deps
  install_programs "${DEPS_TEST[@]}" "${DEPS_BENCH[@]}"
}
