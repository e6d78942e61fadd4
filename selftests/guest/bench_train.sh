#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark: DDP training steps/s on the "nezha" backend against Gloo on
# both NICs (GLOO_SOCKET_IFNAME=rail0,rail1) and Gloo on rail0 alone, same
# 2 guests, same rails, same boot, one rank per guest (vm.sh -n 2 -r 2;
# scripts/bench-train.sh).  tools/train_bench.py runs the three in one
# process per rank, for a communication-bound model (6.3 M parameters) and
# one that computes a good part of its step.  Scenarios:
#   (i)   rails shaped 2 x 40 Mbit/s;
#   (ii)  rail0 40 Mbit/s, rail1 10 Mbit/s;
#   (iii) rail0 TCP 40 Mbit/s, rail1 an RDMA rail (Soft-RoCE, rxe) at
#         40 Mbit/s for Nezha (Gloo keeps TCP on both NICs);
#   (iv)  2 x 40 Mbit/s, guest 0's rail1 cable pulled by the host
#         (failover_host.sh) before step 2 of the nezha and gloo-all runs.
# Node 0 prints the table and the ratios (scripts/bench-train.sh
# summarises them from $NZ_OUT/bench_train.results).
#
# usage: bench_train.sh [--rate RATE] [--slow RATE] [--steps N] [--mtu MTU]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench_lib.sh"
set -u

RATE=${NZ_RATE:-40mbit}
SLOW=10mbit
STEPS=3
MTU=${NZ_MTU:-9000}
SCEN=${NZ_TRAIN_SCENARIOS:-i ii iii iv}
PY=/usr/bin/python3
CTL=$NZ_BIN/tools/nezhactl
NZ_RDMA_KO=${NZ_RDMA_KO:-$NZ_TOP/nezha_rdma.ko}
while [ $# -gt 0 ]; do
	case $1 in
	--rate) RATE=$2 ;;
	--slow) SLOW=$2 ;;
	--steps) STEPS=$2 ;;
	--mtu) MTU=$2 ;;
	*) echo "Bail out! bench_train.sh: unknown argument $1"; exit 2 ;;
	esac
	shift 2
done
export PYTHONPATH=$NZ_BIN/torch MASTER_ADDR=10.77.0.1 OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1

if [ "${NZ_NODES:-0}" != 2 ] || [ "${NZ_RAILS:-0}" != 2 ]; then
	skip "bench_train" "needs 2 guests and 2 rails (vm.sh -n 2 -r 2)"
	tap_done
	exit
fi
if ! why=$("$PY" -c 'import torch.distributed, nezha_torch' 2>&1); then
	not_ok "torch and nezha_torch import" "$(echo "$why" | tail -1) (make torch; scripts/setup.sh)"
	tap_done
	exit 1
fi
RES=$NZ_OUT/bench_train.results
: >"$RES"

st=ok
rails_mtu "$MTU" || st=fail
nezha_up || st=fail
barrier up 300 $st || { not_ok "barrier up"; tap_done; exit 1; }
[ "$NZ_ALL_OK" = 1 ] && ok "nezha.ko, rails r0 r1 (TCP) at MTU $MTU" || not_ok "nezha.ko, rails r0 r1 (TCP) at MTU $MTU"

pull_cmd() {	# pull_cmd N MS: host request N: pull guest 0's rail1 for MS ms;
		# returns once the carrier is gone here (at most 10 s)
	echo "echo 'flap 0 r1 1 $2 0' > $NZ_RUN/.req.$1 && mv $NZ_RUN/.req.$1 $NZ_RUN/req.$1;" \
		"for i in \$(seq 200); do [ \"\$(cat /sys/class/net/rail1/carrier)\" = 0 ] && break; sleep 0.05; done"
}

# run SCENARIO PORT RAILS ARGS...: one train_bench.py per guest.
run() {
	local sc=$1 port=$2 rails=$3 out=$NZ_OUT/train-$1.txt rc
	shift 3
	say "($sc) \$ NEZHA_RAILS=$rails train_bench.py --ifs rail0,rail1 --steps $STEPS $*"
	NEZHA_RAILS=$rails RANK=$NZ_NODE WORLD_SIZE=2 MASTER_PORT=$port timeout -k 5 2400 \
		"$PY" "$NZ_TOP/tools/train_bench.py" --ifs rail0,rail1 --steps "$STEPS" "$@" \
		>"$out" 2>&1
	rc=$?
	grep -v 'No CUDA\|warn' "$out" | grep '^#\|^result\|Error' | comment
	if [ "$NZ_NODE" = 0 ]; then
		awk -v sc="$sc" '$1 == "result" { split($4, a, "="); split($6, s, "=");
			print sc "_" $2 "_" $3 "=" a[2]; print sc "_" $2 "_" $3 "_steps=" s[2] }' "$out" >>"$RES"
	fi
	return $rc
}

scenario() {	# scenario NAME PORT: shape, run, report
	local sc=$1 port=$2 rc
	case $sc in
	i|iv) shape_rails "$RATE" ;;
	ii) show_run tc qdisc replace dev rail0 root tbf rate "$RATE" burst 20kb latency 20ms
	    show_run tc qdisc replace dev rail1 root tbf rate "$SLOW" burst 20kb latency 20ms ;;
	iii) show_run tc qdisc replace dev rail0 root tbf rate "$RATE" burst 20kb latency 20ms
	     show_run tc qdisc replace dev rail1 root tbf rate "$RATE" burst 20kb limit $((128 * 4200 + 20000)) ;;
	esac
	barrier "shaped-$sc" 120 || { not_ok "($sc) barrier"; return 1; }
	case $sc in
	iii) run iii "$port" r0,rd ;;
	iv) if [ "$NZ_NODE" = 0 ]; then
		run iv "$port" r0,r1 --models comm --groups nezha,gloo-all --timeout 60 \
			--pull "1:$(pull_cmd 0 20000)|||$(pull_cmd 1 60000)"
	    else
		run iv "$port" r0,r1 --models comm --groups nezha,gloo-all --timeout 60
	    fi ;;
	*) run "$sc" "$port" r0,r1 ;;
	esac
	rc=$?
	if [ $rc = 0 ] || [ "$sc" = iv ]; then ok "($sc) training runs (exit $rc)"; else not_ok "($sc) training runs (exit $rc)"; fi
	barrier "done-$sc" 2400 || true
}

port=29800
for sc in $SCEN; do
	if [ "$sc" = iii ]; then	# Soft-RoCE on rail1, a Nezha RDMA rail on it
		st=ok
		show_run ip link set rail1 mtu 4200 || st=fail
		show_run modprobe -a rdma_rxe rdma_cm ib_uverbs rdma_ucm || st=fail
		for try in 1 2 3 4 5; do
			show_run rdma link add rxe0 type rxe netdev rail1 && break
			[ $try = 5 ] && st=fail
			sleep 1
		done
		show_run insmod "$NZ_RDMA_KO" || st=fail
		show_run "$CTL" rail add rd proto rdma dev rxe0 || st=fail
		barrier rxe 180 $st || true
		if [ "$NZ_ALL_OK" != 1 ]; then
			not_ok "(iii) Soft-RoCE rail rd on both guests"
			continue
		fi
	fi
	scenario "$sc" $port
	port=$((port + 1))
done

if [ "$NZ_NODE" = 0 ]; then
	"$PY" - "$RES" <<'EOF' | tee -a "$NZ_OUT/bench_train.table" | comment
import sys
r = {}
for line in open(sys.argv[1]):
    k, _, v = line.strip().partition("=")
    r[k] = v
def f(k):
    try:
        return float(r[k])
    except (KeyError, ValueError):
        return None
print(f"{'scenario':8} {'model':8} {'nezha':>8} {'gloo-all':>8} {'gloo-one':>8}  {'nz/gloo-all':>11} {'nz/gloo-one':>11}  steps (nz, gloo-all)")
for sc in ("i", "ii", "iii", "iv"):
    for m in ("comm", "compute"):
        nz, ga, go = (f(f"{sc}_{m}_{g}") for g in ("nezha", "gloo-all", "gloo-one"))
        if nz is None and ga is None:
            continue
        rat = lambda a, b: f"{a / b:11.2f}" if a and b else f"{'-':>11}"
        s = lambda x: f"{x:8.3f}" if x is not None else f"{'-':>8}"
        print(f"{sc:8} {m:8} {s(nz)} {s(ga)} {s(go)}  {rat(nz, ga)} {rat(nz, go)}  "
              f"{r.get(f'{sc}_{m}_nezha_steps', '-')}, {r.get(f'{sc}_{m}_gloo-all_steps', '-')}")
        if nz and ga:
            print(f"ratio_{sc}_{m}_all={nz / ga:.2f}", file=open(sys.argv[1], "a"))
        if nz and go:
            print(f"ratio_{sc}_{m}_one={nz / go:.2f}", file=open(sys.argv[1], "a"))
EOF
fi
tap_done
