#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite: a fuzzing campaign against the module's local interface
# (selftests/fuzz/nz_fuzz.c), as root and as an unprivileged user given
# access to /dev/nezha, then the wire fuzzer (nz_hostile) against this
# guest's own rail.  Afterwards nothing may be left: no peer, no open file,
# and the module must unload.  One guest; on several, each runs it alone.
#
#   fuzz.sh [LOCAL_INPUTS [WIRE_FRAMES [SEED]]]
#
# Defaults: 50000 local inputs per user (two users: 100000 in all), 20000
# wire frames; `make fuzz` passes the long campaign's counts, per guest.
# Each guest fuzzes with seeds of its own (SEED + 16 x its index).
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
FUZZ=$NZ_BIN/fuzz/nz_fuzz
N=${1:-50000}
FRAMES=${2:-20000}
SEED=$((${3:-0x4e5a46555a5a0001} + 16 * ${NZ_NODE:-0}))
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
# shellcheck disable=SC2206  # word splitting intended
ifs=($NZ_IFS) addrs=($NZ_ADDRS)

# unexpected_mb: the fuzzer's pairs send more than they receive.
check "insmod nezha.ko dev_mode=0666" nz_load dev_mode=0666 unexpected_mb=16
for ((i = 0; i < ${#ifs[@]} && i < 2; i++)); do
	check "rail add r$i on ${ifs[i]}" "$CTL" rail add "r$i" proto tcp dev "${ifs[i]}"
done
check "/dev/nezha is open to every user (dev_mode=0666)" test "$(stat -c %a /dev/nezha)" = 666

# One deterministic case per bug the fuzzer found (all fixed on main).
run_tap "regressions" "$FUZZ" -c all
run_tap "regressions uid 65534" "${NOBODY[@]}" "$FUZZ" -c create-no-rail,create-port0,create-addr-null,create-dup-rail,send-1tib,recv-huge,exit-inflight,exit-inflight-async,destroy-fast
run_tap "fuzz root" "$FUZZ" -s "$SEED" -n "$N"
run_tap "fuzz uid 65534" "${NOBODY[@]}" "$FUZZ" -s "$((SEED + 1))" -n "$N"

modprobe -q algif_hash 2>/dev/null
run_tap "wire fuzz" "$NZ_BIN/guest/nz_hostile" r0 "${addrs[0]}" 7470 -n "$FRAMES" -s "$SEED"

check "nezhactl rail show lists no peer" sh -c "! $CTL rail show | grep -q 'peer '"
check "no file of /dev/nezha open" test "$(cat /sys/class/nezha/nezha/open_files)" = 0
for ((i = 0; i < ${#ifs[@]} && i < 2; i++)); do
	check "rail del r$i" "$CTL" rail del "r$i"
done
check "rmmod after the campaign" nz_unload
tap_done
