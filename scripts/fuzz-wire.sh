#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The wire codec's libFuzzer target (selftests/fuzz/fuzz_wire.c) on the
# host, with ASan and UBSan: `make fuzz` runs it after the guest campaign.
#
#   scripts/fuzz-wire.sh [SECONDS]     default 300; FUZZ_WIRE_JOBS=N forks N
#
# The corpus grows in build/fuzz/wire-corpus (seeded by the standalone
# build's -s); a crash leaves build/fuzz/crash-* -- replay it with
# build/fuzz/fuzz_wire FILE.  Exit status 0 iff no crash.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-300}
out=build/fuzz
corpus=$out/wire-corpus
bin=$out/fuzz_wire_lf
mkdir -p "$corpus"
if ! command -v clang >/dev/null ||
   ! clang -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -Iuapi -Iselftests -idirafter kmod \
	-o "$bin" selftests/fuzz/fuzz_wire.c kmod/wire.c kmod/reasm.c; then
	echo "ok - host libFuzzer run of fuzz_wire # SKIP clang with libFuzzer missing (apt-get install clang)"
	exit 0
fi
[ -n "$(ls -A "$corpus")" ] || "$out/fuzz_wire" -s "$corpus"
log=$out/fuzz-wire.log
if "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$out/" \
	${FUZZ_WIRE_JOBS:+-fork=$FUZZ_WIRE_JOBS} "$corpus" > "$log" 2>&1; then
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	echo "ok - host libFuzzer run of fuzz_wire: ${runs:-?} inputs in $secs s, $(ls "$corpus" | wc -l) in the corpus"
else
	echo "not ok - host libFuzzer run of fuzz_wire: crash, see $log"
	grep -E '^(==|SUMMARY|.*runtime error)' "$log" | head -5 | sed 's/^/# /'
	exit 1
fi
