#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: two emulated nodes joined by two shaped TCP rails; Nezha stripes
# one transfer over both.  Boots the guests (selftests/qemu/vm.sh), shows
# what each one runs as it happens (selftests/guest/demo.sh), then the verdict.
#
#    +----------- nz0 -----------+            +----------- nz1 -----------+
#    | nezha-bench p2p (rank 0)  |            | nezha-bench p2p (rank 1)  |
#    | libnezha -> /dev/nezha    |            | libnezha -> /dev/nezha    |
#    | nezha.ko                  |            | nezha.ko                  |
#    |  rail0 10.77.0.1 ---------+-- 40mbit --+--------- 10.77.0.2 rail0 |
#    |  rail1 10.77.1.1 ---------+-- 40mbit --+--------- 10.77.1.2 rail1 |
#    +---------------------------+            +---------------------------+
#
# environment: NZ_RATE (40mbit), NZ_DEMO_TIMEOUT (600 s), NZ_OUT (build/demo)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

out=${NZ_OUT:-build/demo}
mkdir -p "$out"
out=$(realpath "$out")
rm -f "$out"/guest*.result
sed -n '/^#    +/,/^#    +.*+$/s/^# //p' "$0" | tail -n 8
echo
echo "Booting 2 guests under QEMU (TCG: this takes a minute or two)..."
echo

selftests/qemu/vm.sh -n 2 -r 2 -t "${NZ_DEMO_TIMEOUT:-600}" -o "$out" -s "${NZ_RATE:-40mbit}" \
	selftests/guest/demo.sh "${NZ_RATE:-40mbit}" >"$out/vm.log" 2>&1 &
vm=$!

# Follow rank 0 as it runs; rank 1's transcript comes after, in one block.
# TAP bookkeeping and the harness's status lines are left out.
show() {	# show PREFIX < guest result stream
	awk -v p="$1" '
	/^==> / || /^$/ || /^NZ-/ || /^1\.\./ { next }
	/^(not )?ok / { if ($1 == "not") print p "FAILED: " substr($0, index($0, "-") + 2); next }
	/^# / { print p substr($0, 3); fflush(); next }
	{ print p $0; fflush() }'
}
i=0
while [ ! -e "$out/guest0.result" ] && [ $i -lt 100 ]; do
	sleep 0.2
	i=$((i + 1))
done
tail -n +1 -F --pid=$vm "$out/guest0.result" 2>/dev/null | show ""
wait $vm
rc=$?
if [ -s "$out/guest1.result" ]; then
	echo
	echo "--- meanwhile on nz1 (rank 1) ---"
	show "nz1| " <"$out/guest1.result"
fi

echo
if [ $rc -eq 0 ]; then
	echo "demo: every step passed."
else
	echo "demo: some steps failed:"
	grep -E '^not ok' "$out/vm.log" | sed 's/^/  /'
	# The test bed's own known fault: an emulated NIC (virtio-net under
	# TCG) that stops transmitting for good takes its rail with it, and
	# with both rails gone no transport can finish the stream.
	for c in "$out"/guest*.console; do
		w=$(grep -a -m1 'NETDEV WATCHDOG' "$c" 2>/dev/null | tr -d '\r')
		[ -n "$w" ] || continue
		g=${c##*/guest}
		echo "  note: nz${g%.console}'s emulated NIC stopped transmitting:"
		echo "    ${w:0:120}"
		echo "  That is QEMU's virtio-net hanging under load (Documentation/testing.rst,"
		echo "  \"Flapping a link from inside the guest\"), not Nezha: its rail is gone for"
		echo "  good, and a step that needs it fails.  make demo again boots fresh NICs."
	done
	echo "logs: $out (vm.log, guest*.result, guest*.console)"
fi
exit $rc
