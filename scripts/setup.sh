#!/bin/bash
# Install every Debian package the Nezha project needs (build, guest test bed,
# benchmarks).  Idempotent: when everything is present it only asks dpkg, which
# takes well under a second.  Installing needs root.
set -euo pipefail

PACKAGES=(
	build-essential linux-headers-amd64 linux-image-amd64 linux-source-6.1
	qemu-system-x86 busybox-static kmod cpio xz-utils
	iproute2 iputils-ping rdma-core ibverbs-utils perftest iperf3 ethtool procps
	libibverbs-dev librdmacm-dev liburing-dev libmnl-dev pkg-config sparse
	python3 python3-docutils python3-jsonschema rsync linux-perf
	flex bison bc libelf-dev libssl-dev
	python3-torch libtorch-dev pybind11-dev python3-dev python3-sklearn
)

# One dpkg-query for all packages; unknown packages are simply absent from
# its output (their complaint on stderr is dropped).
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null |
	awk '$NF == "installed" && $(NF-1) == "ok" { sub(/:.*/, "", $1); print $1 }' || true)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! grep -qxF -- "$p" <<<"$installed"; then
		missing+=("$p")
	fi
done

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "setup.sh: missing Debian packages: ${missing[*]}" >&2
	echo "setup.sh: run as root (or: apt-get install ${missing[*]})" >&2
	exit 1
fi

echo "setup.sh: installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" >&2
