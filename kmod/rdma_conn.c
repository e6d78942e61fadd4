// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA rails: connecting.  The rdma_cm events of a connection, the client
 * side (resolve, connect) and the server side (the listener's
 * CONNECT_REQUEST, accept), and the handshake that admits a connection to
 * its communicator.  The queue pair's traffic is in transport_rdma.c.
 *
 * Connection sequence (Documentation/rdma.rst has the picture): the client
 * (the higher rank) resolves the peer's address and route, creates its
 * queue pair, posts its receives and connects with a private-data block
 * that names the job, the ranks, the rail and its receive depth.  The
 * server checks that block in the CONNECT_REQUEST (a malformed one is
 * rejected there), creates its queue pair, posts its receives and accepts.
 * Then the handshake of the TCP rails runs as the first messages on the
 * queue pair: CHALLENGE, HELLO, WELCOME, with the same MACs.  Only a peer
 * that knows the job's secret gets attached to the communicator.
 *
 * We move the queue pairs through their states ourselves (rdma_init_qp_attr
 * and ib_modify_qp, as librdmacm does), so that the queue pairs are ours in
 * `rdma resource show`, not rdma_cm's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/delay.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <crypto/algapi.h>
#include "rdma.h"
#include "handshake.h"

#define NZ_RDMA_CM_VERSION	1
#define NZ_RDMA_RESOLVE_MS	2000
#define NZ_RDMA_COMM_GRACE_MS	2000
#define NZ_RDMA_RETRIES		7

/* The REP: the server's receive depth. */
struct nz_rdma_cm_rep {
	__be16 magic;
	u8 version;
	u8 cm_version;
	__be16 rx_depth;
	__be16 rsvd0;
	__be32 rsvd[2];
} __packed;

/* The REJ of a connect request we refuse: why (enum nz_close_reason). */
struct nz_rdma_cm_rej {
	__be16 magic;
	u8 version;
	u8 cm_version;
	__be32 reason;
} __packed;

static_assert(sizeof(struct nz_rdma_cm_req) == 40);
static_assert(sizeof(struct nz_rdma_cm_rep) == 16);

/* ---- handshake ------------------------------------------------------------------------------ */

/*
 * Hand rc to the communicator: it becomes conn->tp.  Fails when the rail or
 * its device went away meanwhile, or (server) the handshake was abandoned:
 * its destruction queued (a failure, the deadline) or done.
 *
 * A server's rc is claimed first: from then on a failure is only recorded
 * (read below), and neither a failure nor the deadline queues its
 * destroy_work.  None was queued before (or we refuse), so an attached rc
 * never has one; its teardown, under conn->io_lock, need not cancel
 * destroy_work or hs_work, whose last touch of rc is this function, under
 * that lock.
 */
static int nz_rdma_attach(struct nz_rdma_conn *rc, struct nz_conn *conn)
{
	struct nz_rdma_rail *rr = rc->rr;
	int ret = -ESHUTDOWN, err;
	bool claim;

	mutex_lock(&conn->io_lock);
	nz_conn_detach(conn, -ECONNRESET);	/* a stale one, if any */
	mutex_lock(&rr->lock);
	spin_lock_bh(&rc->lock);
	claim = !rc->destroy_queued && !rc->closing;
	rc->claimed = claim;
	spin_unlock_bh(&rc->lock);
	if (claim && !rc->hs_dead && !rr->stopping && rr->ibdev) {
		rc->conn = conn;
		ret = nz_conn_attach(conn, rc);
	}
	spin_lock_bh(&rc->lock);
	rc->claimed = false;
	rc->attached = !ret;
	err = rc->err;
	spin_unlock_bh(&rc->lock);
	if (!ret) {
		if (!rc->client) {
			rr->handshakes--;
			rr->hs_stranger_bytes -= rc->hs_cost;
			rc->hs_cost = 0;
		}
		WRITE_ONCE(rc->ws, NZ_WS_ESTABLISHED);
	}
	mutex_unlock(&rr->lock);
	if (!ret) {
		/* Frames that came after WELCOME wait in the ring. */
		/* Release: rx_work sees ws ESTABLISHED once it reads on. */
		smp_store_release(&rc->rx_hold, false);
		queue_work(nz_rdma_wq, &rc->rx_work);
		queue_work(nz_rdma_wq, &rc->tx_work);
		if (err)
			nz_conn_fail(conn, rc, err);
	}
	mutex_unlock(&conn->io_lock);
	return ret;
}

static const char *nz_rdma_reason(u32 reason)
{
	switch (reason) {
	case NZ_CLOSE_AUTH:
		return "bad secret";
	case NZ_CLOSE_IDENTITY:
		return "unknown job, rank or rail";
	case NZ_CLOSE_VERSION:
		return "wire version";
	case NZ_CLOSE_ADMIN:
		return "rail down";
	case NZ_CLOSE_RESOURCE:
		return "no resources";
	case NZ_CLOSE_RESTARTED:
		return "rank restarted";
	case NZ_CLOSE_FRAME_MAC:
		return "per-frame MAC set differently";
	default:
		return "malformed handshake";
	}
}

/* Server: rc's handshake failed or timed out; its destroy work ends it. */
static void nz_rdma_hs_fail(struct nz_rdma_conn *rc, int err)
{
	bool destroy = false;

	spin_lock_bh(&rc->lock);
	if (!rc->attached && !rc->closing && !rc->claimed) {
		if (!rc->err)
			rc->err = err;
		destroy = !rc->destroy_queued;
		rc->destroy_queued = true;
	}
	spin_unlock_bh(&rc->lock);
	if (destroy)
		queue_work(nz_rdma_wq, &rc->destroy_work);
}

void nz_rdma_hs_expired(struct work_struct *work)
{
	struct nz_rdma_conn *rc = container_of(to_delayed_work(work),
					       struct nz_rdma_conn, hs_timer);

	nz_rdma_hs_fail(rc, -ETIMEDOUT);
}

void nz_rdma_destroy_work(struct work_struct *work)
{
	struct nz_rdma_conn *rc = container_of(work, struct nz_rdma_conn,
					       destroy_work);
	struct nz_rdma_rail *rr = rc->rr;
	int err;

	mutex_lock(&rr->lock);
	if (rc->attached) {
		/* Attached meanwhile: the communicator owns it now. */
		mutex_unlock(&rr->lock);
		return;
	}
	rc->hs_dead = true;
	mutex_unlock(&rr->lock);

	spin_lock_bh(&rc->lock);
	err = rc->err;
	spin_unlock_bh(&rc->lock);
	if (err != -ESHUTDOWN && err != -ENODEV) {
		atomic64_inc(&rr->rail->stats.hs_refused);
		pr_info_ratelimited("rail %s: refused a connection (%s, %d)\n",
				    rr->rail->name, nz_rdma_reason(rc->refuse),
				    err);
	}
	nz_rdma_teardown(rc, false, true);
}

/* The HELLO must say what the connect request said. */
static bool nz_rdma_hello_matches(const struct nz_rdma_cm_req *req,
				  const struct nz_frame_hello *h)
{
	return be64_to_cpu(req->job_id) == h->job_id &&
	       be32_to_cpu(req->src_rank) == h->src_rank &&
	       be32_to_cpu(req->dst_rank) == h->dst_rank &&
	       be16_to_cpu(req->rail) == h->rail &&
	       be16_to_cpu(req->nrails) == h->nrails &&
	       be32_to_cpu(req->unit) == h->unit;
}

/*
 * The ranks of a job create their communicators at about the same time: a
 * client may knock before ours exists.  Give it NZ_RDMA_COMM_GRACE_MS.
 */
static struct nz_comm *nz_rdma_wait_comm(struct nz_rdma_conn *rc,
					 const struct nz_frame_hello *h,
					 struct nz_conn **connp, u32 *reason)
{
	struct nz_rail *rail = rc->rr->rail;
	struct nz_comm *comm;
	int waited;

	for (waited = 0; ; waited += 20) {
		comm = nz_comm_find_hello(rail, h, rc->nonce_s, connp, reason);
		if (comm || *reason != NZ_CLOSE_IDENTITY ||
		    waited >= NZ_RDMA_COMM_GRACE_MS || READ_ONCE(rc->closing))
			return comm;
		msleep(20);
	}
}

/* Server: the client's HELLO.  Welcome it, or refuse it. */
static int nz_rdma_server_hello(struct nz_rdma_conn *rc,
				const struct nz_frame *f)
{
	const struct nz_frame_hello *h = &f->hello;
	struct nz_rail *rail = rc->rr->rail;
	struct nz_comm *comm = NULL;
	struct nz_conn *conn = NULL;
	struct nz_frame w;
	u32 reason;
	int ret;

	if (f->type == NZ_FRAME_CLOSE)
		return -ECONNRESET;	/* the client gave up */
	reason = NZ_CLOSE_IDENTITY;
	if (!nz_rdma_hello_matches(&rc->req, h) ||
	    READ_ONCE(rail->dead) || READ_ONCE(rail->admin_down))
		goto refuse;
	comm = nz_rdma_wait_comm(rc, h, &conn, &reason);
	if (!comm)
		goto refuse;

	ret = nz_hs_make_welcome(comm, h, rc->nonce_s, &w);
	if (!ret)
		ret = nz_rdma_send_ctl(rc, &w, false);
	if (!ret)
		ret = nz_rdma_attach(rc, conn);
	nz_comm_put(comm);
	return ret;

refuse:
	if (comm)
		nz_comm_put(comm);
	rc->refuse = reason;
	nz_rdma_send_close(rc, reason);
	return -ECONNREFUSED;
}

/*
 * Server: the HELLO rx_work read (nz_rdma_server_frame()).  Attached, rc
 * is the communicator's, which may tear it down at once: not touched here
 * after a success.
 */
void nz_rdma_hs_work(struct work_struct *work)
{
	struct nz_rdma_conn *rc = container_of(work, struct nz_rdma_conn,
					       hs_work);
	int ret = nz_rdma_server_hello(rc, &rc->hs_frame);

	if (ret)
		nz_rdma_error(rc, ret);
}

static void nz_rdma_set_step(struct nz_rdma_conn *rc, int step)
{
	spin_lock_bh(&rc->lock);
	if (step > rc->step)
		rc->step = step;
	spin_unlock_bh(&rc->lock);
	wake_up_all(&rc->waitq);
}

static int nz_rdma_wait_step(struct nz_rdma_conn *rc, int step,
			     unsigned long deadline)
{
	long left = (long)(deadline - jiffies);
	int ret;

	if (left > 0)
		wait_event_timeout(rc->waitq, READ_ONCE(rc->step) >= step ||
				   READ_ONCE(rc->err), left);
	spin_lock_bh(&rc->lock);
	ret = rc->err ?: (rc->step >= step ? 0 : -ETIMEDOUT);
	spin_unlock_bh(&rc->lock);
	return ret;
}

/* Client: the next handshake frame (a CLOSE is a refusal). */
static int nz_rdma_wait_frame(struct nz_rdma_conn *rc, unsigned long deadline,
			      struct nz_frame *f)
{
	long left = (long)(deadline - jiffies);
	int ret;

	if (left > 0)
		wait_event_timeout(rc->waitq, READ_ONCE(rc->hs_have) ||
				   READ_ONCE(rc->err), left);
	spin_lock_bh(&rc->lock);
	ret = rc->err ?: (rc->hs_have ? 0 : -ETIMEDOUT);
	if (!ret) {
		*f = rc->hs_frame;
		rc->hs_have = false;
	}
	spin_unlock_bh(&rc->lock);
	if (!ret && f->type == NZ_FRAME_CLOSE)
		ret = -ECONNREFUSED;
	return ret;
}

/* The client's handshake, as nz_hs_client() runs it (ws: rx_work checks). */
struct nz_rdma_hs {
	struct nz_rdma_conn *rc;
	unsigned long deadline;
};

static int nz_rdma_hs_recv(void *ctx, enum nz_wire_state ws,
			   struct nz_frame *f)
{
	struct nz_rdma_hs *hs = ctx;

	return nz_rdma_wait_frame(hs->rc, hs->deadline, f);
}

static int nz_rdma_hs_send_hello(void *ctx, const struct nz_frame *f)
{
	struct nz_rdma_conn *rc = ((struct nz_rdma_hs *)ctx)->rc;
	int ret;

	WRITE_ONCE(rc->ws, NZ_WS_CLIENT_WAIT_WELCOME);
	ret = nz_rdma_send_ctl(rc, f, false);
	if (ret)
		return ret;
	/* Release: rx_work sees ws WAIT_WELCOME once it reads on. */
	smp_store_release(&rc->rx_hold, false);
	queue_work(nz_rdma_wq, &rc->rx_work);
	return 0;
}

static const struct nz_hs_io nz_rdma_hs_io = {
	.recv = nz_rdma_hs_recv,
	.send_hello = nz_rdma_hs_send_hello,
};

/* ---- connection manager ---------------------------------------------------------------------- */

/* Client: the server accepted.  Ready the QP, send the RTU. */
static int nz_rdma_client_rep(struct nz_rdma_conn *rc,
			      const struct rdma_cm_event *ev)
{
	const struct nz_rdma_cm_rep *rep = ev->param.conn.private_data;
	u32 depth;
	int ret;

	if (!rep || ev->param.conn.private_data_len < sizeof(*rep) ||
	    be16_to_cpu(rep->magic) != NZ_WIRE_MAGIC ||
	    rep->version != NZ_WIRE_VERSION ||
	    rep->cm_version != NZ_RDMA_CM_VERSION)
		return -EPROTO;
	depth = be16_to_cpu(rep->rx_depth);
	if (depth < NZ_RDMA_MIN_DEPTH || depth > NZ_RDMA_MAX_DEPTH)
		return -EPROTO;
	spin_lock_bh(&rc->lock);
	rc->peer_depth = depth;
	rc->send_credits = depth;
	spin_unlock_bh(&rc->lock);
	ret = nz_rdma_qp_move(rc, IB_QPS_RTR);
	if (!ret)
		ret = nz_rdma_qp_move(rc, IB_QPS_RTS);
	if (!ret)
		ret = rdma_accept(rc->cm_id, NULL);
	return ret;
}

/* Server: the client's RTU came; the handshake starts. */
static int nz_rdma_server_established(struct nz_rdma_conn *rc)
{
	struct nz_frame f;

	nz_hs_make_challenge(rc->nonce_s, &f);
	return nz_rdma_send_ctl(rc, &f, false);
}

static void nz_rdma_log_reject(struct nz_rdma_conn *rc,
			       const struct rdma_cm_event *ev)
{
	const struct nz_rdma_cm_rej *rej;
	u8 len = 0;

	rej = rdma_consumer_reject_data(rc->cm_id, (struct rdma_cm_event *)ev,
					&len);
	if (rej && len >= sizeof(*rej) &&
	    be16_to_cpu(rej->magic) == NZ_WIRE_MAGIC)
		pr_info_ratelimited("rail %s: the peer rejected us (%s)\n",
				    nz_rdma_rail_name(rc),
				    nz_rdma_reason(be32_to_cpu(rej->reason)));
	else
		pr_debug("rail %s: connect rejected: %s\n",
			 nz_rdma_rail_name(rc),
			 rdma_reject_msg(rc->cm_id, ev->status));
}

/* Events of a connection's CM ID (the listener's are in rdma_rail.c). */
static int nz_rdma_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct nz_rdma_conn *rc = id->context;
	int err = 0;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		nz_rdma_set_step(rc, NZ_RDMA_STEP_ADDR);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		nz_rdma_set_step(rc, NZ_RDMA_STEP_ROUTE);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		err = nz_rdma_client_rep(rc, ev);
		if (!err)
			nz_rdma_set_step(rc, NZ_RDMA_STEP_CONNECTED);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!rc->client)
			err = nz_rdma_server_established(rc);
		break;
	case RDMA_CM_EVENT_REJECTED:
		nz_rdma_log_reject(rc, ev);
		err = -ECONNREFUSED;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		err = ev->status < 0 ? ev->status : -EHOSTUNREACH;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		err = -ECONNRESET;
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		err = -ENODEV;
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		err = -ENETRESET;
		break;
	default:
		break;		/* TIMEWAIT_EXIT and the like */
	}
	if (err)
		nz_rdma_error(rc, err);
	/* Never 0 -> destroy: our teardown destroys the ID. */
	return 0;
}

/* Client: the address resolved to the rail's own device and port. */
static int nz_rdma_check_device(struct nz_rdma_conn *rc)
{
	struct nz_rdma_rail *rr = rc->rr;
	bool ok;

	mutex_lock(&rr->lock);
	ok = rr->ibdev && rc->cm_id->device == rr->ibdev &&
	     rc->cm_id->port_num == rr->rail->ib_port;
	mutex_unlock(&rr->lock);
	return ok ? 0 : -ENETUNREACH;
}

static int nz_rdma_connect(struct nz_rdma_conn *rc)
{
	struct nz_conn *conn = rc->conn;
	struct nz_comm *comm = conn->peer->comm;
	struct nz_rdma_cm_req req = {
		.magic = cpu_to_be16(NZ_WIRE_MAGIC),
		.version = NZ_WIRE_VERSION,
		.cm_version = NZ_RDMA_CM_VERSION,
		.rx_depth = cpu_to_be16(rc->rx_depth),
		.rail = cpu_to_be16(conn->slot),
		.job_id = cpu_to_be64(comm->job_id),
		.src_rank = cpu_to_be32(comm->rank),
		.dst_rank = cpu_to_be32(conn->peer->rank),
		.nrails = cpu_to_be16(comm->nrails),
		.unit = cpu_to_be32(comm->unit),
	};
	struct rdma_conn_param param = {
		.private_data = &req,
		.private_data_len = sizeof(req),
		.flow_control = 1,
		.retry_count = NZ_RDMA_RETRIES,
		.rnr_retry_count = NZ_RDMA_RETRIES,
		.qp_num = rc->qp->qp_num,
	};

	return rdma_connect(rc->cm_id, &param);
}

int nz_rdma_conn_connect(struct nz_conn *conn)
{
	struct nz_comm *comm = conn->peer->comm;
	struct nz_rail *rail = conn->rail;
	const struct nz_comm_addr *a =
		&comm->addrs[conn->peer->rank * comm->nrails + conn->slot];
	struct sockaddr_in src = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = rail->addr,
	};
	struct sockaddr_in dst = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = a->addr,
		.sin_port = a->port,
	};
	unsigned long deadline = jiffies + NZ_RDMA_HS_TIMEOUT;
	struct nz_rdma_conn *rc;
	struct nz_rdma_hs hs = { .deadline = deadline };
	struct nz_fmac_keys keys;	/* none: rail.c refuses them on RDMA */
	struct rdma_cm_id *id;
	int ret;

	rc = nz_rdma_conn_alloc(true);
	if (!rc)
		return -ENOMEM;
	rc->conn = conn;
	hs.rc = rc;
	rc->unit = comm->unit;
	rc->rx_depth = nz_rdma_depth(rc->unit);
	rc->tx_slots = rc->rx_depth;
	rc->ws = NZ_WS_CLIENT_WAIT_CHALLENGE;
	ret = nz_rdma_rail_add_client(rail, rc);
	if (ret) {
		kfree(rc);
		return ret;
	}
	ret = nz_conn_dial_begin(conn, rc);
	if (ret)
		goto out_teardown;
	id = rdma_create_id(rail->net, nz_rdma_cm_handler, rc, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id)) {
		ret = PTR_ERR(id);
		goto out_teardown;
	}
	rc->cm_id = id;
	ret = rdma_resolve_addr(id, (struct sockaddr *)&src,
				(struct sockaddr *)&dst, NZ_RDMA_RESOLVE_MS);
	if (!ret)
		ret = nz_rdma_wait_step(rc, NZ_RDMA_STEP_ADDR, deadline);
	if (!ret)
		ret = nz_rdma_check_device(rc);
	if (!ret)
		ret = rdma_resolve_route(id, NZ_RDMA_RESOLVE_MS);
	if (!ret)
		ret = nz_rdma_wait_step(rc, NZ_RDMA_STEP_ROUTE, deadline);
	if (!ret)
		ret = nz_rdma_setup_qp(rc);
	if (!ret)
		ret = nz_rdma_connect(rc);
	if (!ret)
		ret = nz_rdma_wait_step(rc, NZ_RDMA_STEP_CONNECTED, deadline);
	if (!ret)
		ret = nz_hs_client(conn, &nz_rdma_hs_io, &hs, &keys);
	if (ret == -EACCES) {
		atomic64_inc(&rail->stats.hs_refused);
		pr_warn_ratelimited("rail %s: rank %u failed to authenticate\n",
				    rail->name, conn->peer->rank);
	}
	/* Aborted after the handshake: do not attach. */
	if (!ret)
		ret = nz_conn_dial_end(conn);
	if (!ret)
		ret = nz_rdma_attach(rc, conn);
	if (!ret)
		return 0;
	pr_debug("rail %s: connecting to rank %u failed at step %d: %d\n",
		 rail->name, conn->peer->rank, rc->step, ret);
out_teardown:
	nz_conn_dial_end(conn);
	nz_rdma_teardown(rc, false, false);
	return ret;
}

/* Teardown: the dial gives up; its waits see rc->err at once. */
void nz_rdma_dial_abort(void *dial)
{
	struct nz_rdma_conn *rc = dial;

	spin_lock_bh(&rc->lock);
	if (!rc->err)
		rc->err = -ECANCELED;
	spin_unlock_bh(&rc->lock);
	wake_up_all(&rc->waitq);
}

/* ---- server side ------------------------------------------------------------------------------ */

/* Check the REQ's private data; 0 or the close reason for the REJ. */
static u32 nz_rdma_parse_req(const struct rdma_conn_param *p,
			     struct nz_rdma_cm_req *req)
{
	const u8 *data = p->private_data;
	u32 i, nrails, rail, depth;

	if (!data || p->private_data_len < sizeof(*req))
		return NZ_CLOSE_PROTO;
	memcpy(req, data, sizeof(*req));
	if (be16_to_cpu(req->magic) != NZ_WIRE_MAGIC)
		return NZ_CLOSE_PROTO;
	if (req->version != NZ_WIRE_VERSION ||
	    req->cm_version != NZ_RDMA_CM_VERSION)
		return NZ_CLOSE_VERSION;
	for (i = sizeof(*req); i < p->private_data_len; i++)
		if (data[i])
			return NZ_CLOSE_PROTO;
	nrails = be16_to_cpu(req->nrails);
	rail = be16_to_cpu(req->rail);
	depth = be16_to_cpu(req->rx_depth);
	if (req->rsvd0 || req->rsvd[0] || req->rsvd[1] ||
	    !nz_wire_unit_ok(be32_to_cpu(req->unit)) ||
	    !nrails || nrails > NZ_MAX_RAILS || rail >= nrails ||
	    depth < NZ_RDMA_MIN_DEPTH || depth > NZ_RDMA_MAX_DEPTH ||
	    req->src_rank == req->dst_rank)
		return NZ_CLOSE_PROTO;
	return 0;
}

static void nz_rdma_reject(struct rdma_cm_id *id, u32 reason)
{
	struct nz_rdma_cm_rej rej = {
		.magic = cpu_to_be16(NZ_WIRE_MAGIC),
		.version = NZ_WIRE_VERSION,
		.cm_version = NZ_RDMA_CM_VERSION,
		.reason = cpu_to_be32(reason),
	};

	rdma_reject(id, &rej, sizeof(rej), IB_CM_REJ_CONSUMER_DEFINED);
}

/*
 * Whether the REQ names a communicator of this host on this rail: 1 if it
 * does, with the same unit and rails; 0 if there is none (yet); -1 if it
 * names only ones of another shape.  Before any key is checked: it only
 * decides how much memory a request may take (nz_rdma_cm_request()).
 */
static int nz_rdma_req_job(struct nz_rail *rail,
			   const struct nz_rdma_cm_req *req)
{
	return nz_comm_job_fits(be64_to_cpu(req->job_id),
				be32_to_cpu(req->dst_rank), rail,
				be16_to_cpu(req->rail), be32_to_cpu(req->unit),
				be16_to_cpu(req->nrails));
}

/*
 * CONNECT_REQUEST on the rail's listener; id is the new connection's CM
 * ID.  Returns 0 (accepted: rc owns id) or 1 (rejected: rdma_cm destroys
 * id when we return).
 */
int nz_rdma_cm_request(struct nz_rdma_rail *rr, struct rdma_cm_id *id,
		       const struct rdma_cm_event *ev)
{
	struct nz_rail *rail = rr->rail;
	struct nz_rdma_conn *rc = NULL;
	struct nz_rdma_cm_rep rep = {
		.magic = cpu_to_be16(NZ_WIRE_MAGIC),
		.version = NZ_WIRE_VERSION,
		.cm_version = NZ_RDMA_CM_VERSION,
	};
	struct rdma_conn_param param = {
		.private_data = &rep,
		.private_data_len = sizeof(rep),
		.flow_control = 1,
		.rnr_retry_count = NZ_RDMA_RETRIES,
	};
	struct nz_rdma_cm_req req;
	u32 reason;
	int ret, job;

	reason = nz_rdma_parse_req(&ev->param.conn, &req);
	if (reason)
		goto reject;
	reason = NZ_CLOSE_IDENTITY;
	job = nz_rdma_req_job(rail, &req);
	if (job < 0)
		goto reject;
	reason = NZ_CLOSE_ADMIN;
	if (READ_ONCE(rail->dead) || READ_ONCE(rail->admin_down))
		goto reject;
	reason = NZ_CLOSE_RESOURCE;
	rc = nz_rdma_conn_alloc(false);
	if (!rc)
		goto reject;
	rc->unit = be32_to_cpu(req.unit);
	rc->rx_depth = nz_rdma_depth(rc->unit);
	rc->tx_slots = rc->rx_depth;
	rc->peer_depth = be16_to_cpu(req.rx_depth);
	rc->send_credits = rc->peer_depth;
	/* A job we do not know: its buffers count against a small budget. */
	if (!job)
		rc->hs_cost = (u64)(rc->rx_depth + rc->tx_slots) * rc->unit;
	rc->req = req;
	rc->ws = NZ_WS_SERVER_WAIT_HELLO;
	get_random_bytes(rc->nonce_s, sizeof(rc->nonce_s));
	if (nz_rdma_rail_add_server(rr, rc, id->device)) {
		kfree(rc);
		rc = NULL;
		goto reject;
	}
	/* The new ID inherited the listener's handler and context. */
	rc->cm_id = id;
	id->context = rc;
	id->event_handler = nz_rdma_cm_handler;
	ret = nz_rdma_setup_qp(rc);
	if (!ret)
		ret = nz_rdma_qp_move(rc, IB_QPS_RTR);
	if (!ret)
		ret = nz_rdma_qp_move(rc, IB_QPS_RTS);
	if (ret)
		goto reject;
	rep.rx_depth = cpu_to_be16(rc->rx_depth);
	param.qp_num = rc->qp->qp_num;
	ret = rdma_accept(id, &param);
	if (ret)
		goto out_free;		/* it sent a reject itself */
	queue_delayed_work(nz_rdma_wq, &rc->hs_timer, NZ_RDMA_HS_TIMEOUT);
	return 0;

reject:
	nz_rdma_reject(id, reason);
	atomic64_inc(&rr->stats.cm_rejects);
	atomic64_inc(&rail->stats.hs_refused);
	pr_info_ratelimited("rail %s: rejected a connect request (%s)\n",
			    rail->name, nz_rdma_reason(reason));
out_free:
	if (rc) {
		rc->cm_id = NULL;	/* rdma_cm destroys it */
		nz_rdma_teardown(rc, false, false);
	}
	return 1;
}
