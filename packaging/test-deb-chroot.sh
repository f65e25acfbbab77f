#!/usr/bin/env bash
# Installs the revfs .deb into a clean Debian 12 (bookworm) root and uses it there: dpkg -i,
# apt-get install -f (fuse3 comes from the mirror as a dependency), revfs --version, the man
# pages through man-db, the bash, zsh and fish completions, and a real FUSE mount: hg init,
# revfs mount, cat, status, unmount, mount again.
#
# Needs root (it re-runs itself with sudo), network access to a Debian mirror, and FUSE.
# Not part of tests/run.sh (it is slow the first time and needs the network); see
# packaging/README.md.
#
# The minimal root (debootstrap --variant=minbase, plus what the test itself uses:
# mercurial, man-db, zsh, fish, systemd for systemd-analyze) is built once and cached as a tarball under
# target/packaging/chroot-test/; every run unpacks a fresh copy of it.
#
# Usage: packaging/test-deb-chroot.sh [path/to/revfs_*.deb]
#   MIRROR=http://deb.debian.org/debian   the mirror for debootstrap and apt in the root
#   KEEP_ROOT=1                           leave the unpacked root behind (mounts are undone)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  exec sudo MIRROR="${MIRROR:-}" KEEP_ROOT="${KEEP_ROOT:-}" bash "$0" "$@"
fi

started=$(date +%s)
suite=bookworm
mirror=${MIRROR:-http://deb.debian.org/debian}
# What the test uses besides the package. fuse3 must not be here: apt has to bring it.
extra=mercurial,man-db,zsh,fish,systemd
work=$PWD/target/packaging/chroot-test
root=$work/root
key=$(printf '%s %s %s' "$suite" "$mirror" "$extra" | sha256sum | cut -c1-12)
cache=$work/$suite-minbase-$key.tar

# shellcheck disable=SC2012 # the newest .deb; its name is plain
deb=${1:-$(ls -t target/debian/revfs_*.deb 2>/dev/null | head -n1 || true)}
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
  echo "no .deb to test: run packaging/build-deb.sh first (or pass its path)" >&2
  exit 1
fi
version=$(dpkg-deb -f "$deb" Version)
version=${version%-*}

log() { printf '[%3ds] %s\n' "$(($(date +%s) - started))" "$*"; }

# Undoes every mount below $root, deepest first (a failed run can leave the FUSE mount, /dev,
# /sys and /proc there), then stops the processes still running inside the root (a revfs
# daemon this script started) by pid.
release_root() {
  [ -d "$root" ] || return 0
  local real pids p sig
  real=$(realpath "$root")
  # mountinfo's 5th field is the mountpoint (octal escapes; our paths have none).
  awk -v r="$real" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo |
    sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  for sig in TERM KILL; do
    pids=()
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/root" 2>/dev/null)" = "$real" ] && pids+=("${p#/proc/}")
    done
    [ ${#pids[@]} -gt 0 ] || break
    kill -"$sig" "${pids[@]}" 2>/dev/null || true
    sleep 1
  done
  if awk -v r="$real" 'index($5, r "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    echo "warning: mounts are left below $real" >&2
    return 1
  fi
}

cleanup() {
  local rc=$?
  release_root || rc=1
  if [ -z "${KEEP_ROOT:-}" ] && [ -d "$root" ]; then
    rm -rf --one-file-system "$root"
  fi
  if [ $rc -eq 0 ]; then
    log "chroot test: PASS ($deb in a fresh $suite root)"
  else
    log "chroot test: FAILED (exit $rc)"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

mkdir -p "$work"
if [ ! -f "$cache" ]; then
  log "building the $suite base root (once; cached as $cache)"
  base=$work/base
  rm -rf --one-file-system "$base"
  debootstrap --variant=minbase --include="$extra" "$suite" "$base" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    exit 1
  }
  rm -rf "$base"/var/cache/apt/archives/*.deb
  tar -C "$base" --numeric-owner -cf "$cache.tmp" .
  mv "$cache.tmp" "$cache"
  find "$work" -maxdepth 1 -name "$suite-minbase-*.tar" ! -path "$cache" -delete # stale keys
  rm -rf --one-file-system "$base"
else
  log "using the cached base root $cache"
fi

release_root
rm -rf --one-file-system "$root"
mkdir -p "$root"
tar -C "$root" --numeric-owner -xf "$cache"
log "unpacked a fresh root in $root"

cp /etc/resolv.conf "$root/etc/resolv.conf"
# No service starts inside the root.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
cp "$deb" "$root/tmp/revfs.deb"

mount -t proc proc "$root/proc"
mount --bind /sys "$root/sys"
mount --bind /dev "$root/dev" # /dev/fuse
log "mounted /proc, /sys and /dev in the root"

cat >"$root/tmp/inside.sh" <<'EOF'
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { printf '  ok: %s\n' "$*"; }
step() { printf -- '-- %s\n' "$*"; }

step "install"
dpkg -s fuse3 >/dev/null 2>&1 && fail "fuse3 is already in the base root"
if dpkg -i /tmp/revfs.deb >/tmp/dpkg.log 2>&1; then
  fail "dpkg -i succeeded although fuse3 is missing"
fi
grep -q "depends on fuse3" /tmp/dpkg.log || { cat /tmp/dpkg.log; fail "dpkg -i did not stop at fuse3"; }
check "dpkg -i stops at the missing fuse3"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -f -y -qq >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get install -f"; }
for p in revfs fuse3; do
  [ "$(dpkg-query -W -f='${Status}' "$p")" = "install ok installed" ] || fail "$p is not installed"
done
check "apt-get install -f brought fuse3 $(dpkg-query -W -f='${Version}' fuse3); revfs $(dpkg-query -W -f='${Version}' revfs) installed"
[ -u /usr/bin/fusermount3 ] || fail "fusermount3 is not setuid"

step "binary"
[ "$(command -v revfs)" = /usr/bin/revfs ] || fail "revfs is not /usr/bin/revfs"
out=$(revfs --version)
[ "$out" = "revfs $VERSION" ] || fail "revfs --version: $out"
check "revfs --version: $out"

step "man pages"
out=$(man -w revfs-status)
[ "$out" = /usr/share/man/man1/revfs-status.1.gz ] || fail "man -w revfs-status: $out"
check "man -w revfs-status: $out"
man -P cat revfs-status 2>/dev/null | grep -q "Show changed files in the working copy" || fail "man revfs-status"
check "man revfs-status renders"
subs=$(revfs --help | awk '/^Commands:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }' | grep -vx help)
n=0
for s in $subs; do
  man -w "revfs-$s" >/dev/null 2>&1 || fail "no man page for revfs $s"
  n=$((n + 1))
done
[ "$n" -ge 20 ] || fail "only $n subcommands in revfs --help"
man -w revfs >/dev/null || fail "no revfs(1)"
check "revfs(1) and a page for each of the $n subcommands of revfs --help"
! man -w revfs-debuggen >/dev/null 2>&1 || fail "the hidden debuggen has a man page"

step "completions"
complete_bash() { # words... : the completions bash offers for the last word
  bash -c 'source /usr/share/bash-completion/completions/revfs
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _revfs revfs "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    echo "${COMPREPLY[*]}"' bash "$@"
}
out=$(complete_bash revfs st)
[ "$out" = status ] || fail "bash: revfs st<TAB> gives '$out'"
check "bash: revfs st<TAB> -> $out"
out=$(complete_bash revfs mount --fo)
[ "$out" = --foreground ] || fail "bash: revfs mount --fo<TAB> gives '$out'"
check "bash: revfs mount --fo<TAB> -> $out"
out=$(complete_bash revfs '')
case " $out " in *" debug"*) fail "bash offers a hidden command: $out" ;; esac
for s in $subs; do
  case " $out " in *" $s "*) ;; *) fail "bash: revfs <TAB> lacks $s" ;; esac
done
check "bash: revfs <TAB> offers every subcommand and no hidden one"
out=$(zsh -fc 'autoload -Uz compinit && compinit -u -d /tmp/zcompdump && print -r -- $_comps[revfs]')
[ "$out" = _revfs ] || fail "zsh: compinit does not find _revfs ($out)"
check "zsh: compinit finds $out in $(dirname "$(zsh -fc 'print -r -- $^fpath/_revfs(N)')")"
out=$(fish -c 'complete -C "revfs st"' | cut -f1)
[ "$out" = status ] || fail "fish: revfs st<TAB> gives '$out'"
check "fish: revfs st<TAB> -> $out"

# The mounts `revfs list` shows (the working copies kept for mountpoints not mounted left out).
mounted_list() { revfs list | grep -v '  (not mounted; ' || true; }

step "mount"
cd /root
hg init repo
printf 'hello\n' >repo/file
mkdir repo/dir
printf 'below\n' >repo/dir/sub
hg -R repo commit -q -A -u test -m init
mkdir mnt
revfs mount repo mnt
check "revfs mount repo mnt"
# Two programs: the static command, and the daemon it starts beside it.
grep -qx /usr/lib/revfs/revfs-daemon <(for e in /proc/[0-9]*/exe; do readlink "$e"; done 2>/dev/null) ||
  fail "no daemon runs /usr/lib/revfs/revfs-daemon"
check "the mount's daemon runs /usr/lib/revfs/revfs-daemon"
[ "$(cat mnt/file)" = hello ] || fail "cat mnt/file"
[ "$(cat mnt/dir/sub)" = below ] || fail "cat mnt/dir/sub"
check "cat mnt/file: $(cat mnt/file)"
revfs list | grep -q '^/root/mnt  /root/repo ' || { revfs list; fail "revfs list"; }
check "revfs list: $(revfs list)"
cd mnt
[ -z "$(revfs status)" ] || fail "status of a fresh mount: $(revfs status)"
printf 'world\n' >>file
printf 'new\n' >new.txt
rm dir/sub
out=$(revfs status | tr '\n' ' ')
[ "$out" = "M file ! dir/sub ? new.txt " ] || fail "revfs status: $out"
check "revfs status after edits: $out"
# Real hg in the mount: the share's hgrc enables the extension the binary carries.
out=$(HGRCPATH= hg status | tr '\n' ' ')
[ "$out" = "M file ! dir/sub ? new.txt " ] || fail "hg status in the mount: $out"
[ -f /usr/share/revfs/hgext/revfs/__init__.py ] || fail "the extension is not installed"
check "hg status in the mount: $out"
cd /root
revfs unmount mnt
[ ! -e mnt/file ] || fail "mnt/file is still there after unmount"
# `revfs list` keeps showing the working copy kept for the mountpoint, not mounted.
[ -z "$(mounted_list)" ] || fail "revfs list after unmount: $(revfs list)"
revfs list | grep -qx '/root/mnt  /root/repo  [0-9a-f]\{12\}  (not mounted; 3 uncommitted changes)' ||
  fail "revfs list after unmount: $(revfs list)"
check "revfs unmount mnt"
revfs mount repo mnt
[ "$(cat mnt/file)" = "$(printf 'hello\nworld')" ] || fail "the edit did not survive a remount"
out=$(revfs -R mnt status | tr '\n' ' ')
[ "$out" = "M file ! dir/sub ? new.txt " ] || fail "revfs status after remount: $out"
revfs unmount mnt
check "mounted again: the edits are still there ($out); unmounted"

step "systemd user unit"
unit=/usr/lib/systemd/user/revfs@.service
[ -f $unit ] || fail "no $unit"
umnt=/root/src/repo-mnt
inst=$(systemd-escape --path $umnt)
conf=/root/.config/revfs/mounts/$inst.conf
mkdir -p /root/.config/revfs/mounts
printf 'REPO=/root/repo\n' >"$conf"
# A static check: no user manager runs here (one started in a chroot takes over the host's
# cgroups when the host itself does not run systemd).
mkdir -m 700 /tmp/xdg-runtime
XDG_RUNTIME_DIR=/tmp/xdg-runtime systemd-analyze --user verify "revfs@$inst.service" ||
  fail "systemd-analyze --user verify revfs@$inst.service"
check "systemd-analyze --user verify revfs@$inst.service"
# Then the unit's own command lines, run as systemd would run them for this instance
# (specifiers and $$ expanded here; a leading "-" only tells systemd to ignore failure).
unitcmd() {
  sed -n "s/^$1=-\{0,1\}//p" $unit | sed -e "s|%E|/root/.config|g" \
    -e "s|%i|${inst//\\/\\\\}|g" -e "s|%f|$umnt|g" -e 's/\$\$/$/g'
}
eval "$(unitcmd ExecStartPre)"
eval "$(unitcmd ExecStart)" &
main=$!
eval "$(unitcmd ExecStartPost)" || fail "ExecStartPost: the mount did not answer"
[ "$(cat $umnt/file)" = hello ] || fail "cat $umnt/file"
check "ExecStartPre, ExecStart, ExecStartPost: $umnt answers (cat file: $(cat $umnt/file))"
eval "$(unitcmd ExecStop)" || fail "ExecStop"
wait $main || fail "the daemon exited with $? after ExecStop"
SERVICE_RESULT=success eval "$(unitcmd ExecStopPost)"
if [ -e $umnt/file ] || [ -n "$(mounted_list)" ]; then fail "still mounted after ExecStop"; fi
check "ExecStop: unmounted, the daemon exited 0"
eval "$(unitcmd ExecStart)" &
main=$!
eval "$(unitcmd ExecStartPost)" || fail "ExecStartPost (2)"
kill -KILL $main
wait $main 2>/dev/null || true
SERVICE_RESULT=signal eval "$(unitcmd ExecStopPost)" || fail "ExecStopPost after a crash"
[ -z "$(mounted_list)" ] || fail "the dead mount is still there: $(revfs list)"
eval "$(unitcmd ExecStart)" &
main=$!
eval "$(unitcmd ExecStartPost)" || fail "ExecStartPost after a crash"
eval "$(unitcmd ExecStop)"
wait $main || fail "the daemon exited with $? after ExecStop (2)"
check "kill -9: ExecStopPost detaches the dead mount, the next ExecStart mounts again"
printf '# mount options\nREPO="/root/repo"\nREVFS_MOUNT_OPTIONS="-r 0 --threads 3"\n' >"$conf"
eval "$(unitcmd ExecStart)" &
main=$!
eval "$(unitcmd ExecStartPost)" || fail "ExecStartPost with REVFS_MOUNT_OPTIONS"
# `revfs mount --foreground` has become the daemon's program, with the same arguments.
grep -qx 'revfs-daemon mount --foreground -r 0 --threads 3 /root/repo /root/src/repo-mnt' \
  <(for c in /proc/[0-9]*/cmdline; do { tr '\0' ' ' <"$c"; } 2>/dev/null | sed 's|^/usr/lib/revfs/||; s/ $//'; echo; done) ||
  fail "REVFS_MOUNT_OPTIONS did not reach revfs mount"
eval "$(unitcmd ExecStop)"
wait $main || fail "the daemon exited with $? after ExecStop (3)"
check "REVFS_MOUNT_OPTIONS=\"-r 0 --threads 3\" reaches revfs mount"
printf 'REVFS_MOUNT_OPTIONS="-r 0"\n' >"$conf"
out=$(eval "$(unitcmd ExecStart)" 2>&1) && fail "ExecStart without REPO succeeded"
case $out in *"REPO: is not set in $conf") ;; *) fail "ExecStart without REPO: $out" ;; esac
check "ExecStart without REPO= fails: $out"
EOF

log "installing and testing inside the root"
chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  VERSION="$version" /bin/bash /tmp/inside.sh
