#!/usr/bin/env bash
# The README's two commands on a machine with nothing added: in a fresh
# `debootstrap --variant=minbase bookworm` root (what Debian 12's official image holds),
# with only what the README assumes (Rust from rustup, root, a network to Debian's and
# crates.io's mirrors), a clone of this checkout's HEAD runs the README's ```sh install
# block as written: tests/demo.sh, then tests/run.sh. Any program they use but do not
# install fails them there. Not part of tests/run.sh (a root download, a cold build and the
# whole suite: about an hour on 2 cores); its latest result is in docs/RELIABILITY.md.
#
#   tests/fresh-machine.sh          the README's two commands (HEAD must be committed)
#   tests/fresh-machine.sh deps     only install tests/deps.sh's tables and check that
#                                   every program of them is there (a few minutes)
#
# Root (FUSE mounts, chroot). MIRROR=http://deb.debian.org/debian by default; KEEP=1 keeps
# the root for a look afterwards (its path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || exec sudo MIRROR="${MIRROR:-}" KEEP="${KEEP:-}" bash "$0" "$@"
mode=${1:-readme}
case $mode in readme | deps) ;; *) echo "usage: $0 [readme|deps]" >&2; exit 2 ;; esac
mirror=${MIRROR:-http://deb.debian.org/debian}
started=$(date +%s)
log() { printf '[%4ds] %s\n' "$(($(date +%s) - started))" "$*"; }
command -v debootstrap >/dev/null 2>&1 || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}
if [ "$mode" = readme ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "commit first: the root gets a clone of HEAD" >&2
  exit 2
fi
root=$(mktemp -d /var/tmp/revfs-fresh-root.XXXXXX)
# A machine's / is 0755 (mktemp made it 0700: no other user could run a program in it).
chmod 755 "$root"
# Mounted below the root, innermost last; undone in reverse.
mounted=()
cleanup() {
  local i
  # Mounts the suite left (it should leave none) are aborted before the root goes.
  awk -v r="$root/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null || true
  done
  if [ -n "${KEEP:-}" ]; then
    echo "kept: $root" >&2
  else
    rm -rf --one-file-system "$root" "$root.upper"
  fi
}
trap cleanup EXIT
mnt() { # TARGET MOUNT-ARGS...
  local target=$1
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounted+=("$target")
}

log "debootstrap --variant=minbase bookworm"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; exit 1; }
rm -f "$root.log"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The network's own certificate authorities, part of "a network" (a proxy that inspects
# TLS signs with one): the host's additions, where Debian's ca-certificates takes them in
# when it is installed, and the host's bundle, where curl, cargo and hg look before.
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$root/usr/local/share/ca-certificates" "$root/etc/ssl/certs"
  cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
  [ -f /etc/ssl/certs/ca-certificates.crt ] &&
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
fi
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mnt "$root/proc" -t proc proc

if [ "$mode" = deps ]; then
  cp tests/deps.sh "$root/tmp/deps.sh"
  cat >"$root/tmp/inside.sh" <<'INSIDE'
set -euo pipefail
. /tmp/deps.sh
echo "missing on the bare root: $(missing_packages "${DEPS_MAIN[@]}" "${DEPS_TEST[@]}" "${DEPS_BENCH[@]}" "${DEPS_DIST[@]}" "${DEPS_HG_VERSIONS[@]}" | tr '\n' ' ')"
install_programs "${DEPS_MAIN[@]}" "${DEPS_TEST[@]}" "${DEPS_BENCH[@]}" "${DEPS_DIST[@]}" "${DEPS_HG_VERSIONS[@]}"
bad=0
for p in "${ESSENTIAL[@]}"; do command -v "$p" >/dev/null || { echo "not on a bare Debian 12: $p"; bad=1; }; done
[ $bad -eq 0 ] && echo "every program of tests/deps.sh is there"
exit $bad
INSIDE
  log "installing tests/deps.sh's tables in the root"
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root bash /tmp/inside.sh
  log "PASS"
  exit 0
fi

# What the README assumes and a bare root lacks: Rust from rustup. This machine's rustup
# home is the lower layer of an overlay (the suite may add a target; this machine's stays
# as it was) and its cargo home gives only rustup's proxies (cargo, rustc...), not the
# programs `cargo install` put there.
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -x "$cargo_bin/rustup" ] || { echo "no rustup in $cargo_bin: install Rust with rustup first" >&2; exit 1; }
mkdir -p "$root.upper/up" "$root.upper/work"
mnt "$root/root/.rustup" -t overlay overlay \
  -o "lowerdir=$rustup_home,upperdir=$root.upper/up,workdir=$root.upper/work"
mkdir -p "$root/root/.cargo/bin"
proxy=$(stat -c %i "$cargo_bin/rustup")
for f in "$cargo_bin"/*; do
  # rustup's proxies are symbolic or hard links to it.
  if [ "$(readlink "$f")" = rustup ] || [ "$(stat -c %i "$f")" = "$proxy" ]; then
    cp -a "$f" "$root/root/.cargo/bin/"
  fi
done
[ -x "$root/root/.cargo/bin/cargo" ] || { echo "no cargo proxy in $cargo_bin" >&2; exit 1; }
# The kernel's interfaces a machine has: devices (FUSE's among them), sysfs (the FUSE
# connections), and a fresh memory file system for /dev/shm. /tmp stays the root's own
# directory, on its disk, as Debian 12 installs it (a memory /tmp came with Debian 13).
mnt "$root/dev" --rbind /dev
mount --make-rslave "$root/dev"
mnt "$root/dev/shm" -t tmpfs -o mode=1777,size=50% tmpfs
mnt "$root/sys" --rbind /sys
mount --make-rslave "$root/sys"
chmod 1777 "$root/tmp"
log "clone of HEAD ($(git rev-parse --short HEAD)) into the root"
git clone -q --no-hardlinks "$PWD" "$root/root/revfs"
# The README's block, as written.
awk '/^```sh install/ { on = 1; next } on && /^```/ { exit } on' README.md >"$root/root/readme.sh"
echo "the README's commands:"
grep -v '^#' "$root/root/readme.sh" | sed '/^$/d; s/^/  /'
log "running them in the root"
set +e
chroot "$root" /usr/bin/env -i PATH=/root/.cargo/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root TERM=dumb LANG=C.UTF-8 \
  bash -c 'cd /root/revfs && bash -euo pipefail /root/readme.sh' 2>&1 |
  tee "$root.out" | grep -E '^(tests:|demo:|error|FAILED|left)|panicked'
status=${PIPESTATUS[0]}
set -e
tail -n 5 "$root.out"
if [ "$status" -eq 0 ]; then
  log "PASS"
  rm -f "$root.out"
else
  log "FAIL (exit $status): the whole output is $root.out"
fi
exit "$status"
