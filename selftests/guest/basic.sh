#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite: module load/unload, /dev/nezha and its io_uring command path,
# sysfs, nezhactl.  One guest is enough; on several, each runs it alone.
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
SYS=/sys/class/nezha/nezha

check "insmod nezha.ko" nz_load
check "/dev/nezha is a char device" test -c /dev/nezha
check "/dev/nezha mode is 0660 by default" test "$(stat -c %a /dev/nezha)" = 660
check "sysfs: abi_version is 2" test "$(cat $SYS/abi_version 2>&1)" = 2
missing=
for f in release features open_files inflight stats/opens stats/cmds_submitted \
	 stats/cmds_completed stats/cmds_failed stats/cmds_rejected stats/cmds_cancelled \
	 stats/comms_refused stats/cmds_refused stats/tags_refused stats/msgs_aborted \
	 stats/msgs_withdrawn stats/msgs_refused stats/sends_refused \
	 stats/chunks_zerocopy stats/msgs_unexpected stats/bytes_unexpected zerocopy_held; do
	[ -r "$SYS/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && ok "sysfs: every documented file exists" || not_ok "sysfs: every documented file exists" "missing:$missing"
check "sysfs: every statistics file holds one number" \
	sh -c "for f in $SYS/stats/*; do grep -qxE '[0-9]+' \$f || exit 1; done"
check "nezhactl version names the module release" \
	sh -c "$CTL version | grep -qF 'module nezha $(cat $SYS/release), abi 2'"

run_tap uring "$NZ_BIN/guest/nz_uring"

check "nezhactl show reports the counters" \
	sh -c "$CTL show | grep -qE 'submitted [1-9][0-9]{5,}'"
check "nezhactl show: nothing in flight, no file open" \
	sh -c "$CTL show | grep -q 'files: 0 open, 0 commands in flight'"
check_fails "nezhactl: unknown subcommand fails" "$CTL" frobnicate

# rmmod while the device is open is refused; after close it works.
exec 3<>/dev/nezha
check_fails "rmmod refused while /dev/nezha is open" rmmod nezha
exec 3>&-
check "rmmod after close" nz_unload
check_fails "nezhactl without the module fails cleanly" "$CTL" show
check "insmod dev_mode=0600" nz_load dev_mode=0600
check "dev_mode=0600 applies" test "$(stat -c %a /dev/nezha)" = 600
check "rmmod" nz_unload

loops_ok=1
for i in $(seq 1 25); do
	nz_load && nz_unload || { loops_ok=0; break; }
done
[ $loops_ok = 1 ] && ok "25 load/unload cycles" || not_ok "25 load/unload cycles" "failed at $i"

# Load, use, unload while another process hammers the device with opens.
nz_load
( for i in $(seq 1 200); do exec 4<>/dev/nezha 2>/dev/null; exec 4>&- ; done ) &
opener=$!
"$NZ_BIN/guest/nz_uring" >/dev/null 2>&1 || true
wait $opener
check "unload after concurrent opens" nz_unload
tap_done
