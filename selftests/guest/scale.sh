#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite for N guests x 2 rails (make check-scale: 4 and 8 guests):
# every collective of libnezha across the N guests, one rank each, then
# 2N ranks, two per guest, so that intra-node traffic shows; every
# result checked element by element against the reference.  Then the cost
# of watching the paths: probe and echo frames a second per node, idle,
# under allreduces and waiting in a barrier (nz_coll probes), which must
# not grow with the ranks of the job (Documentation/health.rst).
#
# Guest g runs ranks g, g + N, ...; rank 0 (guest 0, 10.77.0.1) is the
# rendezvous.  NZ_SCALE_BIG (bytes, 4 MiB) sizes the big allreduce.
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
BIG=${NZ_SCALE_BIG:-$((4 << 20))}

nz_load_tcp_rails
export MASTER_ADDR=10.77.0.1 NEZHA_TIMEOUT_MS=120000
export NZ_COLL_JOB_TIMEOUT=${NZ_COLL_JOB_TIMEOUT:-900}

n=$NZ_NODES
coll_job "probes$n" 29700 "$n" probes 3
coll_job "coll$n" 29701 "$n" suite "$BIG"
coll_job "coll$((2 * n))" 29702 $((2 * n)) suite "$BIG"
coll_job "probes$((2 * n))" 29703 $((2 * n)) probes 3

check "no transfer left in flight" \
	sh -c 'for i in $(seq 50); do [ "$(cat /sys/class/nezha/nezha/inflight)" = 0 ] && exit 0; sleep 0.2; done; exit 1'
"$CTL" rail show | sed 's/^/# /'
check "rmmod" nz_unload
tap_done
