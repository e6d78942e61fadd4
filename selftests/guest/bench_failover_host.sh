#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host side of the failover benchmark: whenever the guests say a stream is
# flowing ($NZ_RUN/ready.K holds the rail to cut), pull that rail's cable
# on BOTH guests at once (QEMU set_link: carrier off, as a cable or switch
# port dying), put it back after 1.5 s, then tell the guests (stop.K).
k=0
end=$((SECONDS + 3000))
while [ $SECONDS -lt $end ] && [ ! -e "$NZ_RUN/finished" ]; do
	if [ ! -e "$NZ_RUN/ready.$k" ]; then
		sleep 0.05
		continue
	fi
	r=$(cat "$NZ_RUN/ready.$k")
	nz_mon 0 "set_link $r off" >/dev/null
	nz_mon 1 "set_link $r off" >/dev/null
	echo "# drill $k: $r cut at $(date +%s.%N)"
	sleep 1.5
	nz_mon 0 "set_link $r on" >/dev/null
	nz_mon 1 "set_link $r on" >/dev/null
	sleep 1.0
	touch "$NZ_RUN/stop.$k"
	k=$((k + 1))
done
echo "ok - host: $k cable pulls"
