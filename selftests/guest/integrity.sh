#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite (2 guests, 2 rails): the per-frame MAC (nezhactl rail add ...
# frame-mac on; Documentation/security.rst, "On-path attackers").
#
# An on-path attacker is played by tc on guest 0: a pedit action on the
# egress of its first rail device sets the byte 1000 bytes into every IP
# packet long enough to have one to 0x5a -- the payload of rank 0's DATA (the
# handshake, ACKs and heartbeats are shorter), with TCP's checksum
# computed afterwards, so TCP delivers the changed byte.  Without the MAC
# the receiver gets wrong bytes (the threat, and the proof that the tamper
# works); with it every message arrives intact, the receiver counts the
# frames that failed (stats/mac_failures), closes the path and the chunks
# are resent on the other rail.  A rail with the MAC and one without
# refuse each other's connections.
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
IF0=${NZ_IFS%% *}
IF1=$(echo "$NZ_IFS" | cut -d' ' -f2)

nz_load_tcp_rails
export MASTER_ADDR=10.77.0.1 RANK=$NZ_NODE WORLD_SIZE=$NZ_NODES
export NEZHA_TIMEOUT_MS=$((60000 * ${NZ_TIME_SCALE:-1}))

burst() {	# burst NAME PORT RAILS SIZE COUNT: rank 0 sends, rank 1 checks
	MASTER_PORT=$2 NEZHA_RAILS=$3 "$NZ_BIN/guest/nz_p2p" burst "$4" "$5" \
		> "$NZ_OUT/$1.log" 2>&1
	local rc=$?
	sed 's/^/# /' "$NZ_OUT/$1.log"
	return $rc
}
corrupt() {	# corrupt NAME: the messages rank 1 found corrupt
	sed -n 's/^# rank 1: .*, \([0-9]*\) corrupt,.*/\1/p' "$NZ_OUT/$1.log"
}
tampered() {	# tampered: packets guest 0's pedit action changed so far
	tc -s filter show dev "$IF0" egress 2>/dev/null |
		awk '/action order.*pedit/ { p = 1 }
		     p && /Sent/ { s += $4
			for (i = 1; i < NF; i++) if ($i == "overlimits") s -= $(i + 1)
			p = 0 }
		     END { print s + 0 }'
}
tamper_changed() {	# tamper_changed RAIL: the pedit action changed its packets
	local t
	t=$(tampered)
	if [ "$t" -gt 0 ]; then
		ok "the tamper changed $t packets of $1"
	else
		not_ok "the tamper changed packets of $1" "pedit counted none"
	fi
}
tamper() {	# tamper PORT: change rank 0's packets to or from PORT on IF0
	tc filter add dev "$IF0" egress protocol ip prio 1 u32 \
		match ip dport "$1" 0xffff action pedit munge offset 1000 u8 set 0x5a &&
	tc filter add dev "$IF0" egress protocol ip prio 2 u32 \
		match ip sport "$1" 0xffff action pedit munge offset 1000 u8 set 0x5a
}

out=$("$CTL" rail add m0 proto tcp dev "$IF0" port 7490 frame-mac on 2>&1)
rc=$?
if [ $rc != 0 ] && [[ $out == *"no Poly1305"* ]]; then
	skip "per-frame MAC" "this kernel has no Poly1305 (CONFIG_CRYPTO_POLY1305): $out"
	check "rmmod" nz_unload
	tap_done
	exit
fi
if [ $rc = 0 ]; then
	ok "rail add m0 on $IF0 with frame-mac on"
else
	not_ok "rail add m0 on $IF0 with frame-mac on" "exit $rc: $out"
fi
check "rail add m1 on $IF1 with frame-mac on" \
	"$CTL" rail add m1 proto tcp dev "$IF1" port 7490 frame-mac on
check "nezhactl rail show m0 says frame-mac, and counts its failures" \
	sh -c "$CTL rail show m0 | grep -q ' frame-mac\$' && $CTL rail show m0 | grep -q 'mac-failures 0\$'"
check "sysfs: frame_mac 1 on m0, 0 on r0" \
	test "$(rail_file m0 frame_mac) $(rail_file r0 frame_mac)" = "1 0"
check "nezhactl --json rail show m0: frame_mac true" \
	sh -c "$CTL --json rail show m0 | grep -q '\"frame_mac\": *true'"
check_fails "rail add: frame-mac takes on or off" \
	"$CTL" rail add mz proto tcp dev "$IF0" port 7491 frame-mac maybe
# (An RDMA rail with frame-mac is refused: the rdma suite checks it.)

# 1. The MAC rails carry a job, byte for byte, and nothing fails.
check "4 messages of 16 MiB over m0 and m1 (MAC on both) intact" \
	burst mac 29800 m0,m1 16777216 4
check "no frame failed its MAC meanwhile (m0, m1)" \
	test "$(rail_stat m0 mac_failures) $(rail_stat m1 mac_failures)" = "0 0"

# 2. The attacker on the rail without the MAC: wrong bytes delivered.
have_tc=1
if [ "$NZ_NODE" = 0 ]; then
	if ! modprobe -q act_pedit || ! modprobe -q cls_u32 ||
	   ! tc qdisc add dev "$IF0" clsact; then
		have_tc=0
	fi
	echo "$have_tc" > "$NZ_RUN/integrity.tc"
fi
meet integrity-tc
have_tc=$(cat "$NZ_RUN/integrity.tc" 2>/dev/null || echo 0)
if [ "$have_tc" != 1 ]; then
	skip "tamper tests" "guest 0 has no clsact, cls_u32 or act_pedit (debug kernel without NET_ACT_PEDIT?)"
else
	[ "$NZ_NODE" = 0 ] && check "guest 0 tampers with r0's packets (port 7470)" tamper 7470
	burst plain 29810 r0 16777216 2
	if [ "$NZ_NODE" = 1 ]; then
		n=$(corrupt plain)
		if [ "${n:-0}" -gt 0 ]; then
			ok "without the MAC, the changed bytes reach the receiver ($n of 2 messages corrupt)"
		else
			not_ok "without the MAC, the changed bytes reach the receiver" "corrupt: ${n:-no count}"
		fi
	else
		tamper_changed r0
		tc filter del dev "$IF0" egress
	fi

	# 3. The same attacker on m0, a MAC rail: every message intact.
	f0=$(rail_stat m0 mac_failures)
	[ "$NZ_NODE" = 0 ] && check "guest 0 tampers with m0's packets (port 7490)" tamper 7490
	check "with the MAC, 4 messages of 16 MiB over tampered m0 and m1 intact" \
		burst tampered 29820 m0,m1 16777216 4
	if [ "$NZ_NODE" = 1 ]; then
		f=$(($(rail_stat m0 mac_failures) - f0))
		if [ "$f" -gt 0 ] && dmesg | grep -q "rail m0: a frame payload from rank 0 failed its MAC, closing"; then
			ok "the receiver caught $f frames failing their MAC on m0, and said so"
		else
			not_ok "the receiver caught the changed frames on m0" "mac_failures +$f"
		fi
		check "no frame failed on m1, which nobody touched" test "$(rail_stat m1 mac_failures)" = 0
	else
		tamper_changed m0
		tc qdisc del dev "$IF0" clsact
	fi
fi

# 4. One end with the MAC, the other without: refused, and said why.
if [ "$NZ_NODE" = 0 ]; then
	check "rail add mx with frame-mac on (guest 0)" \
		"$CTL" rail add mx proto tcp dev "$IF1" port 7500 frame-mac on
else
	check "rail add mx without frame-mac (guest 1)" \
		"$CTL" rail add mx proto tcp dev "$IF1" port 7500
fi
r0=$(rail_stat mx handshakes_refused)
NEZHA_TIMEOUT_MS=$((5000 * ${NZ_TIME_SCALE:-1})) burst mixed 29830 mx 4096 1
rc=$?
if [ $rc != 0 ]; then
	ok "a job over mx (MAC on one end only) does not come up"
else
	not_ok "a job over mx (MAC on one end only) does not come up" "it did"
fi
if [ "$NZ_NODE" = 0 ]; then	# the server: rank 1 dials rank 0
	r=$(($(rail_stat mx handshakes_refused) - r0))
	if [ "$r" -gt 0 ] && dmesg | grep -q "rail mx: refused a connection (per-frame MAC set differently"; then
		ok "guest 0 refused rank 1's connections ($r) for the MAC setting, and said so"
	else
		not_ok "guest 0 refused rank 1's connections for the MAC setting" "refused +$r"
	fi
fi

for r in m0 m1 mx; do "$CTL" rail del "$r"; done
check "no transfer left in flight" test "$(cat /sys/class/nezha/nezha/inflight)" = 0
check "rmmod after traffic" nz_unload
tap_done
