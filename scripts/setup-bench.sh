#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Optional set-up of the collective benchmark (make bench-coll): Debian's
# PyTorch (python3-torch, 1.13 on Debian 12), whose torch.distributed
# "gloo" backend is the reference Nezha's collectives are compared with.
# It is large (~120 packages, ~1 GiB), so `make check` never installs it:
# only scripts/bench-coll.sh calls this.  Idempotent; installing needs root.
#
# Exit status: 0 when `import torch.distributed` works afterwards, 1 when it
# cannot be installed or imported (the benchmark then SKIPs its Gloo part
# and says why).
set -uo pipefail

# Debian's interpreter: the one that sees python3-torch (a python3 earlier
# in PATH, e.g. pyenv's, would not), and the one the guests run.
PY=/usr/bin/python3
probe() {
	"$PY" -c 'import torch, torch.distributed as d; assert d.is_available(); print(torch.__version__)' 2>&1
}

if v=$(probe); then
	echo "setup-bench.sh: torch $v with torch.distributed is installed" >&2
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "setup-bench.sh: python3-torch is missing; run as root (or: apt-get install python3-torch)" >&2
	exit 1
fi
echo "setup-bench.sh: installing python3-torch (large: ~120 packages)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends python3-torch >&2; then
	apt-get update -qq >&2
	apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends python3-torch >&2 ||
		{ echo "setup-bench.sh: apt-get install python3-torch failed" >&2; exit 1; }
fi
if ! v=$(probe); then
	echo "setup-bench.sh: python3-torch is installed but torch.distributed does not import: $v" >&2
	exit 1
fi
echo "setup-bench.sh: torch $v with torch.distributed is installed" >&2
