#!/usr/bin/env bash
# Builds revfs as it is installed: two builds of the one program, in a prefix.
#
#   PREFIX/bin/revfs                the commands: static, linked with musl, not
#                                   position-independent (.cargo/config.toml), so that a
#                                   command starts without a dynamic loader or relocations
#   PREFIX/lib/revfs/revfs-daemon   the mounts' daemon: linked with glibc (its memcmp and
#                                   memcpy), position-independent; `revfs mount` runs it
#
# Why two: docs/BENCHMARKS.md, "Start-up". A `revfs` with no daemon beside it (a plain
# `cargo build`) is its own daemon and works the same, slower to start.
#
# Installs what the musl build needs when it is missing: musl-tools (musl-gcc, for the C
# code of zstd and mimalloc) with apt, and Rust's musl target with rustup.
#
# Usage: packaging/build.sh [PREFIX]     (default target/dist; prints PREFIX last)
#   STRIP=1   strip both programs (the release profile keeps line tables)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/deps.sh
. tests/deps.sh
install_deps
install_dist_deps

prefix=${1:-target/dist}
target=$(musl_target)
out=${CARGO_TARGET_DIR:-target}

cargo build --release --locked -p revfs-cli
cargo build --release --locked -p revfs-cli --target "$target"

mkdir -p "$prefix/bin" "$prefix/lib/revfs"
# Replaced, not rewritten: a running daemon keeps its program.
install -m 755 "$out/$target/release/revfs" "$prefix/bin/revfs.new"
install -m 755 "$out/release/revfs" "$prefix/lib/revfs/revfs-daemon.new"
if [ "${STRIP:-}" = 1 ]; then
  strip "$prefix/bin/revfs.new" "$prefix/lib/revfs/revfs-daemon.new"
fi
mv -f "$prefix/bin/revfs.new" "$prefix/bin/revfs"
mv -f "$prefix/lib/revfs/revfs-daemon.new" "$prefix/lib/revfs/revfs-daemon"
echo "$prefix"
