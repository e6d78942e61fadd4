#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Copy the module's sources (Kbuild, kmod/, uapi/) to DEST without the
# build outputs kbuild leaves beside them, so that DEST builds from clean:
# the debug lane's copy (scripts/check-debug.sh) and the planted bugs'
# (scripts/planted-bugs.sh).
#
#   scripts/kmod-copy.sh DEST
set -eu
[ $# = 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$1"
exec rsync -a --delete --exclude='*.o' --exclude='*.ko' --exclude='*.mod' \
	--exclude='*.mod.c' --exclude='.*.cmd' --exclude='*.o.d' \
	Kbuild kmod uapi "$1/"
