#!/bin/bash
# Guest stage of the Nezha QEMU test bed.  Run by the initramfs /init inside
# the chroot (host / read-only + tmpfs overlay), as:
#     guest-stage.sh NODE RUNDIR
# It reads RUNDIR/job.sh (written by vm.sh), sets up the rails, exports the
# NZ_* environment and runs the guest script with stdout and stderr on
# /dev/ttyS1, the result channel.  Protocol on ttyS1:
#     NZ-BEGIN <nonce> <uptime>      before the script starts
#     ...                            the script's output
#     NZ-EXIT <code> <nonce> <uptime> after the script exited
#     NZ-SETUP-FAIL <reason>         set-up failed; the script did not run
# The nonce is made here and never shown to the script, so the script's own
# output cannot pass for the final status line.  Returning hands control
# back to /init, which powers the guest off.
#
# Every process started under TCG costs ~0.1 s: builtins are used where they
# can be.

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
unset LC_ALL
set -u

node=$1
run=$2
result=/dev/ttyS1

# The result channel: raw (no CR insertion, no echo), kept open on fd 3.
stty -F "$result" raw -echo 115200 2>/dev/null
exec 3>"$result"

fail() {
	echo "nz-stage: $*" >&2
	echo "NZ-SETUP-FAIL $*" >&3
	exit 1
}

# shellcheck source=/dev/null
. "$run/job.sh" || fail "cannot read $run/job.sh"
: "${NZ_NODES:?}" "${NZ_RAILS:?}" "${NZ_TOP:?}" "${NZ_SCRIPT:?}"

# Rails: rail r of guest g has MAC 52:54:00:00:RR:GG and 10.77.r.(g+1)/24.
declare -A by_mac=()
for d in /sys/class/net/*; do
	read -r mac <"$d/address" && by_mac[$mac]=${d##*/}
done
ifs=() addrs=() cmds="link set lo up"$'\n'
for ((r = 0; r < NZ_RAILS; r++)); do
	printf -v mac '52:54:00:00:%02x:%02x' "$r" "$node"
	dev=${by_mac[$mac]:-}
	[ -n "$dev" ] || fail "no interface with MAC $mac (rail $r)"
	if [ -z "${by_mac[rail$r]:-}" ] && [ ! -e "/sys/class/net/rail$r" ]; then
		cmds+="link set dev $dev name rail$r"$'\n'
		dev=rail$r
	fi
	addr=10.77.$r.$((node + 1))
	cmds+="addr add $addr/24 dev $dev"$'\n'"link set $dev up"$'\n'
	ifs+=("$dev")
	addrs+=("$addr")
done
ip -batch - <<<"$cmds" >&2 || fail "rail set-up failed: ip -batch: $cmds"

echo "nz$node" >/proc/sys/kernel/hostname
echo "nz$node" >/etc/hostname
{
	echo "127.0.0.1 localhost"
	for ((g = 0; g < NZ_NODES; g++)); do
		echo "10.77.0.$((g + 1)) nz$g"
	done
} >/etc/hosts

export NZ_NODE=$node NZ_NODES NZ_RAILS NZ_TOP NZ_RUN=$run NZ_MODULE_PARAMS
export NZ_KO NZ_RDMA_KO NZ_TIME_SCALE NZ_INSNS
export NZ_IFS="${ifs[*]}" NZ_ADDRS="${addrs[*]}"
export NZ_OUT=$run/guest$node.out
# The run's job key, written by vm.sh: every rendezvous of the run uses it.
[ -e "$run/job.key" ] && export NEZHA_JOB_KEY_FILE=$run/job.key
[ -d "$NZ_OUT" ] || fail "no $NZ_OUT"
cd "$NZ_TOP" || fail "cannot cd to $NZ_TOP"

# From here on warnings (and their back traces) reach the console too; boot
# itself stays quiet (loglevel=4 on the command line).
echo 5 >/proc/sys/kernel/printk

# The guest clock: the TSC's rate calibrated at boot is kept only when the
# refinement against the HPET, a second or so later, confirms it (see vm.sh).
# Unconfirmed, the clock may run several times too fast or too slow and every
# timeout in the tests with it: read the HPET instead, slower but right.
cs=/sys/devices/system/clocksource/clocksource0
for ((i = 0; i < 100; i++)); do
	read -r cur <"$cs/current_clocksource"
	[ "$cur" = tsc-early ] || break
	sleep 0.1
done
if [ "$cur" != hpet ] && [[ $cur == tsc* ]] &&
	! dmesg | grep -q 'Refined TSC clocksource calibration'; then
	echo hpet >"$cs/current_clocksource" &&
		echo "nz-stage: TSC rate not confirmed at boot; clocksource hpet" >&2
fi

# kmemleak (debug kernels): forget what boot left, so that the scan after
# the script reports only what the test run leaked.
kmemleak=/sys/kernel/debug/kmemleak
grep -q " /sys/kernel/debug debugfs " /proc/mounts ||
	mount -t debugfs none /sys/kernel/debug 2>/dev/null
if [ -w "$kmemleak" ]; then
	echo scan >"$kmemleak" 2>/dev/null
	echo clear >"$kmemleak" 2>/dev/null
fi

read -r nonce </proc/sys/kernel/random/uuid
nonce=${nonce//-/}
read -r uptime _ </proc/uptime
echo "NZ-BEGIN $nonce $uptime" >&3

if [ -x "$NZ_SCRIPT" ]; then
	"$NZ_SCRIPT" "${NZ_ARGS[@]}" </dev/null >&3 2>&3 3>&-
else
	bash "$NZ_SCRIPT" "${NZ_ARGS[@]}" </dev/null >&3 2>&3 3>&-
fi
rc=$?

# Leaks: an object is reported once it is older than 5 s and no scan found
# a pointer to it; two scans 6 s apart catch what the last test dropped.
if [ -w "$kmemleak" ]; then
	echo scan >"$kmemleak" 2>/dev/null
	sleep 6
	echo scan >"$kmemleak" 2>/dev/null
	leaks=$(grep -c '^unreferenced object' "$kmemleak" 2>/dev/null)
	if [ "${leaks:-0}" -eq 0 ]; then
		echo "ok - kmemleak: no unreferenced object after the run" >&3
	else
		echo "not ok - kmemleak: $leaks unreferenced objects after the run" >&3
		head -n 60 "$kmemleak" | sed 's/^/# kmemleak: /' >&3
		cp "$kmemleak" "$NZ_OUT/kmemleak" 2>/dev/null
	fi
fi

dmesg >"$NZ_OUT/dmesg" 2>/dev/null
read -r uptime _ </proc/uptime
echo "NZ-EXIT $rc $nonce $uptime" >&3
# stty sets the line with TCSADRAIN: it returns once the status line is out.
stty -F "$result" -echo 2>/dev/null
exit 0
