#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The guest scripts' helpers (selftests/guest/lib.sh) on the host: run_tap
# renumbers a program's TAP lines into the script's own count and, when
# the program fails, puts its last words (not a TAP diagnostic) into the
# failing test's name (a CI summary lists only failing names); klog_mark and klog_between cut the
# kernel's log at marks (a stand-in dmesg here).
TOP=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
expect() {	# expect NAME WANT GOT
	n=$((n + 1))
	if [ "$2" = "$3" ]; then echo "ok $n - $1"
	else failed=$((failed + 1)); echo "not ok $n - $1"
		printf '%s\n' "# want:" "$2" "# got:" "$3" | sed 's/^/#   /'; fi
}
# lib_run CMD...: CMD in a shell that sourced lib.sh, 5 tests counted
# before; prints what it printed, then "failed=N".
lib_run() {
	bash -c '. "$1/selftests/guest/lib.sh"; _tap_n=5; shift; "$@"; echo "failed=$_tap_fail"' \
		sh "$TOP" "$@"
}
echo "1..8"

cat >"$T/good" <<'EOF'
#!/bin/sh
echo "1..2"
echo "ok 1 - first"
echo "a comment"
echo "not ok 2 - second"
exit 0
EOF
cat >"$T/dies" <<'EOF'
#!/bin/sh
echo "ok 1 - set up"
echo "Traceback (most recent call last):"
echo "RuntimeError: the store went away"
echo ""
echo "   "
exit 1
EOF
cat >"$T/tapfail" <<'EOF'
#!/bin/sh
echo "# rank 0 of 2, 2 rails"
echo "not ok 1 - the allreduce"
exit 1
EOF
cat >"$T/silent" <<'EOF'
#!/bin/sh
exit 3
EOF
long=$(printf 'x%.0s' $(seq 300))
printf '#!/bin/sh\necho "%s"\nexit 2\n' "$long" >"$T/long"
chmod +x "$T/good" "$T/dies" "$T/tapfail" "$T/silent" "$T/long"

expect "run_tap: lines renumbered after the script's own, named, comments relayed, the exit checked" \
	"ok 6 - prog: first
# a comment
not ok 7 - prog: second
ok 8 - prog: exit status 0
failed=1" "$(lib_run run_tap prog "$T/good")"
expect "run_tap: a failed exit names the last non-blank line" \
	"ok 6 - py: set up
# Traceback (most recent call last):
# RuntimeError: the store went away
# 
#    
not ok 7 - py: exit status 1 (last words: RuntimeError: the store went away)
failed=1" "$(lib_run run_tap py "$T/dies")"
expect "run_tap: a TAP diagnostic is no last words (a failing test says it)" \
	"not ok 7 - tapf: exit status 1" "$(lib_run run_tap tapf "$T/tapfail" | tail -2 | head -1)"
expect "run_tap: a silent failure gets no last words" \
	"not ok 6 - quiet: exit status 3
failed=1" "$(lib_run run_tap quiet "$T/silent")"
expect "run_tap: last words cut at 160 characters" \
	"not ok 6 - long: exit status 2 (last words: ${long:0:160})" \
	"$(lib_run run_tap long "$T/long" | grep '^not ok')"

# A stand-in kernel log that grows between the marks.
printf 'boot %s\n' 1 2 3 >"$T/klog"
cat >"$T/marks" <<'EOF'
dmesg() { cat "$KLOG"; }
a=$(klog_mark)
echo "late 4" >>"$KLOG"; echo "late 5" >>"$KLOG"
b=$(klog_mark)
echo "later 6" >>"$KLOG"
echo "marks $a $b"
echo "between:"; klog_between "$a" "$b"
echo "since:"; klog_between "$b"
EOF
out=$(KLOG=$T/klog bash -c '. "$1/selftests/guest/lib.sh"; . "$2"' sh "$TOP" "$T/marks")
expect "klog_mark: the log's length in lines" "marks 3 5" "$(echo "$out" | head -1)"
expect "klog_between FROM TO: the lines after FROM up to TO" \
	"late 4
late 5" "$(echo "$out" | sed -n '/^between:/,/^since:/p' | sed '1d;$d')"
expect "klog_between FROM: every line after FROM" "later 6" \
	"$(echo "$out" | sed -n '/^since:/,$p' | sed '1d')"
[ "$failed" = 0 ]
