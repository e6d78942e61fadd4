#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host side of the failover benchmark: whenever the guests say a stream is
# flowing ($NZ_RUN/ready.K holds the rail to cut, "rN" or "blackhole rN"),
# fail that rail, put it back after 1.5 s, then tell the guests (stop.K).
#   rN            pull its cable on BOTH guests at once (QEMU set_link:
#                 carrier off, as a cable or switch port dying)
#   blackhole rN  take guest 0's port out of the rail's bridge: every frame
#                 both ways is lost, and both guests keep their carrier
#                 (a dead switch path, a bad ACL)
# One monitor helper for the whole run, connected to both guests: a cable
# is pulled on the two guests microseconds apart (one command each, back to
# back), and no interpreter starts at the moment of the fault.
coproc HMP { exec python3 "$NZ_TOP/selftests/qemu/hmp.py" "$NZ_MON_0" "$NZ_MON_1"; }
hmp() {	# hmp GUESTS COMMAND: GUESTS "0,1"; fails when the helper is gone
	local line
	echo "$1 $2" >&"${HMP[1]}" || return 1
	while read -r -t 20 line <&"${HMP[0]}"; do
		[ "$line" = . ] && return 0
	done
	return 1
}
k=0
bad=0
end=$((SECONDS + 3000))
while [ $SECONDS -lt $end ] && [ ! -e "$NZ_RUN/finished" ]; do
	if [ ! -e "$NZ_RUN/ready.$k" ]; then
		sleep 0.05
		continue
	fi
	read -r kind r <"$NZ_RUN/ready.$k"
	if ! [[ "$kind $r" =~ ^(blackhole\ r[0-9]+|r[0-9]+\ )$ ]]; then
		# Not a rail: fail nothing, and say so (the drill is void).
		echo "# drill $k: no rail to fail in '$kind $r'"
		bad=$((bad + 1))
	elif [ "$kind" = blackhole ]; then
		tap=$(nz_tap 0 "${r#r}")
		ip link set "$tap" nomaster
		echo "# drill $k: $r blackholed at $(date +%s.%N)"
		sleep 1.5
		ip link set "$tap" master "nzbr${r#r}"
	else
		r=$kind
		failed=0
		hmp 0,1 "set_link $r off" || failed=1
		echo "# drill $k: $r cut at $(date +%s.%N)"
		sleep 1.5
		hmp 0,1 "set_link $r on" || failed=1
		bad=$((bad + failed))
	fi
	sleep 1.0
	touch "$NZ_RUN/stop.$k"
	k=$((k + 1))
done
if [ $bad = 0 ]; then
	echo "ok - host: $k rails failed"
else
	echo "not ok - host: $k drills, $bad without a rail to fail or with a monitor command failed"
fi
