#!/usr/bin/env bash
# Installs the system packages revfs and its tests need, when they are missing. Sourced by
# tests/run.sh and tests/demo.sh. Rust itself (>= 1.85, via rustup) must already be there.
install_deps() {
  local missing=()
  command -v hg >/dev/null 2>&1 || missing+=(mercurial)
  command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
  [ -x /usr/bin/python3 ] || missing+=(python3)
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v cc >/dev/null 2>&1 || missing+=(build-essential)
  command -v fio >/dev/null 2>&1 || missing+=(fio)
  command -v stress-ng >/dev/null 2>&1 || missing+=(stress-ng)
  command -v strace >/dev/null 2>&1 || missing+=(strace)
  command -v chg >/dev/null 2>&1 || missing+=(mercurial)
  command -v pkill >/dev/null 2>&1 || missing+=(procps)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install Rust >= 1.85 with rustup first" >&2
    exit 1
  fi
}

# What only the test suite needs beyond install_deps: pjdfstest (crates.io), for
# tests/tests/pjdfstest.rs.
PJDFSTEST_VERSION=0.2.2
install_test_deps() {
  local bin="${CARGO_HOME:-$HOME/.cargo}/bin/pjdfstest"
  if ! command -v pjdfstest >/dev/null 2>&1 && [ ! -x "$bin" ]; then
    echo "installing: pjdfstest $PJDFSTEST_VERSION (cargo install)" >&2
    cargo install --quiet --locked pjdfstest --version "$PJDFSTEST_VERSION"
  fi
  command -v flock >/dev/null 2>&1 || { echo "flock(1) (util-linux) is missing" >&2; exit 1; }
}
