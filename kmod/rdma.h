/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nezha_rdma.ko: RDMA rails over kernel verbs and rdma_cm.  The rail side
 * (devices, listener, device removal, sysfs, module init) is rdma_rail.c;
 * the connections (queue pairs, buffers, credits, handshake) are
 * transport_rdma.c.  Documentation/rdma.rst has the design.
 *
 * Locking: nz_rdma_rails_lock (a mutex) protects the list of RDMA rails and
 * rail->priv of every RDMA rail.  rr->lock (a mutex) protects a rail's
 * listener, device and connection list.  rc->lock (a spinlock taken with
 * _bh: completions run in softirq) protects a connection's credits, free
 * transmit slots and state flags.  Order: conn->io_lock,
 * nz_rdma_rails_lock, rr->lock, peer->lock, rc->lock.
 */
#ifndef _NZ_RDMA_H
#define _NZ_RDMA_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>
#include "comm.h"
#include "transport.h"

/* Counters of one RDMA rail, one file each in rail-NAME/rdma/. */
struct nz_rdma_stats {
	atomic64_t send_posted;		/* send work requests posted */
	atomic64_t send_completed;	/* ... completed successfully */
	atomic64_t recv_posted;		/* receive work requests posted */
	atomic64_t recv_completed;	/* ... completed successfully */
	atomic64_t wc_errors;		/* completions in error, flushes aside */
	atomic64_t async_errors;	/* fatal queue pair events */
	atomic64_t credit_stalls;	/* the sender ran out of credits */
	atomic64_t credit_updates;	/* credit-only messages sent */
	atomic64_t cm_rejects;		/* connect requests rejected */
	atomic64_t device_removals;	/* the rail's RDMA device went away */
	atomic_t qps;			/* queue pairs alive */
};

struct nz_rdma_rail {
	struct nz_rail *rail;
	struct list_head node;		/* nz_rdma_rails */
	struct mutex lock;		/* the fields below, up to stats */
	struct rdma_cm_id *listen_id;
	struct ib_device *ibdev;	/* NULL while the device is gone */
	struct list_head conns;		/* every nz_rdma_conn of the rail */
	unsigned int handshakes;	/* server ones, not attached yet */
	bool stopping;			/* rail_stop() began */
	unsigned int relisten_tries;
	wait_queue_head_t waitq;	/* conns became empty */
	struct delayed_work relisten_work;	/* the device came back */
	struct nz_rdma_stats stats;
};

/* rdma_rail.c */
extern struct workqueue_struct *nz_rdma_wq;
extern struct mutex nz_rdma_rails_lock;

/* transport_rdma.c */
int nz_rdma_conn_connect(struct nz_conn *conn);
void nz_rdma_conn_kick(struct nz_conn *conn);
void nz_rdma_conn_close(struct nz_conn *conn);
/* CONNECT_REQUEST: 0 accepted, 1 rejected (rdma_cm destroys id). */
int nz_rdma_cm_request(struct nz_rdma_rail *rr, struct rdma_cm_id *id,
		       const struct rdma_cm_event *ev);
/*
 * Fail every connection of the rail (the rail or its device goes) and
 * return once they are all gone.  No new one joins: rr->stopping is set or
 * rr->ibdev is NULL, and the listener is destroyed.
 */
void nz_rdma_rail_flush(struct nz_rdma_rail *rr, int err);
int nz_rdma_params_check(void);

#endif /* _NZ_RDMA_H */
