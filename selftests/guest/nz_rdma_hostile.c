// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile RDMA peer, from user space (librdmacm and libibverbs), against
 * the RDMA rail of a module that runs a job: connect requests with garbage,
 * missing or malformed private data must be rejected by the CM; a peer that
 * gets through the CM but does not know the job's secret, or whose HELLO
 * contradicts its connect request, must get a CLOSE with the reason and be
 * disconnected.  rdma.sh checks the target's counters afterwards.
 *
 * Usage: nz_rdma_hostile ADDR PORT JOB SLOT NRAILS UNIT SRC DST
 *   the target rail's address and rdma_cm port, the job id (hex), the
 *   rail's slot, the job's rail count and chunk unit, the rank we pretend
 *   to be (SRC) and the target's (DST).  Links kmod/wire.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "wire.h"
#include "tap.h"

#define NSLOT		8
#define SLOT		256		/* bytes per receive slot */
#define REQ_LEN		40		/* struct nz_rdma_cm_req */
#define TIMEOUT_MS	8000

static struct sockaddr_in target;
static uint64_t job;
static uint32_t slot, nrails, unit, src, dst;
static const struct nz_wire_limits hs_lim = { 0, 0 };

struct peer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t buf[(NSLOT + 1) * SLOT];	/* receives, then one send */
};

/* What the last CM event said. */
struct event {
	enum rdma_cm_event_type type;
	int status;
	uint8_t priv[256];
	uint8_t len;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int next_event(struct peer *p, struct event *e)
{
	struct pollfd pfd = { .fd = p->ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pfd, 1, TIMEOUT_MS) != 1)
		return -ETIMEDOUT;
	if (rdma_get_cm_event(p->ch, &ev))
		return -errno;
	e->type = ev->event;
	e->status = ev->status;
	e->len = 0;
	if (ev->param.conn.private_data && ev->param.conn.private_data_len) {
		e->len = ev->param.conn.private_data_len;
		memcpy(e->priv, ev->param.conn.private_data, e->len);
	}
	rdma_ack_cm_event(ev);
	return 0;
}

static void peer_free(struct peer *p)
{
	if (p->id && p->id->qp)
		rdma_destroy_qp(p->id);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->id)
		rdma_destroy_id(p->id);
	if (p->ch)
		rdma_destroy_event_channel(p->ch);
	free(p);
}

static int post_recv(struct peer *p, uint32_t i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)p->buf + i * SLOT,
		.length = SLOT,
		.lkey = p->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(p->id->qp, &wr, &bad);
}

/* Resolve, make a QP with receives posted, connect with priv; e: answer. */
static struct peer *peer_connect(const void *priv, uint8_t len,
				 struct event *e)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = NSLOT,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_conn_param cp = {
		.private_data = priv,
		.private_data_len = len,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	struct peer *p = calloc(1, sizeof(*p));
	uint32_t i;

	if (!p)
		return NULL;
	p->ch = rdma_create_event_channel();
	if (!p->ch || rdma_create_id(p->ch, &p->id, NULL, RDMA_PS_TCP))
		goto fail;
	if (rdma_resolve_addr(p->id, NULL, (struct sockaddr *)&target, 2000) ||
	    next_event(p, e) || e->type != RDMA_CM_EVENT_ADDR_RESOLVED)
		goto fail;
	if (rdma_resolve_route(p->id, 2000) || next_event(p, e) ||
	    e->type != RDMA_CM_EVENT_ROUTE_RESOLVED)
		goto fail;
	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cq = p->pd ? ibv_create_cq(p->id->verbs, 16, NULL, NULL, 0) : NULL;
	p->mr = p->cq ? ibv_reg_mr(p->pd, p->buf, sizeof(p->buf),
				   IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!p->mr)
		goto fail;
	qa.send_cq = p->cq;
	qa.recv_cq = p->cq;
	if (rdma_create_qp(p->id, p->pd, &qa))
		goto fail;
	for (i = 0; i < NSLOT; i++)
		if (post_recv(p, i))
			goto fail;
	if (rdma_connect(p->id, &cp) || next_event(p, e))
		goto fail;
	return p;
fail:
	tap_diag("set-up failed: %s", strerror(errno));
	peer_free(p);
	return NULL;
}

/* The next message, decoded (-ETIMEDOUT, -EPROTO, or 0). */
static int recv_frame(struct peer *p, struct nz_frame *f)
{
	double end = now_ms() + TIMEOUT_MS;
	struct ibv_wc wc;
	int n;

	while (now_ms() < end) {
		n = ibv_poll_cq(p->cq, 1, &wc);
		if (n < 0)
			return -EIO;
		if (!n) {
			usleep(1000);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS)
			return -EIO;
		if (wc.opcode != IBV_WC_RECV)
			continue;	/* our send completed */
		if (!(wc.wc_flags & IBV_WC_WITH_IMM))
			return -EPROTO;	/* every message returns credits */
		return nz_wire_decode(p->buf + wc.wr_id * SLOT, wc.byte_len,
				      &hs_lim, f);
	}
	return -ETIMEDOUT;
}

static int send_frame(struct peer *p, const struct nz_frame *f)
{
	uint8_t *b = p->buf + NSLOT * SLOT;
	struct ibv_sge sge = { .addr = (uintptr_t)b, .lkey = p->mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(0),
	};
	struct ibv_send_wr *bad;
	int len;

	len = nz_wire_encode(f, &hs_lim, b, SLOT);
	if (len < 0)
		return len;
	sge.length = len;
	return ibv_post_send(p->id->qp, &wr, &bad) ? -errno : 0;
}

static void make_req(uint8_t *r, uint32_t req_unit)
{
	memset(r, 0, REQ_LEN);
	put_unaligned_be16(NZ_WIRE_MAGIC, r);
	r[2] = NZ_WIRE_VERSION;
	r[3] = 1;			/* NZ_RDMA_CM_VERSION */
	put_unaligned_be16(NSLOT, r + 4);
	put_unaligned_be16(slot, r + 6);
	put_unaligned_be64(job, r + 8);
	put_unaligned_be32(src, r + 16);
	put_unaligned_be32(dst, r + 20);
	put_unaligned_be16(nrails, r + 24);
	put_unaligned_be32(req_unit, r + 28);
}

/* Our REJ private data: magic, versions, then the close reason. */
static uint32_t rej_reason(const struct event *e)
{
	if (e->len < 8 || get_unaligned_be16(e->priv) != NZ_WIRE_MAGIC)
		return ~0U;
	return get_unaligned_be32(e->priv + 4);
}

static void expect_reject_for(const char *what, const void *priv,
			      uint8_t len, uint32_t reason)
{
	struct event e = { 0 };
	struct peer *p = peer_connect(priv, len, &e);

	tap_ok(p && e.type == RDMA_CM_EVENT_REJECTED &&
	       rej_reason(&e) == reason,
	       "%s: rejected by the CM (%s, reason %u)", what,
	       p ? rdma_event_str(e.type) : "no connection", rej_reason(&e));
	if (p)
		peer_free(p);
}

static void expect_reject(const char *what, const void *priv, uint8_t len)
{
	expect_reject_for(what, priv, len, NZ_CLOSE_PROTO);
}

/*
 * Strangers that do not know the job's id, each asking for 1 MiB buffers
 * (4 receive and 4 transmit): the server sized its buffers from whatever
 * the request said, 64 such handshakes a rail at once.  Now those for a
 * job it does not know share 16 MiB per rail: two are accepted, the third
 * rejected until they go.
 */
static void strangers_budget(void)
{
	uint64_t real = job;
	struct peer *p[3] = { 0 };
	struct event e[3] = { 0 };
	uint8_t req[REQ_LEN];
	int i, held = 0;

	job = real ^ 0x5a5a5a5a00000000ULL;
	make_req(req, 1 << 20);
	job = real;
	for (i = 0; i < 3; i++) {
		p[i] = peer_connect(req, sizeof(req), &e[i]);
		held += p[i] && e[i].type == RDMA_CM_EVENT_ESTABLISHED;
	}
	tap_ok(held == 2 && p[2] && e[2].type == RDMA_CM_EVENT_REJECTED &&
	       rej_reason(&e[2]) == NZ_CLOSE_RESOURCE,
	       "strangers of an unknown job asking for 1 MiB buffers: 2 held, the 3rd rejected (%s, reason %u)",
	       p[2] ? rdma_event_str(e[2].type) : "no connection",
	       rej_reason(&e[2]));
	for (i = 0; i < 3; i++)
		if (p[i])
			peer_free(p[i]);
}

/* Through the CM, then a HELLO the server must refuse with reason. */
static void expect_close(const char *what, uint32_t hello_unit,
			 uint32_t reason)
{
	uint8_t req[REQ_LEN];
	struct nz_frame f;
	struct event e = { 0 };
	struct peer *p;
	int ret = -1;

	make_req(req, unit);
	p = peer_connect(req, sizeof(req), &e);
	if (!p || e.type != RDMA_CM_EVENT_ESTABLISHED) {
		tap_ok(0, "%s: connect request accepted (%s)", what,
		       p ? rdma_event_str(e.type) : "no connection");
		if (p)
			peer_free(p);
		return;
	}
	ret = recv_frame(p, &f);
	if (ret || f.type != NZ_FRAME_CHALLENGE) {
		tap_ok(0, "%s: CHALLENGE first (%d)", what, ret);
		peer_free(p);
		return;
	}
	nz_frame_init(&f, NZ_FRAME_HELLO);
	f.hello.incarnation = 1;
	f.hello.job_id = job;
	f.hello.src_rank = src;
	f.hello.dst_rank = dst;
	f.hello.rail = slot;
	f.hello.nrails = nrails;
	f.hello.unit = hello_unit;
	memset(f.hello.nonce_c, 0x5a, sizeof(f.hello.nonce_c));
	memset(f.hello.mac, 0xa5, sizeof(f.hello.mac));	/* no secret */
	ret = send_frame(p, &f);
	if (!ret)
		ret = recv_frame(p, &f);
	tap_ok(!ret && f.type == NZ_FRAME_CLOSE && f.close.reason == reason,
	       "%s: refused with CLOSE reason %u (%d, got %s %u)", what, reason,
	       ret, nz_wire_type_name(f.type), f.close.reason);
	ret = next_event(p, &e);
	tap_ok(!ret && e.type == RDMA_CM_EVENT_DISCONNECTED,
	       "%s: then disconnected (%s)", what,
	       ret ? strerror(-ret) : rdma_event_str(e.type));
	peer_free(p);
}

int main(int argc, char **argv)
{
	uint8_t garbage[56], req[REQ_LEN];
	size_t i;

	if (argc != 9) {
		fprintf(stderr, "usage: nz_rdma_hostile ADDR PORT JOB SLOT NRAILS UNIT SRC DST\n");
		return 2;
	}
	target.sin_family = AF_INET;
	target.sin_port = htons(atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &target.sin_addr) != 1)
		return 2;
	job = strtoull(argv[3], NULL, 16);
	slot = atoi(argv[4]);
	nrails = atoi(argv[5]);
	unit = atoi(argv[6]);
	src = atoi(argv[7]);
	dst = atoi(argv[8]);

	for (i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)(0xa5 ^ i);
	expect_reject("garbage private data", garbage, sizeof(garbage));
	expect_reject("no private data", NULL, 0);
	make_req(req, 3);
	expect_reject("private data with a bad chunk unit", req, sizeof(req));
	make_req(req, unit * 2);
	expect_reject_for("this job's connect request with another chunk unit",
			  req, sizeof(req), NZ_CLOSE_IDENTITY);
	strangers_budget();
	expect_close("HELLO without the job's secret", unit, NZ_CLOSE_AUTH);
	expect_close("HELLO that contradicts the connect request", unit * 2,
		     NZ_CLOSE_IDENTITY);
	tap_plan(tap_n);
	return tap_exit();
}
