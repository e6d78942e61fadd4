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

echo "TAP version 13"
# 1. Host unit tests.
for t in build/unit/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	timeout 300 "$t" > "$OUT/$name.tap" 2>&1
	rc=$?
	relay "unit/$name: " < "$OUT/$name.tap"
	[ $rc -eq 0 ] && emit ok "unit/$name: exit status 0" ||
		emit "not ok" "unit/$name: exit status $rc"
done

# 2. Static checks of the kernel code.
relay "static: " < <(scripts/static-checks.sh 2>&1)

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
		[ -n "$mem" ] && hopt+=(-m "$mem")
		selftests/qemu/vm.sh -n "$guests" -r "$rails" -t "$timeout" \
			-o "$OUT/guest-$name" "${hopt[@]}" "$script" > "$OUT/guest-$name.tap" 2>&1
		rc=$?
		relay "$name/" < "$OUT/guest-$name.tap"
		# vm.sh exits 2 on set-up errors before any guest ran: those
		# print no TAP line and must not pass silently.
		if [ $rc -ne 0 ] && ! grep -q '^not ok' "$OUT/guest-$name.tap"; then
			grep -vE '^(ok|not ok|#)' "$OUT/guest-$name.tap" | tail -n 20 | sed 's/^/# /'
			emit "not ok" "$name/: vm.sh exited $rc"
		fi
		echo "# guest suite $name took $(( $(date +%s) - start )) s"
	done < selftests/guest/suites
fi

echo "1..$n"
echo "$pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
