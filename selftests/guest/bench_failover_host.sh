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
end=$((SECONDS + 3000))
while [ $SECONDS -lt $end ] && [ ! -e "$NZ_RUN/finished" ]; do
	if [ ! -e "$NZ_RUN/ready.$k" ]; then
		sleep 0.05
		continue
	fi
	read -r kind r <"$NZ_RUN/ready.$k"
	if [ "$kind" = blackhole ]; then
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
echo "ok - host: $k rails failed"
