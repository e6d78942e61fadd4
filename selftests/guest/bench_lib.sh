#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Helpers of the multi-guest benchmark and demo scripts (sourced after
# lib.sh): a guest-to-guest barrier, rail shaping, the MPTCP wrapper,
# Nezha rail set-up and nezha-bench runs.  Every wait is bounded.
#
# Environment (from selftests/qemu/guest-stage.sh): NZ_NODE, NZ_NODES,
# NZ_RAILS, NZ_IFS, NZ_ADDRS, NZ_OUT.  Rail r of guest g is 10.77.r.(g+1).

read -ra nz_ifs <<<"${NZ_IFS:-}"
NZ_BAR_ADDR=10.77.0.1		# node 0, rail 0: the barrier coordinator
NZ_BAR_PORT=${NZ_BAR_PORT:-7900}
NZ_MASTER_PORT=${NZ_MASTER_PORT:-29500}
_nz_bar_seq=0

say() {		# say TEXT...: a comment line the harness relays
	echo "# $*"
}
comment() {	# comment < TEXT: every line as a comment
	sed 's/^/# /'
}
rail_addr() {	# rail_addr NODE RAIL
	echo "10.77.$2.$(($1 + 1))"
}
show_run() {	# show_run CMD...: print "$ CMD", run it, relay its output
	local rc
	say "\$ $*"
	"$@" 2>&1 | comment
	rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || say "(exit status $rc)"
	return "$rc"
}

# barrier NAME TIMEOUT_S [ok|fail]: wait until every guest reached NAME.
# Node 0 listens on 10.77.0.1 (one port per barrier, a few lines of Python);
# the others connect with bash's /dev/tcp, retrying until it listens.  Each
# guest brings its status; afterwards NZ_ALL_OK is 1 iff every guest said ok.
# Returns 1 when the barrier was not complete within TIMEOUT_S.
barrier() {
	local name=$1 tmo=$2 status=${3:-ok} port=$((NZ_BAR_PORT + _nz_bar_seq)) end reply
	_nz_bar_seq=$((_nz_bar_seq + 1))
	NZ_ALL_OK=0
	if [ "$NZ_NODE" = 0 ]; then
		reply=$(timeout $((tmo + 10)) python3 - "$NZ_BAR_ADDR" "$port" "$name" \
			"$((NZ_NODES - 1))" "$tmo" "$status" <<'EOF'
import socket, sys, time
addr, port, name, n, tmo, status = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
    int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(16)
end = time.monotonic() + tmo
peers, all_ok = [], status == "ok"
while len(peers) < n:
    s.settimeout(max(0.05, end - time.monotonic()))
    try:
        c, _ = s.accept()
    except socket.timeout:
        print("timeout")
        sys.exit(1)
    c.settimeout(5)
    try:
        words = c.makefile().readline().split()
    except OSError:
        words = []
    if len(words) == 2 and words[0] == name:
        peers.append(c)
        all_ok = all_ok and words[1] == "ok"
    else:
        c.close()
verdict = "ok" if all_ok else "fail"
for c in peers:
    c.sendall(("go %s\n" % verdict).encode())
    c.close()
print(verdict)
EOF
)
		[ "$reply" = ok ] && NZ_ALL_OK=1
		[ "$reply" = ok ] || [ "$reply" = fail ] || { say "barrier $name: incomplete after ${tmo}s"; return 1; }
		return 0
	fi
	end=$((SECONDS + tmo))
	while [ $SECONDS -lt $end ]; do
		reply=$(timeout $((end - SECONDS + 1)) bash -c \
			'exec 3<>"/dev/tcp/$0/$1" || exit 1; echo "$2 $3" >&3; read -r l <&3; echo "$l"' \
			"$NZ_BAR_ADDR" "$port" "$name" "$status" 2>/dev/null)
		case $reply in
		"go ok") NZ_ALL_OK=1; return 0 ;;
		"go fail") return 0 ;;
		esac
		sleep 0.3
	done
	say "barrier $name: node 0 did not answer within ${tmo}s"
	return 1
}

# shape_rails RATE: egress token bucket on every rail of this guest.
shape_rails() {
	local ifname ok=0
	for ifname in "${nz_ifs[@]}"; do
		show_run tc qdisc replace dev "$ifname" root tbf rate "$1" burst 20kb latency 20ms || ok=1
	done
	return $ok
}

# rails_mtu MTU: every rail of this guest at MTU (the host side carries up
# to 9000: vm.sh), then a don't-fragment ping of that size to the other
# guest on each rail (with 2 guests).  Jumbo frames cut the per-packet cost that
# makes single-vCPU TCG guests CPU bound well below two rails' rate in both
# directions; every tool in a run uses the same rails, so the comparison
# stays fair.  Returns 1 (and says why) when a path does not carry it.
rails_mtu() {
	local r ifname ok=0
	for ifname in "${nz_ifs[@]}"; do
		show_run ip link set "$ifname" mtu "$1" || ok=1
	done
	{ [ "$1" -le 1500 ] || [ "${NZ_NODES:-1}" != 2 ]; } && return $ok
	for ((r = 0; r < ${#nz_ifs[@]}; r++)); do
		rail_carries_mtu "$r" "$1" || { say "rail $r does not carry MTU $1"; ok=1; }
	done
	return $ok
}

# rail_carries_mtu RAIL MTU: a don't-fragment ping of MTU bytes reaches the
# other guest on RAIL (2 guests).  Both guests set their MTU at about the
# same time: a few tries.
rail_carries_mtu() {
	local t
	for t in 1 2 3 4 5; do
		ping -c 1 -W 2 -M do -s $(($2 - 28)) \
			"$(rail_addr $((1 - NZ_NODE)) "$1")" >/dev/null 2>&1 && return 0
		[ $t = 5 ] || sleep 1
	done
	return 1
}

# Run a TCP program over MPTCP: mptcpize where it exists (not in Debian 12's
# mptcpd), else an LD_PRELOAD shim built here that turns every TCP socket()
# into an IPPROTO_MPTCP one -- what mptcpize does.  Sets MPTCP_RUN (array).
mptcp_wrapper() {
	local so=/tmp/nz-mptcpize.so
	if command -v mptcpize >/dev/null; then
		MPTCP_RUN=(mptcpize run)
		return 0
	fi
	if [ ! -e $so ]; then
		cc -shared -fPIC -O2 -o $so -x c - -ldl <<'EOF' || return 1
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
int socket(int domain, int type, int protocol)
{
	static int (*next)(int, int, int);

	if (!next)
		next = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	if ((domain == AF_INET || domain == AF_INET6) &&
	    (type & 0xf) == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP))
		protocol = IPPROTO_MPTCP;
	return next(domain, type, protocol);
}
EOF
	fi
	MPTCP_RUN=(env "LD_PRELOAD=$so")
}

# mptcp_setup client|server: endpoints on the extra rails (subflow on the
# client, signal on the server), one subflow per rail.
mptcp_setup() {
	local r flag=subflow ok=0
	[ "$1" = server ] && flag=signal
	show_run sysctl -w net.mptcp.enabled=1 || ok=1
	ip mptcp endpoint flush 2>/dev/null
	show_run ip mptcp limits set subflow 4 add_addr_accepted 4 || ok=1
	for ((r = 1; r < NZ_RAILS; r++)); do
		show_run ip mptcp endpoint add "$(rail_addr "$NZ_NODE" $r)" dev "${nz_ifs[r]}" $flag || ok=1
	done
	return $ok
}

mptcp_counter() {	# mptcp_counter NAME: absolute value of an MPTcpExt counter
	nstat -asz "MPTcpExt$1" 2>/dev/null | awk -v n="MPTcpExt$1" '$1 == n { print $2 }'
}

# nezha_up: load the module and add every rail, showing the commands.
nezha_up() {	# nezha_up [ARGS...]: insmod, a TCP rail per device (with ARGS)
	local r ctl=$NZ_BIN/tools/nezhactl
	# shellcheck disable=SC2086  # NZ_MODULE_PARAMS: words, from vm.sh
	show_run insmod "$NZ_KO" ${NZ_MODULE_PARAMS:-} || return 1
	for ((r = 0; r < NZ_RAILS; r++)); do
		show_run timeout 30 "$ctl" rail add "r$r" proto tcp dev "${nz_ifs[r]}" "$@" || return 1
	done
	show_run timeout 30 "$ctl" rail show || true
}

# nezha_bench OUTFILE TIMEOUT_S ARGS...: nezha-bench p2p as this guest's
# rank (rank = node), rank 0 at 10.77.0.1; output to OUTFILE and relayed.
# Each transfer may take 120 s in the module: a window of large messages on
# CPU-starved TCG guests can be that slow without anything being wrong.
nezha_bench() {	# NZ_BENCH_MODE: nezha-bench's mode (p2p)
	local out=$1 tmo=$2 rc mode=${NZ_BENCH_MODE:-p2p}
	shift 2
	say "\$ MASTER_ADDR=$NZ_BAR_ADDR MASTER_PORT=$NZ_MASTER_PORT RANK=$NZ_NODE WORLD_SIZE=$NZ_NODES nezha-bench $mode $*"
	MASTER_ADDR=$NZ_BAR_ADDR MASTER_PORT=$NZ_MASTER_PORT RANK=$NZ_NODE \
		WORLD_SIZE=$NZ_NODES NEZHA_TIMEOUT_MS=${NZ_COMM_TIMEOUT_MS:-60000} \
		NEZHA_OP_TIMEOUT_MS=${NZ_OP_TIMEOUT_MS:-120000} \
		run_bounded "$tmo" "$out.stuck" "$NZ_BIN/tools/nezha-bench" "$mode" "$@" >"$out" 2>&1
	rc=$?
	comment <"$out"
	if [ $rc = 124 ]; then
		say "nezha-bench killed after ${tmo}s; what it was doing:"
		comment <"$out.stuck"
	fi
	return $rc
}

# klog_since MARK: what the kernel logged after klog_mark (lib.sh) gave
# MARK (at most 20 lines), as comments.  After a failure.
klog_since() {
	local log n
	log=$(klog_between "$1")
	n=$(printf '%s' "$log" | grep -c '')
	if [ "$n" = 0 ]; then
		say "the kernel logged nothing during this step"
		return
	fi
	say "the kernel's log during this step ($n lines, the last 20):"
	printf '%s\n' "$log" | tail -n 20 | comment
}

# task_dump PID: each thread of PID with its state, where it sleeps and its
# kernel stack; then the kernel's last lines.  For a run that hangs.
task_dump() {
	local t
	for t in /proc/"$1"/task/*; do
		[ -d "$t" ] || continue
		echo "thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)):" \
			"$(awk '/^State:/ { print $2, $3 }' "$t/status" 2>/dev/null)" \
			"in $(cat "$t/wchan" 2>/dev/null)"
		sed 's/^/    /' "$t/stack" 2>/dev/null
	done
	echo "kernel log, last lines:"
	dmesg | tail -n 20 | sed 's/^/    /'
}

# run_bounded TIMEOUT_S DUMPFILE CMD...: CMD, stopped after TIMEOUT_S like
# timeout(1) (status 124), but first its threads and the kernel's log go to
# DUMPFILE (task_dump), and a process that a kill cannot end (stuck in the
# kernel) is left behind instead of waited for without end.
run_bounded() {
	local tmo=$1 dump=$2 pid i
	shift 2
	"$@" &
	pid=$!
	for ((i = 0; i < tmo * 5; i++)); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid"; return; }
		sleep 0.2
	done
	task_dump "$pid" >"$dump" 2>&1
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		[ "$i" = 25 ] && kill -KILL "$pid" 2>/dev/null
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "it did not end 15 s after SIGKILL (stuck in the kernel):" >>"$dump"
		task_dump "$pid" >>"$dump" 2>&1
	else
		wait "$pid"
	fi
	return 124
}

# target DESC VALUE OP LIMIT: ok "DESC (VALUE)" iff VALUE OP LIMIT (OP >= or
# <=), else not ok; no VALUE: not ok, "not measured".
target() {
	if [ -z "$2" ]; then
		not_ok "$1" "not measured"
	elif awk -v v="$2" -v l="$4" -v op="$3" 'BEGIN { exit !(op == ">=" ? v >= l : v <= l) }'; then
		ok "$1 ($2)"
	else
		not_ok "$1 ($2)"
	fi
}

# Mbit/s of an iperf3 text report (-f m): the receiver's line.
iperf_mbits() {
	awk '/receiver/ { v = $(NF - 2) } END { if (v != "") print v; else exit 1 }' "$1"
}
