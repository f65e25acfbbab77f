#!/usr/bin/env bash
# Proves tests/deps.sh on a bare Debian 12: in a fresh debootstrap --variant=minbase root
# (what the official container image holds), installs every table of tests/deps.sh the way
# tests/run.sh, tests/demo.sh and the benchmarks do, then checks that every program of the
# tables and of the ESSENTIAL list is there. Not part of tests/run.sh (it downloads a root,
# a few minutes); its latest result is in docs/RELIABILITY.md.
# Usage: tests/deps-fresh-debian.sh     (root; MIRROR=http://deb.debian.org/debian)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || exec sudo MIRROR="${MIRROR:-}" bash "$0" "$@"
mirror=${MIRROR:-http://deb.debian.org/debian}
started=$(date +%s)
log() { printf '[%3ds] %s\n' "$(($(date +%s) - started))" "$*"; }
command -v debootstrap >/dev/null 2>&1 || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}
root=$(mktemp -d /var/tmp/revfs-deps-root.XXXXXX)
cleanup() {
  umount "$root/proc" 2>/dev/null || umount -l "$root/proc" 2>/dev/null || true
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
log "debootstrap --variant=minbase bookworm"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; exit 1; }
rm -f "$root.log"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
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
