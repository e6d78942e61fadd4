#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run every Nezha test and print TAP, then one line "N passed, N failed,
# N skipped".  Exit status 0 iff nothing failed.
#
#   selftests/run.sh            host unit tests, static checks, guest suites
#   selftests/run.sh --quick    host unit tests, static checks, basic guest suite
#   NZ_SUITES="basic p2p" selftests/run.sh   only these guest suites
#
# For the debug-kernel lane (scripts/check-debug.sh): NZ_GUEST_ONLY=1 skips
# the host unit tests and static checks, NZ_TIMEOUT_SCALE=N multiplies each
# suite's timeout, NZ_VM_MEM gives each guest that many MiB, and
# NZ_DEBUG_SUITES=1 adds the suites of selftests/guest/suites.debug.
# NZ_SCALE_SUITES=1 (make check-scale) runs the suites of
# selftests/guest/suites.scale (2, 4 and 8 guests) instead of the others.
#
# NZ_WITH_DEBUG="SUITE..." (what `make check` sets) runs those suites on the
# debug kernel as well, after the others, counted in the same totals, if
# that kernel is built (or NZ_DEBUG_BUILD=1 asks to build it); otherwise
# one SKIP says why.
#
# Guest suites are listed in selftests/guest/suites: name, guests, rails,
# timeout (s), script, and optionally a script that runs on the host beside
# the guests (vm.sh -H).  Each boots its own guests (selftests/qemu/vm.sh).
set -u
cd "$(dirname "$0")/.."
TOP=$PWD
OUT=${NZ_OUT:-$TOP/build/test-output}
mkdir -p "$OUT"
quick=0
[ "${1:-}" = --quick ] && quick=1

n=0 pass=0 fail=0 skipped=0
emit() {	# emit "ok|not ok" NAME-WITH-DIRECTIVES
	n=$((n + 1))
	echo "$1 $n - $2"
	if [ "$1" = "not ok" ]; then
		fail=$((fail + 1))
	elif [[ "$2" == *"# SKIP"* ]]; then
		skipped=$((skipped + 1))
	else
		pass=$((pass + 1))
	fi
}
relay() {	# relay PREFIX < TAP: renumber and count every result line
	local prefix=$1 line status rest
	while IFS= read -r line; do
		case "$line" in
		"ok "*|"not ok "*)
			if [[ "$line" == "not ok"* ]]; then status="not ok"; rest=${line#not ok}; else status=ok; rest=${line#ok}; fi
			rest=$(echo "$rest" | sed -E 's/^ *[0-9]* *(- )?//')
			emit "$status" "$prefix$rest";;
		"#"*) echo "$line";;
		esac
	done
}

# early_panic DIR GUESTS: some guest's kernel panicked before its script began.
early_panic() {
	local g
	for ((g = 0; g < $2; g++)); do
		if ! grep -q '^NZ-BEGIN ' "$1/guest$g.result" 2>/dev/null &&
		   grep -aq 'Kernel panic' "$1/guest$g.console" 2>/dev/null; then
			return 0
		fi
	done
	return 1
}

echo "TAP version 13"
# 1. Host unit tests.
for t in build/unit/test_*; do
	[ -z "${NZ_GUEST_ONLY:-}" ] || break
	[ -x "$t" ] || continue
	name=$(basename "$t")
	timeout 300 "$t" > "$OUT/$name.tap" 2>&1
	rc=$?
	relay "unit/$name: " < "$OUT/$name.tap"
	[ $rc -eq 0 ] && emit ok "unit/$name: exit status 0" ||
		emit "not ok" "unit/$name: exit status $rc"
done

# The wire codec's fuzz target (libFuzzer under `make fuzz`) still builds
# and replays its seed corpus without a finding.
if [ -x build/fuzz/fuzz_wire ]; then
	seeds=$(mktemp -d)
	if build/fuzz/fuzz_wire -s "$seeds" > "$OUT/fuzz_wire.log" 2>&1 &&
	   build/fuzz/fuzz_wire "$seeds" >> "$OUT/fuzz_wire.log" 2>&1; then
		emit ok "fuzz/fuzz_wire: $(tail -1 "$OUT/fuzz_wire.log")"
	else
		emit "not ok" "fuzz/fuzz_wire: seed corpus replay failed (see $OUT/fuzz_wire.log)"
	fi
	rm -rf "$seeds"
fi

# 2. Static checks of the kernel code.
[ -n "${NZ_GUEST_ONLY:-}" ] || relay "static: " < <(scripts/static-checks.sh 2>&1)

# 3. Guest suites.
if [ ! -e /dev/net/tun ] || ! command -v qemu-system-x86_64 >/dev/null; then
	emit ok "guest suites # SKIP qemu or /dev/net/tun missing (run scripts/setup.sh)"
else
	while read -r name guests rails timeout script host mem; do
		case "$name" in ''|'#'*) continue;; esac
		[ $quick = 1 ] && [ "$name" != basic ] && continue
		if [ -n "${NZ_SUITES:-}" ] && [[ " $NZ_SUITES " != *" $name "* ]]; then
			continue
		fi
		echo "# guest suite $name: $guests guests x $rails rails"
		start=$(date +%s)
		hopt=()
		[ -n "$host" ] && [ "$host" != - ] && hopt=(-H "$host")
		# Memory per guest: the suite's column, else NZ_VM_MEM.
		mem=${mem:-${NZ_VM_MEM:-}}
		[ -n "$mem" ] && hopt+=(-m "$mem")
		timeout=$((timeout * ${NZ_TIMEOUT_SCALE:-1}))
		jumped=0
		for ((try = 0; ; try++)); do
			selftests/qemu/vm.sh -n "$guests" -r "$rails" -t "$timeout" \
				-o "$OUT/guest-$name" "${hopt[@]}" "$script" > "$OUT/guest-$name.tap" 2>&1
			rc=$?
			# A guest's clock jumped with the host's TSC in a failed
			# run (vm.sh exit 76): its results are void; once again.
			if [ $rc = 76 ] && [ $jumped = 0 ]; then
				jumped=1
				echo "# guest suite $name: a guest's clock jumped with the host's TSC and the run failed; its results are void, booting again:"
				grep -h 'TSC jumped' "$OUT/guest-$name.tap" | sed 's/^/#   /'
				rm -rf "$OUT/guest-$name.clock-jump"
				cp -r "$OUT/guest-$name" "$OUT/guest-$name.clock-jump" 2>/dev/null
				try=$((try - 1))
				continue
			fi
			# NZ_RETRY_BOOT=N (the debug lane): a guest kernel that
			# died before any test ran -- before the script began,
			# with no module loaded -- or whose boot hung (vm.sh's
			# watchdog, exit 75) is booted again, up to N times, and
			# said so.
			[ $try -lt "${NZ_RETRY_BOOT:-0}" ] && [ $rc -ne 0 ] || break
			if [ $rc = 75 ]; then
				echo "# guest suite $name: a guest's boot hung ($(cat "$OUT/guest-$name/boot-hung" 2>/dev/null) s silent); booting again"
				rm -rf "$OUT/guest-$name.boot-hang$try"
				cp -r "$OUT/guest-$name" "$OUT/guest-$name.boot-hang$try" 2>/dev/null
			elif early_panic "$OUT/guest-$name" "$guests"; then
				echo "# guest suite $name: a guest kernel panicked while booting, before the test began; booting again:"
				grep -ahm 3 'BUG:\|panic' "$OUT/guest-$name"/guest*.console | sed 's/^/#   /'
				rm -rf "$OUT/guest-$name.boot-panic$try"
				cp -r "$OUT/guest-$name" "$OUT/guest-$name.boot-panic$try" 2>/dev/null
			else
				break
			fi
		done
		relay "$name/" < "$OUT/guest-$name.tap"
		# vm.sh exits 2 on set-up errors before any guest ran: those
		# print no TAP line and must not pass silently.
		if [ $rc -ne 0 ] && ! grep -q '^not ok' "$OUT/guest-$name.tap"; then
			grep -vE '^(ok|not ok|#)' "$OUT/guest-$name.tap" | tail -n 20 | sed 's/^/# /'
			emit "not ok" "$name/: vm.sh exited $rc"
		fi
		echo "# guest suite $name took $(( $(date +%s) - start )) s"
	done < <([ -n "${NZ_SCALE_SUITES:-}" ] || cat selftests/guest/suites
		 [ -z "${NZ_DEBUG_SUITES:-}" ] || cat selftests/guest/suites.debug
		 [ -z "${NZ_SCALE_SUITES:-}" ] || cat selftests/guest/suites.scale)
fi

# 3b. The test bed itself: a guest whose script outlives vm.sh's timeout is
# stopped, and first leaves every task's kernel stack on its console, so
# that a hung run says where it hung (a demo hung once on 2026-12-06 with
# nothing to say why) -- also while a host script holds the guest's
# monitor, as the failover suite's does (until 2026-12-07 vm.sh then
# could not reach the guest).  And hung_regs.py, which vm.sh runs on a
# hung boot, works on a live guest and takes its 3 samples.  One guest,
# ~50 s.
if [ $quick = 0 ] && [ -e /dev/net/tun ] && command -v qemu-system-x86_64 >/dev/null &&
   { [ -z "${NZ_SUITES:-}" ] || [[ " $NZ_SUITES " == *" harness "* ]]; } &&
   [ -z "${NZ_SCALE_SUITES:-}" ]; then
	tmo=45
	selftests/qemu/vm.sh -n 1 -r 1 -t $tmo -o "$OUT/guest-harness" \
		-H selftests/guest/hold_mon_host.sh selftests/guest/hang.sh \
		> "$OUT/guest-harness.tap" 2>&1
	rc=$?
	con=$OUT/guest-harness/guest0.console
	if [ $rc -ne 0 ] && grep -q "killed after the ${tmo}s timeout (its tasks" "$OUT/guest-harness.tap" &&
	   grep -q '^# host: holding' "$OUT/guest-harness/host.log" &&
	   grep -aq 'task:nz_hang_probe .*state:S' "$con" && grep -aq 'nanosleep' "$con"; then
		emit ok "harness/a guest past its timeout leaves its tasks' stacks on the console"
	else
		emit "not ok" "harness/a guest past its timeout leaves its tasks' stacks on the console (vm.sh exited $rc; see $con)"
		grep -a 'task:' "$con" 2>/dev/null | head -n 5 | sed 's/^/# /'
	fi
	# What vm.sh takes of a hung boot, taken here of a live guest by
	# the host script: 3 samples of every vCPU, each vCPU summed up,
	# with its local APIC timer in each sample, and the kernel's printk
	# buffer read from its memory (a line the guest wrote there).
	hl=$OUT/guest-harness/host.log
	if [ "$(grep -c '^# host: hung_regs: ## sample [123] of 3' "$hl")" = 3 ] &&
	   grep -q '^# host: hung_regs: # vCPU 0: [1-3] of 3 samples at the same RIP' "$hl" &&
	   [ "$(grep -c '^# host: hung_regs: # vCPU 0 local APIC (sample [123] of 3): LVTT .*; Timer .*count' "$hl")" = 3 ] &&
	   grep -q '^# host: hung_regs: # log: nz_hang_probe: a line for hung_regs.py to find' "$hl"; then
		emit ok "harness/hung_regs.py samples a guest's vCPUs and local APIC timers 3 times and reads its printk buffer through its diagnostics monitor"
	else
		emit "not ok" "harness/hung_regs.py samples a guest's vCPUs and local APIC timers 3 times and reads its printk buffer through its diagnostics monitor (see $hl)"
		grep 'hung_regs' "$hl" 2>/dev/null | head -n 5 | sed 's/^/# /'
	fi
fi

# 4. A part of the debug-kernel lane (make check-debug runs all of it),
# when the debug kernel is built already (make check-debug builds it) or
# NZ_DEBUG_BUILD=1 asks for the build: it takes ~37 minutes on 2 cores,
# more than CI's budget leaves (Documentation/testing.rst).
if [ -n "${NZ_WITH_DEBUG:-}" ] && [ $quick = 0 ]; then
	if [ -z "${NZ_DEBUG_BUILD:-}" ] && ! scripts/debug-kernel.sh --cached >/dev/null 2>&1; then
		emit ok "debug-kernel lane ($NZ_WITH_DEBUG) # SKIP no debug kernel built: its build (~37 min on 2 cores) does not fit CI's budget; make check-debug builds it, and make check then runs these suites on it too"
	else
		echo "# debug-kernel lane: $NZ_WITH_DEBUG"
		start=$(date +%s)
		# NZ_SUITES first: bash expands a command's assignments left to
		# right, so "NZ_WITH_DEBUG='' NZ_SUITES=$NZ_WITH_DEBUG" would give
		# an empty list, which means every suite.
		relay "debug/" < <(NZ_SUITES="$NZ_WITH_DEBUG" NZ_WITH_DEBUG='' scripts/check-debug.sh 2>&1)
		echo "# debug-kernel lane took $(( $(date +%s) - start )) s"
	fi
fi

echo "1..$n"
echo "$pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
