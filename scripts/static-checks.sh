#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Static checks of the kernel code, as TAP: checkpatch, a W=1 build with no
# warnings, sparse; and that Documentation/*.rst parses without a warning
# (a malformed table renders as an error block).  Tools come from Debian's
# linux-source-6.1, sparse, python3-docutils and the kernel headers
# (scripts/setup.sh installs them).
set -u
cd "$(dirname "$0")/.."
KVER=${KVER:-$(scripts/kver.sh --guest 2>/dev/null)}
KDIR=${KDIR:-/lib/modules/$KVER/build}
n=0
tap() { n=$((n + 1)); echo "$1 $n - $2"; }

cp=$(scripts/checkpatch-path.sh 2>/dev/null)
if [ -z "$cp" ]; then
	tap ok "checkpatch # SKIP linux-source-6.1 not installed"
else
	files=$(ls kmod/*.c kmod/*.h uapi/linux/*.h)
	if out=$("$cp" --no-tree --quiet --show-types -f $files 2>&1); then
		tap ok "checkpatch: kmod/ and uapi/ are clean"
	else
		tap "not ok" "checkpatch: kmod/ and uapi/ are clean"
		echo "$out" | head -40 | sed 's/^/# /'
	fi
fi

if ! python3 -c 'import docutils' 2>/dev/null; then
	tap ok "Documentation parses # SKIP python3-docutils not installed"
else
	bad=
	for f in Documentation/*.rst; do
		out=$(python3 -m docutils --halt=warning --report=warning "$f" /dev/null 2>&1) ||
			{ bad=1; echo "$out" | head -4 | sed 's/^/# /'; }
	done
	if [ -z "$bad" ]; then
		tap ok "Documentation/*.rst parses without warnings (docutils)"
	else
		tap "not ok" "Documentation/*.rst parses without warnings (docutils)"
	fi
fi

if [ ! -d "$KDIR" ]; then
	tap ok "W=1 build # SKIP no kernel headers"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Build a copy, so that the tree's own objects are left alone.
cp -r Kbuild kmod uapi "$tmp"/
log=$tmp/build.log
if make -C "$KDIR" M="$tmp" W=1 modules > "$log" 2>&1 &&
   ! grep -E "warning:|error:" "$log" >/dev/null; then
	tap ok "module builds with W=1 and no warning"
else
	tap "not ok" "module builds with W=1 and no warning"
	grep -E "warning:|error:" "$log" | head -20 | sed 's/^/# /'
fi
if ! command -v sparse >/dev/null; then
	tap ok "sparse # SKIP sparse not installed"
elif make -C "$KDIR" M="$tmp" C=2 modules > "$log" 2>&1 &&
     ! grep -E "$tmp/.*(warning|error):" "$log" >/dev/null; then
	tap ok "sparse is clean"
else
	tap "not ok" "sparse is clean"
	grep -E "warning|error" "$log" | head -20 | sed 's/^/# /'
fi
