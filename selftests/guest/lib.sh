#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# TAP helpers for guest test scripts (sourced).  Each check prints one line;
# the harness relays them and the runner counts them.

NZ_TOP=${NZ_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
NZ_KO=${NZ_KO:-$NZ_TOP/nezha.ko}
NZ_BIN=$NZ_TOP/build
_tap_n=0
_tap_fail=0
# devtmpfs has no /dev/fd; bash process substitution needs it.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd 2>/dev/null

ok() {		# ok NAME: record a pass
	_tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1"
}
not_ok() {	# not_ok NAME [why]: record a failure
	_tap_n=$((_tap_n + 1)); _tap_fail=$((_tap_fail + 1))
	echo "not ok $_tap_n - $1"; [ -z "${2:-}" ] || echo "# $2"
}
skip() {	# skip NAME REASON
	_tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1 # SKIP $2"
}
check() {	# check NAME CMD...: pass iff CMD succeeds
	local name=$1 out; shift
	if out=$("$@" 2>&1); then ok "$name"; else not_ok "$name" "$(echo "$out" | tail -3 | tr '\n' ' ')"; fi
}
check_fails() {	# check_fails NAME CMD...: pass iff CMD fails
	local name=$1; shift
	if "$@" >/dev/null 2>&1; then not_ok "$name" "succeeded but should fail"; else ok "$name"; fi
}
# run_tap NAME CMD...: relay a TAP program's lines, check its exit.  A
# failed exit names the program's last words (a Python exception's last
# line, say; not a TAP diagnostic, which may be from long before) in the
# test's name, where a CI summary that lists only the failing names still
# shows them.
run_tap() {
	local name=$1 line rc last=; shift
	while IFS= read -r line; do
		case "$line" in
		"ok "*|"not ok "*)
			_tap_n=$((_tap_n + 1))
			case "$line" in "not ok "*) _tap_fail=$((_tap_fail + 1));; esac
			echo "$line" | sed -E "s/^(not )?ok [0-9]+ (- )?/\1ok $_tap_n - $name: /";;
		1..*) ;;
		__rc=*) rc=${line#__rc=};;
		*) echo "# $line"
		   case "$line" in "#"*) ;; *[![:space:]]*) last=$line;; esac;;
		esac
	done < <("$@" 2>&1; echo "__rc=$?")  # the last line carries the status
	if [ "${rc:-1}" = 0 ]; then
		ok "$name: exit status 0"
	else
		not_ok "$name: exit status ${rc:-?}${last:+ (last words: ${last:0:160})}"
	fi
}
tap_done() {
	echo "1..$_tap_n"
	[ "$_tap_fail" -eq 0 ]
}
nz_load() {	# nz_load [params]: insmod the module built in this tree
	# shellcheck disable=SC2086  # NZ_MODULE_PARAMS: words, from vm.sh
	insmod "$NZ_KO" ${NZ_MODULE_PARAMS:-} "$@" || return
	nz_health_scaled
}
# On a kernel NZ_TIME_SCALE times slower than the one the defaults are for
# (make check-debug: KASAN, lockdep, kmemleak), the heartbeat period grows
# with it, as an operator would set it for such a node: at the default 4 ms
# the debug kernel's answers came late enough to fail over 7-29 times per
# 2000-message exchange of the p2p suite's recover tests (2026-12-04).
# Tests that set the period themselves still do.  Nothing changes at 1.
# So does the grace a peer without any connection gets before its
# transfers fail (-ENETDOWN, 5 s by default): there a path torn down after
# an outage took longer than 5 s to come back, and the p2p suite's
# exchange after the registered-buffer cut failed at its 50th message
# with "Network is down" (2026-12-05).
nz_health_scaled() {
	local ts=${NZ_TIME_SCALE:-1}
	[ "${ts%%.*}" -gt 1 ] 2>/dev/null || return 0
	"$NZ_BIN/tools/nezhactl" health set interval $((4 * ${ts%%.*})) \
		grace $((5000 * ${ts%%.*})) >/dev/null
}
nz_load_tcp_rails() {	# insmod, then TCP rail rI on the I-th device of NZ_IFS
	local i=0 ifc
	check "insmod" nz_load
	for ifc in $NZ_IFS; do
		check "rail add r$i dev $ifc" "$NZ_BIN/tools/nezhactl" rail add "r$i" proto tcp dev "$ifc"
		i=$((i + 1))
	done
}
# The suite's own output: net_diag writes there even from inside a check,
# whose output only its last 3 lines would reach.
# shellcheck disable=SC2034  # used by the suites that source this file
exec {NZ_TAP_OUT}>&1
net_diag() {	# net_diag: this guest's view of its rails, as comments (after a failure)
	local a n
	echo "# net_diag: $(date +%T.%N | cut -c1-12), uptime $(cut -d' ' -f1 /proc/uptime) s"
	tc qdisc show 2>&1 | grep -v 'noqueue\|pfifo_fast\|fq_codel' | sed 's/^/#   qdisc: /'
	ip -br addr 2>&1 | sed 's/^/#   addr: /'
	ss -tanH 2>&1 | awk '{ print $1 }' | sort | uniq -c | sed 's/^/#   tcp sockets: /'
	# Sockets other than the rails' (a job's rendezvous), and what TCP
	# dropped: a rendezvous whose SYNs went unanswered for 60 s while
	# pings passed (p2p, 2026-12-03 and -04) left no trace of why.
	ss -tanH 2>&1 | grep -v ':7470 ' | head -n 12 | sed 's/^/#   socket: /'
	nstat -asz 2>/dev/null | awk '/ListenDrops|ListenOverflows|ReqQFullDrop|TcpAttemptFails|TcpInErrs|TCPTimeouts|SynRetrans|AbortOnTimeout/ {
		sub(/^Tcp(Ext)?/, "", $1); s = s " " $1 "=" $2 } END { print "#   tcp counters:" s }'
	for a in $NZ_ADDRS; do
		for ((n = 1; n <= NZ_NODES; n++)); do
			[ "${a%.*}.$n" = "$a" ] && continue
			ping -c1 -W1 "${a%.*}.$n" >/dev/null 2>&1 &&
				echo "#   ping ${a%.*}.$n: ok" || echo "#   ping ${a%.*}.$n: no answer in 1 s"
		done
	done
}
meet() {	# meet NAME: wait (2 min at most) until every guest got here
	local i
	: >"$NZ_RUN/meet.$1.$NZ_NODE"
	# Only this run's: vm.sh writes job.sh before any guest starts.
	for ((i = 0; i < 1200; i++)); do
		[ "$(find "$NZ_RUN" -maxdepth 1 -name "meet.$1.*" -newer "$NZ_RUN/job.sh" | wc -l)" -ge "$NZ_NODES" ] &&
			return 0
		sleep 0.1
	done
	return 1
}

# host_ask LINE: the shell command that asks the host script
# (failover_host.sh) for LINE, as request number $hostreq.
host_ask() {
	echo "echo '$1' > $NZ_RUN/.req.$hostreq && mv $NZ_RUN/.req.$hostreq $NZ_RUN/req.$hostreq"
}

# nz_unload: rmmod, once TCP holds no page of a zero-copy send any more:
# the holds end when TCP frees its buffers, and rmmod would wait for them.
# One still there 10 s (times NZ_TIME_SCALE) after the jobs is a leak.
nz_unload() {
	local held=0 i
	for ((i = 0; i < 100 * ${NZ_TIME_SCALE:-1}; i++)); do
		held=$(cat /sys/class/nezha/nezha/zerocopy_held 2>/dev/null || echo 0)
		[ "$held" = 0 ] && break
		sleep 0.1
	done
	if [ "$held" != 0 ]; then
		echo "# zerocopy_held is still $held: TCP holds pages of sends that ended"
		return 1
	fi
	rmmod nezha
}
klog_mark() {	# klog_mark: the kernel log's length now, in lines
	dmesg | wc -l
}

klog_between() {	# klog_between FROM [TO]: the kernel log's lines after mark FROM (up to mark TO)
	if [ -n "${2:-}" ]; then
		dmesg | sed -n "$(($1 + 1)),${2}p"
	else
		dmesg | tail -n +"$(($1 + 1))"
	fi
}

rail_file() {	# rail_file RAIL FILE: a file under the rail's sysfs directory
	cat "/sys/class/nezha/rail-$1/$2" 2>/dev/null
}
rail_stat() {	# rail_stat RAIL FIELD: one of the rail's counters (stats/)
	rail_file "$1" "stats/$2"
}
# coll_job NAME PORT WORLD ARGS...: run this guest's ranks of a WORLD-rank
# job (nz_coll ARGS) at once -- guest g has ranks g, g + NZ_NODES, ... --
# and relay each one's TAP, prefixed with its rank.  Rank 0 (guest 0) is
# the rendezvous: MASTER_ADDR is the caller's.  Each rank gets
# NZ_COLL_JOB_TIMEOUT seconds (240).
coll_job() {
	local name=$1 port=$2 world=$3 r i rc start=$SECONDS
	local pids=() ranks=() tmo=${NZ_COLL_JOB_TIMEOUT:-240}
	shift 3
	for ((r = NZ_NODE; r < world; r += NZ_NODES)); do
		RANK=$r WORLD_SIZE=$world MASTER_PORT=$port \
			timeout -k 5 "$tmo" "$NZ_BIN/guest/nz_coll" "$@" \
			>"$NZ_OUT/$name-rank$r.log" 2>&1 &
		pids+=($!)
		ranks+=("$r")
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}"
		rc=$?
		[ $rc = 124 ] && echo "# $name rank ${ranks[i]}: killed after $tmo s"
		run_tap "$name rank ${ranks[i]} of $world" \
			sh -c 'cat "$1"; exit "$2"' sh "$NZ_OUT/$name-rank${ranks[i]}.log" "$rc"
	done
	echo "# $name: $((SECONDS - start)) s"
}
