#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# scripts/kver.sh on made-up /lib/modules and /boot trees: make builds for
# the running kernel when it has headers (any distribution), the guest test
# bed always boots Debian's newest *-amd64 with headers and an image, and
# KVER wins over both.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
K=$TOP/scripts/kver.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
check() {	# check NAME WANT [ENV...] -- ARGS
	local name=$1 want=$2 got; shift 2
	got=$(env MODULES=$T/m BOOT=$T/b "$@" 2>/dev/null) || got="exit $?"
	n=$((n + 1))
	if [ "$got" = "$want" ]; then echo "ok $n - $name"
	else failed=$((failed + 1)); echo "not ok $n - $name: got '$got', want '$want'"; fi
}
mk() {	# mk VER [headers] [image]
	mkdir -p "$T/m/$1"
	[ "${2:-}" = headers ] && mkdir -p "$T/m/$1/build"
	[ "${3:-}" = image ] && mkdir -p "$T/b" && : >"$T/b/vmlinuz-$1"
}
echo "1..9"
mkdir -p "$T/m" "$T/b"
check "nothing installed: an error" "exit 1" NZ_UNAME_R=5.15.0-91-generic "$K"
check "nothing installed, --guest: an error" "exit 1" NZ_UNAME_R=5.15.0-91-generic "$K" --guest
mk 5.15.0-91-generic headers
check "Ubuntu: the running kernel with headers" 5.15.0-91-generic NZ_UNAME_R=5.15.0-91-generic "$K"
mk 6.1.0-56-amd64 headers image
mk 6.1.0-57-amd64 headers image
mk 6.1.0-58-amd64 headers		# headers without an image: not bootable
check "the running kernel wins over Debian's newest" 5.15.0-91-generic NZ_UNAME_R=5.15.0-91-generic "$K"
check "--guest: Debian's newest with headers and image, never the running one" \
	6.1.0-57-amd64 NZ_UNAME_R=5.15.0-91-generic "$K" --guest
check "running kernel without headers: the test bed's kernel" \
	6.1.0-57-amd64 NZ_UNAME_R=6.18.44-sandbox "$K"
check "KVER wins" 6.1.0-56-amd64 NZ_UNAME_R=5.15.0-91-generic KVER=6.1.0-56-amd64 "$K"
check "KVER wins with --guest too" 6.1.0-56-amd64 KVER=6.1.0-56-amd64 "$K" --guest
rm -rf "$T/b"/* "$T/m/6.1.0-5"*
mk 5.14.0-362.el9.x86_64 headers
check "no Debian kernel, running one without headers: the newest with headers" \
	5.15.0-91-generic NZ_UNAME_R=6.18.44-sandbox "$K"
exit $((failed > 0))
