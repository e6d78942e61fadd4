#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest suite: the rail control plane.  nezhactl rail add/del/set/show over
# generic netlink, the per-rail sysfs files, the NZ_IOC_RAIL_LIST ioctl,
# every configuration error with its errno and message, privileges,
# network namespaces, and teardown (del, re-add, rmmod with rails).
#
#   guest (one is enough; on several, each runs it alone)
#   +--------------------------------------------------------------+
#   |  r0 ... rN-1: one rail per rail interface ($NZ_IFS)          |
#   |  rail0 10.77.0.1 --+    rail1 10.77.1.1 --+   ...            |
#   |                                                              |
#   |  netns nzrns:  nzrv1 10.99.0.2 <== veth ==> nzrv0 (no IPv4)  |
#   +--------------------------------------------------------------+
. "$(dirname "$0")/lib.sh"
CTL=$NZ_BIN/tools/nezhactl
SYS=/sys/class/nezha
PORT=7470
# shellcheck disable=SC2206  # word splitting intended
ifs=($NZ_IFS) addrs=($NZ_ADDRS)
nrails=${#ifs[@]}
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)

cleanup() {
	ip netns del nzrns 2>/dev/null
	ip netns del nzagns 2>/dev/null
	ip link del nzav0 2>/dev/null
	[ -z "${aggns:-}" ] || kill "$aggns" 2>/dev/null
	ip link del nzrv0 2>/dev/null
	ip link del nzrdum0 2>/dev/null
	[ -z "${reader:-}" ] || kill "$reader" 2>/dev/null
	[ -z "${holder:-}" ] || kill "$holder" 2>/dev/null
	[ -z "${writer:-}" ] || kill "$writer" 2>/dev/null
	[ -z "${junk:-}" ] || kill "$junk" 2>/dev/null
	[ -z "${hog:-}" ] || kill "$hog" 2>/dev/null
}
trap cleanup EXIT

# check_err NAME PATTERN CMD...: CMD fails with status 1 (the kernel's or
# the system's refusal) and what it prints matches PATTERN.
check_err() {
	local name=$1 pat=$2 out rc; shift 2
	out=$("$@" 2>&1); rc=$?
	if [ $rc = 0 ]; then
		not_ok "$name" "succeeded but should fail: $out"
	elif [ $rc != 1 ]; then
		not_ok "$name" "exit status $rc, not 1: $(tr '\n' ' ' <<<"$out")"
	elif grep -qE -- "$pat" <<<"$out"; then
		ok "$name"
	else
		not_ok "$name" "wrong error: $(tr '\n' ' ' <<<"$out")"
	fi
}
# check_usage NAME CMD...: a usage error (status 255), found before talking
# to the kernel.
check_usage() {
	local name=$1 out rc; shift
	out=$("$@" 2>&1); rc=$?
	if [ $rc -eq 255 ] && grep -q '^usage: nezhactl .*rail' <<<"$out" &&
	   ! grep -qE 'not loaded|nezhactl: rail [a-z]+ [^:]*: [A-Z]' <<<"$out"; then
		ok "$name"
	else
		not_ok "$name" "rc $rc: $(tr '\n' ' ' <<<"$out")"
	fi
}
# check_eq NAME WANT CMD...: CMD prints exactly WANT.
check_eq() {
	local name=$1 want=$2 got; shift 2
	got=$("$@" 2>&1)
	if [ "$got" = "$want" ]; then ok "$name"; else not_ok "$name" "want '$want', got '$got'"; fi
}
rail_line() {	# rail_line ID NAME DEV ADDR PORT WEIGHT STATE: the show header
	echo "$1: $2 tcp dev $3 $4:$5 weight $6 state $7 conns 0"
}
zero_stats="    tx 0 bytes 0 chunks  rx 0 bytes 0 chunks  errors 0 refused 0"
sysval() { cat "$SYS/rail-$1/$2" 2>&1; }
rail_names() { "$CTL" rail show | sed -nE 's/^[0-9]+: ([^ ]+) .*/\1/p' | tr '\n' ' '; }
first_names() { local i; for ((i = 0; i < $1; i++)); do printf 'r%d ' $i; done; }
listening() { ss -ltnH 2>/dev/null | grep -qF " $1:$2 "; }
# wait_state RAIL STATE: up to 10 s for a rail's state (carrier is async).
wait_state() {
	local i
	for i in $(seq 50); do
		[ "$(sysval "$1" state)" = "$2" ] && return 0
		sleep 0.2
	done
	return 1
}
# The NZ_IOC_RAIL_LIST ioctl: prints "count name@id:addr:port:weight:state ...".
ioc_list() {
	python3 - "$@" <<'EOF'
import ctypes, fcntl, os, socket, struct, sys
cap = int(sys.argv[1]) if len(sys.argv) > 1 else 8
rsvd = int(sys.argv[2]) if len(sys.argv) > 2 else 0
IOC = (3 << 30) | (16 << 16) | (0xE7 << 8) | 0x01   # _IOWR(0xE7, 1, 16 bytes)
SZ = 48                                             # struct nz_rail_info
buf = ctypes.create_string_buffer(b"\xa5" * (SZ * 8), SZ * 8)
arg = bytearray(struct.pack("=IIQ", cap, rsvd, ctypes.addressof(buf)))
fd = os.open("/dev/nezha", os.O_RDWR)
try:
    fcntl.ioctl(fd, IOC, arg)
except OSError as e:
    print("errno", e.errno)
    sys.exit(0)
count = struct.unpack_from("=I", arg)[0]
out = [str(count)]
for i in range(min(cap, count)):
    name, rid, proto, state, weight, addr, port, rsvd, speed, rsvd2 = \
        struct.unpack_from("=16sIIII4sHHII", buf.raw, SZ * i)
    out.append("%s@%d:%s:%d:%d:%d:%d:%d:%d:%d" % (name.rstrip(b"\0").decode(),
               rid, socket.inet_ntoa(addr), socket.ntohs(port), weight, state,
               proto, rsvd, speed, rsvd2))
# Entries past count (or cap) must be left alone.
untouched = buf.raw[SZ * min(cap, count):] == b"\xa5" * (SZ * (8 - min(cap, count)))
print(" ".join(out), "untouched" if untouched else "OVERWRITTEN")
EOF
}

# --- usage errors need no module -------------------------------------------------

check_usage "usage: rail add without arguments" "$CTL" rail add
check_usage "usage: rail add without proto" "$CTL" rail add r0 dev "${ifs[0]}"
check_usage "usage: rail add without dev" "$CTL" rail add r0 proto tcp
check_usage "usage: rail add with an unknown protocol" "$CTL" rail add r0 proto udp dev "${ifs[0]}"
check_usage "usage: rail add port 0" "$CTL" rail add r0 proto tcp dev "${ifs[0]}" port 0
check_usage "usage: rail add port 65536" "$CTL" rail add r0 proto tcp dev "${ifs[0]}" port 65536
check_usage "usage: rail add port not a number" "$CTL" rail add r0 proto tcp dev "${ifs[0]}" port 7x
check_usage "usage: rail add negative weight" "$CTL" rail add r0 proto tcp dev "${ifs[0]}" weight -1
check_usage "usage: rail add bad address" "$CTL" rail add r0 proto tcp dev "${ifs[0]}" addr 10.77.0
check_usage "usage: rail add unknown keyword" "$CTL" rail add r0 proto tcp dev "${ifs[0]}" mtu 9000
check_usage "usage: rail add keyword twice" "$CTL" rail add r0 proto tcp dev a dev b
check_usage "usage: rail del without a name" "$CTL" rail del
check_usage "usage: rail set without a change" "$CTL" rail set r0
check_usage "usage: rail set up and down" "$CTL" rail set r0 up down
check_usage "usage: rail show with two names" "$CTL" rail show a b
check_err "without the module: nezhactl rail says so" "module is not loaded" "$CTL" rail

# --- add and show ------------------------------------------------------------------

check "insmod nezha.ko" nz_load
check_eq "no rails after load" "" "$CTL" rail show
if (( $(cat $SYS/nezha/features) & 0x10 )); then tcp=1; else tcp=0; fi

for ((i = 0; i < nrails; i++)); do
	check "rail add r$i on ${ifs[i]}" "$CTL" rail add "r$i" proto tcp dev "${ifs[i]}"
done
want=$(for ((i = 0; i < nrails; i++)); do
	rail_line $i "r$i" "${ifs[i]}" "${addrs[i]}" $PORT 100 up
	echo "$zero_stats"
done)
check_eq "rail show lists every rail with defaults" "$want" "$CTL" rail show
check_eq "rail (no command) is rail show" "$want" "$CTL" rail
check_eq "rail list is rail show" "$want" "$CTL" rail list
check_eq "rail show r0 shows one rail" \
	"$(rail_line 0 r0 "${ifs[0]}" "${addrs[0]}" $PORT 100 up)
$zero_stats" "$CTL" rail show r0

# --- sysfs ----------------------------------------------------------------------

bad=
for ((i = 0; i < nrails; i++)); do
	for kv in "id=$i" proto=tcp "dev=${ifs[i]}" "addr=${addrs[i]}" port=$PORT \
		  weight=100 state=up speed_mbps=0 stats/bytes_tx=0 stats/bytes_rx=0 \
		  stats/chunks_tx=0 stats/chunks_rx=0 stats/errors=0 \
		  stats/handshakes_refused=0 stats/conns=0 stats/failovers=0 stats/false_suspects=0 \
		  stats/chunks_resent=0 stats/acks_late=0 stats/ctrl_dropped=0 stats/hb_frames=0 \
		  stats/last_failover_ms=0 stats/sends_confirmed=0 frame_mac=0 \
		  stats/mac_failures=0 stats/redials=0; do
		got=$(sysval "r$i" "${kv%%=*}")
		[ "$got" = "${kv#*=}" ] || bad+=" r$i/${kv%%=*}='$got'"
	done
done
[ -z "$bad" ] && ok "sysfs: every rail file holds its value" || not_ok "sysfs: every rail file holds its value" "$bad"
check_eq "sysfs: exactly the documented rail files" \
	"addr dev frame_mac id port proto speed_mbps state stats/acks_late stats/bytes_rx stats/bytes_tx stats/chunks_resent stats/chunks_rx stats/chunks_tx stats/conns stats/ctrl_dropped stats/errors stats/failovers stats/false_suspects stats/handshakes_refused stats/hb_frames stats/last_failover_ms stats/mac_failures stats/redials stats/sends_confirmed weight" \
	sh -c "cd $SYS/rail-r0 && find . -type f ! -name uevent ! -path './power/*' | sed 's|^\./||' | sort | tr '\n' ' ' | sed 's/ \$//'"
check "sysfs: rail files are read-only, readable by all" \
	sh -c "! find $SYS/rail-r0/ -type f ! -name uevent ! -path '*/power/*' ! -perm 0444 | grep -q ."
check "sysfs: readable by an unprivileged user" "${NOBODY[@]}" cat "$SYS/rail-r0/state"

# --- the ioctl ------------------------------------------------------------------

want="$nrails"
# The NICs of the test suites report no link speed (vm.sh without -s): 0.
for ((i = 0; i < nrails; i++)); do want+=" r$i@$i:${addrs[i]}:$PORT:100:1:1:0:0:0"; done
check_eq "NZ_IOC_RAIL_LIST lists every rail" "$want untouched" ioc_list 8
check_eq "NZ_IOC_RAIL_LIST with no room reports the count only" "$nrails untouched" ioc_list 0
check_eq "NZ_IOC_RAIL_LIST with room for one" "$nrails r0@0:${addrs[0]}:$PORT:100:1:1:0:0:0 untouched" ioc_list 1
check_eq "NZ_IOC_RAIL_LIST rejects a non-zero reserved field" "errno 22" ioc_list 8 1

# --- listeners ------------------------------------------------------------------

if [ $tcp = 1 ]; then
	bad=
	for ((i = 0; i < nrails; i++)); do
		listening "${addrs[i]}" $PORT || bad+=" ${addrs[i]}:$PORT"
	done
	[ -z "$bad" ] && ok "every rail listens on its address" || not_ok "every rail listens on its address" "not listening:$bad; $(ss -ltnH)"
else
	skip "every rail listens on its address" "module lacks the tcp feature"
fi

# --- set ------------------------------------------------------------------------

check "rail set r0 weight 250" "$CTL" rail set r0 weight 250
check_eq "new weight in rail show" "$(rail_line 0 r0 "${ifs[0]}" "${addrs[0]}" $PORT 250 up)" \
	sh -c "$CTL rail show r0 | head -1"
check_eq "new weight in sysfs" 250 sysval r0 weight
check "rail set r0 down" "$CTL" rail set r0 down
check_eq "admin-down in sysfs" admin-down sysval r0 state
check "admin-down in rail show" sh -c "$CTL rail show r0 | grep -q 'state admin-down'"
check "rail set r0 up" "$CTL" rail set r0 up
check_eq "up again in sysfs" up sysval r0 state
check "rail set r0 weight 0 down (combined)" "$CTL" rail set r0 weight 0 down
check_eq "combined set took both" "0 admin-down" sh -c "echo \$(cat $SYS/rail-r0/weight $SYS/rail-r0/state)"
check "rail set r0 up weight 10000 (the maximum)" "$CTL" rail set r0 up weight 10000
check_eq "maximum weight and up" "10000 up" sh -c "echo \$(cat $SYS/rail-r0/weight $SYS/rail-r0/state)"
check "rail set r0 weight 100" "$CTL" rail set r0 weight 100

last=$((nrails - 1))
ip link set "${ifs[last]}" down
check "link down: state no-link" wait_state "r$last" no-link
check "no-link in rail show" sh -c "$CTL rail show r$last | grep -q 'state no-link'"
"$CTL" rail set "r$last" down
check_eq "admin-down wins over no-link" admin-down sysval "r$last" state
"$CTL" rail set "r$last" up
ip link set "${ifs[last]}" up
check "link up: state up" wait_state "r$last" up

# --- configuration errors ----------------------------------------------------------

d0=${ifs[0]}
check_err "unknown device: ENODEV" "rail add rx: No such device: no such network device" \
	"$CTL" rail add rx proto tcp dev nosuchdev0
check_err "device name too long: EINVAL" "Invalid argument: device name is longer than 15" \
	"$CTL" rail add rx proto tcp dev abcdefghijklmnopq
check_err "duplicate name: EEXIST" "rail add r0: File exists: a rail of that name exists" \
	"$CTL" rail add r0 proto tcp dev "$d0" port 7480
check_err "name of 16 characters: EINVAL" "Invalid argument: rail name is longer than 15 characters" \
	"$CTL" rail add abcdefghijklmnop proto tcp dev "$d0" port 7481
check "name of 15 characters is fine" "$CTL" rail add abcdefghijklmno proto tcp dev "$d0" port 7481
check "... and it can be deleted" "$CTL" rail del abcdefghijklmno
check "name of every allowed character" "$CTL" rail add A-z_0.9 proto tcp dev "$d0" port 7482
check "... and it can be deleted" "$CTL" rail del A-z_0.9
for n in "r/0" "r 0" "r:0" "r0*" $'r\xc3\xa4' $'r\t0'; do
	check_err "bad character in name '$n': EINVAL" "Invalid argument: rail name may only contain" \
		"$CTL" rail add "$n" proto tcp dev "$d0" port 7483
done
check_err "empty name: EINVAL" "Invalid argument: rail name is empty" \
	"$CTL" rail add "" proto tcp dev "$d0" port 7483
check_err "port of another rail on that address: EADDRINUSE" \
	"rail add rx: Address already in use: another rail listens" \
	"$CTL" rail add rx proto tcp dev "$d0" port $PORT
if [ $tcp = 1 ]; then
	python3 -c "import socket,time; s=socket.socket(); s.bind(('${addrs[0]}', 7484)); s.listen(); time.sleep(60)" &
	holder=$!
	for _ in $(seq 50); do listening "${addrs[0]}" 7484 && break; sleep 0.1; done
	check_err "port taken by another program: EADDRINUSE" \
		"rail add rx: Address already in use" \
		"$CTL" rail add rx proto tcp dev "$d0" port 7484
	kill $holder; wait $holder 2>/dev/null; holder=
else
	skip "port taken by another program: EADDRINUSE" "module lacks the tcp feature"
fi
check_err "rdma: EPROTONOSUPPORT" "rail add rx: Protocol not supported: RDMA rails" \
	"$CTL" rail add rx proto rdma dev "$d0" port 7485
check_err "weight over the maximum: ERANGE, with the range" \
	"rail add rx: Numerical result out of range.*\(valid: 0\.\.10000\)" \
	"$CTL" rail add rx proto tcp dev "$d0" port 7485 weight 10001
check_err "set weight over the maximum: ERANGE" "rail set r0: Numerical result out of range" \
	"$CTL" rail set r0 weight 4294967295
check_err "address not on the device: EADDRNOTAVAIL" \
	"rail add rx: Cannot assign requested address: address is not on the device" \
	"$CTL" rail add rx proto tcp dev "$d0" addr 10.99.99.99
check "explicit address of the device" "$CTL" rail add rx proto tcp dev "$d0" addr "${addrs[0]}" port 7486
check_eq "... is the one used" "${addrs[0]}:7486" sh -c "echo \$(cat $SYS/rail-rx/addr):\$(cat $SYS/rail-rx/port)"
check "... and it can be deleted" "$CTL" rail del rx
# The kernel cannot load modules itself here (its modprobe is the initramfs').
modprobe -q dummy 2>/dev/null
modprobe -q veth 2>/dev/null
if ip link add nzrdum0 type dummy 2>/dev/null || ip link add nzrdum0 type veth peer name nzrdum1 2>/dev/null; then
	ip link set nzrdum0 up
	check_err "device without IPv4 address: EADDRNOTAVAIL" \
		"Cannot assign requested address: device has no IPv4 address" \
		"$CTL" rail add rx proto tcp dev nzrdum0
	ip link del nzrdum0
else
	skip "device without IPv4 address: EADDRNOTAVAIL" "no dummy or veth devices"
fi
# A NIC that unregisters and comes back under its name (a driver reload)
# gets a new ifindex: the rail follows it (it stayed no-link for ever).
if ip link add nzrdum0 type dummy 2>/dev/null; then
	ip addr add 10.98.0.1/24 dev nzrdum0 && ip link set nzrdum0 up
	check "rail on a dummy NIC" "$CTL" rail add rd proto tcp dev nzrdum0 port 7491
	check "... up" wait_state rd up
	ip link del nzrdum0
	check "... no-link once the NIC is gone" wait_state rd no-link
	ip link add nzrdum0 type dummy && ip addr add 10.98.0.1/24 dev nzrdum0 &&
		ip link set nzrdum0 up
	check "... up again once a NIC of that name is back (new ifindex)" wait_state rd up
	check "... and deleted" "$CTL" rail del rd
	ip link del nzrdum0
else
	skip "a NIC that comes back" "no dummy devices"
fi
check_err "del of an unknown rail: ENOENT" "rail del r99: No such file or directory: no such rail" \
	"$CTL" rail del r99
check_err "set of an unknown rail: ENOENT" "rail set r99: No such file or directory: no such rail" \
	"$CTL" rail set r99 up
check_err "show of an unknown rail: ENOENT" "rail show r99: No such file or directory: no such rail" \
	"$CTL" rail show r99

# The table is full at NZ_MAX_RAILS (8).
full=1
for ((k = nrails; k < 8; k++)); do
	"$CTL" rail add "x$k" proto tcp dev "$d0" port $((7500 + k)) || full=0
done
[ $full = 1 ] && ok "rails up to NZ_MAX_RAILS" || not_ok "rails up to NZ_MAX_RAILS"
check_eq "ids are the slots 0..7" "0 1 2 3 4 5 6 7" sh -c "echo \$(cat $SYS/rail-*/id | sort -n)"
check_err "one rail too many: ENOSPC" "rail add x8: No space left on device: rail table full" \
	"$CTL" rail add x8 proto tcp dev "$d0" port 7600
for ((k = nrails; k < 8; k++)); do "$CTL" rail del "x$k"; done
check_eq "errors left the table alone" "$(first_names $nrails)" rail_names

# --- privileges ----------------------------------------------------------------------

check_err "unprivileged rail add: EPERM" "rail add ru: Operation not permitted" \
	"${NOBODY[@]}" "$CTL" rail add ru proto tcp dev "$d0" port 7601
check_err "unprivileged rail set: EPERM" "rail set r0: Operation not permitted" \
	"${NOBODY[@]}" "$CTL" rail set r0 down
check_err "unprivileged rail del: EPERM" "rail del r0: Operation not permitted" \
	"${NOBODY[@]}" "$CTL" rail del r0
check_eq "unprivileged rail show works" "$("$CTL" rail show)" "${NOBODY[@]}" "$CTL" rail show
check "unprivileged rail show NAME works" "${NOBODY[@]}" "$CTL" rail show r0
check_eq "unprivileged attempts changed nothing" "100 up" sh -c "echo \$(cat $SYS/rail-r0/weight $SYS/rail-r0/state)"

# --- network namespaces ----------------------------------------------------------------

if ip netns add nzrns 2>/dev/null &&
   ip link add nzrv0 type veth peer name nzrv1 netns nzrns 2>/dev/null; then
	ip -n nzrns addr add 10.99.0.2/24 dev nzrv1
	ip -n nzrns link set nzrv1 up
	ip link set nzrv0 up
	check "rail add in a namespace" ip netns exec nzrns "$CTL" rail add rn proto tcp dev nzrv1
	check_err "its device is not in the initial namespace: ENODEV" "No such device" \
		"$CTL" rail add rm proto tcp dev nzrv1
	check "it is in the table" sh -c "$CTL rail show rn | grep -q '^[0-9]: rn tcp dev nzrv1 10.99.0.2:$PORT '"
	check "its state follows its namespace's device" wait_state rn up
	if [ $tcp = 1 ]; then
		check "it listens in its namespace" sh -c "ip netns exec nzrns ss -ltnH | grep -qF ' 10.99.0.2:$PORT '"
	else
		skip "it listens in its namespace" "module lacks the tcp feature"
	fi
	ip -n nzrns link del nzrv1
	check "device deleted: state no-link" wait_state rn no-link
	# The rail keeps its namespace alive until it goes.
	ip netns del nzrns
	check "rail del after its namespace was deleted" "$CTL" rail del rn
else
	skip "rails in network namespaces" "cannot make a namespace with a veth pair"
fi

# --- del and re-add, cycles ----------------------------------------------------------------

check "rail del r$last" "$CTL" rail del "r$last"
check "its sysfs directory is gone" test ! -e "$SYS/rail-r$last"
check_eq "rail show no longer lists it" "$(first_names $last)" rail_names
if [ $tcp = 1 ]; then
	check "it no longer listens" sh -c "! ss -ltnH | grep -qF ' ${addrs[last]}:$PORT '"
fi
check "re-add the same name" "$CTL" rail add "r$last" proto tcp dev "${ifs[last]}"
check_eq "same slot, same files" "$last up" sh -c "echo \$(cat $SYS/rail-r$last/id $SYS/rail-r$last/state)"

# 20 add/del cycles while another process reads the rail's files and dumps
# the table, and a third adds and deletes a rail of its own.
( while :; do
	cat "$SYS"/rail-cyc/* "$SYS"/rail-cyc/stats/* >/dev/null 2>&1
	"$CTL" rail show >/dev/null 2>&1
done ) &
reader=$!
( for _ in $(seq 1 20); do
	"$CTL" rail add cyd proto tcp dev "$d0" port 7701 && "$CTL" rail del cyd || exit 1
done ) >/dev/null 2>&1 &
writer=$!
cycles_ok=1
for i in $(seq 1 20); do
	if ! "$CTL" rail add cyc proto tcp dev "$d0" port 7700 weight "$i" >/dev/null ||
	   [ "$(sysval cyc weight)" != "$i" ] || ! "$CTL" rail del cyc; then
		cycles_ok=0
		break
	fi
done
kill $reader; wait $reader 2>/dev/null; reader=
if [ $cycles_ok = 1 ]; then ok "20 add/del cycles under concurrent readers"; else not_ok "20 add/del cycles under concurrent readers" "failed at cycle $i"; fi
if wait $writer; then ok "a concurrent writer's 20 cycles"; else not_ok "a concurrent writer's 20 cycles"; fi
writer=
check "no trace of the cycled rails" sh -c "! test -e $SYS/rail-cyc && ! test -e $SYS/rail-cyd && ! $CTL rail show | grep -q cy"

# Rail delete while strangers' connections wait in its listener's accept
# queue and write later (issue 19, defect 5).  TCP clones the listener's
# callbacks and user data into each such child: its data must not wake the
# accept work again once rail del has cancelled it, or that work runs on
# the freed rail (KASAN on the debug kernel).  30 add/del cycles of a rail
# under 64 junk connections to its port, each opened again once closed.
#
# A child stays in the queue when rail del cancels the accept work its
# connection queued, so the node is made busy: a real-time busy loop
# leaves the kernel's workers the CPU's real-time throttling margin (5%
# by default), while this script, nezhactl and the junk connections run
# at a higher real-time priority.  Each connection writes 50 ms after it
# is up, after the cancel, and is closed and opened again 50 ms later:
# waiting for the module to close it, the junk made new connections only
# while the workers ran, which then took every child at once.  The old
# code put back passed each earlier version; this one oopses Debian's
# kernel, but still passed on the debug kernel (2026-12-05).
rt_old=$(cat /proc/sys/kernel/sched_rt_runtime_us 2>/dev/null)
[ "${rt_old:--1}" -gt 0 ] 2>/dev/null || echo 950000 > /proc/sys/kernel/sched_rt_runtime_us
chrt -f 20 python3 "$(dirname "$0")/junk_conns.py" "${addrs[0]}" 7702 --junk 64 \
	--silent 0 --secs 600 --delay 50 --close 50 > "$NZ_OUT/junk.log" 2>&1 &
junk=$!
chrt -f 10 sh -c 'while :; do :; done' &
hog=$!
chrt -f -p 20 $$ || echo "# could not make the test real-time: chrt failed"
junk_ok=1
for i in $(seq 1 30); do
	if ! "$CTL" rail add cyj proto tcp dev "$d0" port 7702 >/dev/null; then
		junk_ok=0
		break
	fi
	sleep 0.3
	if ! "$CTL" rail del cyj; then
		junk_ok=0
		break
	fi
done
chrt -o -p 0 $$
kill $hog $junk; wait $hog $junk 2>/dev/null; hog=''; junk=''
sed 's/^/# /' "$NZ_OUT/junk.log"
[ "${rt_old:--1}" -gt 0 ] 2>/dev/null ||
	echo "${rt_old:--1}" > /proc/sys/kernel/sched_rt_runtime_us
if [ $junk_ok = 1 ]; then ok "30 add/del cycles while junk connections write to the rail's port, on a busy node"; else not_ok "30 add/del cycles while junk connections write to the rail's port, on a busy node" "failed at cycle $i"; fi
check "no trace of rail cyj" sh -c "! test -e $SYS/rail-cyj && ! $CTL rail show | grep -q cyj"

# --- nezhactl as operators script it (issue 25) ---------------------------------------------

JC="/usr/bin/python3 $NZ_TOP/selftests/json_check.py"
# check_rc NAME RC PATTERN CMD...: exit status RC, output matching PATTERN.
check_rc() {
	local name=$1 want=$2 pat=$3 out rc; shift 3
	out=$("$@" 2>&1); rc=$?
	if [ $rc = "$want" ] && grep -qE -- "$pat" <<<"$out"; then ok "$name"
	else not_ok "$name" "rc $rc (want $want): $(tr '\n' ' ' <<<"$out")"; fi
}
# The JSON of every show command, checked against the schema in one Python
# run (each start of Python costs seconds under TCG).
J=$NZ_OUT/json
mkdir -p "$J"
json_ok=1
for c in "version:version" "show:show" "rail_show:rail show" "rail_show_r0:-p rail show r0" \
	 "health_show:health" "param_show:param" "device_show:device" "stats:stats"; do
	f=${c%%:*}
	# shellcheck disable=SC2086  # the command's words
	"$CTL" -j ${c#*:} >"$J/$f.json" 2>&1 || { json_ok=0; not_ok "-j ${c#*:}" "$(cat "$J/$f.json")"; }
done
pairs=()
for f in "$J"/*.json; do
	b=${f##*/}; b=${b%.json}
	pairs+=("${b%_r0}=$f")
done
out=$($JC --each "${pairs[@]}" 2>&1); rc=$?
sed "s/^/# /" <<<"$out"
if [ $rc = 4 ]; then
	skip "-j: every show command's JSON against the schema" "python3-jsonschema not installed"
elif [ $rc = 0 ] && [ $json_ok = 1 ] && [ "$(grep -c '^ok ' <<<"$out")" = 8 ]; then
	ok "-j: version, show, rail show (and -p NAME), health, param, device, stats valid against the schema"
else
	not_ok "-j: every show command's JSON against the schema" "$(grep -v '^ok ' <<<"$out" | head -3)"
fi
check_eq "-j rail show: the rails' names" "$(first_names "$nrails")" \
	sh -c "grep -o '\"name\":\"[^\"]*\"' $J/rail_show.json | cut -d'\"' -f4 | tr '\n' ' '"
check_eq "prefixes: r s r0 w 50 is rail set r0 weight 50" "50" sh -c "$CTL r se r0 w 50 && cat $SYS/rail-r0/weight"
"$CTL" rail set r0 weight 100
check_rc "a kernel error is status 1" 1 '^nezhactl: rail add r0: File exists' \
	"$CTL" rail add r0 proto tcp dev "$d0"
check "param set sched_mode weights" sh -c "$CTL param set sched_mode weights &&
	grep -qx weights /sys/module/nezha/parameters/sched_mode"
check_rc "param set: the module's refusal is status 1" 1 "Invalid argument" \
	"$CTL" param set sched_mode fastest
"$CTL" param set sched_mode measured
check_rc "param set dev_mode: load time, /etc/modprobe.d; status 255" 255 \
	"options nezha dev_mode=0600" "$CTL" param set dev_mode 0600
prom=$("$CTL" stats -o prometheus 2>&1)
if grep -q "^nezha_rail_sent_bytes_total{rail=\"r0\"} [0-9]" <<<"$prom" &&
   grep -q '^nezha_rail_up{rail="r0"} 1$' <<<"$prom" &&
   ! grep -vE '^(# (HELP|TYPE) nezha_[a-z_]+ .*|nezha_[a-z_]+(\{[^}]*\})? [-0-9.e+]+)$' <<<"$prom" | grep -q .; then
	ok "stats -o prometheus: every line a sample or a comment, r0's counters"
else
	not_ok "stats -o prometheus" "$(head -c 400 <<<"$prom")"
fi

# monitor: configuration events, in JSON.
"$CTL" -j monitor count 4 timeout 20 >"$NZ_OUT/mon.json" 2>&1 &
mon=$!
sleep 0.5
"$CTL" rail add rmon proto tcp dev "$d0" port 7493 &&
	"$CTL" rail set rmon weight 7 down && "$CTL" health set grace 5000 &&
	"$CTL" rail del rmon
wait $mon; rc=$?
check_eq "monitor: rail add, set, health set, rail del, then count reached" \
	"0 rail-add rail-set health-set rail-del" \
	sh -c "echo $rc \$(sed 's/.*\"event\":\"\\([^\"]*\\)\".*/\\1/' $NZ_OUT/mon.json)"
check "monitor: the set event carries the new weight and state" \
	sh -c "sed -n 2p $NZ_OUT/mon.json | grep '\"weight\":7,' | grep -q '\"state\":\"admin-down\"'"

# A monitor that cannot keep up loses events: it says so and goes on.
# Stopped while one batch process adds and deletes a rail 300 times (600
# events, more than its socket buffer holds), it must report the loss and
# still print the event after it.
"$CTL" -j monitor >"$NZ_OUT/mon-lost.json" 2>"$NZ_OUT/mon-lost.err" &
mon=$!
sleep 0.5
kill -STOP $mon
for i in $(seq 300); do
	echo "rail add rl proto tcp dev $d0 port 7496"
	echo "rail del rl"
done >"$NZ_OUT/cycles.batch"
"$CTL" -b "$NZ_OUT/cycles.batch"
kill -CONT $mon
sleep 1
"$CTL" health set grace 5000
for _ in $(seq 50); do grep -q health-set "$NZ_OUT/mon-lost.json" && break; sleep 0.2; done
kill $mon 2>/dev/null; wait $mon 2>/dev/null
out=$($JC --each "monitor_event=$NZ_OUT/mon.json" "monitor_event=$NZ_OUT/mon-lost.json" 2>&1); rc=$?
case $rc in
0) ok "monitor -j: every line valid against the schema (also the loss)" ;;
4) skip "monitor -j: every line valid against the schema" "python3-jsonschema not installed" ;;
*) not_ok "monitor -j: every line valid against the schema" "$out" ;;
esac
if grep -q 'events lost' "$NZ_OUT/mon-lost.err" && grep -q '"event":"lost"' "$NZ_OUT/mon-lost.json" &&
   grep -q '"event":"health-set"' "$NZ_OUT/mon-lost.json"; then
	ok "monitor: events lost to a full buffer are reported, and it goes on"
else
	not_ok "monitor: events lost to a full buffer are reported, and it goes on" \
		"$(wc -l <"$NZ_OUT/mon-lost.json") lines; $(head -c 200 "$NZ_OUT/mon-lost.err")"
fi

# -n NETNS, as ip -n.
if ip netns add nzrn2 2>/dev/null && ip link add nzrw0 type veth peer name nzrw1 netns nzrn2 2>/dev/null; then
	ip -n nzrn2 addr add 10.97.0.2/24 dev nzrw1 && ip -n nzrn2 link set nzrw1 up
	check "-n NETNS: rail add on a device of that namespace" "$CTL" -n nzrn2 rail add rns proto tcp dev nzrw1
	check "-n NETNS: its address is that namespace's" sh -c "$CTL -j rail show rns | grep -q '\"addr\":\"10.97.0.2\"'"
	"$CTL" rail del rns
	ip link del nzrw0 2>/dev/null
	ip netns del nzrn2
else
	skip "-n NETNS" "cannot make a namespace with a veth pair"
fi

# nezha.service's ExecStart: nezhactl -w -b /etc/nezha/nezha.conf, where one
# NIC appears only later -- first without an address, then with one.
cat >"$NZ_OUT/nezha.conf" <<EOC
# as /etc/nezha/nezha.conf
device set group 65534 mode 0640
health set interval 4 misses 4 grace 5000
param set sched_target_ms 20
rail add rw0 proto tcp dev $d0 port 7494
rail add rw1 proto tcp \\
    dev nzwait0 port 7495
EOC
ip link del nzwait0 2>/dev/null
"$CTL" -w -b "$NZ_OUT/nezha.conf" >"$NZ_OUT/batch.log" 2>&1 &
batch=$!
sleep 1
check "-w -b: a rail whose NIC is missing waits (nezhactl still runs)" kill -0 $batch
check "... the others are added" test -e "$SYS/rail-rw0" -a ! -e "$SYS/rail-rw1"
check_eq "... the device line applied: /dev/nezha group 65534 mode 640" "65534 640" stat -c '%g %a' /dev/nezha
if ip link add nzwait0 type dummy 2>/dev/null; then
	ip link set nzwait0 up
	sleep 1
	check "... a NIC without an address: still waiting" kill -0 $batch
	ip addr add 10.96.0.1/24 dev nzwait0
	for _ in $(seq 50); do kill -0 $batch 2>/dev/null || break; sleep 0.2; done
	wait $batch; rc=$?
	check_eq "... its address appears: the rail is added, nezhactl exits 0" "0 up" \
		sh -c "echo $rc \$(cat $SYS/rail-rw1/state 2>&1)"
	grep -q 'rw1 added' "$NZ_OUT/batch.log" && ok "... and says so" ||
		not_ok "... and says so" "$(cat "$NZ_OUT/batch.log")"
else
	kill $batch; wait $batch
	skip "-w: a NIC that appears later" "no dummy devices"
fi
chgrp root /dev/nezha; chmod 0660 /dev/nezha
printf 'device set mode 0606\nrail add rx proto tcp dev nosuch0\n' >"$NZ_OUT/dev.conf"
check_eq "device apply FILE (the udev rule's command): only the device lines" "606" \
	sh -c "$CTL device apply $NZ_OUT/dev.conf && stat -c %a /dev/nezha && ! test -e $SYS/rail-rx"
chmod 0660 /dev/nezha
check "rail flush (ExecStop) deletes every rail" sh -c "$CTL rail flush && test -z \"\$($CTL rail show)\""
for ((i = 0; i < nrails; i++)); do
	"$CTL" rail add "r$i" proto tcp dev "${ifs[i]}"
done
ip link del nzwait0 2>/dev/null

# --- aggregation rails (Documentation/aggregation.rst, "The rail") ---------------------------
# No listener and no connections: a UDP socket to the node, bound to the
# rail's address, and a probe every 100 ms that nezha-aggd answers.  The
# node runs here, on the second rail's address.
AGGP=29650
# nl_rail_add ATTR=VALUE...: a RAIL_ADD of exactly these attributes, by
# raw generic netlink (nezhactl refuses such mixes itself); prints the
# errno the kernel answered (0: added).
nl_rail_add() {
	python3 - "$NZ_TOP/uapi/linux/nezha_netlink.h" "$@" <<'EOF'
import re, socket, struct, sys
hdr = open(sys.argv[1]).read()
body = re.search(r"enum nz_genl_attr \{(.*?)\};", hdr, re.S).group(1)
names = re.findall(r"^\s*(NZ_A_\w+),", body, re.M)
A = {n: i for i, n in enumerate(names)}
def attr(t, d):
    n = 4 + len(d)
    return struct.pack("=HH", n, t) + d + b"\0" * (-n % 4)
def talk(s, fam, cmd, attrs, seq):
    """Send one request with NLM_F_ACK; (errno, [replies]) at its ACK."""
    p = struct.pack("=BBH", cmd, 1, 0) + b"".join(attrs)
    s.send(struct.pack("=IHHII", 16 + len(p), fam, 5, seq, 0) + p)
    replies = []
    while True:
        buf, off = s.recv(65536), 0
        while off + 16 <= len(buf):
            n, t, _, q, _ = struct.unpack_from("=IHHII", buf, off)
            if q == seq and t == 2:                   # NLMSG_ERROR: the ACK
                return -struct.unpack_from("=i", buf, off + 16)[0], replies
            if q == seq:
                replies.append(buf[off:off + n])
            off += (n + 3) & ~3
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)
s.bind((0, 0))
err, replies = talk(s, 0x10, 3, [attr(2, b"nezha\0")], 1)   # CTRL_CMD_GETFAMILY
fam = None
for r in replies:
    off = 20
    while off + 4 <= len(r):
        n, t = struct.unpack_from("=HH", r, off)
        if t == 1:                                    # CTRL_ATTR_FAMILY_ID
            fam = struct.unpack_from("=H", r, off + 4)[0]
        off += (n + 3) & ~3
if fam is None:
    print("no nezha family: errno", err)
    sys.exit(1)
attrs = []
for a in sys.argv[2:]:
    k, v = a.split("=", 1)
    t = A["NZ_A_RAIL_" + k]
    if k in ("NAME", "DEV"):
        attrs.append(attr(t, v.encode() + b"\0"))
    elif k in ("ADDR", "AGG_ADDR"):
        attrs.append(attr(t, socket.inet_aton(v)))
    elif k in ("PORT", "AGG_PORT"):
        attrs.append(attr(t, struct.pack("=H", int(v))))
    elif k == "FRAME_MAC":
        attrs.append(attr(t, struct.pack("=B", int(v))))
    else:
        attrs.append(attr(t, struct.pack("=I", int(v))))
print(talk(s, fam, 2, attrs, 2)[0])                   # NZ_CMD_RAIL_ADD
EOF
}
# comm_create RAIL...: NZ_IOC_COMM_CREATE, rank 0 of 2, on these rails;
# prints the errno (0: created, and destroyed again).
comm_create() {
	python3 - "$@" <<'EOF'
import ctypes, fcntl, os, socket, struct, sys
names = sys.argv[1:]
n = len(names)
addrs = ctypes.create_string_buffer(8 * 2 * n)
for i in range(n):                                # rank 1's addresses
    struct.pack_into("=4sHH", addrs, 8 * (n + i), socket.inet_aton("10.77.9.9"),
                     socket.htons(7470), 0)
cc = bytearray(232)                               # struct nz_comm_create
struct.pack_into("=Q32sIIIIII", cc, 0, 0x5eed0a66, b"k" * 32, 0, 2, n, 0, 0, 0)
for i, name in enumerate(names):
    struct.pack_into("16s", cc, 64 + 16 * i, name.encode())
struct.pack_into("=Q", cc, 192, ctypes.addressof(addrs))
fd = os.open("/dev/nezha", os.O_RDWR)
try:
    fcntl.ioctl(fd, (3 << 30) | (232 << 16) | (0xE7 << 8) | 2, cc)
except OSError as e:
    print(e.errno)
    sys.exit(0)
cid = struct.unpack_from("=I", cc, 60)[0]
fcntl.ioctl(fd, (1 << 30) | (4 << 16) | (0xE7 << 8) | 4, struct.pack("=I", cid))
print(0)
EOF
}
ag_line="^[0-9]: ag agg dev ${ifs[1]} ${addrs[1]}:[0-9]+ weight 100 state %s aggregator ${addrs[1]}:$AGGP "
check "agg rail added, no node yet" "$CTL" rail add ag proto agg dev "${ifs[1]}" aggregator "${addrs[1]}:$AGGP"
check "agg rail: unreachable while no node answers" wait_state ag unreachable
check "agg rail: rail show names the node and the state" \
	sh -c "$CTL rail show ag | grep -qE '$(printf "$ag_line" unreachable)'"
check "agg rail: probes sent, none answered" \
	sh -c "[ \$(cat $SYS/rail-ag/agg/probes) -ge 1 ] && [ \$(cat $SYS/rail-ag/agg/answers) = 0 ]"
check "agg rail: sysfs proto agg, node ${addrs[1]}:$AGGP" \
	sh -c "[ \$(cat $SYS/rail-ag/proto) = agg ] && [ \$(cat $SYS/rail-ag/agg/node) = ${addrs[1]}:$AGGP ]"
"$NZ_BIN/tools/nezha-aggd" --key-file "$NEZHA_JOB_KEY_FILE" --bind "${addrs[1]}" --port $AGGP \
	>"$NZ_OUT/aggd-rails.log" 2>&1 &
aggd=$!
check "agg rail: up once nezha-aggd answers" wait_state ag up
check "agg rail: rail show says up" sh -c "$CTL rail show ag | grep -qE '$(printf "$ag_line" up)'"
check "agg rail: answers counted, a round trip measured" \
	sh -c "[ \$(cat $SYS/rail-ag/agg/answers) -ge 1 ] && [ \$(cat $SYS/rail-ag/agg/rtt_us) -ge 1 ]"
agl=$(ioc_list)
# peer_port is in network order; ioc_list prints that field as a host u16.
swapped=$(( ((AGGP & 255) << 8) | (AGGP >> 8) ))
if grep -qE "ag@[0-9]+:${addrs[1]}:[0-9]+:100:1:3:$swapped:[0-9]+:" <<<"$agl"; then
	ok "NZ_IOC_RAIL_LIST: proto 3, state up, the node's port"
else
	not_ok "NZ_IOC_RAIL_LIST: proto 3, state up, the node's port" "$agl"
fi
"$CTL" -j rail show ag >"$NZ_OUT/json/rail_show_ag.json" 2>&1
out=$($JC --each "rail_show=$NZ_OUT/json/rail_show_ag.json" 2>&1); rc=$?
sed "s/^/# /" <<<"$out"
if [ $rc = 4 ]; then
	skip "-j rail show of an agg rail against the schema" "python3-jsonschema not installed"
elif [ $rc = 0 ] && grep -q '"aggregator":"'"${addrs[1]}"'"' "$NZ_OUT/json/rail_show_ag.json"; then
	ok "-j rail show of an agg rail: valid against the schema, names the node"
else
	not_ok "-j rail show of an agg rail: valid against the schema, names the node" "$(head -c 600 "$NZ_OUT/json/rail_show_ag.json")"
fi
check_eq "NZ_IOC_COMM_CREATE refuses an agg rail (EPROTOTYPE)" 91 comm_create ag
check_eq "... and takes a TCP rail (the same call)" 0 comm_create r0
check_eq "... and refuses an agg rail in a later slot" 91 comm_create r0 ag
kill "$aggd"; wait "$aggd" 2>/dev/null
# 20 silent probes: two seconds, and more on a slow kernel.
check "agg rail: unreachable once the node stopped" \
	sh -c "for i in \$(seq 150); do [ \$(cat $SYS/rail-ag/state) = unreachable ] && exit 0; sleep 0.1; done; exit 1"
check_eq "agg rail: the loss counted once" 1 cat "$SYS/rail-ag/agg/lost"
check "agg rail: logged" sh -c "dmesg | grep -q 'rail ag: aggregation node ${addrs[1]}:$AGGP unreachable'"
check_eq "RAIL_ADD agg without an aggregator: EDESTADDRREQ" 89 nl_rail_add NAME=ax PROTO=3 DEV="${ifs[1]}"
check_eq "RAIL_ADD agg with a port: EINVAL" 22 nl_rail_add NAME=ax PROTO=3 DEV="${ifs[1]}" AGG_ADDR=10.0.0.1 PORT=7000
check_eq "RAIL_ADD agg to a multicast node: EINVAL" 22 nl_rail_add NAME=ax PROTO=3 DEV="${ifs[1]}" AGG_ADDR=239.1.1.1
check_eq "RAIL_ADD agg to 0.0.0.0: EDESTADDRREQ" 89 nl_rail_add NAME=ax PROTO=3 DEV="${ifs[1]}" AGG_ADDR=0.0.0.0
check_eq "RAIL_ADD agg with frame-mac: EOPNOTSUPP" 95 nl_rail_add NAME=ax PROTO=3 DEV="${ifs[1]}" AGG_ADDR=10.0.0.1 FRAME_MAC=1
check_eq "RAIL_ADD agg, node port 0: ERANGE (policy)" 34 nl_rail_add NAME=ax PROTO=3 DEV="${ifs[1]}" AGG_ADDR=10.0.0.1 AGG_PORT=0
check_eq "RAIL_ADD tcp with an aggregator: EINVAL" 22 nl_rail_add NAME=ax PROTO=1 DEV="${ifs[1]}" PORT=7499 AGG_ADDR=10.0.0.1
check_eq "RAIL_ADD protocol 4: ERANGE (policy)" 34 nl_rail_add NAME=ax PROTO=4 DEV="${ifs[1]}"
check_eq "RAIL_ADD agg, well-formed (the same helper): 0" 0 nl_rail_add NAME=ax PROTO=3 DEV="${ifs[1]}" AGG_ADDR=10.0.0.1
check "two agg rails on one address (their ports the kernel's)" \
	sh -c "$CTL rail show ax | grep -q ' ax agg ' && $CTL rail show ag | grep -q ' ag agg '"
check "unprivileged: no agg rail add" \
	sh -c "! ${NOBODY[*]} $CTL rail add ay proto agg dev ${ifs[1]} aggregator 10.0.0.1 2>/dev/null && ! test -e $SYS/rail-ay"
# The rail's device deleted and made again (another ifindex): the rail
# follows it, as TCP rails do.  The node sits in a namespace, behind a
# veth pair.
agv() {	# agv: the veth pair and its addresses, the node's end in nzagns
	ip link add nzav0 type veth peer name nzav1 netns nzagns &&
		ip addr add 10.96.0.1/24 dev nzav0 && ip link set nzav0 up &&
		ip -n nzagns addr add 10.96.0.2/24 dev nzav1 && ip -n nzagns link set nzav1 up
}
if ip netns add nzagns 2>/dev/null && agv; then
	ip netns exec nzagns "$NZ_BIN/tools/nezha-aggd" --key-file "$NEZHA_JOB_KEY_FILE" \
		--bind 0.0.0.0 --port 29651 >"$NZ_OUT/aggd-ns.log" 2>&1 &
	aggns=$!
	check "agg rail on a veth, its node in a namespace" \
		"$CTL" rail add ah proto agg dev nzav0 aggregator 10.96.0.2:29651
	check "... up" wait_state ah up
	lost0=$(cat "$SYS/rail-ah/agg/lost")
	ip link del nzav0
	check "... no-link once the device is gone" wait_state ah no-link
	# Gone long enough for 20 probes to fail: the rail must find its node
	# again through the new device, not just see a link.
	check "... its node unreachable meanwhile (the loss counted)" \
		sh -c "for i in \$(seq 100); do [ \$(cat $SYS/rail-ah/agg/lost) -gt $lost0 ] && exit 0; sleep 0.1; done; exit 1"
	agv
	check "... up again once a device of that name is back (new ifindex): the node answers through it" \
		wait_state ah up
	check "... and deleted" "$CTL" rail del ah
	kill "$aggns"; wait "$aggns" 2>/dev/null
	ip link del nzav0 2>/dev/null
	ip netns del nzagns
else
	skip "agg rail on a veth whose device is made again" "cannot make a namespace with a veth pair"
fi
check "agg rail del" "$CTL" rail del ag
check "its sysfs directory is gone" test ! -e "$SYS/rail-ag"
# ax stays, probing an address nobody answers: the rmmod below stops it.

# --- rmmod with rails configured -------------------------------------------------------------

"$CTL" monitor >"$NZ_OUT/mon-rmmod.log" 2>&1 &
mon=$!
sleep 0.3
"$CTL" rail set r0 down
logged=$(klog_mark)
check "rmmod with $nrails rails configured" nz_unload
for _ in $(seq 25); do kill -0 $mon 2>/dev/null || break; sleep 0.2; done
kill $mon 2>/dev/null
wait $mon; rc=$?
check_eq "monitor: the module unloaded ends it, status 1, with a message" \
	"1 nezhactl: monitor: the nezha module was unloaded" \
	sh -c "echo $rc \$(grep unloaded $NZ_OUT/mon-rmmod.log)"
check "the nezha class is gone" test ! -e "$SYS"
check_eq "every rail was deleted" "$nrails" \
	sh -c "dmesg | tail -n +$((logged + 1)) | grep -c 'rail r[0-9]* deleted'"
if [ $tcp = 1 ]; then
	check "nothing listens on the rail port" sh -c "! ss -ltnH | grep -qF ':$PORT '"
fi
check "insmod again" nz_load
check_eq "no rails after reload" "" "$CTL" rail show
check "rail add after reload" "$CTL" rail add r0 proto tcp dev "$d0"
check "rmmod" nz_unload
tap_done
