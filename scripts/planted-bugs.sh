#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Do the tests catch what they are there for?  For each
# scripts/planted/NAME.patch: copy Kbuild, kmod/ and uapi/ to
# build/planted/NAME, plant the bug (or put the old code back), build the
# module and run guest suites on that copy.  The run must fail, and:
#
#   # expect: REGEX       the guests' consoles hold this report (an extended
#                         regular expression: KASAN, lockdep, kmemleak ...)
#   # frame: FUNCTION     ... in a call trace through this function
#   # expect-tap: REGEX   a "not ok" line of the suites matches REGEX (a
#                         defect no sanitizer sees: wrong bytes, a stall);
#                         with "# expect:" too, either one will do (a
#                         defect that may crash the kernel or may not)
#   # suites: NAMES       the suites to run (default NZ_PLANT_SUITES, or
#                         "limits": one guest that creates, connects and
#                         destroys hundreds of communicators)
#   # kernel: production  Debian's kernel (selftests/run.sh) instead of the
#                         debug kernel (scripts/check-debug.sh)
#
# A patch needs "# expect:" or "# expect-tap:".  `make planted-bugs`; the
# debug kernel's patches need it built (make check-debug builds it).
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
	want_tap=$(sed -n 's/^# expect-tap: //p' "$p")
	psuites=$(sed -n 's/^# suites: //p' "$p")
	kernel=$(sed -n 's/^# kernel: //p' "$p")
	src=$TOP/build/planted/$name
	out=$TOP/build/test-output-planted/$name
	rm -rf "$src" "$out"
	mkdir -p "$out"
	"$TOP"/scripts/kmod-copy.sh "$src"
	if [ -z "$want$want_tap" ] ||
	   ! patch -s -d "$src" -p1 < "$p" > "$out/patch.log" 2>&1; then
		echo "not ok $n - planted $name: the patch applies and says what to expect"
		sed 's/^/# /' "$out/patch.log"
		fail=$((fail + 1))
		continue
	fi
	start=$(date +%s)
	if [ "$kernel" = production ]; then
		kdir=/lib/modules/$(scripts/kver.sh --guest)/build
		if make -C "$kdir" M="$src" modules > "$out/build.log" 2>&1; then
			NZ_KO=$src/nezha.ko NZ_RDMA_KO=$src/nezha_rdma.ko \
				NZ_GUEST_ONLY=1 NZ_SUITES=${psuites:-$suites} \
				NZ_OUT=$out selftests/run.sh > "$out/lane.log" 2>&1
			rc=$?
		else
			rc=build
			cp "$out/build.log" "$out/lane.log"
		fi
	else
		NZ_DEBUG_SRC=$src NZ_SUITES=${psuites:-$suites} NZ_OUT=$out \
			scripts/check-debug.sh > "$out/lane.log" 2>&1
		rc=$?
	fi
	secs=$(($(date +%s) - start))
	hit=
	if [ -n "$want" ]; then
		for c in $(grep -rlE "$want" "$out" --include='*.console' 2>/dev/null); do
			if [ -z "$frame" ] || grep -q "$frame" "$c"; then
				hit=$(grep -hoE "$want.*" "$c" | head -n 1)${frame:+, in a trace through $frame}
				break
			fi
		done
	fi
	if [ -z "$hit" ] && [ -n "$want_tap" ]; then
		hit=$(grep -E '^not ok ' "$out/lane.log" | grep -E -- "$want_tap" | head -n 1)
	fi
	[ -n "$want" ] && [ -n "$want_tap" ] && want="$want/ or /$want_tap"
	[ -n "$want" ] || want=$want_tap
	if [ "$rc" != 0 ] && [ "$rc" != build ] && [ -n "$hit" ]; then
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
