# SPDX-License-Identifier: GPL-2.0
#
# Nezha: build the module, the library, the tools and the tests.
#
#   make              module + libnezha + tools + tests
#   make check        set-up, build, every test (host unit tests + guests)
#   make check-quick  host unit tests and one guest suite
#   make check-debug  every guest suite on a KASAN/lockdep/kmemleak kernel
#   make demo         boot emulated nodes and show Nezha at work
#   make install      the module, libnezha (+ headers, pkg-config), the tools,
#                     their man pages and completion, the system files
#                     (systemd unit, udev rule, modules-load.d); not the tests
#
# KVER/KDIR choose the kernel to build against.  Default: the running
# kernel when its headers are installed (/lib/modules/$(uname -r)/build),
# on any distribution; else the test bed's kernel (scripts/kver.sh).  The
# targets that boot test guests (check*, demo, bench-*, fuzz) build for the
# kernel the guests boot: the newest Debian *-amd64 with headers and image
# (scripts/kver.sh --guest).

VERSION    := 0.1.0
TESTBED_GOALS := check check-quick check-debug demo fuzz bench-%
ifeq ($(origin KVER),undefined)
ifneq ($(filter $(TESTBED_GOALS),$(MAKECMDGOALS)),)
KVER       := $(shell scripts/kver.sh --guest 2>/dev/null)
else
KVER       := $(shell scripts/kver.sh 2>/dev/null)
endif
endif
KDIR       ?= /lib/modules/$(KVER)/build
B          := build
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCDIR     ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
# System files go where the system looks for them, whatever the PREFIX.
UNITDIR    ?= /lib/systemd/system
UDEVDIR    ?= /lib/udev/rules.d
MODLOADDIR ?= /usr/lib/modules-load.d
COMPLDIR   ?= /usr/share/bash-completion/completions
DESTDIR    ?=
SOMAJOR    := 0

CC         ?= cc
CFLAGS     ?= -O2 -g
WFLAGS     := -Wall -Wextra -Werror
UCFLAGS     = -std=c11 -D_GNU_SOURCE $(WFLAGS) $(CFLAGS) -Iuapi \
	      -Ilibnezha-user/include -Ilibnezha-user \
	      -DNZ_LIB_VERSION=\"$(VERSION)\"
# Host builds of the module's pure-C files (wire codec, scheduler, ...):
# kmod/ comes last so that its nezha.h never shadows the public one.
UNIT_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(WFLAGS) $(CFLAGS) -Iuapi \
	      -Ilibnezha-user/include -Ilibnezha-user -Iselftests -idirafter kmod \
	      -DNZ_LIB_VERSION=\"$(VERSION)\"

LIB_SRCS   := $(wildcard libnezha-user/*.c)
LIB_OBJS   := $(LIB_SRCS:libnezha-user/%.c=$(B)/lib/%.o)
LIB_SO     := $(B)/lib/libnezha.so.$(VERSION)
LIB_A      := $(B)/lib/libnezha.a
LIB_LDLIBS := -luring -lm

CTL_SRCS   := tools/nezhactl.c tools/nl.c tools/parse.c tools/json.c tools/stats.c $(wildcard tools/cmd_*.c)
TOOLS      := $(B)/tools/nezhactl $(B)/tools/nezha-bench $(B)/tools/nezha-aggd \
	      $(B)/tools/nezha-sim
# The aggregation node's core, shared by nezha-aggd and its host tests.
AGGD_SRCS  := tools/aggd_core.c tools/aggd_slot.c tools/aggd_run.c
# The cluster model: its own files and the module's pure-C scheduler
# arithmetic and chunking, compiled from kmod/ (Documentation/sim.rst).
SIM_SRCS   := tools/sim_net.c tools/sim_coll.c kmod/sched_est.c kmod/wire.c
SIM_HDRS   := tools/sim.h kmod/sched_est.h kmod/wire.h kmod/nz_compat.h

# Host unit tests: test_X.c links the pure-C module files it names in
# selftests/unit/deps.mk, or the library.
UNIT_SRCS  := $(wildcard selftests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:selftests/unit/%.c=$(B)/unit/%)
# Host tests written in shell run from build/unit/ like the others.
UNIT_SH    := $(wildcard selftests/unit/test_*.sh)
UNIT_BINS  += $(UNIT_SH:selftests/unit/%.sh=$(B)/unit/%)
GUEST_SRCS := $(wildcard selftests/guest/*.c)
GUEST_BINS := $(GUEST_SRCS:selftests/guest/%.c=$(B)/guest/%)
# LD_PRELOAD libraries of the guest suites (faults.sh).
GUEST_BINS += $(B)/guest/failnow.so
# The hostile RDMA peer needs rdma-core's development files, which nothing
# else does: without them `make` builds the rest (an operator's machine),
# and the rdma suite says that test was skipped.
ifeq ($(wildcard /usr/include/rdma/rdma_cma.h),)
GUEST_BINS := $(filter-out $(B)/guest/nz_rdma_hostile,$(GUEST_BINS))
$(info make: no librdmacm-dev: the test program nz_rdma_hostile is not built)
endif
# Fuzzers: nz_fuzz runs in guests; fuzz_wire is the codec's libFuzzer
# target, built here as a standalone replayer (make fuzz builds the
# libFuzzer one with clang when it is there).
FUZZ_BINS  := $(B)/fuzz/nz_fuzz $(B)/fuzz/fuzz_wire
# The instruction-counting TCG plugin (vm.sh -P; NZ_BENCH_INSNS=1 make
# bench-cpu): a shared object QEMU loads.
QEMU_PLUGIN := $(B)/tools/nz_insns.so
WIRE_SRCS  := kmod/wire.c kmod/reasm.c

# The torch.distributed backend (libnezha-user/torch/), built when
# Debian's python3-torch and libtorch-dev are installed.
PY         ?= /usr/bin/python3
TORCH_OK   := $(shell $(PY) -c 'import torch.distributed' >/dev/null 2>&1 && test -e /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp && echo y)
TORCH_DIR  := $(B)/torch/nezha_torch
TORCH_EXT  := $(TORCH_DIR)/_C$(shell $(PY) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
TORCH_PY   := $(TORCH_DIR)/__init__.py
PYDIR      ?= $(PREFIX)/lib/python$(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)/dist-packages
TORCH_CXXFLAGS = -std=c++17 -O2 -g -fPIC -Wall -Wextra -Werror -Wno-unused-parameter \
	-DTORCH_EXTENSION_NAME=_C -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI=1 \
	-isystem /usr/lib/python3/dist-packages/torch/include \
	-isystem /usr/lib/python3/dist-packages/torch/include/torch/csrc/api/include \
	-isystem $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null) \
	-Iuapi -Ilibnezha-user/include
TORCH_LIBS = -L/usr/lib/python3/dist-packages/torch/lib -ltorch -ltorch_cpu -lc10 -ltorch_python

.PHONY: all module lib tools tests check torch check-quick check-debug planted-bugs check-scale demo setup drill-coll \
	install uninstall man lint checkpatch sparse clean bench-nop bench-p2p bench-coll \
	bench-failover bench-rdma bench-sched bench-train bench-cpu bench-agg fuzz check-install drill

all: module lib tools tests man $(if $(TORCH_OK),torch)

torch: $(TORCH_EXT) $(TORCH_PY)

$(TORCH_EXT): libnezha-user/torch/ProcessGroupNezha.cpp $(LIB_A) libnezha-user/include/nezha.h
	@test -n "$(TORCH_OK)" || { echo "make torch: needs python3-torch and libtorch-dev (apt-get install python3-torch libtorch-dev)" >&2; exit 1; }
	@mkdir -p $(@D)
	$(CXX) $(TORCH_CXXFLAGS) -shared -o $@ $< $(LIB_A) $(TORCH_LIBS) $(LIB_LDLIBS) -lpthread

$(TORCH_PY): libnezha-user/torch/nezha_torch/__init__.py
	@mkdir -p $(@D)
	cp $< $@

setup:
	@scripts/setup.sh

module:
	@test -d "$(KDIR)" || { echo "no kernel headers at '$(KDIR)' (KVER='$(KVER)'): run scripts/setup.sh" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

lib: $(LIB_SO) $(LIB_A) $(B)/lib/nezha.pc

$(B)/lib/%.o: libnezha-user/%.c $(wildcard libnezha-user/include/*.h libnezha-user/*.h) uapi/linux/nezha.h
	@mkdir -p $(@D)
	$(CC) $(UCFLAGS) -fPIC -fvisibility=default -c $< -o $@

$(LIB_SO): $(LIB_OBJS) libnezha-user/libnezha.map
	$(CC) -shared -Wl,-soname,libnezha.so.$(SOMAJOR) \
		-Wl,--version-script=libnezha-user/libnezha.map -o $@ $(LIB_OBJS) $(LIB_LDLIBS)
	ln -sf libnezha.so.$(VERSION) $(B)/lib/libnezha.so.$(SOMAJOR)
	ln -sf libnezha.so.$(SOMAJOR) $(B)/lib/libnezha.so

$(LIB_A): $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

$(B)/lib/nezha.pc: libnezha-user/nezha.pc.in Makefile
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCDIR@|$(INCDIR)|; s|@VERSION@|$(VERSION)|' $< > $@

tools: $(TOOLS)

$(B)/tools/nezhactl: $(CTL_SRCS) $(wildcard tools/*.h) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(UCFLAGS) -o $@ $(CTL_SRCS) $(LIB_A) -lmnl $(LIB_LDLIBS)

$(B)/tools/nezha-bench: tools/nezha-bench.c $(wildcard tools/bench_*.c) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(UCFLAGS) -o $@ tools/nezha-bench.c $(wildcard tools/bench_*.c) $(LIB_A) $(LIB_LDLIBS)

$(B)/tools/nezha-aggd: tools/nezha-aggd.c $(AGGD_SRCS) tools/aggd.h tools/aggd_int.h $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(UCFLAGS) -o $@ tools/nezha-aggd.c $(AGGD_SRCS) $(LIB_A) $(LIB_LDLIBS)

# Not installed: a design tool (Documentation/sim.rst).
$(B)/tools/nezha-sim: tools/nezha-sim.c $(SIM_SRCS) $(SIM_HDRS) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(UCFLAGS) -idirafter kmod -o $@ tools/nezha-sim.c $(SIM_SRCS) $(LIB_A) $(LIB_LDLIBS)

tests: $(UNIT_BINS) $(GUEST_BINS) $(FUZZ_BINS) $(QEMU_PLUGIN)

$(QEMU_PLUGIN): tools/qemu/nz_insns.c
	@mkdir -p $(@D)
	$(CC) $(UCFLAGS) -fPIC -shared -fvisibility=hidden -o $@ $< -lpthread

$(B)/fuzz/nz_fuzz: selftests/fuzz/nz_fuzz.c selftests/tap.h uapi/linux/nezha.h uapi/linux/nezha_netlink.h
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -o $@ $< -luring -lpthread

$(B)/fuzz/fuzz_wire: selftests/fuzz/fuzz_wire.c $(WIRE_SRCS) $(wildcard kmod/*.h)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -DNZ_FUZZ_STANDALONE -o $@ $< $(WIRE_SRCS)

-include selftests/unit/deps.mk
GUEST_DEPS_nz_hostile := kmod/wire.c
# The collective tests share their reference (a header).
$(B)/unit/test_coll $(B)/guest/nz_coll: selftests/unit/test_coll_ref.h
GUEST_DEPS_nz_rdma_hostile := kmod/wire.c -lrdmacm -libverbs

$(B)/unit/%: selftests/unit/%.sh
	@mkdir -p $(@D)
	cp $< $@
	chmod +x $@

$(B)/unit/%: selftests/unit/%.c $(LIB_A) $(wildcard kmod/*.h kmod/*.c selftests/*.h)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_DEPS_$*) $(LIB_A) $(LIB_LDLIBS)

$(B)/guest/%: selftests/guest/%.c $(LIB_A) selftests/tap.h selftests/guest/nz_sysfs.h $(wildcard kmod/*.h kmod/*.c)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(GUEST_DEPS_$*) $(LIB_A) $(LIB_LDLIBS)

$(B)/guest/%.so: selftests/guest/preload/%.c
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -shared -fPIC -o $@ $<

# The suites make check also runs on the debug kernel, if it is built
# (make check-debug builds it, once: ~37 minutes on 2 cores, which CI's
# budget does not leave; NZ_DEBUG_BUILD=1 makes make check build it too).
# make check-debug runs every suite there.
DEBUG_CI_SUITES ?= limits

check: setup
	$(MAKE) all KVER=$(KVER)
	NZ_WITH_DEBUG="$(DEBUG_CI_SUITES)" selftests/run.sh

check-quick: all
	selftests/run.sh --quick

# The debug-kernel lane: builds (once, cached in build/debug-kernel/) a
# kernel with KASAN, lockdep, kmemleak, UBSAN, DEBUG_OBJECTS, KFENCE and
# fault injection, the module for it, and runs every guest suite on it.
check-debug: setup
	$(MAKE) all KVER=$(KVER)
	scripts/check-debug.sh

# The lanes' own test: bugs planted in copies of kmod/ (scripts/planted/:
# a use-after-free, a lock-order inversion, and issue 19's defects put
# back) must each make their suites fail, with the report or the failed
# test line each patch names.
planted-bugs: setup
	$(MAKE) all KVER=$(KVER)
	scripts/planted-bugs.sh

# More than two nodes: the collectives and the cost of health probes on
# 2, 4 and 8 guests (selftests/guest/suites.scale); not in make check.
check-scale: setup
	$(MAKE) all KVER=$(KVER)
	NZ_GUEST_ONLY=1 NZ_SCALE_SUITES=1 NZ_OUT=$(CURDIR)/build/test-output-scale selftests/run.sh

demo: setup
	$(MAKE) all KVER=$(KVER)
	scripts/demo.sh

bench-nop: all
	selftests/qemu/vm.sh -B -n 1 -r 1 -t 600 selftests/guest/bench_nop.sh

# Nezha p2p vs single rails, parallel iperf3 and MPTCP, in 2 guests.
bench-failover: all
	scripts/bench-failover.sh

bench-p2p: all
	scripts/bench-p2p.sh

# An allreduce split between a TCP rail and the aggregation rail against
# each alone, Gloo and an MPTCP ring: 4 ranks and an aggregation node (5
# guests; Documentation/aggregation.rst).
bench-agg: all
	scripts/bench-agg.sh

# Nezha allreduce vs Gloo (torch.distributed) on the same 2 guests and
# rails; installs python3-torch first (scripts/setup-bench.sh).
bench-coll: all
	scripts/bench-coll.sh

# The isolation drill (issue 20): a job under a local fuzzer, a squatter and
# 2000 hostile connections, against the same job alone; 2 guests.
drill: all
	scripts/drill.sh

# The allreduce failover drill (issue 23): 4 guests, allreduces for 40 s,
# one node's rail pulled from 10 s to 30 s; iteration times, false failovers.
drill-coll: all
	scripts/drill-coll.sh

# CPU seconds per GiB of Nezha vs iperf3 on 1 and 2 unshaped rails, with a
# profile (perf) of the Nezha runs; NZ_BENCH_VCPUS=2 for 2-vCPU guests;
# NZ_BENCH_BASE=other/nezha.ko compares that module with ours in the boot.
bench-cpu: all
	scripts/bench-cpu.sh

# Nezha over a TCP rail and an RDMA rail (Soft-RoCE) vs each alone, 2 guests.
bench-rdma: all
	scripts/bench-rdma.sh

# The measured scheduler on 2 unequal rails vs the rails alone, MPTCP and
# the static equal split; latency of small messages; a rail halved mid-run.
bench-sched: all
	scripts/bench-sched.sh

# The long fuzzing campaign (not part of `make check`, whose fuzz suite runs
# a short one): in each of FUZZ_NODES guests (one vCPU each, so one a host
# core), FUZZ_INPUTS local inputs as root and as many again as an
# unprivileged user and FUZZ_FRAMES hostile wire frames, with seeds of its
# own; then the wire codec under libFuzzer on the host for FUZZ_WIRE_SECS.
# Defaults: 2 x 2 x 2.5M = 10^7 inputs, 2 x 500k = 10^6 frames.  Replay one
# input with build/fuzz/nz_fuzz -r SEED:INDEX (Documentation/testing.rst).
FUZZ_NODES     ?= 2
FUZZ_INPUTS    ?= 2500000
FUZZ_FRAMES    ?= 500000
FUZZ_SEED      ?= 0x4e5a46555a5a0001
FUZZ_TIMEOUT   ?= 14400
FUZZ_WIRE_SECS ?= 600
fuzz: all
	selftests/qemu/vm.sh -n $(FUZZ_NODES) -r 2 -t $(FUZZ_TIMEOUT) -o $(B)/fuzz-output \
		selftests/guest/fuzz.sh $(FUZZ_INPUTS) $(FUZZ_FRAMES) $(FUZZ_SEED)
	scripts/fuzz-wire.sh $(FUZZ_WIRE_SECS)
# DDP training steps/s on the nezha torch backend vs Gloo (both NICs, one
# NIC), 2 guests: 2 x 40 Mbit/s, 40 + 10, TCP + RDMA, a rail pulled.
bench-train: all
	scripts/bench-train.sh

# make && make install and DKMS in a fresh Debian root (debootstrap), for a
# kernel that is not the newest (minutes: apt in a new root; not in check).
check-install:
	scripts/check-install.sh

# Style and static checks of the kernel code (also run by `make check`).
lint: checkpatch sparse
checkpatch:
	"$$(scripts/checkpatch-path.sh)" --no-tree --quiet --show-types -f kmod/*.c kmod/*.h uapi/linux/*.h
sparse:
	$(MAKE) -C $(KDIR) M=$(CURDIR) W=1 C=2 modules

# Man pages, from Documentation/ (rst2man, Debian's python3-docutils).
RST2MAN    := $(shell command -v rst2man || command -v rst2man.py)
MANPAGES   := $(B)/man/nezhactl.8 $(B)/man/nezha-bench.1 $(B)/man/libnezha.3
man: $(if $(RST2MAN),$(MANPAGES))
	@test -n "$(RST2MAN)" || echo "make man: no rst2man (apt-get install python3-docutils): man pages not built" >&2
$(B)/man/nezhactl.8: Documentation/nezhactl.rst
$(B)/man/nezha-bench.1: Documentation/nezha-bench.rst
$(B)/man/libnezha.3: Documentation/libnezha.rst
$(MANPAGES):
	@mkdir -p $(@D)
	$(RST2MAN) --halt=warning $< $@

# The files of a system that runs Nezha: no test program, nothing the tests
# need (no RDMA development library).  The module goes to
# /lib/modules/$(KVER)/extra; a DKMS installation instead: dkms.conf.
# DESTDIR stages everything (packaging); without it, depmod, ldconfig and
# udev/systemd are told.
INSTALL_UNITS = $(B)/dist/nezha.service $(B)/dist/60-nezha.rules
$(B)/dist/%: tools/dist/%.in Makefile
	@mkdir -p $(@D)
	sed -e 's|@SBINDIR@|$(SBINDIR)|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' $< > $@

install: module lib tools man $(INSTALL_UNITS) $(if $(TORCH_OK),torch)
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_PATH=$(DESTDIR) \
		$(if $(wildcard $(KDIR)/certs/signing_key.pem),,CONFIG_MODULE_SIG_ALL=) modules_install
	@# Debian's headers have no System.map, so kbuild skips depmod: without
	@# this, `modprobe nezha` says "Module nezha not found".
	[ -n "$(DESTDIR)" ] || depmod -a $(KVER)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)/nezha/linux \
		$(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR)
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf libnezha.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libnezha.so.$(SOMAJOR)
	ln -sf libnezha.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libnezha.so
	install -m 0644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(B)/lib/nezha.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 0644 libnezha-user/include/*.h $(DESTDIR)$(INCDIR)/nezha/
	install -m 0644 uapi/linux/nezha.h uapi/linux/nezha_netlink.h $(DESTDIR)$(INCDIR)/nezha/linux/
	install -m 0755 $(B)/tools/nezhactl $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(B)/tools/nezha-bench $(DESTDIR)$(BINDIR)/
	install -m 0755 $(B)/tools/nezha-aggd $(DESTDIR)$(SBINDIR)/
	$(if $(wildcard $(MANPAGES)),install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man8 && \
		install -m 0644 $(B)/man/nezha-bench.1 $(DESTDIR)$(MANDIR)/man1/ && \
		install -m 0644 $(B)/man/libnezha.3 $(DESTDIR)$(MANDIR)/man3/ && \
		install -m 0644 $(B)/man/nezhactl.8 $(DESTDIR)$(MANDIR)/man8/)
	install -D -m 0644 tools/dist/nezhactl.bash $(DESTDIR)$(COMPLDIR)/nezhactl
	install -D -m 0644 $(B)/dist/nezha.service $(DESTDIR)$(UNITDIR)/nezha.service
	install -D -m 0644 $(B)/dist/60-nezha.rules $(DESTDIR)$(UDEVDIR)/60-nezha.rules
	install -D -m 0644 tools/dist/modules-load.conf $(DESTDIR)$(MODLOADDIR)/nezha.conf
	@# The operator's configuration is never overwritten.
	[ -e $(DESTDIR)$(SYSCONFDIR)/nezha/nezha.conf ] || \
		install -D -m 0644 tools/dist/nezha.conf $(DESTDIR)$(SYSCONFDIR)/nezha/nezha.conf
	$(if $(TORCH_OK),install -d $(DESTDIR)$(PYDIR)/nezha_torch && \
		install -m 0644 $(TORCH_PY) $(DESTDIR)$(PYDIR)/nezha_torch/ && \
		install -m 0755 $(TORCH_EXT) $(DESTDIR)$(PYDIR)/nezha_torch/)
	[ -n "$(DESTDIR)" ] || { ldconfig; \
		! command -v udevadm >/dev/null || udevadm control --reload || true; \
		[ ! -d /run/systemd/system ] || systemctl daemon-reload || true; }

# Everything install put there, but the configuration.
uninstall:
	rm -f $(DESTDIR)/lib/modules/$(KVER)/extra/nezha.ko $(DESTDIR)/lib/modules/$(KVER)/extra/nezha_rdma.ko
	[ -n "$(DESTDIR)" ] || depmod -a $(KVER)
	rm -f $(DESTDIR)$(LIBDIR)/libnezha.so* $(DESTDIR)$(LIBDIR)/libnezha.a $(DESTDIR)$(LIBDIR)/pkgconfig/nezha.pc
	rm -rf $(DESTDIR)$(INCDIR)/nezha
	rm -f $(DESTDIR)$(SBINDIR)/nezhactl $(DESTDIR)$(BINDIR)/nezha-bench $(DESTDIR)$(SBINDIR)/nezha-aggd
	rm -f $(DESTDIR)$(MANDIR)/man1/nezha-bench.1 $(DESTDIR)$(MANDIR)/man3/libnezha.3 $(DESTDIR)$(MANDIR)/man8/nezhactl.8
	rm -f $(DESTDIR)$(COMPLDIR)/nezhactl $(DESTDIR)$(UNITDIR)/nezha.service
	rm -f $(DESTDIR)$(UDEVDIR)/60-nezha.rules $(DESTDIR)$(MODLOADDIR)/nezha.conf
	$(if $(TORCH_OK),rm -rf $(DESTDIR)$(PYDIR)/nezha_torch)

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean 2>/dev/null
	rm -rf $(B)
