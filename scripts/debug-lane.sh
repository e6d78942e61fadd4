# SPDX-License-Identifier: GPL-2.0
#
# Sourced, not run: what every user of the debug-kernel lane's guests shares
# (scripts/check-debug.sh, scripts/boot-soak.sh), so that a soak boots its
# guests exactly as the lane does.  Needs TOP (the tree's root).
#
#   debug_kernel            find or build the kernel (scripts/debug-kernel.sh):
#                           sets NZ_KERNEL NZ_MODDIR NZ_DEBUG_KDIR; 1 if none
#   debug_module [DIR]      build nezha.ko and nezha_rdma.ko for it, in DIR
#                           (which holds Kbuild, kmod/ and uapi/) or in a copy
#                           of this tree's under build/debug-mod; sets
#                           NZ_KO NZ_RDMA_KO, and debug_module_out to
#                           kbuild's output; 1 if the build fails
#   debug_guest_env         export how the lane boots its guests

debug_kernel() {
	local paths
	paths=$("$TOP"/scripts/debug-kernel.sh) || return 1
	eval "$paths"	# NZ_KERNEL NZ_MODDIR NZ_DEBUG_KDIR
	export NZ_KERNEL NZ_MODDIR NZ_DEBUG_KDIR
}

# The module is built from a copy of the sources: kbuild writes its objects
# beside them, and the tree's own nezha.ko is for the Debian kernel.
debug_module() {
	local mod=${1:-}
	if [ -z "$mod" ]; then
		mod=$TOP/build/debug-mod
		"$TOP"/scripts/kmod-copy.sh "$mod" || return 1
	fi
	export NZ_KO=$mod/nezha.ko NZ_RDMA_KO=$mod/nezha_rdma.ko
	# shellcheck disable=SC2034 # for the script that sources this
	debug_module_out=$(make -C "$NZ_DEBUG_KDIR" M="$mod" W=1 modules 2>&1)
}

debug_guest_env() {
	# KASAN's shadow and lockdep's tables want memory.
	export NZ_VM_MEM=${NZ_VM_MEM:-1024}
	# Its vmlinux does not start through the PVH entry (a KASAN kernel
	# of 116 MB, silent from the first instruction): boot the bzImage.
	export NZ_PVH=0
	# This kernel was seen to hang, silent, right after the
	# decompressor's "Booting the kernel" (2 guests at once: about 1 boot
	# in 6; with earlyprintk the last line is KASLR's), and to die in its
	# first 2 s (KASAN: wild-memory-access in do_raw_spin_lock from
	# handle_edge_irq, during identify_cpu; 2 of 12 boots on 2026-12-02).
	# So the guests print their boot (loglevel=6, earlyprintk), and vm.sh
	# stops a run whose guest stays silent for NZ_BOOT_SILENCE seconds
	# before its script began (run.sh boots it again).  nokaslr did not
	# end the hang (1 of 6 boots still hung).  The early report interrupts
	# identify_cpu(), which rebuilds the CPU's feature bits: a guess is
	# QEMU's max CPU with LA57 (5-level paging), whose bit drops out for
	# that while.  Both flags stay: a fixed layout makes reports
	# reproducible, and no5lvl costs nothing; whether either helps is not
	# shown.
	export NZ_GUEST_CMDLINE="${NZ_GUEST_CMDLINE:+$NZ_GUEST_CMDLINE }nokaslr no5lvl loglevel=6 earlyprintk=serial,ttyS0"
}
