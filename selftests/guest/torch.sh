#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite (2 guests, 2 rails): the torch.distributed backend "nezha"
# (libnezha-user/torch/) against Gloo, on Debian's PyTorch 1.13.
#
#   guest 0: ranks 0 (2) == rail0 bridge == guest 1: ranks 1 (3)
#                        == rail1 bridge ==
#
#  1. every operation and dtype on 2 ranks (one per guest) and on 4 ranks
#     (two per guest), element by element against Gloo (torch_ops.py);
#  2. DDP training on scikit-learn's digits, 50 steps, Gloo then Nezha,
#     same seeds: the per-step losses must agree (torch_train.py);
#  3. the same script under torchrun (its TCPStore on MASTER_PORT, Nezha's
#     rendezvous through it), the job key drawn by rank 0 and passed in
#     that store (NEZHA_KEY_FROM_STORE=1); everywhere else the key is the
#     run's key file that vm.sh hands out (NEZHA_JOB_KEY_FILE), and
#     without any key the backend refuses to start;
#  4. the Nezha training again with guest 0's rail1 cable pulled by the
#     host at step 20 (failover_host.sh): same losses; then Gloo on both
#     NICs under the same fault, to show what it does (a comment, not a
#     check: Gloo is not under test).
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
PY=/usr/bin/python3
T=$NZ_TOP/selftests/guest
export PYTHONPATH=$NZ_BIN/torch MASTER_ADDR=10.77.0.1 GLOO_SOCKET_IFNAME=rail0
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1

if ! why=$("$PY" -c 'import torch.distributed, sklearn, nezha_torch' 2>&1); then
	not_ok "torch, sklearn and nezha_torch import" \
		"$(echo "$why" | tail -1) (make check installs python3-torch, libtorch-dev and python3-sklearn; make torch builds nezha_torch)"
	tap_done
	exit 1
fi
ok "torch, sklearn and nezha_torch import"
# The default health settings: probes go only where an answer is owed,
# so Python processes (two per guest with 4 ranks) no longer share their
# vCPU with a heartbeat every 4 ms on every path (Documentation/health.rst).
nz_load_tcp_rails
"$CTL" monitor timeout 3000 >"$NZ_OUT/monitor.log" 2>&1 &
monpid=$!

# job NAME PORT WORLD TIMEOUT CMD...: this guest's ranks of a WORLD-rank
# run of CMD (env://), at once; relay each one's TAP.
job() {
	local name=$1 port=$2 world=$3 tmo=$4 r i rc start=$SECONDS
	local pids=() ranks=()
	shift 4
	for ((r = NZ_NODE; r < world; r += NZ_NODES)); do
		RANK=$r WORLD_SIZE=$world MASTER_PORT=$port timeout -k 5 "$tmo" "$@" \
			>"$NZ_OUT/$name-rank$r.log" 2>&1 &
		pids+=($!)
		ranks+=("$r")
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}"
		rc=$?
		[ $rc = 124 ] && echo "# $name rank ${ranks[i]}: killed after $tmo s"
		run_tap "$name rank ${ranks[i]}" sh -c 'grep -v "No CUDA runtime" "$1"; exit "$2"' \
			sh "$NZ_OUT/$name-rank${ranks[i]}.log" "$rc"
	done
	echo "# $name: $((SECONDS - start)) s"
}

# No key: init_process_group raises, naming the variables (the other ranks
# of such a job could not authenticate it).
nokey() {
	env -u NEZHA_JOB_KEY_FILE RANK=$NZ_NODE WORLD_SIZE=2 MASTER_PORT=29705 timeout -k 5 300 \
		"$PY" - >"$NZ_OUT/nokey.log" 2>&1 <<'EOF'
import datetime, torch.distributed as dist, nezha_torch
try:
    dist.init_process_group("nezha", timeout=datetime.timedelta(seconds=60))
except RuntimeError as e:
    print(e)
    raise SystemExit(0 if "NEZHA_JOB_KEY" in str(e) and "NEZHA_KEY_FROM_STORE" in str(e) else 1)
raise SystemExit(1)
EOF
}
check "no job key: init_process_group(\"nezha\") raises, naming NEZHA_JOB_KEY" nokey
grep -m1 'job key' "$NZ_OUT/nokey.log" | cut -c1-300 | sed 's/^/# /'

job ops2 29700 2 900 "$PY" "$T/torch_ops.py"
job ops4 29701 4 1200 "$PY" "$T/torch_ops.py"

# train NAME PORT ARGS...: the training on 2 ranks, one per guest; node 0
# keeps the losses in $NZ_OUT/NAME.loss.
train() {
	local name=$1 port=$2 rc
	shift 2
	RANK=$NZ_NODE WORLD_SIZE=2 MASTER_PORT=$port timeout -k 5 600 \
		"$PY" "$T/torch_train.py" "$@" >"$NZ_OUT/$name.log" 2>&1
	rc=$?
	grep '^step ' "$NZ_OUT/$name.log" >"$NZ_OUT/$name.loss"
	grep '^# ' "$NZ_OUT/$name.log"
	return $rc
}

# same_losses A B: 50 steps each, every loss within 1e-5 (relative).
same_losses() {
	"$PY" - "$NZ_OUT/$1.loss" "$NZ_OUT/$2.loss" <<'EOF'
import sys
a = [float(l.split()[3]) for l in open(sys.argv[1])]
b = [float(l.split()[3]) for l in open(sys.argv[2])]
worst = max((abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)), default=1)
print(f"{len(a)} and {len(b)} steps; first {a[:1]} {b[:1]}, last {a[-1:]} {b[-1:]}; worst relative difference {worst:.2e}")
sys.exit(0 if len(a) == len(b) == 50 and worst <= 1e-5 else 1)
EOF
}

check "DDP digits, 50 steps, gloo" train gloo 29710 --backend gloo
check "DDP digits, 50 steps, nezha" train nezha 29711 --backend nezha
if [ "$NZ_NODE" = 0 ]; then
	out=$(same_losses nezha gloo)
	[ $? = 0 ] && ok "DDP: nezha's 50 losses equal gloo's" || not_ok "DDP: nezha's 50 losses equal gloo's" "$out"
	echo "# $out"
fi

# Under torchrun: an unmodified script, its store on MASTER_PORT; rank 0
# draws the job key and hands it out through that store.
# --redirects 2 --tee 1: Debian's torch 1.13 on Python 3.11 cannot parse
# the default "0" of either (Std.from_str returns None: a zero-valued
# IntFlag member is not iterated any more), so torchrun dies before it
# starts a worker; these two values parse, and keep stdout on the console
# (each line prefixed "[default0]:").
trun() {
	local rc
	env -u NEZHA_JOB_KEY_FILE NEZHA_KEY_FROM_STORE=1 \
		timeout -k 5 600 "$PY" -m torch.distributed.run --nnodes 2 --nproc_per_node 1 \
		--node_rank "$NZ_NODE" --master_addr 10.77.0.1 --master_port 29720 \
		--redirects 2 --tee 1 \
		"$T/torch_train.py" --backend nezha >"$NZ_OUT/torchrun.log" 2>&1
	rc=$?
	# torchrun's tee prefixes what it has read so far: a line read in two
	# parts comes out as "step 4 loss 2.27[default0]:35". Drop every prefix.
	sed 's/\[default0\]://g' "$NZ_OUT/torchrun.log" | grep '^step ' >"$NZ_OUT/torchrun.loss"
	[ $rc = 0 ] || tail -5 "$NZ_OUT/torchrun.log" | sed 's/^/# /'
	return $rc
}
check "torchrun, 2 nodes: DDP digits on nezha, the key through torch's store" trun
if [ "$NZ_NODE" = 0 ]; then
	out=$(same_losses torchrun gloo)
	[ $? = 0 ] && ok "torchrun: nezha's 50 losses equal gloo's" || not_ok "torchrun: nezha's 50 losses equal gloo's" "$out"
	echo "# $out"
fi

# A rail pulled at step 20: the host takes guest 0's rail1 carrier away for
# 45 s (failover_host.sh), longer than the runs' 30 s collective timeout;
# the training goes on over rail0.
hostreq=0
pull_cmd() {	# the command that asks the host to pull rail1 of guest 0 for $1 ms,
		# and returns once this guest sees the carrier gone (at most 10 s)
	echo "echo 'flap 0 r1 1 $1 0' > $NZ_RUN/.req.$hostreq && mv $NZ_RUN/.req.$hostreq $NZ_RUN/req.$hostreq;" \
		"for i in \$(seq 200); do [ \"\$(cat /sys/class/net/rail1/carrier)\" = 0 ] && break; sleep 0.05; done"
}
host_done() {	# host_done: wait for the host's answer to the last request
	local i answer=
	for ((i = 0; i < 900; i++)); do
		answer=$(cat "$NZ_RUN/done.$hostreq" 2>/dev/null) && [ -n "$answer" ] && break
		sleep 0.1
	done
	hostreq=$((hostreq + 1))
	[ "$answer" = ok ]
}
train_pulled() {	# train_pulled NAME PORT ARGS...: with the pull at step 20 (node 0)
	local name=$1 port=$2
	shift 2
	if [ "$NZ_NODE" = 0 ]; then
		train "$name" "$port" "$@" --pull-step 20 --pull-cmd "$(pull_cmd 45000)"
	else
		train "$name" "$port" "$@"
	fi
}
fo_before=$(rail_stat r1 failovers)
meet pulled || echo "# the other guest did not come within 2 minutes"
check "DDP digits on nezha, guest 0's rail1 pulled at step 20 (45 s; timeout 30 s)" \
	train_pulled pulled 29730 --backend nezha --timeout 30
if [ "$NZ_NODE" = 0 ]; then
	fo=$(( $(rail_stat r1 failovers) - fo_before ))
	[ "$fo" -gt 0 ] && ok "Nezha failed rail1 over during that training ($fo failovers)" ||
		not_ok "Nezha failed rail1 over during that training" "no failover counted on r1: was the cable pulled in time?"
	out=$(same_losses pulled gloo)
	[ $? = 0 ] && ok "rail pulled: nezha's 50 losses equal gloo's" ||
		not_ok "rail pulled: nezha's 50 losses equal gloo's" "$out"
	echo "# $out"
	if host_done; then ok "the host pulled rail1 and put it back"; else not_ok "the host pulled rail1 and put it back"; fi
	grep -h 'rail\|r1' "$NZ_OUT/pulled.log" | head -3 | sed 's/^/# /'
fi
sleep 5	# rail1 is back: let its connections come up before the next run

# Gloo under the same fault, both NICs: shown, not checked.  Guest 0 waited
# for the host to put rail1 back; without the meeting, guest 1 started
# alone and its rendezvous timed out (30 s) before guest 0 came, so the
# run failed in init_process_group after 500 s, with no step done.
meet gloo-pulled || echo "# the other guest did not come within 2 minutes"
start=$SECONDS
GLOO_SOCKET_IFNAME=rail0,rail1 train_pulled gloo-pulled 29740 --backend gloo --timeout 30
rc=$?
if [ "$NZ_NODE" = 0 ]; then
	host_done || true
	echo "# gloo on rail0,rail1 with rail1 pulled at step 20: exit status $rc after $((SECONDS - start)) s," \
		"$(wc -l <"$NZ_OUT/gloo-pulled.loss") of 50 steps done; last words:"
	grep -v '^step \|No CUDA' "$NZ_OUT/gloo-pulled.log" | grep -i 'error\|timed\|exception' | tail -2 | cut -c1-300 | sed 's/^/#   /'
fi

kill "$monpid" 2>/dev/null
echo "# path events during the suite: $(grep -c ': down' "$NZ_OUT/monitor.log") down," \
	"$(grep -c ': up' "$NZ_OUT/monitor.log") up; failovers per rail:" \
	"$(for r in r0 r1; do echo -n "$r $(rail_stat $r failovers) "; done)"
grep ': down' "$NZ_OUT/monitor.log" | head -3 | sed 's/^/#   /'
check "no transfer left in flight" \
	sh -c 'for i in $(seq 50); do [ "$(cat /sys/class/nezha/nezha/inflight)" = 0 ] && exit 0; sleep 0.2; done; exit 1'
check "rmmod" nz_unload
tap_done
