#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite (2 guests, 2+ rails): point-to-point transfers striped over
# TCP rails, checked byte by byte; then unload under no traffic.
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl

check "insmod" nz_load
i=0
for ifc in $NZ_IFS; do
	check "rail add r$i dev $ifc" "$CTL" rail add "r$i" proto tcp dev "$ifc"
	i=$((i + 1))
done
export MASTER_ADDR=10.77.0.1 MASTER_PORT=29500 RANK=$NZ_NODE WORLD_SIZE=$NZ_NODES
export NEZHA_TIMEOUT_MS=60000
run_tap p2p "$NZ_BIN/guest/nz_p2p"
"$CTL" rail show | sed 's/^/# /'
check "no transfer left in flight" test "$(cat /sys/class/nezha/nezha/inflight)" = 0
check "rmmod after traffic" nz_unload
tap_done
