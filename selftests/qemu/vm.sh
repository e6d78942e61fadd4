#!/bin/bash
# Boot N QEMU guests joined by R rails and run a test script in every guest.
# See Documentation/testing.rst.
#
# usage: selftests/qemu/vm.sh [-n GUESTS] [-r RAILS] [-t TIMEOUT_S] [-m MEM_MB]
#            [-o OUTDIR] [-H HOST_SCRIPT] [-a "extra kernel cmdline"] [-B]
#            [-s SPEED[,SPEED...]] [-c VCPUS] [-P PLUGIN] GUEST_SCRIPT [ARGS...]
#
# -B (benchmarks): boot without the kernel's debugging allocator
# (slub_debug), which the tests keep to catch memory errors but which
# costs every allocation a stack walk: a benchmark would measure it.
#
# -s: the link speed each rail's NIC reports (QEMU's virtio-net speed=),
# in Mbit/s or as tc writes it (40mbit, 1gbit); one value per rail, the
# last one for the rest.  The guest scripts shape the rails (tbf); a NIC of
# that speed tells the guest its speed as a real one does, and libnezha
# sizes its chunks from it.  Without -s the NICs report no speed.
#
# -c: virtual CPUs per guest (default 1).  Under TCG each is a host thread:
# more vCPUs than host cores only share them.
#
# -P: load the instruction-counting TCG plugin PLUGIN (tools/qemu/nz_insns.c)
# into every guest's QEMU, writing OUTDIR/guestG.insns.N at the guest's
# N-th marker (nz_mark); the guests see NZ_INSNS=1.
#
# NZ_BOOT_SILENCE=S (the debug lane): a guest whose console stays silent
# for S seconds before its script began is taken for a hung boot: every
# guest is stopped, the run reports it and exits 75, and OUTDIR/boot-hung
# says which guest (selftests/run.sh then boots the suite again).  It needs
# a kernel that prints while it boots (loglevel=6, earlyprintk).
#
# Output: TAP lines ("ok - g0: ..." / "not ok - g0: ..."), "# " comments.
# A guest's clock is the host's TSC (tsc=reliable, TCG): when the host's TSC
# jumps (its own virtual machine paused, restored or migrated) the guest's
# clock jumps with it and every kernel timer fires at once; CI saw a jump of
# 462,342 s (2026-12-03).  A guest whose clock ran more than 30 s ahead of
# the host's over its script is reported, and a failed run with such a
# jump exits 76: its results say nothing about the code.
#
# Exit status: 0 when no line was "not ok" (but for "# TODO"), 1 otherwise,
# 2 on usage or set-up errors, 75 when a boot hung (NZ_BOOT_SILENCE), 76
# when the run failed and a guest's clock jumped.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)

usage() {
	sed -n 's/^# \{0,1\}//; 4,20p' "${BASH_SOURCE[0]}" >&2
	exit 2
}
die() {
	echo "vm.sh: $*" >&2
	exit 2
}
comment() { sed 's/^/# /'; }
# Console text as plain lines: no CRs, terminal escapes or blank lines.
console_text() { sed 's/\r//g; s/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1b[a-z]//g; /^[[:space:]]*$/d' "$@"; }

nodes=2 rails=2 timeout=300 mem=768 outdir='' host_script='' extra_cmdline='' speeds='' vcpus=1
slub_debug=FZPU
plugin=
while getopts n:r:t:m:o:H:a:Bs:c:P:h opt; do
	case $opt in
	n) nodes=$OPTARG ;;
	r) rails=$OPTARG ;;
	t) timeout=$OPTARG ;;
	m) mem=$OPTARG ;;
	o) outdir=$OPTARG ;;
	H) host_script=$OPTARG ;;
	a) extra_cmdline=$OPTARG ;;
	B) slub_debug='' ;;
	s) speeds=$OPTARG ;;
	c) vcpus=$OPTARG ;;
	P) plugin=$(realpath "$OPTARG") || die "-P: no $OPTARG" ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
guest_script=$1
shift
guest_args=("$@")
# A guest script that says "#@ boot=systemd" runs under the host's systemd
# as PID 1, with Nezha's system files installed (init.sh, systemd-prep.sh).
if [ -r "$guest_script" ] && grep -q '^#@ boot=systemd$' "$guest_script"; then
	extra_cmdline+="${extra_cmdline:+ }nz.boot=systemd"
fi

# in_range VALUE MIN MAX: VALUE is a decimal number in [MIN, MAX]
in_range() { [[ $1 =~ ^[0-9]{1,6}$ ]] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
in_range "$nodes" 1 200 || die "-n: 1..200 guests"
in_range "$rails" 1 16 || die "-r: 1..16 rails"
in_range "$timeout" 1 999999 || die "-t: a number of seconds"
in_range "$mem" 128 65536 || die "-m: MiB, 128..65536"
in_range "$vcpus" 1 64 || die "-c: 1..64 virtual CPUs"
IFS=, read -r -a speed <<<"$speeds"
for ((r = 0; r < ${#speed[@]}; r++)); do
	s=${speed[r],,}
	case $s in
	*gbit) s=${s%gbit}000 ;;
	*mbit) s=${s%mbit} ;;
	esac
	in_range "$s" 1 999999 || die "-s: link speeds (40, 40mbit, 1gbit), comma separated"
	speed[r]=$s
done
[ "$(id -u)" -eq 0 ] || die "must run as root (network namespace, tap devices)"

# One test bed at a time on this host: two runs' guests would share its
# cores, and every timing in both would be wrong.  A second run waits.
lock=${NZ_VM_LOCK:-/run/lock/nezha-vm.lock}
exec 9>>"$lock" || die "cannot open $lock"
if ! flock -n 9; then
	echo "vm.sh: waiting for another test-bed run to finish ($lock)" >&2
	flock 9
fi

# Paths end up in QEMU options and on the kernel command line.
plain_path() {
	case $1 in
	*[[:space:],]*) die "path must not contain blanks or commas: $1" ;;
	/proc/* | /sys/* | /dev/* | /run/*) die "path is hidden in the guest: $1" ;;
	esac
}
guest_script=$(realpath -e -- "$guest_script") || die "no such guest script"
plain_path "$guest_script"
plain_path "$TOP"
if [ -n "$host_script" ]; then
	host_script=$(realpath -e -- "$host_script") || die "no such host script"
fi

# --- kernel and modules ------------------------------------------------------

# The release of a kernel image: a bzImage (boot protocol: kernel_version
# pointer at 0x20e) or an ELF vmlinux (its "Linux version" banner).
kernel_release() {
	local off
	if [ "$(od -An -tx1 -N 4 "$1" | tr -d ' ')" = 7f454c46 ]; then
		grep -a -m 1 -o 'Linux version [^ ]*' "$1" | head -n 1 | cut -d' ' -f3
		return
	fi
	[ "$(od -An -c -j 514 -N 4 "$1" | tr -d ' ')" = HdrS ] || return 1
	off=$(od -An -tu2 -j 526 -N 2 "$1" | tr -d ' ')
	[ -n "$off" ] && [ "$off" -gt 0 ] || return 1
	dd if="$1" bs=1 skip=$((off + 512)) count=200 status=none | tr '\0' '\n' | head -n 1 | cut -d' ' -f1
}

if [ -n "${NZ_KERNEL:-}" ]; then
	kernel=$(realpath -e -- "$NZ_KERNEL") || die "NZ_KERNEL: no such file"
	kver=$(kernel_release "$kernel") || kver=''
	[ -n "$kver" ] || die "NZ_KERNEL: not a bzImage or vmlinux: $kernel"
else
	kver=$("$TOP/scripts/kver.sh" --guest) || exit 2
	kernel=/boot/vmlinuz-$kver
	[ -r "$kernel" ] || die "no $kernel"
fi
moddir=${NZ_MODDIR:-/lib/modules/$kver}
moddir=$(realpath -e -- "$moddir") ||
	die "no module directory ${NZ_MODDIR:-/lib/modules/$kver} (set NZ_MODDIR)"
plain_path "$moddir"
modkver=${moddir##*/}
modbase=${moddir%/lib/modules/"$modkver"}
[ "$modbase/lib/modules/$modkver" = "$moddir" ] || die "NZ_MODDIR must end in lib/modules/<kver>: $moddir"
[ "$modkver" = "$kver" ] || echo "vm.sh: warning: kernel $kver, modules $modkver" >&2
# `make` builds for the running kernel when it has headers: a module built
# for another kernel than the guest's would only fail at insmod, obscurely.
ko=${NZ_KO:-$TOP/nezha.ko}
if [ -r "$ko" ] && command -v modinfo >/dev/null; then
	kov=$(modinfo -F vermagic "$ko" 2>/dev/null | cut -d' ' -f1)
	[ -z "$kov" ] || [ "$kov" = "$modkver" ] ||
		die "$ko is built for $kov, the guest boots $modkver: make KVER=$modkver"
fi
# Is it the host's own /lib/modules/<kver> (which the guest sees anyway)?
sys_moddir=
[ "$(realpath -m -- "/lib/modules/$modkver")" != "$moddir" ] || sys_moddir=1

# --- initramfs (cached) --------------------------------------------------------

cachedir=$TOP/build/qemu
mkdir -p "$cachedir"
if [ -n "$sys_moddir" ]; then
	initramfs=$cachedir/initramfs-$modkver.cpio.gz
else
	initramfs=$cachedir/initramfs-$modkver-$(echo "$moddir" | md5sum | cut -c1-8).cpio.gz
fi

build_initramfs() {
	local tmp bb kind path name
	tmp=$(mktemp -d "$cachedir/initramfs.XXXXXX")
	# shellcheck disable=SC2064  # expand now: tmp is local
	trap "rm -rf '$tmp' '$initramfs.tmp.$$'" EXIT
	bb=$(command -v busybox || true)
	[ -n "$bb" ] || die "busybox not found (apt-get install busybox-static)"
	if ldd "$bb" >/dev/null 2>&1; then
		die "$bb is not static (apt-get install busybox-static)"
	fi
	mkdir -p "$tmp"/{bin,dev,proc,sys,modules}
	cp "$bb" "$tmp/bin/busybox"
	cp "$HERE/init.sh" "$tmp/init"
	chmod 755 "$tmp/init" "$tmp/bin/busybox"
	: >"$tmp/modules/order"
	modprobe -d "${modbase:-/}" -S "$modkver" --show-depends -a \
		virtio_pci virtio_net 9pnet_virtio 9p overlay configfs >"$tmp/deps" ||
		die "modprobe --show-depends failed for $moddir"
	while read -r kind path _; do
		[ "$kind" = insmod ] || continue # "builtin NAME": nothing to load
		name=${path##*/}
		name=${name%.ko*}.ko
		grep -qxF "$name" "$tmp/modules/order" && continue
		case $path in
		*.ko.xz) xz -dc "$path" >"$tmp/modules/$name" ;;
		*.ko.zst) zstd -qdc "$path" >"$tmp/modules/$name" ;;
		*.ko.gz) gzip -dc "$path" >"$tmp/modules/$name" ;;
		*.ko) cp "$path" "$tmp/modules/$name" ;;
		*) die "unexpected module file $path" ;;
		esac
		echo "$name" >>"$tmp/modules/order"
	done <"$tmp/deps"
	rm -f "$tmp/deps"
	(cd "$tmp" && find . -print0 | cpio --null -o -H newc -R 0:0 --quiet) |
		gzip -1 >"$initramfs.tmp.$$"
	mv -f "$initramfs.tmp.$$" "$initramfs"
	rm -rf "$tmp"
	trap - EXIT
}

if [ ! -s "$initramfs" ] || [ "$HERE/init.sh" -nt "$initramfs" ] ||
	[ "${BASH_SOURCE[0]}" -nt "$initramfs" ] || [ "$moddir/modules.dep" -nt "$initramfs" ]; then
	build_initramfs
fi

# --- uncompressed kernel for a direct PVH boot (cached) -----------------------
#
# Under TCG the bzImage's own decompressor takes seconds; QEMU boots the ELF
# vmlinux inside it directly when it has a PVH entry (CONFIG_PVH).  NZ_PVH=0
# boots the bzImage as it is.

# extract_vmlinux BZIMAGE OUT: unpack the payload (boot protocol >= 2.08).
extract_vmlinux() {
	local k=$1 out=$2 setup poff plen magic
	setup=$(od -An -tu1 -j $((0x1f1)) -N 1 "$k" | tr -d ' ')
	[ "$setup" -ne 0 ] || setup=4
	poff=$(od -An -tu4 -j $((0x248)) -N 4 "$k" | tr -d ' ')
	plen=$(od -An -tu4 -j $((0x24c)) -N 4 "$k" | tr -d ' ')
	if [ -z "$poff" ] || [ -z "$plen" ] || [ "$plen" -eq 0 ]; then
		return 1
	fi
	payload() { tail -c +$(((setup + 1) * 512 + poff + 1)) "$k" | head -c "$plen"; }
	magic=$(payload | od -An -tx1 -N 4 | tr -d ' ')
	case $magic in
	fd377a58) payload | xz -dcq --single-stream ;;
	1f8b*) payload | gzip -dcq ;;
	28b52ffd) payload | zstd -dcq ;;
	425a68*) payload | bzip2 -dcq ;;
	5d0000*) payload | xz -dcq --format=lzma ;;
	*) return 1 ;;
	esac >"$out" 2>/dev/null
	[ "$(od -An -tx1 -N 4 "$out" | tr -d ' ')" = 7f454c46 ] || return 1
	# XEN_ELFNOTE_PHYS32_ENTRY (18): the PVH entry point.
	readelf -n "$out" 2>/dev/null | grep -qE '\(0x0*12\)|PHYS32' || return 1
}

boot_kernel=$kernel
if [ "${NZ_PVH:-1}" != 0 ] && [ "$(od -An -tx1 -N 4 "$kernel" | tr -d ' ')" != 7f454c46 ]; then
	vmlinux=$cachedir/vmlinux-$kver-$(echo "$kernel" | md5sum | cut -c1-8)
	if [ ! -s "$vmlinux" ] || [ "$kernel" -nt "$vmlinux" ]; then
		rm -f "$vmlinux" "$vmlinux.none"
		if extract_vmlinux "$kernel" "$vmlinux.tmp.$$"; then
			mv -f "$vmlinux.tmp.$$" "$vmlinux"
		else
			rm -f "$vmlinux.tmp.$$"
			: >"$vmlinux.none" # no PVH entry: remember, boot the bzImage
		fi
	fi
	[ ! -s "$vmlinux" ] || boot_kernel=$vmlinux
fi

# --- run directory -------------------------------------------------------------

if [ -z "$outdir" ]; then
	outdir=$(mktemp -d "${TMPDIR:-/tmp}/nz-vm.XXXXXX")
else
	mkdir -p "$outdir"
	outdir=$(realpath -e -- "$outdir")
	rm -rf "$outdir"/guest*.out
	rm -f "$outdir"/guest*.{console,result,mon,diag,qemu.log} "$outdir/host.log" "$outdir/job.sh" \
		"$outdir/job.key" "$outdir/boot-hung" "$outdir"/guest*.insns.*
	# The guests' and the host script's rendezvous files (lib.sh's meet,
	# the host requests): one left by an earlier run lets a guest through
	# a meeting the other has not reached.  A suite run again in its
	# directory (selftests/run.sh, after a hung boot or a clock jump, and
	# the debug lane's runs) went on out of step.
	rm -f "$outdir"/{meet,at,req,.req,done,.done,ready,.ready,stop,gap,dmesg}.* \
		"$outdir"/{finished,restart.go,rdma-hold,ratemeter.txt}
fi
plain_path "$outdir"
[ ${#outdir} -le 90 ] || die "OUTDIR path too long for the monitor sockets: $outdir"

# In the guest /tmp is a fresh tmpfs, unless a path the guest needs lives in
# the host's /tmp: then /tmp stays the overlay's (host /tmp + tmpfs upper).
guest_tmp=tmpfs
for p in "$TOP" "$guest_script" "$moddir"; do
	case $p in /tmp/*) guest_tmp=overlay ;; esac
done

{
	printf 'NZ_NODES=%q\nNZ_RAILS=%q\nNZ_TOP=%q\nNZ_SCRIPT=%q\n' \
		"$nodes" "$rails" "$TOP" "$guest_script"
	# Module parameters for every insmod of nezha.ko (ablations).
	printf 'NZ_MODULE_PARAMS=%q\n' "${NZ_MODULE_PARAMS:-}"
	# The modules to load, when not the tree's own (the debug kernel's).
	printf 'NZ_KO=%q\nNZ_RDMA_KO=%q\n' "${NZ_KO:-$TOP/nezha.ko}" \
		"${NZ_RDMA_KO:-$TOP/nezha_rdma.ko}"
	# How much slower than Debian's the guest kernel is (the debug one:
	# KASAN, lockdep...): tests that bound a time multiply by it.
	printf 'NZ_TIME_SCALE=%q\n' "${NZ_TIME_SCALE:-1}"
	printf 'NZ_INSNS=%q\n' "$([ -n "$plugin" ] && echo 1 || echo 0)"
	printf 'NZ_ARGS=('
	[ ${#guest_args[@]} -eq 0 ] || printf ' %q' "${guest_args[@]}"
	printf ' )\n'
} >"$outdir/job.sh"

# The job key every rendezvous of the run needs (Documentation/libnezha.rst,
# "The job key"): the launcher hands it out through the run directory, the
# file system the guests share, as a cluster would through a shared home.
# guest-stage.sh points NEZHA_JOB_KEY_FILE at it.  A new key for each run.
rm -f "$outdir/job.key"
if [ -x "$TOP/build/tools/nezhactl" ]; then
	"$TOP/build/tools/nezhactl" key generate "$outdir/job.key" >/dev/null ||
		die "nezhactl key generate $outdir/job.key failed"
else	# not built: the same, by hand
	(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$outdir/job.key" &&
		echo >>"$outdir/job.key") || die "cannot write $outdir/job.key"
fi

# --- cleanup -------------------------------------------------------------------

ns=nzt-$$
qpids=()
hpid=
ns_made=
# shellcheck disable=SC2317  # invoked by trap
cleanup() {
	local p
	trap - EXIT INT TERM HUP
	set +e
	for p in "${qpids[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	[ -z "$hpid" ] || kill -TERM -- "-$hpid" 2>/dev/null
	for p in "${qpids[@]}" ${hpid:+"$hpid"}; do
		wait "$p" 2>/dev/null
	done
	[ -z "$hpid" ] || kill -KILL -- "-$hpid" 2>/dev/null
	[ -z "$ns_made" ] || ip netns del "$ns" 2>/dev/null
	rm -f "$outdir/job.key"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# --- rails: one bridge per rail, one tap per (guest, rail) ----------------------

tap_name() { echo "tap-g$1-r$2"; }
# The host side carries jumbo frames; a guest picks its rails' MTU (1500
# unless a benchmark raises it: bench_lib.sh rails_mtu).
RAIL_MAX_MTU=9000

ip netns add "$ns" || die "cannot create network namespace $ns"
ns_made=1
# The host side of the rails is layer 2 only: no IPv6 chatter from it.
ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
	net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
{
	echo "link set lo up"
	for ((r = 0; r < rails; r++)); do
		echo "link add nzbr$r mtu $RAIL_MAX_MTU type bridge stp_state 0 forward_delay 0 mcast_snooping 0"
		echo "link set nzbr$r up"
		for ((g = 0; g < nodes; g++)); do
			tap=$(tap_name "$g" "$r")
			echo "tuntap add dev $tap mode tap"
			echo "link set $tap mtu $RAIL_MAX_MTU master nzbr$r"
			echo "link set $tap up"
		done
	done
} | ip -n "$ns" -batch - || die "cannot set up the rails in $ns"

# --- guests --------------------------------------------------------------------

cmdline="console=ttyS0 panic=-1 panic_on_warn=1 panic_on_oops=1 oops=panic"
# Every sysrq key from the (emulated) keyboard: tasks_to_console.
cmdline+=" sysrq_always_enabled"
cmdline+="${slub_debug:+ slub_debug=$slub_debug} quiet loglevel=4"
# Faster or steadier under TCG on a busy host: no speculation workarounds,
# no ACPI IRQ routing (seconds per PCI device), no timer or TSC checks that
# fail when the vCPU thread is starved.
cmdline+=" mitigations=off acpi=noirq no_timer_check tsc=reliable"
# NZ_GUEST_CMDLINE: more, from the caller (scripts/check-debug.sh).
cmdline+="${NZ_GUEST_CMDLINE:+ $NZ_GUEST_CMDLINE}"
# A TCG guest's TSC is the host's.  Calibrated at boot on a starved vCPU it
# can come out badly wrong (a guest clock running 6x fast was seen), and the
# kernel then keeps it: the refinement against the HPET is dropped when it
# differs by over 1 %.  Give the guest the host's rate when the host knows it
# (a fixed-rate TSC and no APERF/MPERF, so "cpu MHz" is the TSC's rate);
# guest-stage.sh checks the refinement and falls back to the HPET.
tsc_khz=${NZ_GUEST_TSC_KHZ:-}
if [ -z "$tsc_khz" ] && flags=$(grep -m1 '^flags' /proc/cpuinfo) &&
	[[ " $flags " == *" constant_tsc "* && " $flags " != *" aperfmperf "* ]]; then
	tsc_khz=$(awk -F: '/^cpu MHz/ { printf "%d", $2 * 1000 + 0.5; exit }' /proc/cpuinfo)
fi
[[ $tsc_khz =~ ^[1-9][0-9]{5,7}$ ]] && cmdline+=" tsc_early_khz=$tsc_khz"
cmdline+=" nz.run=$outdir nz.stage=$HERE/guest-stage.sh nz.tmp=$guest_tmp"
[ -n "$sys_moddir" ] || cmdline+=" nz.moddir=$moddir"

t0=$(date +%s.%N)
declare -a started begun ended qrc
for ((g = 0; g < nodes; g++)); do
	# No ERMS/FSRM: TCG runs "rep movsb" a byte at a time, so with them
	# every memcpy, copy_to_user and clear_page of the guest ran at ~140
	# MB/s (64 KiB in 450 us) instead of the 20x faster vector or
	# 8-byte loops it picks without them.  Real CPUs do "rep movsb" at
	# memory speed: without the flags the guest's copies are closer to
	# real hardware's, for every system measured alike.
	# shellcheck disable=SC2054  # commas belong to QEMU options
	qemu=(qemu-system-x86_64 -nodefaults -no-user-config -nographic -no-reboot
		-name "nz$g" -accel tcg -cpu "${NZ_QEMU_CPU:-max,erms=off,fsrm=off}" -smp "$vcpus" -m "$mem"
		-kernel "$boot_kernel" -initrd "$initramfs"
		-append "$cmdline nz.node=$g${extra_cmdline:+ $extra_cmdline}"
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
		-virtfs "local,path=$outdir,mount_tag=nzrun,security_model=none"
		-serial "file:$outdir/guest$g.console"
		-serial "file:$outdir/guest$g.result"
		-monitor "unix:$outdir/guest$g.mon,server=on,wait=off"
		-monitor "unix:$outdir/guest$g.diag,server=on,wait=off")
	[ -z "$plugin" ] || qemu+=(-plugin "file=$plugin,out=$outdir/guest$g.insns")
	for ((r = 0; r < rails; r++)); do
		link=''
		if [ ${#speed[@]} -gt 0 ]; then
			s=${speed[r]:-${speed[-1]}}
			link=",speed=$s,duplex=full"
		fi
		qemu+=(-netdev "tap,id=r$r,ifname=$(tap_name "$g" "$r"),script=no,downscript=no"
			-device "virtio-net-pci,netdev=r$r,romfile=,mac=$(printf '52:54:00:00:%02x:%02x' "$r" "$g")$link")
	done
	mkdir -p "$outdir/guest$g.out"
	ip netns exec "$ns" "${qemu[@]}" </dev/null >"$outdir/guest$g.qemu.log" 2>&1 &
	qpids[g]=$!
	started[g]=$(date +%s.%N)
done

echo "# OUTDIR $outdir"
echo "# kernel $kernel ($kver), $nodes guests x $rails rails, $(basename "$guest_script")"

# --- host script -----------------------------------------------------------------

# Helpers exported to a bash host script.
# shellcheck disable=SC2317  # not called here
nz_tap() { echo "tap-g$1-r$2"; }
# nz_mon G COMMAND: run a QEMU monitor (HMP) command on guest G, print the reply.
# shellcheck disable=SC2317  # not called here
nz_mon() {
	python3 "$NZ_TOP/selftests/qemu/hmp.py" -c "$OUTDIR/guest$1.mon" "$2"
}

host_state=
if [ -n "$host_script" ]; then
	for ((i = 0; i < 50; i++)); do
		missing=0
		for ((g = 0; g < nodes; g++)); do
			[ -S "$outdir/guest$g.mon" ] || missing=1
		done
		[ $missing -eq 0 ] && break
		sleep 0.1
	done
	export OUTDIR=$outdir NZ_RUN=$outdir NZ_NODES=$nodes NZ_RAILS=$rails NZ_NS=$ns NZ_TOP=$TOP
	for ((g = 0; g < nodes; g++)); do
		export "NZ_MON_$g=$outdir/guest$g.mon"
		for ((r = 0; r < rails; r++)); do
			export "NZ_TAP_${g}_$r=$(tap_name "$g" "$r")"
		done
	done
	export -f nz_tap nz_mon
	runner=()
	[ -x "$host_script" ] || runner=(bash)
	(cd "$TOP" && exec ip netns exec "$ns" setsid "${runner[@]}" "$host_script") \
		</dev/null >"$outdir/host.log" 2>&1 &
	hpid=$!
fi

# --- wait ---------------------------------------------------------------------------

deadline=$((SECONDS + timeout))
killed_at=
timed_out=()
boot_silence=${NZ_BOOT_SILENCE:-0}
boot_hung=
clock_jumped=
# Each guest has two monitors: guestG.mon for host scripts (which may hold
# it open for the whole run: a QEMU monitor serves one client at a time)
# and guestG.diag for vm.sh's own diagnostics below.  With one, a hung
# guest of the failover suite, whose host script holds the monitor, said
# nothing: "TimeoutError" in place of its registers (debug lane,
# 2026-12-07, the first boot hang after ELCR caught in the act).
#
# hung_regs G: where a hung guest's vCPUs are (issue 18: the debug lane's
# boot hangs, Documentation/testing.rst; NZ_HUNG_NMI=1 then panics it for
# every task's stack): registers and stacks from the monitor, into
# OUTDIR/guestG.hung-regs, named from a System.map beside the kernel (the
# debug lane's build has one, and boots it with nokaslr: the map holds).
hung_regs() {
	local f="$outdir/guest$1.hung-regs" map='' m
	if [[ " $cmdline " = *" nokaslr "* ]]; then
		for m in "${kernel%/arch/*}/System.map" "${kernel%/*}/System.map"; do
			[ -s "$m" ] && { map=$m; break; }
		done
	fi
	python3 "$TOP/selftests/qemu/hung_regs.py" "$outdir/guest$1.diag" ${map:+"$map"} >"$f" 2>&1 || true
	grep '^# vCPU' "$f" | sed "s/^# /# g$1: hung /" || true
	echo "# g$1: registers and stack in $f"
}

# tasks_to_console G...: before a guest that ran out of time is stopped,
# every task's state and kernel stack (sysrq t, through the emulated
# keyboard; the console's log level raised first, sysrq 8) into its
# console, to say where a run hung; waits until the consoles have been
# quiet for 1.6 s (3 s at least, 20 s at most).
tasks_to_console() {
	local g i quiet=0 size prev='' cons=()
	for g in "$@"; do
		cons+=("$outdir/guest$g.console")
		for i in 8 t; do
			python3 "$TOP/selftests/qemu/hmp.py" -c "$outdir/guest$g.diag" \
				"sendkey alt-sysrq-$i" >/dev/null 2>&1 || true
		done
	done
	for ((i = 0; i < 100 && (i < 15 || quiet < 8); i++)); do
		sleep 0.2
		size=$(cat "${cons[@]}" 2>/dev/null | wc -c)
		if [ "$size" = "$prev" ]; then quiet=$((quiet + 1)); else quiet=0; fi
		prev=$size
	done
}

declare -a con_size con_seen
while :; do
	running=0
	for ((g = 0; g < nodes; g++)); do
		[ -z "${ended[g]:-}" ] || continue
		if [ -z "${begun[g]:-}" ] && grep -q '^NZ-BEGIN ' "$outdir/guest$g.result" 2>/dev/null; then
			begun[g]=$(date +%s.%N)
			read -r "hbegun[g]" _ </proc/uptime
		fi
		# The boot watchdog: console silent too long before the script.
		if [ "$boot_silence" -gt 0 ] && [ -z "${begun[g]:-}" ] && [ -z "$killed_at" ]; then
			size=$(stat -c %s "$outdir/guest$g.console" 2>/dev/null || echo 0)
			if [ "$size" != "${con_size[g]:-}" ]; then
				con_size[g]=$size
				con_seen[g]=$SECONDS
			elif [ $((SECONDS - con_seen[g])) -ge "$boot_silence" ]; then
				boot_hung=$g
				echo "g$g $boot_silence" >"$outdir/boot-hung"
				echo "# g$g: console silent for ${boot_silence} s before its script began: a hung boot; stopping every guest"
				hung_regs "$g"
				killed_at=$SECONDS
				for ((h = 0; h < nodes; h++)); do
					[ -n "${ended[h]:-}" ] || kill -TERM "${qpids[h]}" 2>/dev/null || true
				done
			fi
		fi
		if kill -0 "${qpids[g]}" 2>/dev/null; then
			running=1
			continue
		fi
		ended[g]=$(date +%s.%N)
		read -r "hended[g]" _ </proc/uptime
		rc=0
		wait "${qpids[g]}" || rc=$?
		qrc[g]=$rc
		# A guest that died of a panic leaves its peers waiting out every
		# step for it (the debug lane: an hour): stop them too.
		if [ -z "$killed_at" ] && [ "$nodes" -gt 1 ] &&
		   grep -q 'Kernel panic - not syncing' "$outdir/guest$g.console" 2>/dev/null; then
			echo "# g$g: its kernel panicked; stopping every guest"
			killed_at=$SECONDS
			for ((h = 0; h < nodes; h++)); do
				[ -n "${ended[h]:-}" ] || kill -TERM "${qpids[h]}" 2>/dev/null || true
			done
		fi
	done
	[ $running -eq 1 ] || break
	if [ -z "$killed_at" ] && [ $SECONDS -ge $deadline ]; then
		for ((g = 0; g < nodes; g++)); do
			[ -n "${ended[g]:-}" ] || timed_out[g]=1
		done
		tasks_to_console "${!timed_out[@]}"
		killed_at=$SECONDS
		for ((g = 0; g < nodes; g++)); do
			[ -n "${ended[g]:-}" ] || kill -TERM "${qpids[g]}" 2>/dev/null || true
		done
	elif [ -n "$killed_at" ] && [ $SECONDS -ge $((killed_at + 5)) ]; then
		for ((g = 0; g < nodes; g++)); do
			[ -n "${ended[g]:-}" ] || kill -KILL "${qpids[g]}" 2>/dev/null || true
		done
	fi
	sleep 0.2
done
qpids=()

if [ -n "$hpid" ]; then
	if kill -0 "$hpid" 2>/dev/null; then
		kill -TERM -- "-$hpid" 2>/dev/null || true
		wait "$hpid" 2>/dev/null || true
		kill -KILL -- "-$hpid" 2>/dev/null || true
		host_state=stopped
	else
		rc=0
		wait "$hpid" || rc=$?
		host_state=$rc
	fi
	hpid=
fi

# --- report ----------------------------------------------------------------------------

failed=0
tap_ok() { echo "ok - $*"; }
tap_fail() {
	echo "not ok - $*"
	failed=1
}

# Kernel log lines that fail a run.
bad_console='WARNING:|BUG:|Oops|general protection|Kernel panic|kernel BUG'
bad_console+='|BUG [^ ]+ \((Not t|T)ainted\)|BUG kmalloc|Redzone|Poison overwritten|Object padding'
bad_console+='|INFO: task .* blocked|UBSAN|KASAN|list_add corruption|list_del corruption'
bad_console+='|soft lockup|hard LOCKUP|rcu.*detected stall|kernel stack overflow|stack-protector'
# The debug kernel's checkers (Documentation/testing.rst, debug-kernel lane).
bad_console+='|ODEBUG:|kmemleak: [0-9]+ new suspected|INFO: (possible|trying to register|inconsistent)'
bad_console+='|DEBUG_LOCKS_WARN_ON|BUG: KFENCE|sleeping function called from invalid context'

# The console without the reports that are the kernel's own and not the
# module's: the debug kernel (6.1) draws fail_function's random numbers in
# the kprobe's int3 handler, which lockdep counts as NMI context, and
# reports the RNG's batched_entropy lock as "inconsistent lock state"
# whenever fault injection probes a function (the faults suite, 2026-12-04:
# the stack is should_fail_ex <- fei_kprobe_handler <- exc_int3, the probed
# function the module's nz_conn_attach).  Such a report is replaced by one
# NZ-KNOWN line; any other stays.  Lockdep is off for the rest of that boot,
# so the faults suite probes functions last.
known_reports() {
	awk '
	function flush(  i, known) {
		known = blk ~ /fei_kprobe_handler/ && blk ~ /should_fail_ex/ &&
			blk ~ /batched_entropy/
		if (known)
			print "NZ-KNOWN: lockdep on fault injection'"'"'s own RNG lock (fail_function in int3 context), not the module'"'"'s"
		else
			for (i = 1; i <= n; i++)
				print line[i]
		n = 0; blk = ""; inblk = 0
	}
	/WARNING: inconsistent lock state/ { inblk = 1 }
	inblk { line[++n] = $0; blk = blk "\n" $0
		if ($0 ~ /<\/TASK>/ || n >= 400)
			flush()
		next }
	{ print }
	END { if (inblk) flush() }'
}

# Rewrite a guest's TAP lines so they name the guest: "ok 3 foo # SKIP x"
# becomes "ok - g0: foo # SKIP x".  Exits 1 if any line was "not ok".
rewrite_tap() {
	awk -v p="$1: " '
	/^(not )?ok($|[ \t])/ {
		neg = ($0 ~ /^not /)
		rest = $0
		sub(/^(not )?ok[ \t]*/, "", rest)
		num = ""
		if (match(rest, /^[0-9]+/)) {
			num = substr(rest, 1, RLENGTH)
			rest = substr(rest, RLENGTH + 1)
		}
		sub(/^[ \t]*(-[ \t]*)?/, "", rest)
		if (rest == "" || rest ~ /^#/)
			rest = "test" (num == "" ? "" : " " num) (rest == "" ? "" : " " rest)
		print (neg ? "not ok" : "ok") " - " p rest
		if (neg && rest !~ /#[ \t]*[Tt][Oo][Dd][Oo]/) bad = 1
		next
	}
	/^# / { print "# " p substr($0, 3); next }
	/^Bail out!/ { print "not ok - " p $0; bad = 1; next }
	END { exit bad }'
}

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

for ((g = 0; g < nodes; g++)); do
	res=$outdir/guest$g.result
	con=$outdir/guest$g.console
	touch "$res" "$con"
	gfail=0
	tr -d '\r' <"$res" | rewrite_tap "g$g" || gfail=1
	[ $gfail -eq 0 ] || failed=1

	nonce=$(awk '$1 == "NZ-BEGIN" { print $2; exit }' "$res")
	boot=$(awk '$1 == "NZ-BEGIN" { print $3; exit }' "$res")
	code=
	[ -z "$nonce" ] || code=$(awk -v n="$nonce" '$1 == "NZ-EXIT" && $3 == n { c = $2 } END { print c }' "$res")
	gend=
	[ -z "$nonce" ] || gend=$(awk -v n="$nonce" '$1 == "NZ-EXIT" && $3 == n { u = $4 } END { print u }' "$res")
	if [ -n "$gend" ] && [ -n "$boot" ] && [ -n "${hbegun[g]:-}" ] && [ -n "${hended[g]:-}" ] &&
	   awk -v g="$(secs "$boot" "$gend")" -v h="$(secs "${hbegun[g]}" "${hended[g]}")" \
		'BEGIN { exit !(g > h + 30) }'; then
		echo "# g$g: its clock ran $(secs "$boot" "$gend") s over the script, the host's $(secs "${hbegun[g]}" "${hended[g]}") s: the host's TSC jumped (its machine paused or migrated?)"
		clock_jumped=1
	fi
	setup=$(sed -n 's/^NZ-SETUP-FAIL //p' "$res" | head -n 1)
	if [ -n "$setup" ]; then
		tap_fail "g$g: guest set-up failed: $setup"
		gfail=1
	elif [ -z "$code" ]; then
		# Which of them, and where the script was, in the name: a CI
		# summary that lists only failing names then says it.
		why="panic, hang or timeout"
		if grep -aq 'Kernel panic' "$con"; then
			why="kernel panic"
		elif [ -n "${timed_out[g]:-}" ]; then
			why="killed after the ${timeout}s timeout"
		fi
		last=$(tr -d '\r' <"$res" | grep -av '^NZ-' | grep -a . | tail -n 1 | cut -c1-160) || :
		tap_fail "g$g: no exit status ($why)${last:+; its last line: $last}"
		gfail=1
	elif [ "$code" -eq 0 ]; then
		tap_ok "g$g: exited 0"
	else
		tap_fail "g$g: exited $code"
		gfail=1
	fi
	[ -z "${timed_out[g]:-}" ] ||
		echo "# g$g: killed after the ${timeout}s timeout (its tasks, sysrq t: guest$g.console)"
	[ "${qrc[g]:-0}" -eq 0 ] || echo "# g$g: qemu exited ${qrc[g]}"

	# The console filtered once.  (grep finding nothing is no error:
	# pipefail and set -e are on.)
	filtered=$(tr -d '\r\000' <"$con" | known_reports)
	{ grep -a '^NZ-KNOWN' <<<"$filtered" || :; } | sort | uniq -c |
		sed "s/^ *\([0-9]*\) NZ-KNOWN: /# g$g console: known, \1 time(s): /"
	if matches=$(grep -aE "$bad_console" <<<"$filtered"); then
		tap_fail "g$g: kernel log clean"
		head -n 5 <<<"$matches" | sed "s/^/# g$g console: /"
		gfail=1
	else
		tap_ok "g$g: kernel log clean"
	fi

	if [ -n "${begun[g]:-}" ]; then
		echo "# g$g: script started $(secs "${started[g]}" "${begun[g]}") s after qemu" \
			"(${boot:-?} s guest uptime); guest ran $(secs "${started[g]}" "${ended[g]}") s"
	else
		echo "# g$g: guest ran $(secs "${started[g]}" "${ended[g]}") s"
	fi
	if [ $gfail -ne 0 ]; then
		echo "# g$g: last lines of $con:"
		console_text "$con" | tail -n 40 | sed "s/^/# g$g console| /"
		echo "# g$g: last lines of $res:"
		console_text "$res" | tail -n 40 | sed "s/^/# g$g result| /"
		if [ -s "$outdir/guest$g.qemu.log" ]; then
			tail -n 10 "$outdir/guest$g.qemu.log" | sed "s/^/# g$g qemu| /"
		fi
	fi
done

if [ -n "$host_script" ]; then
	tr -d '\r' <"$outdir/host.log" | rewrite_tap host || failed=1
	case $host_state in
	stopped) tap_ok "host: script stopped when the guests were done" ;;
	0) tap_ok "host: script exited 0" ;;
	*)
		tap_fail "host: script exited $host_state"
		tail -n 40 "$outdir/host.log" | comment
		;;
	esac
fi

echo "# total $(secs "$t0" "$(date +%s.%N)") s; logs in $outdir"
[ -z "$boot_hung" ] || exit 75
[ "$failed" = 0 ] || [ -z "$clock_jumped" ] || exit 76
exit $failed
