#!/bin/bash
# Smoke test of the guest test bed (selftests/qemu/vm.sh): rails, peer
# reachability and Soft-RoCE.  Runs in every guest, prints TAP.
set -u

failed=0
ok() { echo "ok $*"; }
not_ok() {
	echo "not ok $*"
	failed=1
}
# iputils-ping if installed, else busybox's.
if command -v ping >/dev/null; then ping=(ping); else ping=(busybox ping); fi

echo "1..3"

# 1. Every rail interface exists, is up and has its address.
bad=
read -ra ifs <<<"$NZ_IFS"
read -ra addrs <<<"$NZ_ADDRS"
for i in "${!ifs[@]}"; do
	ifname=${ifs[i]}
	addr=${addrs[i]:-}
	if ! ip -4 -o addr show dev "$ifname" 2>/dev/null | grep -q " $addr/24 " ||
		! ip -o link show dev "$ifname" | grep -q '[<,]UP[,>]'; then
		bad+=" $ifname($addr)"
	fi
done
if [ -z "$bad" ] && [ ${#ifs[@]} -eq "$NZ_RAILS" ] && [ ${#addrs[@]} -eq "$NZ_RAILS" ]; then
	ok "1 rails up: $NZ_IFS = $NZ_ADDRS"
else
	not_ok "1 rails up: missing or wrong:$bad (NZ_IFS=$NZ_IFS)"
fi

# 2. The next guest answers on every rail (give it time to boot).
peer=$(((NZ_NODE + 1) % NZ_NODES))
bad=
r=0
for ifname in "${ifs[@]}"; do
	addr=10.77.$r.$((peer + 1))
	alive=
	for _ in $(seq 60); do
		if "${ping[@]}" -q -c 1 -W 1 -I "$ifname" "$addr" >/dev/null 2>&1; then
			alive=1
			break
		fi
	done
	[ -n "$alive" ] || bad+=" $addr"
	r=$((r + 1))
done
if [ -z "$bad" ]; then
	ok "2 ping peer nz$peer on all $NZ_RAILS rails"
else
	not_ok "2 ping peer nz$peer: no answer from$bad"
fi

# 3. Soft-RoCE is available: the module loads (with the crc32 algorithm the
# kernel asks modprobe for) and an rxe device binds to rail0.
if ! modinfo rdma_rxe >/dev/null 2>&1; then
	ok "3 modprobe rdma_rxe # SKIP rdma_rxe not in $(uname -r)"
elif ! out=$(modprobe rdma_rxe 2>&1); then
	not_ok "3 modprobe rdma_rxe"
	echo "# $out"
elif ! command -v rdma >/dev/null; then
	ok "3 modprobe rdma_rxe # SKIP no rdma tool (iproute2) to add a link"
elif out=$(rdma link add nzsmoke0 type rxe netdev "${ifs[0]}" 2>&1) &&
	rdma link show nzsmoke0/1 >/dev/null 2>&1; then
	ok "3 modprobe rdma_rxe, rxe link on ${ifs[0]}"
	rdma link delete nzsmoke0 >/dev/null 2>&1
else
	not_ok "3 modprobe rdma_rxe, rxe link on ${ifs[0]}"
	echo "# $out"
fi
exit $failed
