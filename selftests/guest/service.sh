#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite: Nezha as an operator installs it, booted by systemd.
#
#   guest (systemd is PID 1: vm.sh boots with nz.boot=systemd because of
#   the "#@ boot" line below; selftests/qemu/systemd-prep.sh installed the
#   module in /lib/modules/.../extra, nezha.service (enabled), the udev rule,
#   modules-load.d and /etc/nezha/nezha.conf from the "#@conf" lines)
#   +---------------------------------------------------------------+
#   | systemd-modules-load: modprobe nezha -> udev: device apply     |
#   | nezha.service: nezhactl -w -b /etc/nezha/nezha.conf            |
#   |   rails on rail0 and rail1, which exist only once the test     |
#   |   bed renames the NICs and gives them addresses (after boot)   |
#   +---------------------------------------------------------------+
# Nothing is configured by hand before the checks: the rails, the health
# and scheduler settings and the device's group and mode must come from
# the file.
#
#@ boot=systemd
#@conf device set group 65534 mode 0640
#@conf health set interval 5 misses 6 grace 4000
#@conf param set sched_target_ms 25
#@conf rail add r0 proto tcp dev rail0
#@conf rail add r1 proto tcp \
#@conf     dev rail1 port 7471
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
SYS=/sys/class/nezha

check "systemd is PID 1" test "$(cat /proc/1/comm)" = systemd
check "systemd-modules-load loaded the installed nezha.ko" \
	sh -c "test -e /sys/module/nezha && modinfo -n nezha | grep -q /extra/nezha.ko"
check "nezha.service is enabled" systemctl -q is-enabled nezha.service
# The rails' NICs got their names and addresses after boot: nezhactl -w
# waited for them.  Give it a little time (TCG).
up=0
for _ in $(seq 100); do
	[ "$(cat $SYS/rail-r0/state 2>/dev/null)" = up ] &&
		[ "$(cat $SYS/rail-r1/state 2>/dev/null)" = up ] && { up=1; break; }
	sleep 0.2
done
[ $up = 1 ] && ok "the rails of nezha.conf came up with no manual step" ||
	not_ok "the rails of nezha.conf came up with no manual step" "$("$CTL" rail show 2>&1; systemctl status nezha 2>&1 | tail -5)"
check_eq() {
	local name=$1 want=$2 got; shift 2
	got=$("$@" 2>&1)
	[ "$got" = "$want" ] && ok "$name" || not_ok "$name" "want '$want', got '$got'"
}
check_eq "r1 on its port, from a continued line" 7471 cat $SYS/rail-r1/port
check_eq "health from nezha.conf" "heartbeat interval 5 ms misses 6 (dead after 30 ms) grace 4000 ms
new peers: 32 ms more, halving every 120 s" "$CTL" health
check_eq "a scheduler knob from nezha.conf" 25 cat /sys/module/nezha/parameters/sched_target_ms
check_eq "/dev/nezha: group and mode from nezha.conf (the udev rule)" "65534 640" stat -c '%g %a' /dev/nezha
state=
for _ in $(seq 50); do
	state=$(systemctl show -p ActiveState,SubState --value nezha.service | tr '\n' ' ')
	[ "$state" = "active exited " ] && break
	sleep 0.2
done
check_eq "nezha.service: active (exited) once every rail is added" "active exited " echo "$state"
journalctl -q -u nezha.service --no-pager 2>/dev/null | sed "s/^/# /"
check "the journal says which rail waited, and when it came" \
	sh -c "journalctl -q -u nezha.service --no-pager | grep -q 'rail r0: no such device: waiting' &&
	       journalctl -q -u nezha.service --no-pager | grep -q 'rail r0 added'"
check "systemctl stop nezha: the rails are deleted" \
	sh -c "systemctl stop nezha.service && test -z \"\$($CTL rail show)\""
check "systemctl start nezha: the rails are back at once" \
	sh -c "systemctl start nezha.service && $CTL rail show r0 >/dev/null && $CTL rail show r1 >/dev/null"
systemctl stop nezha.service
chgrp 0 /dev/nezha
if modprobe -r nezha && modprobe nezha; then
	udevadm settle -t 10 2>/dev/null
	check_eq "module reloaded: the udev rule applies the group and mode again" "65534 640" \
		stat -c '%g %a' /dev/nezha
else
	not_ok "module reloaded: the udev rule applies the group and mode again" "modprobe -r/modprobe failed"
fi
modprobe -r nezha
tap_done
