#!/usr/bin/env bash
# Builds the Debian package of revfs: target/debian/revfs_<version>-1_<arch>.deb.
#
#   1. installs cargo-deb when missing (cargo install --locked, kept in ~/.cargo/bin), and
#      dpkg-dev (dpkg-shlibdeps, for the libc dependency) when missing;
#   2. builds revfs as it is installed (packaging/build.sh: bin/revfs, the static musl
#      commands, and lib/revfs/revfs-daemon, the glibc daemon);
#   3. generates the man pages and shell completions from the clap definitions with the
#      binary just built (`revfs debuggen --out target/packaging`);
#   4. runs cargo-deb, which packages what [package.metadata.deb] in cli/Cargo.toml lists
#      (and gzips the man pages).
#
# Usage: packaging/build-deb.sh        (from anywhere; prints the path of the .deb last)
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust with rustup first" >&2
  exit 1
fi
if ! cargo deb --version >/dev/null 2>&1; then
  echo "installing cargo-deb $CARGO_DEB_VERSION (once; it stays in ~/.cargo/bin)" >&2
  cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi
if ! command -v dpkg-shlibdeps >/dev/null 2>&1; then
  echo "installing: dpkg-dev" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq dpkg-dev >/dev/null
fi

# The daemon is packaged from target/release/revfs (cargo-deb strips it and finds its
# libc dependency); the static command from the prefix, stripped there.
STRIP=1 packaging/build.sh target/packaging/dist >/dev/null

# Reproducible dates (man page footers, file times in the .deb): the last commit's. Set
# after the build: cargo rebuilds C dependencies (zstd) when this variable changes.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

# cargo-deb finds the binary in the real target directory; the generated files go to
# target/packaging/, where cli/Cargo.toml's assets expect them.
bin=target/packaging/dist/bin/revfs
gen=target/packaging
rm -rf "$gen/man" "$gen/completions"
"$bin" debuggen --out "$gen" >/dev/null
echo "generated $(find "$gen/man" -name '*.1' | wc -l) man pages and" \
  "$(find "$gen/completions" -type f | wc -l) completion scripts in $gen" >&2

# --no-build: the binary above is the one the pages were generated from. --strip: the
# release profile keeps line tables (debug = 1), the package does not need them.
# cargo-deb warns about every asset under a directory named target/ that is not a build
# product (our generated pages): those warnings are expected and dropped, the rest shown.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! cargo deb -p revfs-cli --no-build --locked --strip --output target/debian >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
# dpkg-shlibdeps finds no libraries in the static command: "Failed to find dependency
# specification" is that, expected too.
grep -i warning "$log" | grep -v -e "are detected as Cargo target dir" -e "Failed to find dependency specification" >&2 || true
deb="target/debian/revfs_$("$bin" --version | awk '{print $2}')-1_$(dpkg --print-architecture).deb"
if [ ! -f "$deb" ]; then
  echo "cargo-deb did not produce $deb" >&2
  exit 1
fi
echo "$deb"
