#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite (debug kernel only, Documentation/testing.rst): the
# communicator, transfer and rail paths while the kernel fails
# allocations (failslab, fail_page_alloc, for the test task) and the
# module's own error-injectable functions (fail_function, every context).
# Every injected failure must end in a clean error: a negative errno in a
# CQE, an ioctl or a netlink reply -- no hang, no wrong bytes, no leak (the
# harness scans kmemleak after the run), no report on the console -- and
# the module must work and unload afterwards.
#
#   one guest, two rails: rail0 10.77.0.1, rail1 10.77.1.1; rails r0, r1
#   on port 7470; both ranks of each job in this guest (rank 1 dials 0)
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
FAULTS=$NZ_BIN/guest/nz_faults
DBG=/sys/kernel/debug
# shellcheck disable=SC2206  # word splitting intended
ifs=($NZ_IFS) addrs=($NZ_ADDRS)
ROUNDS=${1:-60}
total=0

if [ ! -d $DBG/failslab ] || [ ! -d $DBG/fail_function ]; then
	skip "fault injection" "this kernel has no failslab/fail_function (make check-debug runs it)"
	tap_done
	exit 0
fi

# attr_set DIR: inject with probability P % for at most TIMES failures.
attr_set() {
	local d=$1 p=$2 times=$3
	echo 0 >"$d/verbose"
	echo 1 >"$d/interval"
	echo "$times" >"$d/times"
	echo 0 >"$d/space"
	echo "$p" >"$d/probability"
}
attr_off() { echo 0 >"$1/probability"; echo 0 >"$1/times"; }
# injected DIR START: failures the attribute injected since it was set.
injected() { echo $(($2 - $(cat "$1/times"))); }
# The task filter's processes set make-it-fail on themselves once loaded
# and their memory locked (nz_faults -F, failnow.so): set before their exec,
# it failed the exec and the loader first.
# The binary from this guest's tmpfs, not from the host's 9p share: an
# allocation failed in a 9p read left every later exec of it failing
# (exit 126, on the debug kernel, 2026-12-03).
cp "$FAULTS" /tmp/nz_faults && FAULTS=/tmp/nz_faults

loads() {	# loads NAME ROUNDS [-q | -F]: one nz_faults run as a check
	local name=$1 n=$2 q=${3:-} out rc
	out=$("$FAULTS" r0,r1 "${addrs[0]},${addrs[1]}" 7470 "$n" $q 2>&1); rc=$?
	echo "# $name: $out" | tail -n 5
	[ $rc -eq 0 ] && ok "$name" || not_ok "$name" "exit $rc"
}
healthy() {	# healthy WHEN: the module works and holds nothing
	loads "$1: 5 rounds without injection, every transfer whole" 5 -q
	check "$1: no communicator, no command in flight" \
		sh -c "test \"\$(cat /sys/class/nezha/nezha/comms)\" = 0 &&
		       test \"\$(cat /sys/class/nezha/nezha/inflight)\" = 0"
}

check "insmod" nz_load
check "rails r0, r1" sh -c "$CTL rail add r0 proto tcp dev ${ifs[0]} port 7470 &&
			    $CTL rail add r1 proto tcp dev ${ifs[1]} port 7470"
healthy "before"

# 1. Slab allocations of the test task fail (ioctls, commands, io_uring).
for p in 2 10 30; do
	attr_set $DBG/failslab "$p" 100000
	echo Y >$DBG/failslab/task-filter
	echo N >$DBG/failslab/ignore-gfp-wait
	loads "failslab $p%: $ROUNDS rounds end in errors or data, never a hang" "$ROUNDS" -F
	n=$(injected $DBG/failslab 100000); total=$((total + n))
	attr_off $DBG/failslab
	echo "# failslab $p%: $n allocations failed"
	healthy "after failslab $p%"
done

# 2. Page allocations of the test task fail (pinning, kvmalloc, sockets).
attr_set $DBG/fail_page_alloc 10 100000
echo Y >$DBG/fail_page_alloc/task-filter
echo N >$DBG/fail_page_alloc/ignore-gfp-wait
echo N >$DBG/fail_page_alloc/ignore-gfp-highmem
echo 0 >$DBG/fail_page_alloc/min-order
loads "fail_page_alloc 10%: $ROUNDS rounds end in errors or data" "$ROUNDS" -F
n=$(injected $DBG/fail_page_alloc 100000); total=$((total + n))
attr_off $DBG/fail_page_alloc
echo "# fail_page_alloc: $n page allocations failed"
healthy "after fail_page_alloc"

# 3. rail add under failslab: the netlink reply carries the error.
# nezhactl runs under it from its main() on (failnow.so), from tmpfs.
cp "$CTL" /tmp/nezhactl && cp "$NZ_BIN/guest/failnow.so" /tmp/failnow.so
attr_set $DBG/failslab 20 100000
echo Y >$DBG/failslab/task-filter
rail_ok=0 rail_err=0 rail_bad=0
for i in $(seq 1 40); do
	out=$(LD_PRELOAD=/tmp/failnow.so /tmp/nezhactl rail add fx proto tcp dev "${ifs[0]}" port 7480 2>&1); rc=$?
	if [ $rc -eq 0 ]; then
		rail_ok=$((rail_ok + 1))
		"$CTL" rail del fx >/dev/null 2>&1 || rail_bad=$((rail_bad + 1))
	elif grep -qE '^nezhactl: ' <<<"$out"; then
		rail_err=$((rail_err + 1))
	else
		rail_bad=$((rail_bad + 1)); echo "# rail add: rc $rc: $out"
	fi
done
n=$(injected $DBG/failslab 100000); total=$((total + n))
attr_off $DBG/failslab
[ $rail_bad -eq 0 ] && [ $((rail_ok + rail_err)) -eq 40 ] && [ $rail_err -gt 0 ] &&
	ok "rail add x40 under failslab 20%: $rail_ok added, $rail_err clean errors ($n failed allocations)" ||
	not_ok "rail add x40 under failslab 20%" "$rail_bad unexplained, $rail_err clean errors"
check "no rail fx left" sh -c "! $CTL rail show fx >/dev/null 2>&1"

# 4. The module's error-injectable functions fail, in every context (the
# workers that connect, receive and transmit included).  Last: on this
# kernel the first probe's fault injection makes lockdep report its own
# RNG lock and turn itself off (vm.sh, known_reports()).
for fn in nz_conn_attach nz_comm_mac nz_cmd_send nz_cmd_recv nz_conn_rx_data \
	  nz_conn_rx_ctrl nz_conn_tx_next nz_sysfs_conn_add; do
	if ! echo "$fn" >$DBG/fail_function/inject 2>/dev/null; then
		not_ok "fail_function: $fn is error-injectable"
		continue
	fi
	echo -12 >"$DBG/fail_function/$fn/retval"	# -ENOMEM
	attr_set $DBG/fail_function 20 100000
	echo N >$DBG/fail_function/task-filter
	loads "fail_function $fn 20%: 10 rounds end in errors or data" 10
	n=$(injected $DBG/fail_function 100000); total=$((total + n))
	attr_off $DBG/fail_function
	echo "!$fn" >$DBG/fail_function/inject
	echo "# fail_function $fn: $n calls failed"
done
healthy "at the end"
[ $total -ge 1000 ] && ok "at least 1000 failures injected ($total)" ||
	not_ok "at least 1000 failures injected ($total)"
check "rail del r0 r1" sh -c "$CTL rail del r0 && $CTL rail del r1"
check "rmmod" nz_unload
tap_done
