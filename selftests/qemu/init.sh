#!/bin/busybox sh
# /init of the Nezha guest initramfs (built by selftests/qemu/vm.sh).
#
# Loads the virtio/9p/overlay modules, mounts the host's / read-only over
# virtio-9p with a tmpfs overlay on top, mounts the run directory shared with
# the host (read-write) at the same path as on the host, chroots and runs the
# guest stage script (selftests/qemu/guest-stage.sh), then powers off.
# It never exits: PID 1 exiting would panic the guest.
#
# Kernel command line parameters read here:
#   nz.node=G       guest index
#   nz.run=DIR      host run directory (OUTDIR), shared as mount tag "nzrun"
#   nz.stage=PATH   stage script, a path in the host's root
#   nz.tmp=tmpfs    /tmp is a fresh tmpfs; "overlay": the overlay's /tmp
#                   (host /tmp, writable), for runs whose files live there
#   nz.moddir=PATH  bind PATH over /lib/modules/$(uname -r) (debug kernels)
#   nz.boot=systemd boot the host's systemd in the guest root instead:
#                   selftests/qemu/systemd-prep.sh installs Nezha's system
#                   files there and a unit that runs the stage script and
#                   powers off (vm.sh -a nz.boot=systemd; the service suite)

/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

power_off() {
	sync
	echo o >/proc/sysrq-trigger
	while :; do sleep 60; done
}

# A set-up failure is reported on the result channel, then the guest stops.
fail() {
	echo "nz-init: $*" >/dev/console
	echo "NZ-SETUP-FAIL init: $*" >/dev/ttyS1
	power_off
}

node='' run='' stage='' tmp=tmpfs moddir='' boot=''
read -r cmdline </proc/cmdline
for arg in $cmdline; do
	case $arg in
	nz.node=*) node=${arg#nz.node=} ;;
	nz.run=*) run=${arg#nz.run=} ;;
	nz.stage=*) stage=${arg#nz.stage=} ;;
	nz.tmp=*) tmp=${arg#nz.tmp=} ;;
	nz.moddir=*) moddir=${arg#nz.moddir=} ;;
	nz.boot=*) boot=${arg#nz.boot=} ;;
	esac
done
if [ -z "$node" ] || [ -z "$run" ] || [ -z "$stage" ]; then
	fail "nz.node, nz.run or nz.stage missing"
fi

while read -r m; do
	insmod "/modules/$m" || fail "insmod $m"
done </modules/order

r=/newroot
mkdir -p /lower /upper $r
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=262144,cache=loose hostroot /lower ||
	fail "mount 9p hostroot"
mount -t tmpfs -o mode=0755 tmpfs /upper
mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w overlay $r ||
	fail "mount overlay"

mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t devtmpfs devtmpfs $r/dev
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts -o gid=5,mode=0620,ptmxmode=0666 devpts $r/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $r/dev/shm
[ "$tmp" = overlay ] || mount -t tmpfs -o mode=1777 tmpfs $r/tmp
mount -t tmpfs -o mode=0755 tmpfs $r/run
mount -t debugfs debugfs $r/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs $r/sys/kernel/tracing 2>/dev/null
mount -t configfs configfs $r/sys/kernel/config 2>/dev/null
mkdir -p "$r$run"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none nzrun "$r$run" ||
	fail "mount 9p nzrun"
if [ -n "$moddir" ]; then
	kdir=$r/lib/modules/$(uname -r)
	mkdir -p "$kdir"
	mount -o bind "$r$moddir" "$kdir" || fail "bind $moddir over /lib/modules/$(uname -r)"
fi

# The kernel runs its module loader (request_module: crypto algorithms,
# protocol families...) in this root, not in the chroot: send it there.
printf '#!/bin/sh\nexec chroot %s /sbin/modprobe "$@"\n' "$r" >/bin/nz-modprobe
chmod 755 /bin/nz-modprobe
echo /bin/nz-modprobe >/proc/sys/kernel/modprobe

[ -e "$r$stage" ] || fail "stage script $stage not found"
if [ "$boot" = systemd ]; then
	chroot $r /bin/bash "${stage%/*}/systemd-prep.sh" "$node" "$run" "$stage" \
		</dev/null >/dev/console 2>&1 || fail "systemd-prep.sh"
	# The initramfs goes with switch_root: the module loader is the root's.
	echo /sbin/modprobe >/proc/sys/kernel/modprobe
	exec switch_root $r /lib/systemd/systemd
	fail "switch_root"
fi
chroot $r /bin/bash "$stage" "$node" "$run" </dev/null >/dev/console 2>&1
power_off
