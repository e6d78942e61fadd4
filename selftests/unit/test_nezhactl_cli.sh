#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# nezhactl's command line on the host, where the module is not loaded:
# exit codes (0 ok, 1 kernel/system, 255 usage), every usage error found
# before the kernel is asked, help, batch files (line numbers, -force,
# continuation lines), and the commands that read sysfs, module
# parameters and /dev/nezha -- pointed at a made-up tree -- with their
# JSON validated against Documentation/nezhactl.schema.json.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
CTL=$TOP/build/tools/nezhactl
CHECK=$TOP/selftests/json_check.py
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -z "${2:-}" ] || echo "# $2"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

# expect NAME RC PATTERN CMD...: exit status RC, and stderr+stdout match PATTERN.
expect() {
	local name=$1 want=$2 pat=$3 out rc; shift 3
	out=$("$@" 2>&1); rc=$?
	if [ "$rc" = "$want" ] && grep -qE -- "$pat" <<<"$out"; then
		ok "$name"
	else
		not_ok "$name" "rc $rc (want $want): $(head -c 300 <<<"$out" | tr '\n' ' ')"
	fi
}
# usage NAME PATTERN CMD...: a usage error (255) that never reached the kernel.
usage() {
	local name=$1 pat=$2 out rc; shift 2
	out=$("$@" 2>&1); rc=$?
	if [ $rc = 255 ] && grep -qE -- "$pat" <<<"$out" && ! grep -q 'not loaded' <<<"$out"; then
		ok "$name"
	else
		not_ok "$name" "rc $rc: $(head -c 300 <<<"$out" | tr '\n' ' ')"
	fi
}
# schema NAME DEF CMD...: exit 0 and stdout valid against definition DEF.
schema() {
	local name=$1 def=$2 out rc; shift 2
	out=$("$@" 2>"$T/err"); rc=$?
	if [ $rc != 0 ]; then
		not_ok "$name" "rc $rc: $(head -c 300 "$T/err")"
		return
	fi
	echo "$out" | "$PY" "$CHECK" "$def" 2>"$T/why"
	case $? in
	0) ok "$name" ;;
	4) skip "$name" "python3-jsonschema not installed" ;;
	*) not_ok "$name" "$(cat "$T/why")" ;;
	esac
}

if [ ! -x "$CTL" ]; then
	echo "1..1"
	echo "ok 1 - nezhactl command line # SKIP build/tools/nezhactl not built"
	exit 0
fi
echo "1..62"

# --- usage, help, exit codes -------------------------------------------------
expect "no arguments: usage, 255" 255 '^usage: nezhactl' "$CTL"
expect "help: 0 and every object" 0 'monitor .*events' "$CTL" help
expect "-h is help" 0 '^objects:' "$CTL" -h
expect "help rail: the rail usage" 0 'nezhactl rail flush' "$CTL" help rail
expect "rail help" 0 'rail add NAME proto tcp' "$CTL" rail help
expect "rail -h" 0 'rail add NAME proto tcp' "$CTL" rail -h
expect "rail add help: that command's usage" 0 '^usage: nezhactl rail add' "$CTL" rail add help
expect "health help" 0 'health set \[interval MS\]' "$CTL" health help
expect "monitor help" 0 'monitor \[count N\]' "$CTL" monitor help
expect "param, device, stats help" 0 'param set NAME VALUE' "$CTL" param help
expect "-V: the version" 0 '^nezhactl [0-9]' "$CTL" -V
usage "unknown object" 'object: unknown "frob"; one of: version, show, rail' "$CTL" frob
usage "ambiguous object: s" '"s" is ambiguous: show, stats' "$CTL" s
usage "unknown option" 'option: unknown "x"' "$CTL" -x show
usage "-n needs a namespace" '-n(etns)? needs an argument' "$CTL" -n
usage "-w needs -b" '-w is for batch mode' "$CTL" -w rail show
usage "rail s: ambiguous (show, set)" '"s" is ambiguous: show, set' "$CTL" rail s
usage "rail add: no name" 'rail add: no name' "$CTL" rail add
usage "rail add: no protocol" 'rail add r0: no protocol' "$CTL" rail add r0 dev eth0
usage "rail add: p is proto or port" '"p" is ambiguous: proto, port' "$CTL" rail add r0 p tcp
usage "rail add: unknown protocol" 'protocol: unknown "udp"; one of: tcp, rdma' "$CTL" rail add r0 proto udp dev eth0
usage "rail add: port 0" 'bad port "0" \(1..65535\)' "$CTL" rail add r0 proto tcp dev eth0 port 0
usage "rail add: port 65536" 'bad port "65536"' "$CTL" rail add r0 proto tcp dev eth0 port 65536
usage "rail add: bad address" 'bad IPv4 address "10.0.0"' "$CTL" rail add r0 proto tcp dev eth0 addr 10.0.0
usage "rail add: twice" '"dev" given twice' "$CTL" rail add r0 proto tcp dev eth0 dev eth1
usage "rail add: a value missing" '"weight" needs a value' "$CTL" rail add r0 proto tcp dev eth0 weight
usage "rail add: netdev is for rdma" 'netdev, ib-port and gid-index are for rdma' "$CTL" rail add r0 proto tcp dev eth0 netdev eth0
usage "rail add: ib-port 0" 'bad ib-port "0" \(1..255\)' "$CTL" rail add r0 proto rdma dev rxe0 ib-port 0
usage "rail add: unknown protocol lists agg" 'one of: tcp, rdma, agg' "$CTL" rail add r0 proto udp dev eth0
usage "rail add agg: no aggregator" 'rail add ra: an agg rail needs its aggregator' "$CTL" rail add ra proto agg dev eth0
usage "rail add agg: aggregator port 0" 'bad aggregator "10.0.0.1:0"' "$CTL" rail add ra proto agg dev eth0 aggregator 10.0.0.1:0
usage "rail add agg: aggregator port 65536" 'bad aggregator "10.0.0.1:65536"' "$CTL" rail add ra proto agg dev eth0 aggregator 10.0.0.1:65536
usage "rail add agg: aggregator a name" 'bad aggregator "node5"' "$CTL" rail add ra proto agg dev eth0 aggregator node5
usage "rail add agg: aggregator empty port" 'bad aggregator "10.0.0.1:"' "$CTL" rail add ra proto agg dev eth0 aggregator 10.0.0.1:
usage "rail add agg: no port" 'takes dev, aggregator, addr and weight only' "$CTL" rail add ra proto agg dev eth0 aggregator 10.0.0.1 port 9
usage "rail add agg: no frame-mac" 'takes dev, aggregator, addr and weight only' "$CTL" rail add ra proto agg dev eth0 aggregator 10.0.0.1 frame-mac on
usage "rail add tcp: no aggregator" 'rail add r0: aggregator is for agg rails' "$CTL" rail add r0 proto tcp dev eth0 aggregator 10.0.0.1
usage "rail add: a is addr or aggregator" '"a" is ambiguous: addr, aggregator' "$CTL" rail add ra proto agg dev eth0 a 10.0.0.1
usage "rail set: nothing to set" 'rail set r0: nothing to set' "$CTL" rail set r0
usage "rail set: up and down" 'up or down given twice' "$CTL" rail set r0 up do
usage "rail set: bad weight" 'bad weight "-1"' "$CTL" rail set r0 weight -1
usage "health set: nothing to set" 'health set: nothing to set' "$CTL" health set
usage "health set: unknown key" 'health set: unknown "speed"' "$CTL" health set speed 1
usage "health set: bad value" 'bad interval "1x"' "$CTL" health set int 1x
usage "monitor: count needs a number" 'monitor: count needs a number' "$CTL" monitor count many
usage "stats: unknown format" 'stats -o: unknown "xml"' "$CTL" stats -o xml
expect "module not loaded: 1" 1 'the nezha module is not loaded' "$CTL" rail show
expect "-j, module not loaded: 1 and no JSON on stdout" 1 '^nezhactl: the nezha' "$CTL" -j rail show
out=$("$CTL" -j rail show 2>/dev/null)
[ -z "$out" ] && ok "a failed show writes no partial JSON" || not_ok "a failed show writes no partial JSON" "$out"
expect "-n with no such namespace: 1" 1 "network namespace .nz-none-$$." "$CTL" -n "nz-none-$$" rail show

# --- a made-up sysfs, module parameters and device node -----------------------
S=$T/sys M=$T/module D=$T/nezha-dev
mkdir -p "$S/nezha/stats" "$S/rail-r0/stats" "$S/rail-r0/peer-00c0ffee00000001-0-1" \
	"$M/nezha/parameters" "$M/nezha_rdma/parameters"
echo 0.1.0 >"$S/nezha/release"; echo 3 >"$S/nezha/open_files"
echo 42 >"$S/nezha/stats/cmds_submitted"
echo tcp >"$S/rail-r0/proto"; echo eth1 >"$S/rail-r0/dev"; echo up >"$S/rail-r0/state"
echo 40 >"$S/rail-r0/speed_mbps"; echo 1000 >"$S/rail-r0/stats/bytes_tx"
echo 2 >"$S/rail-r0/stats/failovers"
echo hot >"$S/rail-r0/peer-00c0ffee00000001-0-1/sched_state"
echo 2300 >"$S/rail-r0/peer-00c0ffee00000001-0-1/srtt_us"
echo measured >"$M/nezha/parameters/sched_mode"; chmod 644 "$M/nezha/parameters/sched_mode"
echo 20 >"$M/nezha/parameters/sched_target_ms"; chmod 644 "$M/nezha/parameters/sched_target_ms"
echo 432 >"$M/nezha/parameters/dev_mode"; chmod 444 "$M/nezha/parameters/dev_mode"
echo 256 >"$M/nezha_rdma/parameters/rx_depth"; chmod 444 "$M/nezha_rdma/parameters/rx_depth"
: >"$D"; chmod 600 "$D"
export NEZHACTL_SYSFS=$S NEZHACTL_SYSMODULE=$M NEZHACTL_DEV=$D NEZHACTL_CONF=$T/none.conf

expect "stats: text" 0 'rail r0: proto tcp dev eth1 state up speed_mbps 40' "$CTL" stats
schema "stats -j: valid against the schema" stats "$CTL" -j stats
expect "stats -o prometheus" 0 'nezha_rail_failovers_total\{rail="r0"\} 2' "$CTL" stats -o prom
usage "stats: a rail and -o without a format" 'stats: -o needs a format' "$CTL" stats r0 -o
expect "stats RAIL: no such rail: 1" 1 'no rail "r9"' "$CTL" stats r9
expect "param show" 0 'nezha.sched_mode measured' "$CTL" param show
schema "param show -j: valid against the schema" param_show "$CTL" -j param
expect "param set, by prefix" 0 '' "$CTL" param set sched_t 25
[ "$(cat "$M/nezha/parameters/sched_target_ms")" = 25 ] && ok "param set wrote the parameter" ||
	not_ok "param set wrote the parameter" "$(cat "$M/nezha/parameters/sched_target_ms")"
usage "param set: a load-time parameter" 'options nezha_rdma rx_depth=512.*modprobe.d' "$CTL" param set rx_depth 512
usage "param: s is sched_mode or sched_target_ms" 'ambiguous' "$CTL" param set sched 1
schema "device show -j: valid against the schema" device_show "$CTL" -j device
usage "device set: bad mode" 'bad mode "0999"' "$CTL" device set mode 0999
usage "device set: no such group" 'no such group "nz-nogroup"' "$CTL" device set group nz-nogroup

# --- batch files -------------------------------------------------------------
cat >"$T/b1" <<'EOB'
# comment
device set \
    mode 0640
device set mode 0999
device set mode 0604
EOB
expect "-b: the failing line is named, status 255" 255 "$T/b1:4: command failed" "$CTL" -b "$T/b1"
[ "$(stat -c %a "$D")" = 640 ] && ok "-b: stopped at the error, after a continued line ran" ||
	not_ok "-b: stopped at the error, after a continued line ran" "mode $(stat -c %a "$D")"
"$CTL" -force -b "$T/b1" >/dev/null 2>&1; rc=$?
[ $rc = 255 ] && [ "$(stat -c %a "$D")" = 604 ] && ok "-force: goes on, the first error's status" ||
	not_ok "-force: goes on, the first error's status" "rc $rc mode $(stat -c %a "$D")"
printf 'device set mode 0660\nrail add r0 proto tcp dev eth0\nhealth set grace 1\n' >"$T/nezha.conf"
NEZHACTL_CONF=$T/nezha.conf "$CTL" device apply >/dev/null 2>&1; rc=$?
[ $rc = 0 ] && [ "$(stat -c %a "$D")" = 660 ] && ok "device apply: only the device lines of the conf" ||
	not_ok "device apply: only the device lines of the conf" "rc $rc mode $(stat -c %a "$D")"
expect "device apply with no conf: nothing to do" 0 '' "$CTL" device apply
printf 'device apply %s\n' "$T/nezha.conf" >"$T/nest"
expect "batch files do not nest" 255 'do not nest' "$CTL" -b "$T/nest"
expect "-b: a kernel error is status 1" 1 "$T/nezha.conf:2: command failed" "$CTL" -b "$T/nezha.conf"
printf 'rail add r0 proto "tcp\n' >"$T/b2"
expect "-b: an unterminated quote" 255 "$T/b2:1: unterminated quote" "$CTL" -b "$T/b2"

# Under systemd (Type=notify), -b says READY=1 once the file is applied,
# and never after a failure: "systemctl start nezha" returns only then.
notified() {	# notified CMD...: what CMD sent to $NOTIFY_SOCKET, or "nothing"
	"$PY" - "$T/notify" "$@" <<'EOP'
import os, socket, subprocess, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
subprocess.run(sys.argv[2:], env=dict(os.environ, NOTIFY_SOCKET=sys.argv[1]),
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
s.settimeout(0.5)
try:
    print(s.recv(512).decode().replace("\n", " "))
except socket.timeout:
    print("nothing")
EOP
	rm -f "$T/notify"
}
printf 'device set mode 0660\n' >"$T/b3"
got=$(notified "$CTL" -w -b "$T/b3")
[[ $got == "READY=1 STATUS=0 rail(s) waiting for a device" ]] && ok "-b under systemd: READY=1 once applied" ||
	not_ok "-b under systemd: READY=1 once applied" "got '$got'"
got=$(notified "$CTL" -b "$T/b1")
[ "$got" = nothing ] && ok "-b under systemd: no READY=1 after a failed line" ||
	not_ok "-b under systemd: no READY=1 after a failed line" "got '$got'"

[ $n = 74 ] || not_ok "plan: $n tests ran, 74 planned"
exit $((failed > 0))
