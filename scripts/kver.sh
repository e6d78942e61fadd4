#!/bin/bash
# Print the kernel version to build against and boot in test guests.
# $KVER wins; otherwise the newest /lib/modules/*-amd64 that has both a build
# link (headers) and a /boot/vmlinuz-<ver>.  Never the running kernel.
set -euo pipefail

if [ -n "${KVER:-}" ]; then
	echo "$KVER"
	exit 0
fi

best=$(
	for d in /lib/modules/*-amd64; do
		v=${d##*/}
		[ -e "$d/build" ] && [ -e "/boot/vmlinuz-$v" ] && echo "$v"
	done | sort -V | tail -n 1
) || true

if [ -z "$best" ]; then
	echo "kver.sh: no /lib/modules/*-amd64 with a build link and a /boot/vmlinuz;" \
		"run scripts/setup.sh (linux-image-amd64, linux-headers-amd64) or set KVER" >&2
	exit 1
fi
echo "$best"
