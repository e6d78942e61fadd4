#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host side of the failover suite: the faults a guest cannot make on itself.
# A guest asks by renaming one line into $NZ_RUN/req.N (N = 0, 1, ...):
#   flap GUEST RAIL COUNT DOWN_MS UP_MS
#       pull RAIL's cable on GUEST COUNT times (QEMU set_link: carrier off,
#       as a flapping cable or switch port), DOWN_MS off and UP_MS on each
# and finds $NZ_RUN/done.N once it is over: "ok", or what failed.
#
# Why not "ip link set down/up" in the guest: that closes and reopens the
# guest's driver, and after some tens of quick cycles under emulation the
# virtio NIC's transmit queue stayed hung for good (NETDEV WATCHDOG); and
# each ip command took 0.3-0.7 s to start in a busy guest, so a flap every
# 300 ms became one every 1.5 s.  Here one helper holds the monitors open.
mons=()
for ((g = 0; g < ${NZ_NODES:-2}; g++)); do
	mon=NZ_MON_$g
	mons+=("${!mon}")
done
coproc HMP { exec python3 "$NZ_TOP/selftests/qemu/hmp.py" "${mons[@]}"; }
hmp() {	# hmp GUEST COMMAND: fails when the helper is gone or QEMU complains
	local line reply=
	echo "$1 $2" >&"${HMP[1]}" || return 1
	while read -r -t 20 line <&"${HMP[0]}"; do
		if [ "$line" = . ]; then
			[ -z "$reply" ] && return 0
			echo "# host: '$2' on guest $1: $reply" >&2
			return 1
		fi
		reply="$reply$line "
	done
	return 1
}
ms() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

serve() {	# serve LINE: do one request, print its outcome
	local what g r n down up i
	read -r what g r n down up <<<"$1"
	case "$what $g $r $n $down $up" in
	"flap "[0-9]" r"[0-9]*" "[0-9]*" "[0-9]*" "[0-9]*) ;;
	*) echo "malformed request '$1'"; return ;;
	esac
	for ((i = 0; i < n; i++)); do
		hmp "$g" "set_link $r off" || { echo "set_link $r off failed"; return; }
		sleep "$(ms "$down")"
		hmp "$g" "set_link $r on" || { echo "set_link $r on failed"; return; }
		sleep "$(ms "$up")"
	done
	echo ok
}

# A reused run directory: nothing of an earlier run may answer this one.
rm -f "$NZ_RUN"/req.* "$NZ_RUN"/.req.* "$NZ_RUN"/done.* "$NZ_RUN"/.done.*
k=0
while :; do
	if [ ! -e "$NZ_RUN/req.$k" ]; then
		sleep 0.05
		continue
	fi
	req=$(cat "$NZ_RUN/req.$k")
	start=$(date +%s.%N)
	out=$(serve "$req")
	echo "# host: request $k '$req' at $start: $out"
	echo "$out" > "$NZ_RUN/.done.$k" && mv "$NZ_RUN/.done.$k" "$NZ_RUN/done.$k"
	[ "$out" = ok ] || echo "not ok - host: request $k '$req': $out"
	k=$((k + 1))
done
