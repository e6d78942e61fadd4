// SPDX-License-Identifier: GPL-2.0
/*
 * Statistics in sysfs, one value per file: the module in
 * /sys/class/nezha/nezha/, each rail in /sys/class/nezha/rail-NAME/.
 * Documented in Documentation/ABI/testing/sysfs-class-nezha.
 */
#include <linux/device.h>
#include <linux/kdev_t.h>
#include <linux/module.h>
#include <linux/error-injection.h>
#include <linux/sysfs.h>
#include "nezha.h"
#include "comm.h"
#include "rail.h"
#include "transport.h"

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
NZ_ATTR_ATOMIC64(comms_refused);
NZ_ATTR_ATOMIC64(cmds_refused);
NZ_ATTR_ATOMIC64(tags_refused);
NZ_ATTR_ATOMIC64(msgs_aborted);
NZ_ATTR_ATOMIC64(msgs_withdrawn);
NZ_ATTR_ATOMIC64(msgs_refused);
NZ_ATTR_ATOMIC64(sends_refused);
NZ_ATTR_ATOMIC64(chunks_zerocopy);
NZ_ATTR_ATOMIC64(msgs_unexpected);
NZ_ATTR_ATOMIC64(bytes_unexpected);
NZ_ATTR_ATOMIC(zerocopy_held);
NZ_ATTR_ATOMIC(open_files);
NZ_ATTR_ATOMIC(inflight);
NZ_ATTR_ATOMIC(comms);

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
	&dev_attr_comms.attr,
	&dev_attr_zerocopy_held.attr,
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
	&dev_attr_comms_refused.attr,
	&dev_attr_cmds_refused.attr,
	&dev_attr_tags_refused.attr,
	&dev_attr_msgs_aborted.attr,
	&dev_attr_msgs_withdrawn.attr,
	&dev_attr_msgs_refused.attr,
	&dev_attr_sends_refused.attr,
	&dev_attr_chunks_zerocopy.attr,
	&dev_attr_msgs_unexpected.attr,
	&dev_attr_bytes_unexpected.attr,
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

/*
 * Rails.  A rail's device is unregistered (which waits for every show()
 * in progress) before the table drops its reference, so drvdata always
 * points to a live rail here.
 */
static struct nz_rail *nz_dev_rail(struct device *d)
{
	return dev_get_drvdata(d);
}

#define NZ_RAIL_ATTR(_name, _fmt, _expr)				\
static ssize_t nz_rail_##_name##_show(struct device *d,		\
				      struct device_attribute *a,	\
				      char *buf)			\
{									\
	struct nz_rail *rail = nz_dev_rail(d);				\
									\
	return sysfs_emit(buf, _fmt "\n", _expr);			\
}									\
static struct device_attribute nz_rail_attr_##_name =			\
	__ATTR(_name, 0444, nz_rail_##_name##_show, NULL)

static const char *nz_rail_proto_name(const struct nz_rail *rail)
{
	return rail->ops->name;
}

static const char *nz_rail_state_name(const struct nz_rail *rail)
{
	switch (nz_rail_state(rail)) {
	case NZ_RAIL_UP:
		return "up";
	case NZ_RAIL_ADMIN_DOWN:
		return "admin-down";
	case NZ_RAIL_NO_LINK:
		return "no-link";
	case NZ_RAIL_UNREACHABLE:
		return "unreachable";
	default:
		return "failed";
	}
}

NZ_RAIL_ATTR(id, "%u", rail->id);
NZ_RAIL_ATTR(proto, "%s", nz_rail_proto_name(rail));
NZ_RAIL_ATTR(dev, "%s", rail->dev);
NZ_RAIL_ATTR(addr, "%pI4", &rail->addr);
NZ_RAIL_ATTR(port, "%u", rail->port);
NZ_RAIL_ATTR(weight, "%u", READ_ONCE(rail->weight));
NZ_RAIL_ATTR(state, "%s", nz_rail_state_name(rail));
NZ_RAIL_ATTR(speed_mbps, "%u", READ_ONCE(rail->speed_mbps));
NZ_RAIL_ATTR(frame_mac, "%d", rail->frame_mac);
NZ_RAIL_ATTR(bytes_tx, "%lld", atomic64_read(&rail->stats.bytes_tx));
NZ_RAIL_ATTR(bytes_rx, "%lld", atomic64_read(&rail->stats.bytes_rx));
NZ_RAIL_ATTR(chunks_tx, "%lld", atomic64_read(&rail->stats.chunks_tx));
NZ_RAIL_ATTR(chunks_rx, "%lld", atomic64_read(&rail->stats.chunks_rx));
NZ_RAIL_ATTR(errors, "%lld", atomic64_read(&rail->stats.errors));
NZ_RAIL_ATTR(handshakes_refused, "%lld",
	     atomic64_read(&rail->stats.hs_refused));
NZ_RAIL_ATTR(conns, "%d", atomic_read(&rail->stats.conns));
NZ_RAIL_ATTR(failovers, "%lld", atomic64_read(&rail->stats.failovers));
NZ_RAIL_ATTR(false_suspects, "%lld",
	     atomic64_read(&rail->stats.false_suspects));
NZ_RAIL_ATTR(chunks_resent, "%lld", atomic64_read(&rail->stats.resent));
NZ_RAIL_ATTR(acks_late, "%lld", atomic64_read(&rail->stats.acks_late));
NZ_RAIL_ATTR(sends_confirmed, "%lld",
	     atomic64_read(&rail->stats.sends_confirmed));
NZ_RAIL_ATTR(ctrl_dropped, "%lld",
	     atomic64_read(&rail->stats.ctrl_dropped));
NZ_RAIL_ATTR(hb_frames, "%lld", atomic64_read(&rail->stats.hb_frames));
NZ_RAIL_ATTR(redials, "%lld", atomic64_read(&rail->stats.redials));
NZ_RAIL_ATTR(last_failover_ms, "%lld",
	     atomic64_read(&rail->stats.last_failover_ms));
NZ_RAIL_ATTR(mac_failures, "%lld", atomic64_read(&rail->stats.mac_failures));

static struct attribute *nz_rail_info_attrs[] = {
	&nz_rail_attr_id.attr,
	&nz_rail_attr_proto.attr,
	&nz_rail_attr_dev.attr,
	&nz_rail_attr_addr.attr,
	&nz_rail_attr_port.attr,
	&nz_rail_attr_weight.attr,
	&nz_rail_attr_state.attr,
	&nz_rail_attr_speed_mbps.attr,
	&nz_rail_attr_frame_mac.attr,
	NULL,
};

static const struct attribute_group nz_rail_info_group = {
	.attrs = nz_rail_info_attrs,
};

static struct attribute *nz_rail_stats_attrs[] = {
	&nz_rail_attr_bytes_tx.attr,
	&nz_rail_attr_bytes_rx.attr,
	&nz_rail_attr_chunks_tx.attr,
	&nz_rail_attr_chunks_rx.attr,
	&nz_rail_attr_errors.attr,
	&nz_rail_attr_handshakes_refused.attr,
	&nz_rail_attr_conns.attr,
	&nz_rail_attr_failovers.attr,
	&nz_rail_attr_false_suspects.attr,
	&nz_rail_attr_chunks_resent.attr,
	&nz_rail_attr_acks_late.attr,
	&nz_rail_attr_sends_confirmed.attr,
	&nz_rail_attr_ctrl_dropped.attr,
	&nz_rail_attr_hb_frames.attr,
	&nz_rail_attr_redials.attr,
	&nz_rail_attr_last_failover_ms.attr,
	&nz_rail_attr_mac_failures.attr,
	NULL,
};

static const struct attribute_group nz_rail_stats_group = {
	.name = "stats",
	.attrs = nz_rail_stats_attrs,
};

static const struct attribute_group *nz_rail_groups[] = {
	&nz_rail_info_group,
	&nz_rail_stats_group,
	NULL,
};

int nz_sysfs_rail_add(struct nz_rail *rail)
{
	struct device *d;

	d = device_create_with_groups(nz_class, nz_dev, MKDEV(0, 0), rail,
				      nz_rail_groups, "rail-%s", rail->name);
	if (IS_ERR(d))
		return PTR_ERR(d);
	rail->sysdev = d;
	return 0;
}

void nz_sysfs_rail_del(struct nz_rail *rail)
{
	device_unregister(rail->sysdev);
	rail->sysdev = NULL;
}

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

/*
 * Per (peer, rail) statistics: one directory per connection of a
 * communicator, under its rail's directory, named
 * peer-<communicator serial>-<local rank>-<peer rank>.  Not the job id:
 * every user can list these names, and a job id is for its owner (the
 * serial comes back from NZ_IOC_COMM_CREATE) and root (file "job", 0400).
 * The directory lives as long as the connection object (the
 * communicator), whatever its socket does.
 */
struct nz_conn_kobj {
	struct kobject kobj;
	struct nz_conn *conn;	/* valid until kobject_del() returns */
};

#define to_nz_conn(k) (container_of(k, struct nz_conn_kobj, kobj)->conn)

#define NZ_CONN_ATTR_ATOMIC64(_name)					\
static ssize_t nz_conn_##_name##_show(struct kobject *k,		\
				      struct kobj_attribute *a, char *buf) \
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  atomic64_read(&to_nz_conn(k)->_name));	\
}									\
static struct kobj_attribute nz_conn_attr_##_name = __ATTR(_name, 0444, \
	nz_conn_##_name##_show, NULL)

NZ_CONN_ATTR_ATOMIC64(bytes_tx);
NZ_CONN_ATTR_ATOMIC64(bytes_rx);
NZ_CONN_ATTR_ATOMIC64(chunks_tx);
NZ_CONN_ATTR_ATOMIC64(chunks_rx);

const char *nz_conn_state_name(enum nz_conn_state state)
{
	static const char *const names[] = {
		[NZ_CONN_IDLE] = "idle",
		[NZ_CONN_CONNECTING] = "connecting",
		[NZ_CONN_UP] = "up",
		[NZ_CONN_DEAD] = "dead",
	};

	return names[state];
}

static ssize_t nz_conn_state_show(struct kobject *k, struct kobj_attribute *a,
				  char *buf)
{
	return sysfs_emit(buf, "%s\n",
			  nz_conn_state_name(READ_ONCE(to_nz_conn(k)->state)));
}

static struct kobj_attribute nz_conn_attr_state = __ATTR(state, 0444,
	nz_conn_state_show, NULL);

static ssize_t nz_conn_inflight_bytes_show(struct kobject *k,
					   struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%llu\n",
			  READ_ONCE(to_nz_conn(k)->inflight_bytes));
}

static struct kobj_attribute nz_conn_attr_inflight_bytes =
	__ATTR(inflight_bytes, 0444, nz_conn_inflight_bytes_show, NULL);

static ssize_t nz_conn_errors_show(struct kobject *k, struct kobj_attribute *a,
				   char *buf)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read(&to_nz_conn(k)->errors));
}

static struct kobj_attribute nz_conn_attr_errors = __ATTR(errors, 0444,
	nz_conn_errors_show, NULL);

static ssize_t nz_conn_heartbeats_tx_show(struct kobject *k,
					  struct kobj_attribute *a, char *buf)
{
	struct nz_conn *conn = to_nz_conn(k);
	unsigned int n;

	spin_lock_bh(&conn->peer->lock);
	n = conn->hb_sent;
	spin_unlock_bh(&conn->peer->lock);
	return sysfs_emit(buf, "%u\n", n);
}

static struct kobj_attribute nz_conn_attr_heartbeats_tx =
	__ATTR(heartbeats_tx, 0444, nz_conn_heartbeats_tx_show, NULL);

/* The scheduler's estimates (sched.c), read consistently under the lock. */
enum nz_est_field {
	NZ_EST_STATE, NZ_EST_BW, NZ_EST_SRTT, NZ_EST_MIN_RTT, NZ_EST_START,
	NZ_EST_WINDOW, NZ_EST_TRANSITIONS,
};

static ssize_t nz_conn_est_show(struct kobject *k, char *buf,
				enum nz_est_field field)
{
	struct nz_conn *conn = to_nz_conn(k);
	const struct nz_est *e = &conn->est;
	u64 v = 0;
	u8 state;

	spin_lock_bh(&conn->peer->lock);
	state = e->state;
	switch (field) {
	case NZ_EST_STATE:
		break;
	case NZ_EST_BW:
		v = e->bw;
		break;
	case NZ_EST_SRTT:
		v = e->srtt_us;
		break;
	case NZ_EST_MIN_RTT:
		v = nz_est_min_rtt(e);
		break;
	case NZ_EST_START:
		v = e->start_us;
		break;
	case NZ_EST_WINDOW:
		v = nz_sched_window(conn);
		break;
	case NZ_EST_TRANSITIONS:
		v = e->transitions;
		break;
	}
	spin_unlock_bh(&conn->peer->lock);
	if (field == NZ_EST_STATE)
		return sysfs_emit(buf, "%s\n", nz_sched_state_name(state));
	return sysfs_emit(buf, "%llu\n", v);
}

#define NZ_CONN_ATTR_EST(_name, _field)					\
static ssize_t nz_conn_##_name##_show(struct kobject *k,		\
				      struct kobj_attribute *a, char *buf) \
{									\
	return nz_conn_est_show(k, buf, _field);			\
}									\
static struct kobj_attribute nz_conn_attr_##_name = __ATTR(_name, 0444, \
	nz_conn_##_name##_show, NULL)

/* The communicator's chunk unit, the same on every connection of it. */
static ssize_t nz_conn_chunk_unit_show(struct kobject *k,
				       struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%u\n", to_nz_conn(k)->peer->comm->unit);
}

static struct kobj_attribute nz_conn_attr_chunk_unit =
	__ATTR(chunk_unit, 0444, nz_conn_chunk_unit_show, NULL);

NZ_CONN_ATTR_EST(sched_state, NZ_EST_STATE);
NZ_CONN_ATTR_EST(est_bw, NZ_EST_BW);
NZ_CONN_ATTR_EST(srtt_us, NZ_EST_SRTT);
NZ_CONN_ATTR_EST(min_rtt_us, NZ_EST_MIN_RTT);
NZ_CONN_ATTR_EST(start_us, NZ_EST_START);
NZ_CONN_ATTR_EST(window_bytes, NZ_EST_WINDOW);
NZ_CONN_ATTR_EST(sched_transitions, NZ_EST_TRANSITIONS);

/* The job id: root's alone (see above). */
static ssize_t nz_conn_job_show(struct kobject *k, struct kobj_attribute *a,
				char *buf)
{
	return sysfs_emit(buf, "%016llx\n", to_nz_conn(k)->peer->comm->job_id);
}

static struct kobj_attribute nz_conn_attr_job = __ATTR(job, 0400,
	nz_conn_job_show, NULL);

static struct attribute *nz_conn_attrs[] = {
	&nz_conn_attr_job.attr,
	&nz_conn_attr_bytes_tx.attr,
	&nz_conn_attr_bytes_rx.attr,
	&nz_conn_attr_chunks_tx.attr,
	&nz_conn_attr_chunks_rx.attr,
	&nz_conn_attr_state.attr,
	&nz_conn_attr_inflight_bytes.attr,
	&nz_conn_attr_errors.attr,
	&nz_conn_attr_heartbeats_tx.attr,
	&nz_conn_attr_chunk_unit.attr,
	&nz_conn_attr_sched_state.attr,
	&nz_conn_attr_est_bw.attr,
	&nz_conn_attr_srtt_us.attr,
	&nz_conn_attr_min_rtt_us.attr,
	&nz_conn_attr_start_us.attr,
	&nz_conn_attr_window_bytes.attr,
	&nz_conn_attr_sched_transitions.attr,
	NULL,
};
ATTRIBUTE_GROUPS(nz_conn);

static void nz_conn_kobj_release(struct kobject *kobj)
{
	kfree(container_of(kobj, struct nz_conn_kobj, kobj));
}

static const struct kobj_type nz_conn_ktype = {
	.release = nz_conn_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = nz_conn_groups,
};

int nz_sysfs_conn_add(struct nz_conn *conn)
{
	struct nz_comm *comm = conn->peer->comm;
	struct nz_conn_kobj *ck;
	int ret;

	if (!conn->rail->sysdev)
		return 0;
	ck = kzalloc(sizeof(*ck), GFP_KERNEL);
	if (!ck)
		return -ENOMEM;
	ck->conn = conn;
	ret = kobject_init_and_add(&ck->kobj, &nz_conn_ktype,
				   &conn->rail->sysdev->kobj,
				   "peer-%016llx-%u-%u", comm->serial,
				   comm->rank, conn->peer->rank);
	if (ret) {
		kobject_put(&ck->kobj);
		return ret;
	}
	conn->kobj = &ck->kobj;
	return 0;
}
ALLOW_ERROR_INJECTION(nz_sysfs_conn_add, ERRNO);

/* After this returns no attribute of conn is being read or can be. */
void nz_sysfs_conn_del(struct nz_conn *conn)
{
	if (!conn->kobj)
		return;
	kobject_del(conn->kobj);
	kobject_put(conn->kobj);
	conn->kobj = NULL;
}
