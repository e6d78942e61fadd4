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

nz_load_tcp_rails
export MASTER_ADDR=10.77.0.1 RANK=$NZ_NODE WORLD_SIZE=$NZ_NODES
export NEZHA_TIMEOUT_MS=60000
MASTER_PORT=29500 run_tap p2p "$NZ_BIN/guest/nz_p2p"
"$CTL" rail show | sed 's/^/# /'
# After every kind of failed transfer -- a send that timed out, a receive
# posted after its send gave up, a receive that gave up before its message,
# every rail down for 4 s under a stream, a send from a registered buffer
# cut off by an outage (and that buffer unregistered at its CQE: nothing of
# it may be sent after) -- 2000 messages each way on the same communicator
# arrive intact, no rail failing over meanwhile.  Before
# the ABORT and REFUSE frames (wire version 2), a failed send left its
# receiver's window stuck, or its paths held for good by a message nobody
# would receive.
NZCTL=$CTL MASTER_PORT=30100 run_tap recover "$NZ_BIN/guest/nz_p2p" recover
# Its outages are children of nz_p2p that lift themselves.  When recover
# fails early (seen on the debug kernel) one may still hold the rails at
# 100 % loss, and every step after this one failed its rendezvous: end it
# and clear the rails' root qdiscs (recover leaves none when it passes).
pkill -x nz_p2p 2>/dev/null
for ifc in $NZ_IFS; do tc qdisc del dev "$ifc" root 2>/dev/null; done
# Short jobs: the ACK owed by a rank that leaves at once reaches the
# sender; a quick peer that already left counts as connected.
MASTER_PORT=29600 run_tap leave "$NZ_BIN/guest/nz_p2p" leave 100 1

# Late ACKs: the receiver's first rail loses everything it sends for 100
# ms in every 300 (netem, 100 % loss switched on and off), so the sender
# suspects that path and moves its unacknowledged chunks to the other
# rail, and the ACKs of the first copies come back afterwards on that
# rail, when TCP resends them.  They prove the bytes arrived and must be
# taken (stats/acks_late).  When they were dropped as stale, a receiver
# that had everything and left at once (the resent copies unanswered)
# failed the send with ECONNRESET.  Not a plug qdisc any more: frames
# held in the receiver's queue are, since its queue reports (NZ_HB_LATE,
# health.rst "Queues are not silence"), allowed for and not suspected (the
# plug gave 2 late ACKs in one CI run and 0 in the next, 13-104 before).
# The sender's second rail runs at 40 Mbit/s, so the moved copies are still
# on their way when the late ACKs come: unshaped, that rail often resent
# and had them answered first, and no ACK came late at all (1 CI run in 8).
# That premise is one of timing.  On a kernel
# NZ_TIME_SCALE times slower (make check-debug; suspicion after 320 ms at
# 20x) it does not hold: with 100 ms windows no suspicion (acks_late 11 ->
# 11, 2026-12-07), with windows scaled to 500 ms paths were suspected and
# their copies moved (2-3 chunks each time) but answered on r1 before the
# windows ended, and some connections timed out (-110) (1 -> 1, the same
# day).  There the job still runs and must complete; the count is
# reported, not held to.
late_acks() { cat /sys/class/nezha/rail-*/stats/acks_late | awk '{ s += $1 } END { print s + 0 }'; }
ifc0=${NZ_IFS%% *}
ifc1=$(echo $NZ_IFS | cut -d' ' -f2)
toggler=
ts=${NZ_TIME_SCALE:-1}; ts=${ts%%.*}
if [ "$NZ_NODE" = 0 ]; then
	if tc qdisc add dev "$ifc0" root netem loss 0%; then
		ok "late ACKs: rail0's sends lost 100 ms in every 300 (netem)"
		(while :; do
			tc qdisc change dev "$ifc0" root netem loss 100%
			sleep 0.1
			tc qdisc change dev "$ifc0" root netem loss 0%
			sleep 0.2
		done) &
		toggler=$!
	else
		not_ok "late ACKs: rail0's sends lost 100 ms in every 300 (netem)" "no sch_netem"
	fi
else
	tc qdisc replace dev "$ifc1" root tbf rate 40mbit burst 20kb latency 400ms
fi
la0=$(late_acks)
MASTER_PORT=29900 run_tap leave-late-acks "$NZ_BIN/guest/nz_p2p" leave 30 16777216
la1=$(late_acks)
[ -z "$toggler" ] || { kill "$toggler"; wait "$toggler" 2>/dev/null; }
if [ "$NZ_NODE" = 0 ]; then
	tc qdisc del dev "$ifc0" root 2>/dev/null
else
	tc qdisc del dev "$ifc1" root 2>/dev/null
	if [ "$ts" -gt 1 ]; then
		skip "late ACKs on a stalled path taken" \
			"timing premise not met on a kernel $ts times slower (acks_late $la0 -> $la1)"
	elif [ $((la1 - la0)) -gt 0 ]; then
		ok "late ACKs on a stalled path taken ($((la1 - la0)))"
	else
		not_ok "late ACKs on a stalled path taken" "acks_late did not move ($la0 -> $la1): the stalls caused no suspicion, or every resent copy was answered first"
	fi
fi

# A receiver that leaves over lossy rails (8% loss, 2 ms, its sends only):
# its socket lingers -- writing shut, still reading -- until its CLOSE and
# last ACKs are acknowledged.  Closed at once, the bytes the sender still
# sent (resent chunks) drew a reset that threw away the CLOSE and ACKs
# waiting for retransmission: "Connection reset by peer" by round 8.
if [ "$NZ_NODE" = 0 ]; then
	for ifc in $NZ_IFS; do tc qdisc replace dev "$ifc" root netem loss 8% delay 2ms; done
fi
MASTER_PORT=29950 run_tap leave-lossy "$NZ_BIN/guest/nz_p2p" leave 40 2097152
[ "$NZ_NODE" != 0 ] || for ifc in $NZ_IFS; do tc qdisc del dev "$ifc" root 2>/dev/null; done

# ACKs lost with a path that goes down as the receiver leaves (nz_p2p.c,
# "unacked"): guest 1, the receiver, holds every frame it sends for 1 s
# (netem); guest 0 sets r1 down while the receiver's ACKs are held, 400 ms
# after sending.  The receiver's DONE (wire version 4), ahead of its CLOSE
# on r0, completes the sends; before, those that went on r1 failed, as in
# the churn suite on the debug kernel.
if [ "$NZ_NODE" = 1 ]; then
	for ifc in $NZ_IFS; do
		check "$ifc of guest 1: every frame held 1 s (netem)" \
			tc qdisc replace dev "$ifc" root netem delay 1000ms limit 100000
	done
fi
# 8 jobs: the test needs slot 1 to carry chunks in one of them at least,
# and the scheduler puts a job's 16 empty sends all on r0 about half the
# time (the first job every time in 7 runs, 2026-12-05): with 4 jobs a
# clean-clone make check failed on it.
NZCTL=$CTL MASTER_PORT=30400 run_tap unacked "$NZ_BIN/guest/nz_p2p" unacked 8
[ "$NZ_NODE" != 1 ] || for ifc in $NZ_IFS; do tc qdisc del dev "$ifc" root 2>/dev/null; done

# The job key (Documentation/security.rst, "The rendezvous"): vm.sh hands
# every guest the run's key in NEZHA_JOB_KEY_FILE, and every job above
# used it.  Without a key there is no job; a rank with another key is
# refused by rank 0, which times out saying why; NEZHA_INSECURE=1 is the
# explicit way to join without one.
check "the run's job key: a file only its owner reads (nezhactl key check)" \
	"$CTL" key check "${NEZHA_JOB_KEY_FILE:-unset}"
# Both guests start these jobs together (meet), whatever the tests before took.
keyjob() {	# keyjob NAME PORT TIMEOUT_MS [env ARGS...]: a 1-second job of this guest's rank
	local name=$1 port=$2 tmo=$3
	shift 3
	env "$@" MASTER_PORT="$port" NEZHA_TIMEOUT_MS="$tmo" "$NZ_BIN/guest/nz_p2p" drill 1 \
		>"$NZ_OUT/$name.log" 2>&1
}
keyjob nokey 29810 4000 -u NEZHA_JOB_KEY_FILE
rc=$?
check "no key: the job stops at once, naming NEZHA_JOB_KEY" \
	sh -c "[ $rc != 0 ] && grep -q 'job key: none.*NEZHA_JOB_KEY' $NZ_OUT/nokey.log"
meet otherkey || echo "# the other guest did not come within 2 minutes"
if [ "$NZ_NODE" = 1 ]; then
	rm -f "$NZ_OUT/other.key"
	"$CTL" key generate "$NZ_OUT/other.key" >/dev/null
	keyjob otherkey 29811 4000 NEZHA_JOB_KEY_FILE="$NZ_OUT/other.key"
	rc=$?
	check "rank 1 with another key is refused (EKEYREJECTED)" \
		sh -c "[ $rc != 0 ] && grep -q 'does not hold this job.s key' $NZ_OUT/otherkey.log"
else
	keyjob otherkey 29811 4000
	rc=$?
	check "rank 0 does not take rank 1 under another key, and says so" \
		sh -c "[ $rc != 0 ] && grep -q 'under another key' $NZ_OUT/otherkey.log"
fi
sed 's/^/# /' "$NZ_OUT/otherkey.log"
meet insecure || echo "# the other guest did not come within 2 minutes"
keyjob insecure 29812 60000 -u NEZHA_JOB_KEY_FILE NEZHA_INSECURE=1
rc=$?
check "NEZHA_INSECURE=1: a job without a key forms, with a warning" \
	sh -c "[ $rc = 0 ] && grep -q 'warning: NEZHA_INSECURE=1' $NZ_OUT/insecure.log"

# A receive kept 8 s past its deadline (timeout 4 s) by other traffic with
# its peer: the module names it once in its log, and it still completes
# when the message comes (nz_p2p overdue).  Before this line existed, such
# a wait (16 ranks on 8 guests, make check-scale) showed nowhere.
meet overdue || echo "# the other guest did not come within 2 minutes"
said=$(dmesg | grep -c 'past its deadline by a whole timeout')
MASTER_PORT=29813 NEZHA_OP_TIMEOUT_MS=4000 "$NZ_BIN/guest/nz_p2p" overdue 12 >"$NZ_OUT/overdue.log" 2>&1
rc=$?
sed 's/^/# /' "$NZ_OUT/overdue.log"
check "a transfer kept past its deadline by other traffic completes" [ $rc = 0 ]
if [ "$NZ_NODE" = 1 ]; then
	line=$(dmesg | grep 'past its deadline by a whole timeout' | tail -n +$((said + 1)))
	[ -n "$line" ] && echo "# ${line#*] }" | cut -c1-300
	check "... and the module's log says it was overdue, once" [ "$(grep -c . <<<"$line")" = 1 ]
fi

# The chunk unit comes from the slowest link of the job's rails: NICs that
# say 40 Mbit/s (virtio-net takes a speed from ethtool) give 32 KiB chunks,
# as 40 Mbit/s carries 40 KB in 8 ms.  Each rank reads the unit its module
# uses and the speed its rails report while a job runs.  Then 10 Gbit/s:
# 64 KiB again, as before this test and for the tests after it.
unit_job() {	# unit_job PORT: "UNIT SPEED0 SPEED1" of a short job, or ""
	local rd="cat /sys/class/nezha/rail-r0/peer-*/chunk_unit /sys/class/nezha/rail-r0/speed_mbps /sys/class/nezha/rail-r1/speed_mbps > $NZ_OUT/unit"
	rm -f "$NZ_OUT/unit"
	MASTER_PORT=$1 "$NZ_BIN/guest/nz_p2p" drill 1 "0.5:$rd" > "$NZ_OUT/unit.log" 2>&1 &&
		tr '\n' ' ' < "$NZ_OUT/unit" | sed 's/ $//'
}
for ifc in $NZ_IFS; do ethtool -s "$ifc" speed 40 duplex full; done
got=$(unit_job 29700)
check "NICs at 40 Mbit/s: the job cuts 32 KiB chunks (unit, speeds: ${got:-none})" \
	test "$got" = "32768 40 40"
check "nezhactl rail show r0 gives the speed" \
	sh -c "$CTL rail show r0 | grep -q 'state up conns [0-9]* speed 40 Mbit/s\$'"
for ifc in $NZ_IFS; do ethtool -s "$ifc" speed 10000 duplex full; done
got=$(unit_job 29701)
check "NICs at 10 Gbit/s: the job cuts 64 KiB chunks (unit, speeds: ${got:-none})" \
	test "$got" = "65536 10000 10000"

# A hostile client against this guest's own rail r0 (each guest alone).
# 1000 silent strangers come from a second address of this guest's rail0.
modprobe -q algif_hash 2>/dev/null
STRANGER=${ADDR0%.*}.$((100 + NZ_NODE))
ip addr add "$STRANGER/24" dev "${NZ_IFS%% *}"
run_tap hostile "$NZ_BIN/guest/nz_hostile" r0 "$ADDR0" 7470 -x 1000 -S "$STRANGER"
ip addr del "$STRANGER/24" dev "${NZ_IFS%% *}"

# The scheduler (sched.c), with rail1 20 ms slower each way on both guests.
SCHED=/sys/module/nezha/parameters/sched_mode
IF1=$(echo "$NZ_IFS" | cut -d' ' -f2)
check "sched_mode is measured by default" test "$(cat $SCHED)" = measured
check_fails "sched_mode refuses an unknown mode" sh -c "echo bogus > $SCHED"
check "rail1 delayed by 20 ms (netem)" tc qdisc replace dev "$IF1" root netem delay 20ms
# These tests count where the scheduler put each chunk.  The unshaped rails
# keep these single-vCPU emulated guests CPU bound: a sender saw a healthy
# path without one TCP ACK for 16-36 ms, up to 600 segments in flight, many
# times a minute -- at the 16 ms default the path is then suspect and its
# chunks move, which would skew the counts.  Detection is the failover
# suite's business; here a path is suspect after 100 ms.
check "health set misses 25 for the scheduler tests" "$CTL" health set misses 25
burst() {	# burst NAME PORT SIZE COUNT [pieces]: one message at a time, or all at once
	MASTER_PORT=$2 "$NZ_BIN/guest/nz_p2p" "${5:-burst}" "$3" "$4" > "$NZ_OUT/$1.log" 2>&1
	local rc=$?
	sed 's/^/# /' "$NZ_OUT/$1.log"
	[ $rc = 0 ] || net_diag >&"$NZ_TAP_OUT"
	return $rc
}
chunks() { rail_stat "$1" chunks_tx; }
est() {		# est NAME RAIL FIELD: a value of rank 0's est lines
	awk -v r="$2" -v f="$3" '$1 == "est" && $2 == r {
		for (i = 3; i <= NF; i++) { split($i, a, "="); if (a[1] == f) print a[2] } }' "$NZ_OUT/$1.log"
}
a0=$(chunks r0); a1=$(chunks r1)
check "sched: 400 messages of 4 KiB intact" burst small 29510 4096 400
d0=$(($(chunks r0) - a0)); d1=$(($(chunks r1) - a1))
if [ "$NZ_NODE" = 0 ]; then
	if [ $d0 -ge 380 ] && [ $d1 -le 20 ]; then
		ok "sched: small messages go on the rail that starts fastest (r0 $d0, r1 $d1 chunks)"
	else
		not_ok "sched: small messages go on the rail that starts fastest" "r0 $d0, r1 $d1 chunks"
	fi
	m0=$(est small r0 min_rtt_us); m1=$(est small r1 min_rtt_us)
	if [ -n "$m0" ] && [ -n "$m1" ] && [ "$m1" -ge 20000 ] && [ "$m0" -lt "$m1" ]; then
		ok "sched: heartbeat round trips measured (r0 $m0 us, r1 $m1 us)"
	else
		not_ok "sched: heartbeat round trips measured" "r0 ${m0:-?} us, r1 ${m1:-?} us"
	fi
fi
a0=$(chunks r0); a1=$(chunks r1)
check "sched: 4 messages of 16 MiB intact" burst large 29511 16777216 4
d0=$(($(chunks r0) - a0)); d1=$(($(chunks r1) - a1))
if [ "$NZ_NODE" = 0 ]; then
	b0=$(est large r0 est_bw); s0=$(est large r0 sched_state)
	if [ $d0 -gt 0 ] && [ $d1 -gt 0 ] && [ "${b0:-0}" -gt 0 ] && [ "$s0" = hot ]; then
		ok "sched: 16 MiB striped over both (r0 $d0, r1 $d1 chunks), r0 hot at $b0 B/s"
	else
		not_ok "sched: 16 MiB striped, r0 measured" "r0 $d0, r1 $d1 chunks; r0 ${s0:-?} ${b0:-?} B/s"
	fi
fi
check "sched_mode=equal accepted" sh -c "echo equal > $SCHED"
resent() { rail_stat "$1" chunks_resent; }
a0=$(chunks r0); a1=$(chunks r1); e0=$(resent r0); e1=$(resent r1)
check "sched: equal split, 2 messages of 16 MiB intact" burst equal 29512 16777216 2
d0=$(($(chunks r0) - a0)); d1=$(($(chunks r1) - a1))
e0=$(($(resent r0) - e0)); e1=$(($(resent r1) - e1))
if [ "$NZ_NODE" = 0 ]; then
	# A chunk taken off a rail that went silent is sent again on the
	# other one; count each chunk on the rail the split gave it to.
	f0=$((d0 - e1)); f1=$((d1 - e0))
	diff=$((f0 > f1 ? f0 - f1 : f1 - f0))
	what="r0 $d0, r1 $d1 chunks sent; r0 $e0, r1 $e1 taken off again"
	if [ $((f0 + f1)) -ge 512 ] && [ $diff -le 2 ]; then
		ok "sched: equal split halves each message ($what)"
	else
		not_ok "sched: equal split halves each message" "$what"
	fi
	[ $((e0 + e1)) -eq 0 ] || dmesg | grep "rerouted" | tail -n 5 | sed 's/^/# /'
fi
check "sched_mode=measured restored" sh -c "echo measured > $SCHED && test \"\$(cat $SCHED)\" = measured"
TR=/sys/kernel/tracing
[ -d $TR/events ] || mount -t tracefs nodev $TR 2>/dev/null
if [ -e $TR/events/nezha/nezha_sched_state/enable ]; then
	echo 1 > $TR/events/nezha/nezha_sched_state/enable
	: > $TR/trace
	check "sched: 4 messages of 1 MiB traced" burst trace 29513 1048576 4
	echo 0 > $TR/events/nezha/nezha_sched_state/enable
	if [ "$NZ_NODE" = 0 ]; then
		check "sched: the tracepoint shows a connection turning hot" grep -q "probe->hot" $TR/trace
	fi
else
	skip "sched tracepoint" "no tracefs in this guest"
fi
tc qdisc del dev "$IF1" root 2>/dev/null

# Pieces sent at once on two equal 40 Mbit/s rails, on a fresh communicator
# (nothing measured yet): split between the rails, not all taken by the
# connection that happens to pull first (14/2, 16/0 chunks before).  Rank 0
# also sends one chunk of the communicator's set-up agreement
# (aggregation.rst, "The rail"): 17 in all.
for ifc in $NZ_IFS; do
	tc qdisc replace dev "$ifc" root tbf rate 40mbit burst 20kb latency 20ms
done
a0=$(chunks r0); a1=$(chunks r1)
check "sched: 16 pieces of 16 KiB at once intact" burst pieces 29516 16384 16 pieces
d0=$(($(chunks r0) - a0)); d1=$(($(chunks r1) - a1))
if [ "$NZ_NODE" = 0 ]; then
	if [ $((d0 + d1)) -eq 17 ] && [ $d0 -ge 4 ] && [ $d1 -ge 4 ]; then
		ok "sched: unmeasured equal rails share the pieces (r0 $d0, r1 $d1 of 16 + 1)"
	else
		not_ok "sched: unmeasured equal rails share the pieces" "r0 $d0, r1 $d1 of 16 + 1"
	fi
fi

# Both directions at once on the same two equal rails: a ring allreduce
# of 16 MiB sends and receives on both.  Each rank's own sends must use
# both rails (at least 40 % each; 50/50 measured): when the window counted
# chunks awaiting ACK frames, which come back behind the other direction's
# data, one rail's estimate collapsed and the split went 67/33 or worse.
b0=$(rail_stat r0 bytes_tx); b1=$(rail_stat r1 bytes_tx)
check "sched: 16 MiB ring allreduces both ways, results checked" \
	env MASTER_PORT=29517 "$NZ_BIN/tools/nezha-bench" allreduce -b 16M -e 16M -n 2 -w 1 \
	--place out -c 1 -T 120
# The 40 % floor holds where the two 40 Mbit/s rails are the limit.  On a
# kernel NZ_TIME_SCALE times slower (make check-debug) the kernel's own
# cost may be, and the measured scheduler follows what each rail's
# connection drains, which can then differ by more than the floor allows
# (39 % there, 2026-12-07): the split is reported, not held to it.
b0=$(($(rail_stat r0 bytes_tx) - b0)); b1=$(($(rail_stat r1 bytes_tx) - b1))
if [ "$ts" -gt 1 ]; then
	skip "sched: both directions busy, this rank's sends use both rails" \
		"rails not the limit on a kernel $ts times slower (r0 $b0, r1 $b1 bytes)"
elif [ $((b0 + b1)) -gt 0 ] && [ $((5 * b0)) -ge $((2 * (b0 + b1))) ] &&
	[ $((5 * b1)) -ge $((2 * (b0 + b1))) ]; then
	ok "sched: both directions busy, this rank's sends use both rails (r0 $b0, r1 $b1 bytes)"
else
	not_ok "sched: both directions busy, this rank's sends use both rails" "r0 $b0, r1 $b1 bytes"
fi
for ifc in $NZ_IFS; do
	tc qdisc del dev "$ifc" root 2>/dev/null
done
# The static split (sched_mode=equal): messages that are not whole chunks
# per rail still go out whole.  With the shares rounded down a 0- or 1-byte
# message was a finished share on both rails before it began, and the
# last byte of 2 chunks + 1 byte on two rails was nobody's: those sends
# never went out and timed out (8 guests, 2026-12-07: "send of 0 bytes,
# not all assigned").  A short operation timeout makes a stuck send fail
# here in 20 s.
SMODE=/sys/module/nezha/parameters/sched_mode
check "sched_mode=equal accepted" sh -c "echo equal > $SMODE"
port=29540
for sz in 0 1 131073; do	# the last: 2 chunks of 64 KiB (the default unit) + 1
	NEZHA_OP_TIMEOUT_MS=20000 check "sched_mode=equal: 4 messages of $sz bytes intact" \
		burst "equal$sz" $port "$sz" 4
	port=$((port + 1))
done
check "sched_mode back to measured" sh -c "echo measured > $SMODE"
check "health set misses 4 (the default) again" "$CTL" health set misses 4

# Rail sockets' congestion control (tcp_cc, new connections): what ss shows
# on the rails' connections during a transfer; an unknown one is a log line
# and the default, never a failed transfer.
TCPCC=/sys/module/nezha/parameters/tcp_cc
cc_seen() {	# cc_seen NAME PID: a rail connection using NAME while job PID runs
	local n=0 polls=0 t0=$SECONDS
	while kill -0 "$2" 2>/dev/null && [ $((SECONDS - t0)) -lt 60 ]; do
		ss -tinH state established '( sport = :7470 or dport = :7470 )' \
			> "$NZ_OUT/ss.txt" 2>&1
		polls=$((polls + 1))
		grep -qw "$1" "$NZ_OUT/ss.txt" && return 0
		grep -q . "$NZ_OUT/ss.txt" && n=$((n + 1))
		sleep 0.1
	done
	# Not seen: how many polls in how long saw rail connections, what
	# the last one showed, and every rail socket's state now.
	{
		echo "# $polls polls in $((SECONDS - t0)) s, $n saw rail connections; the last one:"
		sed 's/^/#   /' "$NZ_OUT/ss.txt"
		ss -tanH '( sport = :7470 or dport = :7470 )' | sed 's/^/#   now: /'
		net_diag
	} >&"$NZ_TAP_OUT"
	return 1
}
# Each guest starts each of these jobs together, whatever the tests before
# took: a guest a whole rendezvous timeout behind would fail every job
# after.  Three CI runs failed here, each without a log that showed why:
# 2026-12-03 (rendezvous time-outs in tcp_cc, tcp_cc=bogus and the
# killed-peer test), 2026-12-05 (none of 100 polls of ss saw a rail
# connection while 128 MiB went unshaped, in well under a second) and
# 2026-12-07 (no reno seen by guest 1, which then came to the tcp_cc=bogus
# job after guest 0's 60 s rendezvous had given up; guest 0 had 5 rail
# sockets in LAST-ACK by then).  So: the job runs at 40 Mbit/s per rail
# for about 7 s, ss is polled for as long as it runs and no longer, a
# failed poll says how many polls it made, in how long, and the state of
# every rail socket, a job that outlives the polls by 10 s says so, and
# the guests meet again before the next job.
meet tcpcc || echo "# the other guest did not come within 2 minutes"
check "tcp_cc=reno accepted" sh -c "echo reno > $TCPCC"
for ifc in $NZ_IFS; do
	tc qdisc replace dev "$ifc" root tbf rate 40mbit burst 20kb latency 400ms
done
burst cc 29514 4194304 16 & bp=$!
check "tcp_cc: the rails' connections use reno" cc_seen reno $bp
t=$SECONDS
wait $bp
rc=$?
[ $((SECONDS - t)) -ge 10 ] && echo "# tcp_cc: the job ended $((SECONDS - t)) s after the polls"
check "tcp_cc=reno: 16 messages of 4 MiB intact" test $rc = 0
for ifc in $NZ_IFS; do
	tc qdisc del dev "$ifc" root 2>/dev/null
done
check "tcp_cc=bogus accepted (checked per connection)" sh -c "echo bogus > $TCPCC"
meet tcpcc-bogus || echo "# the other guest did not come within 2 minutes"
check "tcp_cc=bogus: 4 messages of 1 MiB intact" burst ccbad 29515 1048576 4
check "tcp_cc=bogus: a log line says the default stays" sh -c \
	"dmesg | grep -q 'congestion control bogus: error'"
check "tcp_cc back to the default" sh -c "echo > $TCPCC"

# Rank 0's process dies mid-stream: rank 1 gets an error, not a hang.
meet stream || echo "# the other guest did not come within 2 minutes"
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
		net_diag
	fi
fi
# A rank whose node dies and which comes back with the job it had (same
# job id and secret): before wire version 3 its peer took the new instance
# for the old one reconnecting, and drained and acknowledged its messages
# as repeats of old ones -- the restarted rank's send completed, delivered
# nowhere, and rank 0's receive timed out.  Now the handshake names each
# communicator's instance: rank 0 refuses the new one and fails what it
# had with the old one (ECONNRESET).  Rank 1's "crash": its old rail
# connections go silent (every segment they send is dropped, by source
# port: a u32 filter) and its process is killed, so nothing of the old
# instance -- no CLOSE, no FIN -- reaches rank 0 again, as when a node
# dies; the new instance's connections (new ports) pass.
meet restart || echo "# the other guest did not come within 2 minutes"
if [ "$NZ_NODE" = 0 ]; then
	rm -f "$NZ_RUN/restart.go"
	said=$(dmesg | grep -c 'restarted: another instance')
	run_tap restart "$NZ_BIN/guest/nz_restart" serve 20 "$NZ_RUN/restart.go"
	line=$(dmesg | grep 'restarted: another instance' | tail -n +$((said + 1)) | head -n 1)
	[ -n "$line" ] && echo "# ${line#*] }"
	check "restart: the module's log names the restarted rank" test -n "$line"
else
	"$NZ_BIN/guest/nz_restart" send 20 > "$NZ_OUT/restart1.log" 2>&1 &
	rp=$!
	for i in $(seq 600); do grep -q '^sent' "$NZ_OUT/restart1.log" && break; sleep 0.1; done
	sed 's/^/# /' "$NZ_OUT/restart1.log"
	check "restart: rank 1 sent its 20 messages" grep -q '^ok .*sent 20 of 20' "$NZ_OUT/restart1.log"
	ports=$(ss -tnH state established '( dport = :7470 )' | awk '{ n = split($3, a, ":"); print a[n] }')
	echo "# the old instance's connections leave from ports" $ports
	for ifc in $NZ_IFS; do
		tc qdisc replace dev "$ifc" root handle 1: prio
		for port in $ports; do
			tc filter add dev "$ifc" parent 1: protocol ip prio 1 u32 \
				match ip sport "$port" 0xffff action drop
		done
	done
	kill -9 $rp
	wait $rp 2>/dev/null
	sleep 1
	touch "$NZ_RUN/restart.go"
	run_tap restart "$NZ_BIN/guest/nz_restart" again
	for ifc in $NZ_IFS; do tc qdisc del dev "$ifc" root; done
fi
check "no transfer left in flight" test "$(cat /sys/class/nezha/nezha/inflight)" = 0
check "no connection counted once the jobs are gone" \
	sh -c 'for r in /sys/class/nezha/rail-*; do [ "$(cat $r/stats/conns)" = 0 ] || exit 1; done'
check "rmmod after traffic" nz_unload
tap_done
