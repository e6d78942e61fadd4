#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite (2 guests, 2+ rails): point-to-point transfers striped over
# TCP rails and checked byte by byte; a hostile peer; a process killed
# mid-transfer; rmmod attempted under traffic; unload afterwards.
#
#   guest 0 (rank 0) == rail0 bridge == guest 1 (rank 1)
#                    == rail1 bridge ==
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
ADDR0=${NZ_ADDRS%% *}

check "insmod" nz_load
i=0
for ifc in $NZ_IFS; do
	check "rail add r$i dev $ifc" "$CTL" rail add "r$i" proto tcp dev "$ifc"
	i=$((i + 1))
done
export MASTER_ADDR=10.77.0.1 RANK=$NZ_NODE WORLD_SIZE=$NZ_NODES
export NEZHA_TIMEOUT_MS=60000
MASTER_PORT=29500 run_tap p2p "$NZ_BIN/guest/nz_p2p"
"$CTL" rail show | sed 's/^/# /'

# A hostile client against this guest's own rail r0 (each guest alone).
modprobe -q algif_hash 2>/dev/null
run_tap hostile "$NZ_BIN/guest/nz_hostile" r0 "$ADDR0" 7470

# Rank 0's process dies mid-stream: rank 1 gets an error, not a hang.
if [ "$NZ_NODE" = 0 ]; then
	MASTER_PORT=29501 "$NZ_BIN/guest/nz_p2p" stream 60 > "$NZ_OUT/stream.log" 2>&1 &
	pid=$!
	sleep 6
	check_fails "rmmod refused while a transfer runs" rmmod nezha
	check "the transfer is still running" kill -0 $pid
	kill -9 $pid
	wait $pid 2>/dev/null
	sleep 1
	check "killed process: its transfers drained" \
		sh -c 'for i in $(seq 50); do [ "$(cat /sys/class/nezha/nezha/inflight)" = 0 ] && exit 0; sleep 0.2; done; exit 1'
else
	start=$(date +%s)
	MASTER_PORT=29501 "$NZ_BIN/guest/nz_p2p" stream 60 > "$NZ_OUT/stream.log" 2>&1
	rc=$?
	sed 's/^/# /' "$NZ_OUT/stream.log"
	took=$(( $(date +%s) - start ))
	if [ $rc = 3 ] && [ $took -lt 40 ]; then
		ok "peer killed mid-transfer: reported as an error after ${took} s"
	else
		not_ok "peer killed mid-transfer: reported as an error" "rc $rc after ${took} s"
	fi
fi
check "no transfer left in flight" test "$(cat /sys/class/nezha/nezha/inflight)" = 0
check "no connection counted once the jobs are gone" \
	sh -c 'for r in /sys/class/nezha/rail-*; do [ "$(cat $r/stats/conns)" = 0 ] || exit 1; done'
check "rmmod after traffic" nz_unload
tap_done
