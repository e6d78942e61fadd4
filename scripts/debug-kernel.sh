#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (once, cached under build/debug-kernel/) a guest kernel from Debian's
# linux-source-6.1 with the kernel's own bug finders switched on, for
# `make check-debug` (Documentation/testing.rst, "The debug-kernel lane"):
#
#   KASAN (generic, inline)       out-of-bounds and use-after-free
#   PROVE_LOCKING, DEBUG_ATOMIC_SLEEP   lock order and sleeping in atomic
#   DEBUG_KMEMLEAK                leaks (the suites scan at the end)
#   UBSAN                         undefined behaviour
#   DEBUG_OBJECTS (timers, work)  timers and work freed while armed
#   KFENCE                        sampled memory errors
#   FAILSLAB, FAIL_PAGE_ALLOC, FAIL_FUNCTION   fault injection
#
# plus what the guest suites need (virtio, 9p, overlay, veth, bridge, tun,
# MPTCP, bonding, tbf/netem/plug, INFINIBAND + RDMA_RXE, configfs).
# Trimmed of what no guest has (graphics, sound, USB, wireless, Ethernet
# drivers but virtio's, NFS) and with UBSAN on the module only, it built
# in 24 min instead of 37, but one guest of five then hung before user
# space (a first trimmed try, earlier, hung the same way): not used until
# that is understood.
#
# `scripts/debug-kernel.sh --cached` builds nothing: exit status 1 unless
# the kernel of these options is built already.
#
# Prints the three paths the lane needs, as shell assignments:
#   NZ_KERNEL=.../bzImage NZ_MODDIR=.../lib/modules/<kver> NZ_DEBUG_KDIR=...
# Everything it makes lives under build/debug-kernel/; `make clean` keeps
# it (rm -rf build/debug-kernel to rebuild).  Takes ~35-40 minutes on 2
# cores the first time, then well under a second; a new patch rebuilds
# what it touches (minutes).
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# NZ_DEBUG_KERNEL_DIR: another tree's cache (a copy of this tree needs no rebuild).
base=${NZ_DEBUG_KERNEL_DIR:-$TOP/build/debug-kernel}
tarball=$(ls /usr/src/linux-source-6.1.tar.* 2>/dev/null | head -n 1 || true)
[ -n "$tarball" ] || {
	echo "debug-kernel.sh: no /usr/src/linux-source-6.1.tar.*: run scripts/setup.sh" >&2
	exit 2
}

# The options, one per line: NAME=y|m|n (n: disable).  Their hash names the
# build, so that a change here rebuilds.
options() {
	cat <<'OPTS'
MODULES=y
MODULE_UNLOAD=y
MODULE_SIG=n
LOCALVERSION_AUTO=n
PVH=y
HYPERVISOR_GUEST=y
PARAVIRT=y
DEBUG_INFO=n
DEBUG_INFO_NONE=y
DEBUG_INFO_BTF=n
IO_URING=y
VIRTIO=y
VIRTIO_PCI=y
VIRTIO_NET=y
VIRTIO_CONSOLE=y
NET_9P=y
NET_9P_VIRTIO=y
9P_FS=y
9P_FS_POSIX_ACL=y
OVERLAY_FS=y
CONFIGFS_FS=y
TMPFS=y
TMPFS_POSIX_ACL=y
DEVTMPFS=y
NETDEVICES=y
NET_CORE=y
VETH=m
TUN=m
DUMMY=m
BONDING=m
BRIDGE=m
NET_NS=y
IPV6=y
MPTCP=y
MPTCP_IPV6=y
INET_DIAG=y
INET_TCP_DIAG=y
INET_UDP_DIAG=y
INET_MPTCP_DIAG=y
PACKET_DIAG=y
UNIX_DIAG=y
NETLINK_DIAG=y
NET_SCHED=y
NET_SCH_TBF=m
NET_SCH_NETEM=m
NET_SCH_HTB=m
NET_SCH_PRIO=m
NET_SCH_PLUG=m
NET_SCH_INGRESS=m
NET_SCH_FQ_CODEL=y
NET_CLS=y
NET_CLS_U32=m
NET_CLS_BASIC=m
NET_CLS_MATCHALL=m
NET_CLS_ACT=y
NET_ACT_GACT=m
NET_ACT_MIRRED=m
NET_ACT_PEDIT=m
NET_EMATCH=y
NETFILTER=y
CRYPTO_USER_API_HASH=m
CRYPTO_HMAC=y
CRYPTO_SHA256=y
CRYPTO_POLY1305=m
CRYPTO_POLY1305_X86_64=m
CRYPTO_CRC32=y
CRYPTO_CRC32C=y
LIBCRC32C=y
CRC32=y
INFINIBAND=m
INFINIBAND_USER_ACCESS=m
INFINIBAND_USER_MAD=m
INFINIBAND_ADDR_TRANS=y
RDMA_RXE=m
ETHTOOL_NETLINK=y
KPROBES=y
FTRACE=y
FUNCTION_TRACER=n
KASAN=y
KASAN_GENERIC=y
KASAN_INLINE=y
KASAN_OUTLINE=n
KASAN_VMALLOC=y
PROVE_LOCKING=y
DEBUG_ATOMIC_SLEEP=y
DEBUG_KMEMLEAK=y
DEBUG_KMEMLEAK_MEM_POOL_SIZE=65536
DEBUG_KMEMLEAK_AUTO_SCAN=n
UBSAN=y
UBSAN_BOUNDS=y
UBSAN_SHIFT=y
UBSAN_BOOL=y
UBSAN_ENUM=y
UBSAN_SANITIZE_ALL=y
DEBUG_OBJECTS=y
DEBUG_OBJECTS_TIMERS=y
DEBUG_OBJECTS_WORK=y
DEBUG_OBJECTS_FREE=y
DEBUG_OBJECTS_RCU_HEAD=y
KFENCE=y
DEBUG_LIST=y
BUG_ON_DATA_CORRUPTION=y
FAULT_INJECTION=y
FAULT_INJECTION_DEBUG_FS=y
FAILSLAB=y
FAIL_PAGE_ALLOC=y
FUNCTION_ERROR_INJECTION=y
FAIL_FUNCTION=y
DEBUG_FS=y
MAGIC_SYSRQ=y
PANIC_ON_OOPS=n
SOFTLOCKUP_DETECTOR=y
DETECT_HUNG_TASK=y
OPTS
}

# Fixes to the test kernel itself: scripts/debug-kernel.d/*.patch, each
# saying what it fixes and where the fix comes from, applied in name order
# to the unpacked source.  Their contents name the build as the options do.
patches=()
for p in "$TOP"/scripts/debug-kernel.d/*.patch; do
	[ -e "$p" ] && patches+=("$p")
done
patch_sums() {
	local p
	for p in ${patches[@]+"${patches[@]}"}; do
		md5sum <"$p" | cut -c1-12
	done
}

src=$base/linux
stamp=$base/.built-$( (options; patch_sums) | md5sum | cut -c1-12)-$(basename "$tarball")
if [ -e "$stamp" ]; then
	kver=$(cat "$src/include/config/kernel.release")
	echo "NZ_KERNEL=$src/arch/x86/boot/bzImage NZ_MODDIR=$base/stage/lib/modules/$kver NZ_DEBUG_KDIR=$src"
	exit 0
fi
# --cached: only say whether it is built (exit 1 if not), never build.
[ "${1:-}" != --cached ] || exit 1

log=$base/build.log
mkdir -p "$base"
echo "debug-kernel.sh: building the debug kernel (once; log in $log)" >&2
# The sums of the patches in this tree, one a line.  A patch changed or
# gone cannot be taken back out of a built tree: unpack it afresh.
applied=$src/.nz-patches
if [ -e "$applied" ] && grep -qvxF -f <(patch_sums) "$applied"; then
	echo "debug-kernel.sh: a patch applied to $src changed or went: unpacking it again" >&2
	rm -rf "$src"
fi
if [ ! -e "$src/Makefile" ]; then
	rm -rf "$src" "$base/unpack"
	mkdir -p "$base/unpack"
	tar -xaf "$tarball" -C "$base/unpack"
	mv "$base/unpack"/linux-source-* "$src"
	rmdir "$base/unpack"
fi
for p in ${patches[@]+"${patches[@]}"}; do
	sum=$(md5sum <"$p" | cut -c1-12)
	! grep -qxF "$sum" "$applied" 2>/dev/null || continue
	patch -d "$src" -p1 --forward --batch <"$p" >"$base/patch.log" 2>&1 || {
		echo "debug-kernel.sh: $p does not apply to $src:" >&2
		cat "$base/patch.log" >&2
		exit 1
	}
	echo "$sum" >>"$applied"
done
rm -f "$base"/.built-*
jobs=$(nproc)
# build: every step, stopping at the first that fails (errexit is off in a
# function called as `build || ...`).
build() {
	local args=() name val missing=0
	make -C "$src" x86_64_defconfig || return 1
	while IFS='=' read -r name val; do
		case $val in
		y) args+=(--enable "$name") ;;
		m) args+=(--module "$name") ;;
		n) args+=(--disable "$name") ;;
		*) args+=(--set-val "$name" "$val") ;;
		esac
	done < <(options)
	"$src/scripts/config" --file "$src/.config" "${args[@]}" || return 1
	make -C "$src" olddefconfig || return 1
	# olddefconfig drops what a dependency refuses: say so, do not guess.
	while IFS='=' read -r name val; do
		case $val in
		y | m) grep -qx "CONFIG_$name=[ym]" "$src/.config" || {
			echo "debug-kernel.sh: CONFIG_$name did not stick"
			missing=1
		} ;;
		esac
	done < <(options)
	[ $missing -eq 0 ] || return 1
	make -C "$src" -j"$jobs" bzImage modules || return 1
	rm -rf "$base/stage"
	make -C "$src" INSTALL_MOD_PATH="$base/stage" modules_install || return 1
}
build >"$log" 2>&1 || {
	echo "debug-kernel.sh: the build failed; last lines of $log:" >&2
	tail -n 30 "$log" >&2
	exit 1
}
touch "$stamp"
kver=$(cat "$src/include/config/kernel.release")
echo "NZ_KERNEL=$src/arch/x86/boot/bzImage NZ_MODDIR=$base/stage/lib/modules/$kver NZ_DEBUG_KDIR=$src"
