#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Prepare the guest's root (host / + tmpfs overlay) to boot systemd with
# Nezha installed as an operator installs it, before /init hands over to
# systemd (init.sh, nz.boot=systemd):
#   - nezha.ko and nezha_rdma.ko in /lib/modules/$(uname -r)/extra, depmod;
#   - the system files of `make install` (tools/dist/), naming the tree's
#     nezhactl: nezha.service (enabled), the udev rule, modules-load.d;
#   - /etc/nezha/nezha.conf from the "#@conf " lines of the guest script;
#   - nz-stage.service: runs guest-stage.sh NODE RUN (the test script) once
#     the system is up, and powers the guest off, whatever its result.
# Only the overlay changes; the host's files are never written.
#   systemd-prep.sh NODE RUNDIR STAGE
set -eu
node=$1 run=$2 stage=$3
. "$run/job.sh"
top=$NZ_TOP
kver=$(uname -r)
mkdir -p "/lib/modules/$kver/extra"
cp "${NZ_KO:-$top/nezha.ko}" "/lib/modules/$kver/extra/"
[ ! -e "${NZ_RDMA_KO:-$top/nezha_rdma.ko}" ] || cp "${NZ_RDMA_KO:-$top/nezha_rdma.ko}" "/lib/modules/$kver/extra/"
depmod -a "$kver"

sbin=$top/build/tools
sed -e "s|@SBINDIR@|$sbin|g; s|@SYSCONFDIR@|/etc|g" "$top/tools/dist/nezha.service.in" \
	>/etc/systemd/system/nezha.service
mkdir -p /etc/udev/rules.d /etc/modules-load.d /etc/nezha
sed -e "s|@SBINDIR@|$sbin|g" "$top/tools/dist/60-nezha.rules.in" >/etc/udev/rules.d/60-nezha.rules
cp "$top/tools/dist/modules-load.conf" /etc/modules-load.d/nezha.conf
sed -n 's/^#@conf //p' "$NZ_SCRIPT" >/etc/nezha/nezha.conf
systemctl enable nezha.service >/dev/null 2>&1

# Nothing of the host's disks exists here.
echo "# nezha guest: no file systems to mount" >/etc/fstab
cat >/etc/systemd/system/nz-stage.service <<EOU
[Unit]
Description=Nezha test bed: the guest's test script
Wants=systemd-udev-settle.service
After=nezha.service systemd-udev-settle.service systemd-modules-load.service
[Service]
Type=oneshot
# Off at once after the stage, as init.sh does (no clean shutdown needed).
ExecStart=/bin/sh -c '/bin/bash $stage $node $run; echo o >/proc/sysrq-trigger'
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Install]
WantedBy=multi-user.target
EOU
systemctl enable nz-stage.service >/dev/null 2>&1
