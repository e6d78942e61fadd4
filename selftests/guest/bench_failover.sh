#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Failover benchmark (issue 6), 2 guests x 2 rails of 40 Mbit/s.  For each
# system a stream flows from guest 0 to guest 1 while the host pulls one
# rail's cable on both guests (bench_failover_host.sh); guest 1 measures
# the longest gap in what it receives.  NZ_DRILLS drills per system:
#   nezha     nz_p2p gapmeter over both rails            (rail0 cut)
#   nezha-bh  the same, rail0 blackholed (link up, every frame lost)
#   mptcp     one MPTCP connection, one subflow per rail (initial subflow's
#             rail cut)
#   bonding   active-backup, miimon=100, over both rails (active slave cut)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench_lib.sh"
DRILLS=${1:-20}
RATE=${NZ_RATE:-40mbit}
GAP=$NZ_TOP/tools/gap_tcp.py
k=0
peer0=10.77.0.1 peer1=10.77.0.2

fbarrier() {	# fbarrier NAME: both guests reached NAME (files in NZ_RUN)
	local i
	touch "$NZ_RUN/at.$1.$NZ_NODE"
	for i in $(seq 600); do
		[ -e "$NZ_RUN/at.$1.0" ] && [ -e "$NZ_RUN/at.$1.1" ] && return 0
		sleep 0.1
	done
	return 1
}

# drill SYSTEM RAIL-TO-CUT RECV-CMD... -- SEND-CMD...
gaps=()
nbad=0
drill() {
	local sys=$1 cut=$2 out=$NZ_OUT/$1.$k.txt recv=() send=() cut_rail=${2#blackhole }
	shift 2
	while [ "$1" != -- ]; do recv+=("$1"); shift; done
	shift
	send=("$@")
	fbarrier "start.$k" || { say "barrier start.$k timed out"; return 1; }
	if [ "$NZ_NODE" = 1 ]; then
		timeout 200 "${recv[@]}" > "$out" 2>&1
		cat "$out" > "$NZ_RUN/gap.$k"
	else
		timeout 200 "${send[@]}" > "$out" 2>&1 &
		local pid=$!
		sleep 2			# flowing, and past the gap meter's first second
		# Renamed into place: the host must never read it half-written
		# (an empty read failed no rail: a drill without a fault).
		echo "$cut" > "$NZ_RUN/.ready.$k" && mv "$NZ_RUN/.ready.$k" "$NZ_RUN/ready.$k"
		wait $pid
	fi
	# The module's log of this drill, CLOCK_MONOTONIC-like stamps (gap_from=).
	dmesg -c 2>/dev/null | grep -E "nezha|rail " > "$NZ_OUT/dmesg.$sys.$k"
	cp "$NZ_OUT/dmesg.$sys.$k" "$NZ_RUN/dmesg.$NZ_NODE.$k"
	fbarrier "end.$k"
	local g
	g=$(grep -o 'gap_ms=[0-9]*' "$NZ_RUN/gap.$k" 2>/dev/null | cut -d= -f2)
	# A Nezha drill counts only if the sender saw its rail fail: without
	# a fault the gap meter measures the stream's own jitter (20-40 ms).
	if [ "${sys%-bh}" = nezha ] &&
	   ! grep -qE "rail $cut_rail: path to rank 1 (lost|silent)" "$NZ_RUN/dmesg.0.$k"; then
		[ "$NZ_NODE" = 1 ] && not_ok "$sys drill $k: the sender saw no failover of $cut_rail"
		g=999999
	fi
	# Every byte checked (nz_p2p gapmeter): none short, none wrong.
	if [ "${sys%-bh}" = nezha ] && [ "$NZ_NODE" = 1 ]; then
		local bad
		bad=$(grep -o 'bad=[0-9]*' "$NZ_RUN/gap.$k" 2>/dev/null | cut -d= -f2)
		if [ "${bad:-x}" != 0 ]; then
			not_ok "$sys drill $k: ${bad:-unknown} messages short or corrupt"
			nbad=$((nbad + 1))
		fi
	fi
	gaps+=("${g:-999999}")
	k=$((k + 1))
}

summary() {	# summary SYSTEM: median and max of the gaps collected
	local sorted n
	sorted=$(printf '%s\n' "${gaps[@]}" | sort -n)
	n=${#gaps[@]}
	echo "$1 $n $(echo "$sorted" | sed -n "$(( (n + 1) / 2 ))p") $(echo "$sorted" | tail -1) $(echo $sorted)" >> "$NZ_OUT/summary"
	say "$1: $n drills, gap median $(echo "$sorted" | sed -n "$(( (n + 1) / 2 ))p") ms, max $(echo "$sorted" | tail -1) ms: $(echo $sorted)"
	gaps=()
}

modprobe -q sch_tbf; modprobe -q bonding
shape_rails "$RATE"
nezha_up > /dev/null 2>&1 || say "nezha set-up failed"

# 1. Nezha
export MASTER_ADDR=$peer0 WORLD_SIZE=2 RANK=$NZ_NODE NEZHA_TIMEOUT_MS=60000
for ((i = 0; i < DRILLS; i++)); do
	port=$((29700 + k))
	drill nezha r0 env MASTER_PORT=$port "$NZ_BIN/guest/nz_p2p" gapmeter "$NZ_RUN/stop.$k" -- \
		env MASTER_PORT=$port "$NZ_BIN/guest/nz_p2p" gapmeter "$NZ_RUN/stop.$k"
	# Next drill on a healthy job: wait for rail0 to be re-admitted.
	sleep 1
done
summary nezha
# 1b. Nezha, the same rail blackholed: link up, every frame lost.  Only
# the heartbeats can tell; MPTCP and bonding are not run (bonding never
# notices, MPTCP only after its retransmission timeouts).
for ((i = 0; i < DRILLS; i++)); do
	port=$((29700 + k))
	drill nezha-bh "blackhole r0" env MASTER_PORT=$port "$NZ_BIN/guest/nz_p2p" gapmeter "$NZ_RUN/stop.$k" -- \
		env MASTER_PORT=$port "$NZ_BIN/guest/nz_p2p" gapmeter "$NZ_RUN/stop.$k"
	sleep 1
done
summary nezha-bh
rmmod nezha 2>/dev/null
if [ "${2:-}" = nezha-only ]; then
	touch "$NZ_RUN/finished"
	exit 0
fi

# 2. MPTCP, one subflow per rail
mptcp_wrapper
if [ "$NZ_NODE" = 0 ]; then mptcp_setup client; else mptcp_setup server; fi > /dev/null 2>&1
for ((i = 0; i < DRILLS; i++)); do
	port=$((5300 + k))
	drill mptcp r0 "${MPTCP_RUN[@]}" python3 "$GAP" server $peer1 $port "$NZ_RUN/stop.$k" -- \
		"${MPTCP_RUN[@]}" python3 "$GAP" client $peer1 $port "$NZ_RUN/stop.$k"
	sleep 1
done
summary mptcp

# 3. Bonding, active-backup, miimon=100
ip link add bond0 type bond mode active-backup miimon 100
for ifc in $NZ_IFS; do
	ip link set "$ifc" down
	ip addr flush dev "$ifc"
	ip link set "$ifc" master bond0
done
ip link set bond0 up
ip addr add "10.79.0.$((NZ_NODE + 1))/24" dev bond0
sleep 2
for ((i = 0; i < DRILLS; i++)); do
	port=$((5400 + k))
	active=$(cat /sys/class/net/bond0/bonding/active_slave)
	drill bonding "r${active#rail}" python3 "$GAP" server 10.79.0.2 $port "$NZ_RUN/stop.$k" -- \
		python3 "$GAP" client 10.79.0.2 $port "$NZ_RUN/stop.$k"
	sleep 1
done
summary bonding
touch "$NZ_RUN/finished"

if [ "$NZ_NODE" = 1 ]; then
	say "failover gap, receiver side, ms ($DRILLS drills each; nezha-bh: blackhole, the others: cable pulled on both ends):"
	say "$(printf '%-8s %6s %8s %8s' system drills median max)"
	while read -r sys n med max rest; do
		say "$(printf '%-8s %6s %8s %8s' "$sys" "$n" "$med" "$max")"
	done < "$NZ_OUT/summary"
	[ "$nbad" = 0 ] && ok "nezha, nezha-bh: every message of every drill arrived whole and intact"
	for sys in nezha nezha-bh; do
		read -r _ _ med max _ < <(grep "^$sys " "$NZ_OUT/summary")
		[ "$med" -le 50 ] && ok "$sys: median gap <= 50 ms ($med)" || not_ok "$sys: median gap <= 50 ms ($med)"
		[ "$max" -le 200 ] && ok "$sys: max gap <= 200 ms ($max)" || not_ok "$sys: max gap <= 200 ms ($max)"
	done
fi
exit 0
