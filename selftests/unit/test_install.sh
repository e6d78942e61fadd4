#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make install into a staging directory (DESTDIR): the module, libnezha
# with its headers and pkg-config file, the tools with their man pages and
# completion, the system files -- and no test program.  A program then
# builds against what was installed, with pkg-config alone.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -z "${2:-}" ] || echo "# $2"; }
echo "1..6"
if [ ! -e "$TOP/nezha.ko" ] || ! command -v modinfo >/dev/null; then
	for i in 1 2 3 4 5 6; do echo "ok $i - make install # SKIP the module is not built (make all)"; done
	exit 0
fi
kver=$(modinfo -F vermagic "$TOP/nezha.ko" | cut -d' ' -f1)
D=$T/root
# The operator's own configuration is there already: install must keep it.
mkdir -p "$D/etc/nezha"
echo "# mine" >"$D/etc/nezha/nezha.conf"
if make -s -C "$TOP" install DESTDIR="$D" PREFIX=/usr KVER="$kver" TORCH_OK= >"$T/log" 2>&1; then
	ok "make install DESTDIR=... PREFIX=/usr"
else
	not_ok "make install DESTDIR=... PREFIX=/usr" "$(tail -5 "$T/log" | tr '\n' ' ')"
fi
missing=
for f in "lib/modules/$kver/extra/nezha.ko" usr/lib/libnezha.so.0 usr/lib/libnezha.so \
	usr/lib/libnezha.a usr/lib/pkgconfig/nezha.pc usr/include/nezha/nezha.h \
	usr/include/nezha/linux/nezha.h usr/include/nezha/linux/nezha_netlink.h \
	usr/sbin/nezhactl usr/bin/nezha-bench usr/sbin/nezha-aggd usr/share/man/man8/nezhactl.8 \
	usr/share/man/man1/nezha-bench.1 usr/share/man/man3/libnezha.3 \
	usr/share/bash-completion/completions/nezhactl lib/systemd/system/nezha.service \
	lib/udev/rules.d/60-nezha.rules usr/lib/modules-load.d/nezha.conf; do
	[ -e "$D/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && ok "module, library, headers, pkg-config, tools, man pages, completion, system files" ||
	not_ok "module, library, headers, pkg-config, tools, man pages, completion, system files" "missing:$missing"
extra=$(cd "$D" && find . -type f \( -name 'test_*' -o -name 'nz_*' -o -name 'fuzz*' -o -name '*.py' \) |
	grep -v nezha_torch)
[ -z "$extra" ] && ok "no test program is installed" || not_ok "no test program is installed" "$extra"
grep -q "^ExecStart=/usr/sbin/nezhactl -w -b /etc/nezha/nezha.conf$" "$D/lib/systemd/system/nezha.service" &&
grep -q 'RUN+="/usr/sbin/nezhactl device apply"' "$D/lib/udev/rules.d/60-nezha.rules" &&
	ok "the unit and the udev rule name the installed nezhactl" ||
	not_ok "the unit and the udev rule name the installed nezhactl"
# (a fresh system gets the example: the install line, when there is none)
[ "$(cat "$D/etc/nezha/nezha.conf")" = "# mine" ] &&
	make -s -n -C "$TOP" install DESTDIR=/nonexistent PREFIX=/usr KVER="$kver" TORCH_OK= 2>/dev/null |
	grep -q 'install -D -m 0644 tools/dist/nezha.conf /nonexistent/etc/nezha/nezha.conf' &&
	ok "make install keeps an existing nezha.conf (and installs the example otherwise)" ||
	not_ok "make install keeps an existing nezha.conf (and installs the example otherwise)"
cat >"$T/p.c" <<'EOC'
#include <stdio.h>
#include <nezha.h>
int main(void) { printf("%s\n", nz_library_version()); return 0; }
EOC
sed -i "s|^prefix=.*|prefix=$D/usr|; s|^libdir=.*|libdir=$D/usr/lib|; s|^includedir=.*|includedir=$D/usr/include|" \
	"$D/usr/lib/pkgconfig/nezha.pc"
if cc -o "$T/p" "$T/p.c" $(PKG_CONFIG_PATH=$D/usr/lib/pkgconfig pkg-config --cflags --libs --static nezha) \
	>"$T/cc" 2>&1 && LD_LIBRARY_PATH=$D/usr/lib "$T/p" | grep -q '^[0-9]'; then
	ok "a program builds and runs against the installed library (pkg-config)"
else
	not_ok "a program builds and runs against the installed library (pkg-config)" "$(head -3 "$T/cc")"
fi
exit $((failed > 0))
