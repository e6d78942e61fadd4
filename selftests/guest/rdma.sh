#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite (2 guests, 2 rails): RDMA rails over Soft-RoCE, alone and next
# to a TCP rail, every byte checked; a hostile RDMA peer; the RDMA device
# deleted under a transfer; module unload.  Needs rdma_rxe, rdma_cm,
# ib_uverbs and rdma_ucm (the hostile peer is a user-space verbs program).
#
#   guest 0 (rank 0)                                 guest 1 (rank 1)
#   rail0 10.77.0.1 ====== rail0 bridge ======= 10.77.0.2 rail0   TCP rail t0
#   rail1 10.77.1.1 ====== rail1 bridge ======= 10.77.1.2 rail1
#     rxe0 (rdma_rxe)                                 rxe0         RDMA rail rd
#
#  1. module set-up: an RDMA rail needs nezha_rdma; dev / netdev /
#     ib-port / gid-index; nezha_rdma cannot go while a rail uses it;
#  2. RDMA alone: sizes 0 B .. 64 MiB, 64 messages in flight, random sizes;
#  3. TCP + RDMA: the same, and one message split over both rails;
#  4. a hostile peer (guest 1, user-space verbs) against guest 0's rail:
#     bad private data rejected by the CM, a HELLO without the secret
#     refused, everything counted; the QPs are nezha_rdma's;
#  5. guest 0 deletes rxe0 under a 64 MiB message: it arrives intact over
#     TCP; rxe0 comes back, and so does the rail;
#  6. rails deleted, no RDMA resource left, rmmod nezha_rdma, rmmod nezha.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench_lib.sh"
CTL=$NZ_BIN/tools/nezhactl
NZ_RDMA_KO=${NZ_RDMA_KO:-$NZ_TOP/nezha_rdma.ko}
ME=$NZ_NODE
OTHER=$((1 - NZ_NODE))
RD_ADDR0=10.77.1.1
HOLD=$NZ_RUN/rdma-hold

if [ "${NZ_NODES:-0}" != 2 ] || [ "${NZ_RAILS:-0}" -lt 2 ]; then
	skip "rdma suite" "needs 2 guests and 2 rails (vm.sh -n 2 -r 2)"
	tap_done
	exit
fi
if ! modprobe -a rdma_rxe rdma_cm ib_uverbs rdma_ucm 2>/dev/null; then
	skip "rdma suite" "no Soft-RoCE (rdma_rxe) in this kernel"
	tap_done
	exit
fi
# Retried: right after rdma_rxe loads, rdma link add can fail once.
for try in 1 2 3 4 5; do
	rdma link add rxe0 type rxe netdev rail1 && break
	[ $try = 5 ] && { not_ok "rdma link add rxe0 on rail1"; tap_done; exit 1; }
	sleep 1
done
rdma_qps() {	# rdma_qps: QPs of nezha_rdma in `rdma resource show`
	rdma resource show qp | grep -c 'comm \[nezha_rdma\]'
}
export MASTER_ADDR=10.77.0.1 RANK=$NZ_NODE WORLD_SIZE=$NZ_NODES
export NEZHA_TIMEOUT_MS=120000

# 1. Modules and rails.
check "insmod nezha" nz_load
if out=$("$CTL" rail add rd proto rdma dev rxe0 2>&1); then
	not_ok "an RDMA rail needs nezha_rdma" "rail add succeeded"
elif [[ $out == *"load nezha_rdma"* ]]; then
	ok "an RDMA rail needs nezha_rdma (says so)"
else
	not_ok "an RDMA rail needs nezha_rdma (says so)" "$out"
fi
check "insmod nezha_rdma" insmod "$NZ_RDMA_KO"
check "features: RDMA" sh -c \
	'[ $(( $(cat /sys/class/nezha/nezha/features) & 0x20 )) != 0 ]'
check_fails "rail add: no such RDMA device" \
	"$CTL" rail add bad proto rdma dev nosuchdev0
check_fails "rail add: no such port" \
	"$CTL" rail add bad proto rdma dev rxe0 ib-port 2
check_fails "rail add: a netdev without an RDMA device" \
	"$CTL" rail add bad proto rdma netdev rail0
check_fails "rail add: ib-port on a TCP rail" \
	"$CTL" rail add bad proto tcp dev rail0 ib-port 1
out=$("$CTL" rail add bad proto rdma dev rxe0 frame-mac on 2>&1)
rc=$?
if [ $rc != 0 ] && [[ $out == *"no per-frame MAC on this protocol"* ]]; then
	ok "rail add: no per-frame MAC on an RDMA rail (says so)"
else
	not_ok "rail add: no per-frame MAC on an RDMA rail (says so)" "exit $rc: $out"
fi
check "rail add by netdev: finds rxe0" sh -c \
	"$CTL rail add rn proto rdma netdev rail1 port 7471 &&
	 [ \$(cat /sys/class/nezha/rail-rn/rdma/device) = rxe0 ] &&
	 $CTL rail del rn"
check "rail add with gid-index 1: its IPv4 address" sh -c \
	"$CTL rail add rg proto rdma dev rxe0 gid-index 1 port 7472 &&
	 $CTL rail show rg | grep -q 'gid-index 1 netdev rail1 10.77.1.$((ME + 1)):7472' &&
	 $CTL rail del rg"
check "rail add rd (RDMA, rxe0)" "$CTL" rail add rd proto rdma dev rxe0
check_fails "rmmod nezha_rdma refused while rail rd uses it" rmmod nezha_rdma
# Health timers relaxed for TCG guests on a busy host, if the module has
# them: a communicator may take seconds to connect here.
"$CTL" health set interval 100 misses 30 grace 60000 >/dev/null 2>&1
"$CTL" rail show | comment
barrier rails-rd 120 || { not_ok "barrier rails-rd"; tap_done; exit 1; }

# 2. RDMA alone.
MASTER_PORT=29500 run_tap rdma-only "$NZ_BIN/guest/nz_rdma" data
grep -H . /sys/class/nezha/rail-rd/rdma/* | sed 's|.*/rdma/||' | paste -sd' ' | comment

# 3. TCP next to RDMA.
check "rail add t0 (TCP, rail0)" "$CTL" rail add t0 proto tcp dev rail0
barrier rails-both 120 || { not_ok "barrier rails-both"; tap_done; exit 1; }
MASTER_PORT=29501 run_tap tcp+rdma "$NZ_BIN/guest/nz_rdma" data
# Short jobs over the RDMA rail: a receiver that leaves at once still
# delivers the ACK it owes (queued frames go out before the CLOSE).
NEZHA_RAILS=rd MASTER_PORT=29700 run_tap leave "$NZ_BIN/guest/nz_p2p" leave 50 1

# 4. A hostile RDMA peer (guest 1) against guest 0's rail, while a job runs.
refused0=$(rail_stat rd handshakes_refused)
rejects0=$(rail_file rd rdma/cm_rejects)
rm -f "$HOLD" "$HOLD.info.$ME"
MASTER_PORT=29502 "$NZ_BIN/guest/nz_rdma" hold "$HOLD" >"$NZ_OUT/hold.log" 2>&1 &
hold=$!
for _ in $(seq 600); do
	[ -s "$HOLD.info.$ME" ] && break
	sleep 0.2
done
check "rdma resource show: the job's QP is nezha_rdma's" test "$(rdma_qps)" -ge 1
rdma resource show qp | grep nezha_rdma | comment
if [ "$ME" = 1 ]; then
	read -r slot nrails <"$HOLD.info.$ME"
	job=$(cat /sys/class/nezha/rail-rd/peer-*-1-0/job)
	if [ -x "$NZ_BIN/guest/nz_rdma_hostile" ]; then
		run_tap hostile "$NZ_BIN/guest/nz_rdma_hostile" $RD_ADDR0 7470 "$job" \
			"$slot" "$nrails" 65536 1 0
	else
		skip "hostile RDMA peer" "nz_rdma_hostile not built (librdmacm-dev missing)"
	fi
	touch "$HOLD"
fi
wait $hold
rc=$?
check "the job survived the hostile peer (exit $rc)" test $rc = 0
[ $rc = 0 ] || comment < "$NZ_OUT/hold.log"
if [ "$ME" = 0 ]; then
	refused=$(( $(rail_stat rd handshakes_refused) - refused0 ))
	rejects=$(( $(rail_file rd rdma/cm_rejects) - rejects0 ))
	# Refusals: the 5 rejected requests, the 2 HELLOs refused, and the 2
	# strangers that left in the middle of their handshakes.
	check "5 connect requests rejected by the CM, 9 refusals counted ($rejects, $refused)" \
		test "$rejects" = 5 -a "$refused" = 9
fi

# 5. rxe0 deleted on guest 0 under a transfer, then added again.
MASTER_PORT=29503 run_tap failover "$NZ_BIN/guest/nz_rdma" failover rd rxe0 rail1
"$CTL" rail show | comment
grep -H . /sys/class/nezha/rail-rd/rdma/* | sed 's|.*/rdma/||' | paste -sd' ' | comment

# 6. Teardown.
barrier teardown 120 || true
check "rail del rd, t0" sh -c "$CTL rail del rd && $CTL rail del t0"
check "no RDMA resource of nezha_rdma left" sh -c \
	'! rdma resource show | grep -q nezha_rdma'
check "rmmod nezha_rdma" rmmod nezha_rdma
check "rmmod nezha" nz_unload
tap_done
