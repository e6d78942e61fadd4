/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nezha_rdma.ko: RDMA rails over kernel verbs and rdma_cm.  The rail side
 * (devices, listener, device removal, sysfs, module init) is rdma_rail.c;
 * setting connections up (CM events, handshake) is rdma_conn.c; a
 * connection's queue pair, buffers and teardown are rdma_qp.c; its
 * traffic (posting, credits, completions) is transport_rdma.c.
 * Documentation/rdma.rst has the design.
 *
 * Locking: nz_rdma_rails_lock (a mutex) protects the list of RDMA rails and
 * rail->priv of every RDMA rail.  rr->lock (a mutex) protects a rail's
 * listener, device and connection list.  rc->lock (a spinlock taken with
 * _bh: completions run in softirq) protects a connection's credits, free
 * transmit slots and state flags.  Order: conn->io_lock,
 * nz_rdma_rails_lock, rr->lock, conn->kick_lock (nz_conn_fail()), rc->lock;
 * peer->lock (the data path's) is never held with rc->lock.
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
	u64 hs_stranger_bytes;		/* their buffers, for unknown jobs */
	bool stopping;			/* rail_stop() began */
	unsigned int relisten_tries;
	wait_queue_head_t waitq;	/* conns became empty */
	struct delayed_work relisten_work;	/* the device came back */
	struct nz_rdma_stats stats;
};

/* Receives per connection (module parameter rx_depth). */
#define NZ_RDMA_MIN_DEPTH	4
#define NZ_RDMA_MAX_DEPTH	256
#define NZ_RDMA_HS_TIMEOUT	(5 * HZ)	/* a handshake, either side */

/*
 * The CM private data, big-endian.  A REQ carries 56 bytes of private data
 * on InfiniBand and RoCE; unused bytes must be zero.
 */
struct nz_rdma_cm_req {
	__be16 magic;			/* NZ_WIRE_MAGIC */
	u8 version;			/* NZ_WIRE_VERSION */
	u8 cm_version;			/* NZ_RDMA_CM_VERSION */
	__be16 rx_depth;		/* receives the client keeps posted */
	__be16 rail;			/* rail slot, < nrails */
	__be64 job_id;
	__be32 src_rank;		/* the client */
	__be32 dst_rank;		/* the server */
	__be16 nrails;
	__be16 rsvd0;
	__be32 unit;			/* chunk unit of the job */
	__be32 rsvd[2];
} __packed;

#define NZ_RDMA_HDR_SLOT	64	/* header area per slot (48 used) */

/* One receive or transmit buffer. */
struct nz_rdma_slot {
	struct ib_cqe cqe;
	struct nz_rdma_conn *rc;
	void *buf;			/* payload: one chunk unit */
	u64 dma;
	bool mapped;
	u32 index;
	u32 len;			/* receive: bytes that arrived */
	bool done;			/* receive: arrived, not processed */
};

enum nz_rdma_step {
	NZ_RDMA_STEP_NONE,
	NZ_RDMA_STEP_ADDR,		/* address resolved */
	NZ_RDMA_STEP_ROUTE,		/* route resolved */
	NZ_RDMA_STEP_CONNECTED,		/* queue pair ready to send */
};

struct nz_rdma_conn {
	struct nz_rdma_rail *rr;
	struct list_head node;		/* rr->conns, under rr->lock */
	struct nz_conn *conn;		/* client: always; server: attached */
	bool client;
	struct rdma_cm_id *cm_id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	unsigned int cq_size;
	struct ib_qp *qp;
	bool qp_init;			/* moved to INIT: can be drained */
	u32 unit;			/* payload bytes per buffer */
	u32 rx_depth;			/* our receives */
	u32 tx_slots;			/* our transmit buffers */
	u32 peer_depth;			/* the peer's receives: credits */
	u64 hs_cost;			/* server: in rr->hs_stranger_bytes */
	u8 *rx_hdr, *tx_hdr;		/* header areas of all slots */
	u64 rx_hdr_dma, tx_hdr_dma;
	bool rx_hdr_mapped, tx_hdr_mapped;
	struct nz_rdma_slot *rx, *tx;
	u32 *tx_free;			/* stack of free transmit slots */

	/* Receive progress: rx_work only. */
	u32 rx_head;			/* next slot, in posting order */
	enum nz_wire_state ws;		/* READ_ONCE: which frames may come */
	bool rx_stalled;		/* READ_ONCE: waits for a kick */
	bool rx_hold;			/* READ_ONCE: a handshake step reads */

	spinlock_t lock;		/* everything below */
	int step;			/* enum nz_rdma_step */
	int err;			/* first error */
	bool attached;			/* conn->tp: the communicator owns it */
	bool claimed;			/* nz_rdma_attach() under way */
	bool closing;			/* teardown began */
	bool hs_dead;			/* server: never attach any more */
	bool destroy_queued;		/* server: destroy_work queued once */
	bool starved;			/* out of credits since the last count */
	bool tx_waiting;		/* tx_work waits for a slot or credit */
	u32 send_credits;
	u32 credits_owed;		/* receives reposted, not yet told */
	u32 tx_nfree;
	struct nz_frame hs_frame;	/* the handshake frame read (server: HELLO) */
	bool hs_have;

	/* Set up once, or synchronised by themselves. */
	wait_queue_head_t waitq;	/* client steps, frames; sends done */
	struct nz_rdma_cm_req req;	/* server: as the client sent it */
	u8 nonce_s[NZ_WIRE_NONCE_LEN];	/* server: our challenge */
	u32 refuse;			/* server: close reason we sent */
	int async_err;			/* from the QP event handler */
	struct work_struct rx_work;
	struct work_struct tx_work;
	struct work_struct err_work;
	struct work_struct destroy_work;	/* server, before attach */
	struct work_struct hs_work;	/* server: HELLO to attach */
	struct delayed_work hs_timer;	/* server handshake deadline */
};

static inline struct nz_rdma_stats *nz_rdma_stats(struct nz_rdma_conn *rc)
{
	return &rc->rr->stats;
}

static inline const char *nz_rdma_rail_name(struct nz_rdma_conn *rc)
{
	return rc->rr->rail->name;
}

static inline struct ib_device *nz_rdma_dev(struct nz_rdma_conn *rc)
{
	return rc->pd->device;
}

/* rdma_rail.c */
extern struct workqueue_struct *nz_rdma_wq;
extern struct mutex nz_rdma_rails_lock;

/* rdma_qp.c: a connection's verbs objects and lifetime. */
struct nz_rdma_conn *nz_rdma_conn_alloc(bool client);
u32 nz_rdma_depth(u32 unit);
int nz_rdma_params_check(void);
/* rc joins its rail: a client unless the rail is going or has no device. */
int nz_rdma_rail_add_client(struct nz_rail *rail, struct nz_rdma_conn *rc);
int nz_rdma_rail_add_server(struct nz_rdma_rail *rr, struct nz_rdma_conn *rc,
			    struct ib_device *dev);
/*
 * Fail every connection of the rail (the rail or its device goes) and
 * return once they are all gone.  No new one joins: rr->stopping is set or
 * rr->ibdev is NULL, and the listener is destroyed.
 */
void nz_rdma_rail_flush(struct nz_rdma_rail *rr, int err);
/* rc failed; any context but hard interrupts. */
void nz_rdma_error(struct nz_rdma_conn *rc, int err);
int nz_rdma_setup_qp(struct nz_rdma_conn *rc);
int nz_rdma_qp_move(struct nz_rdma_conn *rc, enum ib_qp_state state);
/* Never from rc's own CM handler or works (but its destroy work). */
void nz_rdma_teardown(struct nz_rdma_conn *rc, bool bye, bool in_destroy);
void nz_rdma_conn_close(struct nz_conn *conn);

/* transport_rdma.c: a connection's traffic. */
/* A handshake frame or a CLOSE (last_ok: it may take the last credit). */
int nz_rdma_send_ctl(struct nz_rdma_conn *rc, const struct nz_frame *f,
		     bool last_ok);
void nz_rdma_send_close(struct nz_rdma_conn *rc, u32 reason);
void nz_rdma_conn_kick(struct nz_conn *conn);
int nz_rdma_post_recv(struct nz_rdma_conn *rc, struct nz_rdma_slot *s);
void nz_rdma_rx_work(struct work_struct *work);
void nz_rdma_tx_work(struct work_struct *work);

/* rdma_conn.c: connecting. */
int nz_rdma_conn_connect(struct nz_conn *conn);
void nz_rdma_dial_abort(void *dial);
/* CONNECT_REQUEST: 0 accepted, 1 rejected (rdma_cm destroys id). */
int nz_rdma_cm_request(struct nz_rdma_rail *rr, struct rdma_cm_id *id,
		       const struct rdma_cm_event *ev);
/* Server: the client's HELLO (or CLOSE) rx_work read; welcome or refuse. */
void nz_rdma_hs_work(struct work_struct *work);
void nz_rdma_destroy_work(struct work_struct *work);
void nz_rdma_hs_expired(struct work_struct *work);

#endif /* _NZ_RDMA_H */
