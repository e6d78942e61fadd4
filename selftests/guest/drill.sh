#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The isolation drill (issue 20): a 2-rank job moves 256 MiB while, at the
# same time,
#   - on nz1 (the receiving rank's node), an unprivileged user runs the
#     local fuzzer (selftests/fuzz/nz_fuzz) against /dev/nezha;
#   - on nz0 (the sending rank's node), a second user who has learned the
#     job's id squats it: communicators under that id as rank 0 and 1,
#     without the secret, created and destroyed over and over (nz_squat);
#   - from a second address of nz0's rail0, a host keeps 1000 junk
#     connections (garbage bytes) and 1000 silent ones (handshakes left
#     half done) open to nz1's rail r0, reopening each one the module
#     closes (junk_conns.py).
# The job runs alone first, then beside plain CPU load (the control: as
# many processes spinning in user space as the attacks run, so that what
# a busy CPU costs shows apart from what the module's work for the
# attackers costs), then under each attack alone (so that the cost of
# each shows), then under all three at once.  Every run must
# complete with its data intact; under all three at no less than 0.9x the
# throughput of the job alone (same boot); the module's memory on nz1 must
# stay bounded and come back.
#
#    nz0 (rank 0, squatter, junk host)          nz1 (rank 1, fuzzer)
#    rail0 10.77.0.1 (+10.77.0.100) --tbf-- bridge --tbf-- 10.77.0.2 rail0
#    rail1 10.77.1.1 ------------------tbf-- bridge --tbf-- 10.77.1.2 rail1
#
# 2 guests x 2 rails (scripts/drill.sh: make drill).  usage: drill.sh
# [--rate RATE] [--size SIZE] [--iters N]; defaults 40mbit, 64M x 4.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench_lib.sh"
set -u

RATE=${NZ_RATE:-40mbit}
SIZE=64M
ITERS=4
while [ $# -gt 0 ]; do
	case $1 in
	--rate) RATE=$2 ;;
	--size) SIZE=$2 ;;
	--iters) ITERS=$2 ;;
	*) echo "Bail out! drill.sh: unknown argument $1"; exit 2 ;;
	esac
	shift 2
done
if [ "${NZ_NODES:-0}" != 2 ] || [ "${NZ_RAILS:-0}" -lt 2 ]; then
	skip "drill" "needs 2 guests with 2 rails (vm.sh -n 2 -r 2)"
	tap_done
	exit
fi
CTL=$NZ_BIN/tools/nezhactl
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
STRANGER=10.77.0.100
JOB_TMO=900

say "node $NZ_NODE: $(nproc) vCPU(s), rails $NZ_IFS shaped to $RATE each; job: $ITERS x $SIZE"

# 1. Rails, module (the device open to every user, as on a shared node).
st=ok
rails_mtu 9000 && shape_rails "$RATE" || st=fail
show_run insmod "$NZ_KO" dev_mode=0666 unexpected_mb=16 || st=fail
for ((r = 0; r < NZ_RAILS; r++)); do
	show_run "$CTL" rail add "r$r" proto tcp dev "${nz_ifs[r]}" || st=fail
done
[ "$NZ_NODE" = 0 ] && { show_run ip addr add "$STRANGER/24" dev "${nz_ifs[0]}" || st=fail; }
barrier up 180 $st || { not_ok "barrier up"; tap_done; exit 1; }
[ "$NZ_ALL_OK" = 1 ] && ok "module loaded (dev_mode 0666), rails shaped to $RATE on both guests" ||
	{ not_ok "set-up on both guests"; tap_done; exit 1; }

# job NAME PORT: the 2-rank transfer, data checked; its rate in MB/s on
# rank 0 goes to $NZ_OUT/NAME.rate.
job() {
	NZ_MASTER_PORT=$2 nezha_bench "$NZ_OUT/$1.txt" $JOB_TMO -b "$SIZE" -e "$SIZE" \
		-n "$ITERS" -w 1 -W 1 -m bw --check
	local rc=$?
	awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $4 }' "$NZ_OUT/$1.txt" >"$NZ_OUT/$1.rate"
	return $rc
}

# rail_stat NAME: the sum of rail counter NAME over this guest's rails.
rail_stat() {
	cat /sys/class/nezha/rail-r*/stats/"$1" | awk '{ s += $1 } END { print s + 0 }'
}
# kmem: unreclaimable slab + vmalloc, in KiB (what the module allocates).
kmem() {
	awk '/^SUnreclaim:/ { s += $2 } /^VmallocUsed:/ { s += $2 } END { print s }' /proc/meminfo
}

# 2. The job alone.
job base 29800
rc=$?
barrier base-done 300 "$([ $rc = 0 ] && echo ok || echo fail)" || { not_ok "barrier base-done"; tap_done; exit 1; }
if [ "$NZ_ALL_OK" = 1 ]; then
	ok "the job alone: $ITERS x $SIZE intact"
else
	not_ok "the job alone: $ITERS x $SIZE intact"
fi

# 3. The job under each attack alone, then under all three at once.
pids=()
attacks_start() {	# attacks_start WHAT...: fuzz, squat, junk
	local a tag=$PHASE
	for a in "$@"; do
		case $a/$NZ_NODE in
		fuzz/1)	# the fuzzer as user nobody, one campaign after another
			( s=1; while :; do
				"${NOBODY[@]}" "$NZ_BIN/fuzz/nz_fuzz" -s "$s" -n 20000 \
					>>"$NZ_OUT/fuzz-$tag.log" 2>&1
				s=$((s + 1)); done ) &
			pids+=($!) ;;
		squat/0)	# once the job's id can be read (root: sysfs)
			( for _ in $(seq 600); do
				id=$(cat /sys/class/nezha/rail-r0/peer-*/job 2>/dev/null | head -n 1)
				[ -n "$id" ] && break
				sleep 0.5
			  done
			  echo "job id $id" >"$NZ_OUT/squat-$tag.log"
			  exec "${NOBODY[@]}" "$NZ_BIN/guest/nz_squat" r0 "$id" "$(rail_addr 0 0)" \
				"$(rail_addr 1 0)" 7470 $JOB_TMO >>"$NZ_OUT/squat-$tag.log" 2>&1 ) &
			pids+=($!) ;;
		hog/*)	# the control: as many processes spinning in user space
			# as the attacks run on this node (1 on nz1, 2 on nz0),
			# touching nothing of the module's
			for _ in $(seq $((NZ_NODE == 0 ? 2 : 1))); do
				"${NOBODY[@]}" sh -c 'while :; do :; done' &
				pids+=($!)
			done ;;
		junk/0)
			python3 "$(dirname "$0")/junk_conns.py" "$(rail_addr 1 0)" 7470 \
				--src "$STRANGER" --junk 1000 --silent 1000 --secs $JOB_TMO \
				>"$NZ_OUT/junk-$tag.log" 2>&1 &
			pids+=($!) ;;
		esac
	done
}
attacks_stop() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	pkill -x nz_fuzz	# the fuzz loop's current campaign
	# Not a bare wait: that would wait for the memory sampler too.
	[ ${#pids[@]} = 0 ] || wait "${pids[@]}" 2>/dev/null
	pids=()
}
[ "$NZ_NODE" = 1 ] && { ( while :; do kmem; sleep 0.5; done >"$NZ_OUT/kmem" ) & kmem_pid=$!; }
kmem0=$(kmem)
port=29801
for PHASE in hog fuzz squat junk all; do
	what=$PHASE
	[ $PHASE = all ] && what="fuzz squat junk"
	label="under attack ($what)"
	[ $PHASE = hog ] && label="beside the control (CPU hogs, no attack)"
	for c in errors handshakes_refused failovers false_suspects; do
		eval "before_$c=$(rail_stat $c)"
	done
	# shellcheck disable=SC2086  # words
	attacks_start $what
	sleep 3		# the attacks are under way before the job starts
	job "$PHASE" $port
	rc=$?
	port=$((port + 1))
	attacks_stop
	sleep 2
	barrier "$PHASE-done" 300 "$([ $rc = 0 ] && echo ok || echo fail)" ||
		{ not_ok "barrier $PHASE-done"; tap_done; exit 1; }
	if [ "$NZ_ALL_OK" = 1 ]; then
		ok "$label: $ITERS x $SIZE intact"
	else
		not_ok "$label: $ITERS x $SIZE intact"
	fi
	line=
	for c in errors handshakes_refused failovers false_suspects; do
		eval "d=\$(( \$(rail_stat $c) - before_$c ))"
		line="$line $c +$d"
	done
	say "node $NZ_NODE, rails during '$what':$line"
	if [ "$NZ_NODE" = 0 ]; then
		sed 's/^/# /' "$NZ_OUT/junk-$PHASE.log" "$NZ_OUT/squat-$PHASE.log" 2>/dev/null
		base=$(cat "$NZ_OUT/base.rate") att=$(cat "$NZ_OUT/$PHASE.rate")
		r=$(awk -v a="$att" -v b="$base" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b }')
		say "throughput (MB/s, rank 0): alone $base, under '$what' $att, ratio ${r:-?}"
		eval "ratio_$PHASE=${r:-0}"
	fi
done
[ "$NZ_NODE" = 1 ] && kill "$kmem_pid" 2>/dev/null

if [ "$NZ_NODE" = 1 ]; then
	# The fuzzer's own end-of-campaign check ("every file ... released")
	# counts the module's files and peers, the job's included: not its
	# business here.  What is left is checked below, once all are gone.
	say "fuzzer: $(grep -h '^ok.*inputs:' "$NZ_OUT"/fuzz-*.log | sed 's/^ok [0-9]* - //' | tr '\n' ';')"
	check "the fuzzer (uid 65534) found nothing unexpected" \
		sh -c "! grep -h '^not ok' '$NZ_OUT'/fuzz-*.log | grep -v 'released within'"
	peak=$(sort -n "$NZ_OUT/kmem" | tail -n 1)
	sleep 3
	kmem1=$(kmem)
	say "module memory (SUnreclaim + VmallocUsed): before $kmem0 KiB, peak $peak KiB (+$((peak - kmem0))), after $kmem1 KiB (+$((kmem1 - kmem0)))"
	check "memory bounded: peak within 128 MiB of the start (+$((peak - kmem0)) KiB)" \
		test $((peak - kmem0)) -lt 131072
	check "memory back within 8 MiB once the attacks stop (+$((kmem1 - kmem0)) KiB)" \
		test $((kmem1 - kmem0)) -lt 8192
else
	check "the squatter ran (uid 65534)" grep -q '^squat:' "$NZ_OUT/squat-all.log"
	say "throughput under attack / alone: fuzz $ratio_fuzz, squat $ratio_squat, junk $ratio_junk, all three $ratio_all"
	say "the control, the same number of processes spinning in user space: $ratio_hog;" \
		"all three / the control: $(awk -v a="$ratio_all" -v h="$ratio_hog" 'BEGIN { if (h > 0) printf "%.3f", a / h; else print "?" }')"
	if awk -v r="$ratio_all" 'BEGIN { exit !(r >= 0.9) }'; then
		ok "target: under all three the job keeps >= 0.9x its throughput ($ratio_all)"
	else
		not_ok "target: under all three the job keeps >= 0.9x its throughput ($ratio_all)"
	fi
	show_run ip addr del "$STRANGER/24" dev "${nz_ifs[0]}"
fi
barrier checked 300 || true
check "no communicator left" test "$(cat /sys/class/nezha/nezha/comms)" = 0
check "no file of /dev/nezha open" test "$(cat /sys/class/nezha/nezha/open_files)" = 0
for ((r = 0; r < NZ_RAILS; r++)); do
	check "rail del r$r" "$CTL" rail del "r$r"
done
check "rmmod" nz_unload
tap_done
