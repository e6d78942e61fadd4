#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Failover gap of Nezha, MPTCP and bonding side by side (issue 6).
# NZ_DRILLS (default 20) drills per system; NZ_FAILOVER_NEZHA_ONLY=1 skips
# MPTCP and bonding (quicker, when working on Nezha's own gap).
cd "$(dirname "$0")/.." || exit 1
out=${NZ_BENCH_OUT:-build/bench-failover}
rm -rf "$out"
exec selftests/qemu/vm.sh -B -n 2 -r 2 -t 3000 -o "$out" -s "${NZ_RATE:-40mbit}" \
	-H selftests/guest/bench_failover_host.sh selftests/guest/bench_failover.sh "${NZ_DRILLS:-20}" \
	${NZ_FAILOVER_NEZHA_ONLY:+nezha-only}
