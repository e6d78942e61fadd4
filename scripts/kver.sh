#!/bin/bash
# Print the kernel release to build against, or to boot in test guests.
#
#   scripts/kver.sh           the kernel to build for (make, make install):
#                             $KVER; else the running kernel when its headers
#                             are installed (/lib/modules/$(uname -r)/build),
#                             on any distribution; else the test bed's kernel
#                             below; else the newest /lib/modules/* with headers.
#   scripts/kver.sh --guest   the kernel the guest test bed boots (vm.sh,
#                             make check, benchmarks): $KVER; else the newest
#                             Debian /lib/modules/*-amd64 that has both a build
#                             link (headers) and a /boot/vmlinuz-<ver>.  Never
#                             the running kernel just because it runs.
#
# MODULES (default /lib/modules), BOOT (default /boot) and NZ_UNAME_R (the
# running release) let selftests/unit/test_kver.sh point it at a fake tree.
set -euo pipefail

MODULES=${MODULES:-/lib/modules}
BOOT=${BOOT:-/boot}
mode=build
case "${1:-}" in
--guest) mode=guest ;;
'' | --build) ;;
*)
	echo "usage: scripts/kver.sh [--guest|--build]" >&2
	exit 2
	;;
esac

if [ -n "${KVER:-}" ]; then
	echo "$KVER"
	exit 0
fi

# The test bed's kernel: Debian's, with headers and an image to boot.
guest_kver() {
	local d v
	for d in "$MODULES"/*-amd64; do
		v=${d##*/}
		[ -e "$d/build" ] && [ -e "$BOOT/vmlinuz-$v" ] && echo "$v"
	done | sort -V | tail -n 1
}

if [ "$mode" = guest ]; then
	best=$(guest_kver) || true
	if [ -z "$best" ]; then
		echo "kver.sh: no $MODULES/*-amd64 with a build link and a $BOOT/vmlinuz;" \
			"run scripts/setup.sh (linux-image-amd64, linux-headers-amd64) or set KVER" >&2
		exit 1
	fi
	echo "$best"
	exit 0
fi

running=${NZ_UNAME_R:-$(uname -r)}
if [ -e "$MODULES/$running/build" ]; then
	echo "$running"
	exit 0
fi
best=$(guest_kver) || true
if [ -z "$best" ]; then
	best=$(for d in "$MODULES"/*; do
		[ -e "$d/build" ] && echo "${d##*/}"
	done | sort -V | tail -n 1) || true
fi
if [ -z "$best" ]; then
	echo "kver.sh: no headers for the running kernel ($MODULES/$running/build)" \
		"nor for any other; install your distribution's kernel headers" \
		"(Debian/Ubuntu: linux-headers-\$(uname -r); RHEL/Fedora: kernel-devel)" \
		"or set KVER/KDIR" >&2
	exit 1
fi
echo "kver.sh: no headers for the running kernel $running: building for $best" >&2
echo "$best"
