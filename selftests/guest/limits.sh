#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite: what a local user can do to the module (issue 18's findings,
# each a regression test): half-failed creates, lengths past every limit,
# RLIMIT_MEMLOCK, a process killed with dials and receives pending, destroy
# and rail del while peers never answer, create racing destroy.
#
#   one guest, one rail:  rail0 10.77.0.1, rail r0 listening on :7470
#   unreachable peers:    10.77.0.200-249 (no guest has them: ARP fails)
#   a silent peer:        10.77.0.1:7499 accepts and never writes
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
# shellcheck disable=SC2206  # word splitting intended
ifs=($NZ_IFS) addrs=($NZ_ADDRS)

check "insmod" nz_load
check "rail add r0" "$CTL" rail add r0 proto tcp dev "${ifs[0]}" port 7470
# Arguments name a subset of the cases, to replay one (nz_limits.c):
#   selftests/qemu/vm.sh -n 1 -r 1 selftests/guest/limits.sh killed
NZ_RAIL_DEV=${ifs[0]} run_tap limits "$NZ_BIN/guest/nz_limits" r0 "${addrs[0]}" 7470 "$CTL" "$@"
check "nothing in flight, no file open, no communicator" \
	sh -c "$CTL show | grep -q 'files: 0 open, 0 commands in flight' &&
	       test \"\$(cat /sys/class/nezha/nezha/comms)\" = 0"
check "rail del r0" "$CTL" rail del r0
check "rmmod" nz_unload
tap_done
