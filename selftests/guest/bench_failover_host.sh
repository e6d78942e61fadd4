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
		nz_mon 0 "set_link $r off" >/dev/null
		nz_mon 1 "set_link $r off" >/dev/null
		echo "# drill $k: $r cut at $(date +%s.%N)"
		sleep 1.5
		nz_mon 0 "set_link $r on" >/dev/null
		nz_mon 1 "set_link $r on" >/dev/null
	fi
	sleep 1.0
	touch "$NZ_RUN/stop.$k"
	k=$((k + 1))
done
if [ $bad = 0 ]; then
	echo "ok - host: $k rails failed"
else
	echo "not ok - host: $k drills, $bad of them without a rail to fail"
fi
