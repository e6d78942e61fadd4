#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Does the debug-kernel lane catch what it is there for?  For each
# scripts/planted/NAME.patch: copy Kbuild, kmod/ and uapi/ to
# build/planted/NAME, plant the bug, and run scripts/check-debug.sh on that
# copy (suites NZ_PLANT_SUITES, default "limits": one guest that creates,
# connects and destroys hundreds of communicators).  The lane must fail,
# and its consoles must hold the report the patch names on its
# "# expect:" line (an extended regular expression) and, if the patch has
# one, the function of its "# frame:" line (the report's call trace).
# `make planted-bugs`; needs the debug kernel (make check-debug builds it).
#
#   scripts/planted-bugs.sh [NAME...]      only these bugs
#
# Prints TAP and one "N passed, N failed" line; exit status 0 iff every
# planted bug was caught.
set -u
cd "$(dirname "$0")/.." || exit 2
TOP=$PWD
suites=${NZ_PLANT_SUITES:-limits}
pass=0 fail=0 n=0

echo "TAP version 13"
pick=("$@")
[ $# = 0 ] && pick=("$TOP"/scripts/planted/*.patch)
for p in "${pick[@]}"; do
	[ -f "$p" ] || p=$TOP/scripts/planted/$p.patch
	name=$(basename "$p" .patch)
	n=$((n + 1))
	want=$(sed -n 's/^# expect: //p' "$p")
	frame=$(sed -n 's/^# frame: //p' "$p")
	src=$TOP/build/planted/$name
	out=$TOP/build/test-output-planted/$name
	rm -rf "$src" "$out"
	mkdir -p "$src" "$out"
	cp -r "$TOP/Kbuild" "$TOP/kmod" "$TOP/uapi" "$src/"
	if [ -z "$want" ] || ! patch -s -d "$src" -p1 < "$p" > "$out/patch.log" 2>&1; then
		echo "not ok $n - planted $name: the patch applies and says what to expect"
		sed 's/^/# /' "$out/patch.log"
		fail=$((fail + 1))
		continue
	fi
	start=$(date +%s)
	NZ_DEBUG_SRC=$src NZ_SUITES=$suites NZ_OUT=$out \
		scripts/check-debug.sh > "$out/lane.log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	hit=
	for c in $(grep -rlE "$want" "$out" --include='*.console' 2>/dev/null); do
		if [ -z "$frame" ] || grep -q "$frame" "$c"; then
			hit=$(grep -hoE "$want.*" "$c" | head -n 1)${frame:+, in a trace through $frame}
			break
		fi
	done
	if [ "$rc" != 0 ] && [ -n "$hit" ]; then
		echo "ok $n - planted $name: the lane failed (exit $rc, ${secs} s) on \"$hit\""
		pass=$((pass + 1))
	else
		echo "not ok $n - planted $name: the lane failed on /$want/${frame:+ through $frame} (exit $rc, ${secs} s, report ${hit:-not found})"
		tail -n 20 "$out/lane.log" | sed 's/^/# /'
		fail=$((fail + 1))
	fi
	grep -E '^(not )?ok ' "$out/lane.log" | grep -E '^not ok' | head -n 5 | sed 's/^/#   lane: /'
done
echo "1..$n"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
