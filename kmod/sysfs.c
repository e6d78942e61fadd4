// SPDX-License-Identifier: GPL-2.0
/*
 * Statistics in sysfs: /sys/class/nezha/nezha/, one value per file.
 * Documented in Documentation/ABI/testing/sysfs-class-nezha.
 */
#include <linux/device.h>
#include <linux/kdev_t.h>
#include <linux/module.h>
#include <linux/sysfs.h>
#include "nezha.h"

static struct class *nz_class;
static struct device *nz_dev;

#define NZ_ATTR_ATOMIC64(_name)						\
static ssize_t _name##_show(struct device *d,				\
			    struct device_attribute *a, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  atomic64_read(&nz_stats._name));		\
}									\
static DEVICE_ATTR_RO(_name)

#define NZ_ATTR_ATOMIC(_name)						\
static ssize_t _name##_show(struct device *d,				\
			    struct device_attribute *a, char *buf)	\
{									\
	return sysfs_emit(buf, "%d\n", atomic_read(&nz_stats._name));	\
}									\
static DEVICE_ATTR_RO(_name)

NZ_ATTR_ATOMIC64(opens);
NZ_ATTR_ATOMIC64(cmds_submitted);
NZ_ATTR_ATOMIC64(cmds_completed);
NZ_ATTR_ATOMIC64(cmds_failed);
NZ_ATTR_ATOMIC64(cmds_rejected);
NZ_ATTR_ATOMIC64(cmds_cancelled);
NZ_ATTR_ATOMIC(open_files);
NZ_ATTR_ATOMIC(inflight);

static ssize_t abi_version_show(struct device *d, struct device_attribute *a,
				char *buf)
{
	return sysfs_emit(buf, "%d\n", NZ_ABI_VERSION);
}
static DEVICE_ATTR_RO(abi_version);

static ssize_t release_show(struct device *d, struct device_attribute *a,
			    char *buf)
{
	return sysfs_emit(buf, "%s\n", NZ_RELEASE);
}
static DEVICE_ATTR_RO(release);

static ssize_t features_show(struct device *d, struct device_attribute *a,
			     char *buf)
{
	struct nz_version v;

	nz_fill_version(&v);
	return sysfs_emit(buf, "0x%llx\n", v.features);
}
static DEVICE_ATTR_RO(features);

static struct attribute *nz_info_attrs[] = {
	&dev_attr_abi_version.attr,
	&dev_attr_release.attr,
	&dev_attr_features.attr,
	&dev_attr_open_files.attr,
	&dev_attr_inflight.attr,
	NULL,
};

static const struct attribute_group nz_info_group = {
	.attrs = nz_info_attrs,
};

static struct attribute *nz_stats_attrs[] = {
	&dev_attr_opens.attr,
	&dev_attr_cmds_submitted.attr,
	&dev_attr_cmds_completed.attr,
	&dev_attr_cmds_failed.attr,
	&dev_attr_cmds_rejected.attr,
	&dev_attr_cmds_cancelled.attr,
	NULL,
};

static const struct attribute_group nz_stats_group = {
	.name = "stats",
	.attrs = nz_stats_attrs,
};

static const struct attribute_group *nz_groups[] = {
	&nz_info_group,
	&nz_stats_group,
	NULL,
};

int nz_sysfs_init(void)
{
	nz_class = class_create(THIS_MODULE, "nezha");
	if (IS_ERR(nz_class))
		return PTR_ERR(nz_class);
	nz_dev = device_create_with_groups(nz_class, NULL, MKDEV(0, 0), NULL,
					   nz_groups, "nezha");
	if (IS_ERR(nz_dev)) {
		class_destroy(nz_class);
		return PTR_ERR(nz_dev);
	}
	return 0;
}

void nz_sysfs_exit(void)
{
	device_unregister(nz_dev);
	class_destroy(nz_class);
}
