#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Churn under load (2 guests, 2 rails; issue 19).  Rank 0 (guest 0) streams
# 2 MiB messages to rank 1 (guest 1), which checks every byte, and guest 0,
# N times each, mid-stream:
#  1. deletes rail r1 and adds it again;
#  2. unbinds rail1's NIC from virtio_net and binds it again (a driver
#     reload: the netdev goes, and comes back with a new ifindex, under
#     another name until it is renamed);
#  3. kills its rank and unloads the module at once (rmmod retried until
#     the last reference is gone), then loads it and adds its rails again.
# Every stream of 1 and 2 ends intact (it goes on over rail0); in 3 rank 1's
# stream fails with an error within its timeout and never hangs.  After
# each part both rails are up and a new job's stream crosses both.  The
# harness fails the run on any kernel report, and scans for leaks
# (kmemleak, on the debug kernel).
#
#   churn.sh [N]   N times each: default 5, and 50 on the debug kernel
#                  (NZ_TIME_SCALE > 1, `make check-debug`)
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
P2P=$NZ_BIN/guest/nz_p2p
scale=${NZ_TIME_SCALE:-1}
if [ -n "${1:-}" ]; then
	N=$1
elif [ "$scale" -gt 1 ]; then
	N=50
else
	N=5
fi
export MASTER_ADDR=10.77.0.1 RANK=$NZ_NODE WORLD_SIZE=$NZ_NODES
export NEZHA_TIMEOUT_MS=$((20000 * scale))
# shellcheck disable=SC2206  # word splitting intended
addrs=($NZ_ADDRS)
port=29700
did=$NZ_OUT/did

rails_add() {
	"$CTL" rail add r0 proto tcp dev rail0 && "$CTL" rail add r1 proto tcp dev rail1
}
wait_up() {	# wait_up RAIL: its state is up within 10 s (times the scale)
	local i
	for ((i = 0; i < 100 * scale; i++)); do
		[ "$(rail_file "$1" state)" = up ] && return 0
		sleep 0.1
	done
	return 1
}
wait_both() { wait_up r0 && wait_up r1; }
# job NAME SECS [T:CMD]: a stream of SECS seconds on a port of its own; the
# command runs on guest 0 only, T seconds after the communicator is up.
job() {
	local out=$NZ_OUT/$1.log secs=$2 rc
	shift 2
	[ "$NZ_NODE" = 0 ] || set --
	MASTER_PORT=$port "$P2P" drill "$secs" "$@" >"$out" 2>&1
	rc=$?
	port=$((port + 1))
	return $rc
}
# round PART I CMD: meet, then a 2 s stream with CMD at 1 s; counts.
round() {
	local part=$1 i=$2 cmd=$3
	meet "$part$i" || echo "# $part $i: the other guest did not come within 2 minutes"
	rm -f "$did"
	if job "$part$i" 2 "1:$cmd && touch $did"; then
		intact=$((intact + 1))
	else
		grep '^# rank' "$NZ_OUT/$part$i.log" | sed "s/^/# $part $i: /"
		[ -n "$first_bad" ] || first_bad=$i
	fi
	[ -e "$did" ] && done=$((done + 1))
}
# counts NAME: every stream of the part intact, its command done each time.
counts() {
	[ "$intact" = "$N" ] && ok "$1 x$N: every stream intact" ||
		not_ok "$1 x$N: every stream intact" "$intact intact, the first bad in round $first_bad"
	if [ "$NZ_NODE" = 0 ]; then
		[ "$done" = "$N" ] && ok "$1 x$N: done mid-stream each time" ||
			not_ok "$1 x$N: done mid-stream each time" "$done of $N"
	fi
	intact=0 done=0 first_bad=
}
# after NAME: both rails up again, and a new job's stream crosses both.
after() {
	local name=$1 b0 b1 r0 r1
	check "$name: r0 and r1 up again" wait_both
	meet "$name-after" || echo "# $name: the other guest did not come within 2 minutes"
	b0=$(rail_stat r0 "bytes_$dir") b1=$(rail_stat r1 "bytes_$dir")
	job "after-$port" 3
	check "$name: then a new job's stream intact" test $? = 0
	r0=$(($(rail_stat r0 "bytes_$dir") - b0)) r1=$(($(rail_stat r1 "bytes_$dir") - b1))
	[ "$r0" -gt 0 ] && [ "$r1" -gt 0 ] && ok "$name: ... over both rails ($r0 and $r1 bytes)" ||
		not_ok "$name: ... over both rails" "r0 $r0, r1 $r1 bytes"
}
[ "$NZ_NODE" = 0 ] && dir=tx || dir=rx
intact=0 done=0 first_bad=

check "insmod" nz_load
check "rails r0, r1" rails_add
check "r0 and r1 up" wait_both

# 1. rail delete under load.
for ((i = 1; i <= N; i++)); do
	round del "$i" "$CTL rail del r1 && $CTL rail add r1 proto tcp dev rail1"
done
counts "rail del and add under load"
after "rail del and add under load"

# 2. NIC unbind and rebind under load.  Its device comes back as ethN (no
# udev here) and is named rail1 again; the rail follows the name.
nic=$(basename "$(readlink -f /sys/class/net/rail1/device)")
cat >/tmp/rebind.sh <<EOF
#!/bin/bash
drv=/sys/bus/virtio/drivers/virtio_net
echo $nic >\$drv/unbind || exit 1
sleep 0.2
echo $nic >\$drv/bind || exit 1
for ((i = 0; i < 100 * $scale; i++)); do
	new=\$(ls /sys/bus/virtio/devices/$nic/net/ 2>/dev/null | head -n 1)
	[ -n "\$new" ] && break
	sleep 0.1
done
[ -n "\$new" ] || exit 1
[ "\$new" = rail1 ] || ip link set dev "\$new" name rail1 || exit 1
ip addr add ${addrs[1]}/24 dev rail1 && ip link set rail1 up
EOF
chmod +x /tmp/rebind.sh
if [ -e "/sys/bus/virtio/drivers/virtio_net/$nic" ]; then
	for ((i = 1; i <= N; i++)); do
		round nic "$i" /tmp/rebind.sh
	done
	counts "NIC unbind and rebind under load"
	after "NIC unbind and rebind under load"
else
	skip "NIC unbind and rebind under load" "rail1 ($nic) is not a virtio_net device"
fi

# 3. rmmod under load: guest 0 kills its rank mid-stream and unloads.
slowest=0 unloaded=0 reloaded=0 failed=0 hung=0
for ((i = 1; i <= N; i++)); do
	meet "rm$i" || echo "# rm $i: the other guest did not come within 2 minutes"
	if [ "$NZ_NODE" = 0 ]; then
		MASTER_PORT=$port "$P2P" drill 600 >"$NZ_OUT/rm$i.log" 2>&1 &
		pid=$!
		# Under load: the stream has moved 2 MiB on r0.
		b0=$(rail_stat r0 bytes_tx)
		for ((k = 0; k < 300 * scale; k++)); do
			[ $(($(rail_stat r0 bytes_tx) - b0)) -gt 2097152 ] && break
			sleep 0.1
		done
		kill -9 $pid
		wait $pid 2>/dev/null
		t0=$(date +%s%N)
		for ((k = 0; k < 100 * scale; k++)); do
			rmmod nezha 2>/dev/null && break
			sleep 0.1
		done
		t=$((($(date +%s%N) - t0) / 1000000))
		if [ ! -d /sys/module/nezha ]; then
			unloaded=$((unloaded + 1))
			[ "$t" -gt "$slowest" ] && slowest=$t
		fi
		nz_load && rails_add && reloaded=$((reloaded + 1))
	else
		timeout $((60 * scale)) env MASTER_PORT=$port "$P2P" drill 600 >"$NZ_OUT/rm$i.log" 2>&1
		rc=$?
		if [ $rc = 124 ]; then
			hung=$((hung + 1))
		elif [ $rc != 0 ]; then
			failed=$((failed + 1))
		fi
		grep '^# rank' "$NZ_OUT/rm$i.log" | tail -n 1 | sed "s/^/# rm $i: /"
	fi
	port=$((port + 1))
done
if [ "$NZ_NODE" = 0 ]; then
	[ "$unloaded" = "$N" ] && ok "rmmod under load x$N: unloaded each time, the slowest after $slowest ms" ||
		not_ok "rmmod under load x$N: unloaded each time" "$unloaded of $N"
	[ "$reloaded" = "$N" ] && ok "rmmod under load x$N: loaded again with its rails" ||
		not_ok "rmmod under load x$N: loaded again with its rails" "$reloaded of $N"
else
	[ "$failed" = "$N" ] && [ "$hung" = 0 ] &&
		ok "rmmod under load x$N: the peer's stream failed with an error each time, never hung" ||
		not_ok "rmmod under load x$N: the peer's stream failed with an error each time" \
			"$failed failed, $hung hung for $((60 * scale)) s"
fi
after "rmmod under load"

meet end || echo "# end: the other guest did not come within 2 minutes"
check "nezhactl rail show lists no peer" sh -c "! $CTL rail show | grep -q 'peer '"
check "rail del r0 r1" sh -c "$CTL rail del r0 && $CTL rail del r1"
check "rmmod" nz_unload
tap_done
