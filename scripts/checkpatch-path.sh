#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Print the path of a usable checkpatch.pl, unpacking it (with the data files
# it reads) from Debian's linux-source-6.1 tarball into build/ once.
set -eu
cd "$(dirname "$0")/.."
dst=build/checkpatch
if [ ! -x "$dst/scripts/checkpatch.pl" ]; then
	tarball=$(ls /usr/src/linux-source-6.1.tar.* 2>/dev/null | head -1)
	[ -n "$tarball" ] || exit 1
	mkdir -p "$dst"
	tar -xf "$tarball" -C "$dst" --strip-components=1 \
		linux-source-6.1/scripts/checkpatch.pl \
		linux-source-6.1/scripts/spelling.txt \
		linux-source-6.1/scripts/const_structs.checkpatch
fi
echo "$PWD/$dst/scripts/checkpatch.pl"
