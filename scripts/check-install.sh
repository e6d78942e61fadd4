#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# What a new operator meets: in a fresh Debian 12 root (debootstrap, as
# ../shared/TESTBED.md describes) with two kernels' headers installed,
# build and install Nezha for the OLDER kernel -- `make && make install`
# and DKMS (`dkms add/build/install`) -- and check what was installed.
# Not part of make check (apt in a new root takes minutes): make
# check-install.  TAP on stdout.
#
#   scripts/check-install.sh [ROOT]     (default build/install-root, kept
#                                        for the next run; rm -rf to renew)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
ROOT=${1:-$TOP/build/install-root}
MIRROR=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -z "${2:-}" ] || echo "$2" | tail -n 15 | sed 's/^/# /'; }
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	DEBIAN_FRONTEND=noninteractive bash -c "$1"; }

[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP needs root (debootstrap, chroot)"; exit 0; }
echo "1..8"
if ! command -v debootstrap >/dev/null; then
	apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 ||
		{ not_ok "debootstrap installed"; exit 1; }
fi
mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null; done
}
trap cleanup EXIT
if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
	rm -rf "$ROOT"
	mkdir -p "$ROOT"
	if out=$(debootstrap --variant=minbase --include=git,make,ca-certificates bookworm \
		"$ROOT" "$MIRROR" 2>&1); then
		ok "debootstrap bookworm ($MIRROR)"
	else
		not_ok "debootstrap bookworm" "$out"
		exit 1
	fi
else
	ok "debootstrap bookworm # SKIP reusing $ROOT"
fi
cp /etc/apt/sources.list.d/debian.sources "$ROOT/etc/apt/sources.list.d/" 2>/dev/null
rm -f "$ROOT/etc/apt/sources.list"
cp /etc/resolv.conf "$ROOT/etc/"
for m in proc sys dev dev/pts; do
	mount --bind "/$m" "$ROOT/$m" && mounted+=("$ROOT/$m")
done

# Two kernels' headers; build for the older one, which is not the running
# kernel either (the host's is a sandbox kernel).
new=$(apt-cache search --names-only '^linux-headers-[0-9.]+-[0-9]+-amd64$' | cut -d' ' -f1 |
	sed 's/^linux-headers-//' | sort -V | tail -n 1)
old=$(apt-cache search --names-only '^linux-headers-[0-9.]+-[0-9]+-amd64$' | cut -d' ' -f1 |
	sed 's/^linux-headers-//' | sort -V | tail -n 2 | head -n 1)
if out=$(in_root "apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	build-essential kmod pkg-config liburing-dev libmnl-dev python3-docutils dkms \
	linux-headers-$old linux-headers-$new" 2>&1); then
	ok "apt: build tools, dkms, headers of $old and $new"
else
	not_ok "apt: build tools, dkms, headers of $old and $new" "$out"
	exit 1
fi

rm -rf "$ROOT/root/nezha"
git clone -q "$TOP" "$ROOT/root/nezha"
# The working tree as it is, not only what is committed.
(cd "$TOP" && git ls-files -z --others --exclude-standard --modified) |
	(cd "$TOP" && xargs -0 -r cp --parents -t "$ROOT/root/nezha" 2>/dev/null)
if out=$(in_root "cd /root/nezha && make KVER=$old && make KVER=$old install" 2>&1); then
	ok "make && make install for $old (not the newest kernel)"
else
	not_ok "make && make install for $old (not the newest kernel)" "$out"
fi
if in_root "modinfo -F vermagic /lib/modules/$old/extra/nezha.ko | grep -q '^$old ' &&
	modinfo /lib/modules/$old/extra/nezha_rdma.ko >/dev/null && modprobe -n -S $old nezha &&
	test -x /usr/local/sbin/nezhactl && test -e /usr/local/lib/pkgconfig/nezha.pc &&
	test -e /lib/systemd/system/nezha.service && man -w nezhactl >/dev/null 2>&1 || test -e /usr/local/share/man/man8/nezhactl.8" >/dev/null 2>&1; then
	ok "installed: modules for $old (modprobe finds them), nezhactl, pkg-config, unit, man page"
else
	not_ok "installed: modules for $old (modprobe finds them), nezhactl, pkg-config, unit, man page" \
		"$(in_root "ls -R /lib/modules/$old/extra /usr/local/sbin /usr/local/lib" 2>&1)"
fi
if in_root "! ls /usr/local/bin /usr/local/sbin | grep -E '^(test_|nz_)'; ! dpkg -l librdmacm-dev 2>/dev/null | grep -q ^ii"; then
	ok "no test program installed, no RDMA development library needed"
else
	not_ok "no test program installed, no RDMA development library needed"
fi
in_root "cd /root/nezha && make KVER=$old uninstall >/dev/null 2>&1; depmod -a $old 2>/dev/null"
if out=$(in_root "dkms remove -q nezha/0.1.0 --all >/dev/null 2>&1; dkms add /root/nezha &&
	dkms build nezha/0.1.0 -k $old && dkms install nezha/0.1.0 -k $old" 2>&1); then
	ok "dkms add, build, install for $old"
else
	not_ok "dkms add, build, install for $old" "$out"
fi
if out=$(in_root "dkms status nezha; modinfo -F vermagic \$(modinfo -k $old -n nezha) &&
	modinfo -k $old -n nezha_rdma" 2>&1) && grep -q "^$old " <<<"$out" &&
	grep -q "nezha/0.1.0, $old, x86_64: installed" <<<"$out"; then
	ok "dkms status: installed for $old; modprobe finds nezha and nezha_rdma there"
else
	not_ok "dkms status: installed for $old; modprobe finds nezha and nezha_rdma there" "$out"
fi
if out=$(in_root "dkms build nezha/0.1.0 -k $new && dkms install nezha/0.1.0 -k $new &&
	dkms status nezha" 2>&1) && grep -q "$new, x86_64: installed" <<<"$out"; then
	ok "dkms builds for the newer kernel too ($new)"
else
	not_ok "dkms builds for the newer kernel too ($new)" "$out"
fi
in_root "dkms remove -q nezha/0.1.0 --all" >/dev/null 2>&1
exit $((failed > 0))
