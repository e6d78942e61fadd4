#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# nezhactl's bash completion (tools/dist/nezhactl.bash), in plain bash
# (bash-completion's helpers are used when installed, not needed).
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/tools/dist/nezhactl.bash"
n=0 failed=0
comp() {	# comp WANT WORD...: complete the last word of "nezhactl WORD..."
	local want=$1; shift
	COMP_WORDS=(nezhactl "$@")
	COMP_CWORD=$#
	COMPREPLY=()
	_nezhactl 2>/dev/null
	n=$((n + 1))
	if [ "${COMPREPLY[*]}" = "$want" ]; then
		echo "ok $n - nezhactl $* <TAB>: $want"
	else
		failed=$((failed + 1))
		echo "not ok $n - nezhactl $* <TAB>: got '${COMPREPLY[*]}', want '$want'"
	fi
}
echo "1..8"
comp "rail" ra
comp "show stats" s
comp "-j" -j
comp "rail" -j -n ns0 r
comp "proto port" rail add r0 p
comp "tcp rdma" rail add r0 proto ""
comp "weight" rail set r0 w
comp "text json prometheus" stats -o ""
exit $((failed > 0))
