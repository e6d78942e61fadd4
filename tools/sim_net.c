// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-sim's network: NICs, links and the module's scheduler
 * (Documentation/sim.rst, "The model").
 *
 * Every node has, per rail, one egress and one ingress NIC queue; a chunk
 * is serialised on the sender's egress (FIFO across its peers), crosses
 * the link in lat_ns, and is serialised again on the receiver's ingress
 * when several senders meet there.  Its acknowledgement comes back one
 * latency after the chunk arrived.  Per (node, peer) the connections pull
 * chunks as nezha.ko's do (sched.c: nz_sched_next_chunk): the glue --
 * lists, resend queue, which connection asks first -- is written here
 * again; the numbers that decide (windows, start-up costs, the rails a
 * message uses, the tail rule, the estimators) come from kmod/sched_est.c
 * and kmod/wire.c, compiled from the module's sources.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "sched_est.h"
#include "wire.h"

/* sched.c's defaults (module parameters). */
#define SIM_WINDOW_UNITS	8
#define SIM_TARGET_MS		20
#define SIM_TCP_RESTART_RTTS	3	/* transport_tcp.c: restart_rtts */
#define SIM_MSS_OVERHEAD	52	/* IPv4 + TCP with timestamps */
#define SIM_ETH_OVERHEAD	38	/* preamble, header, FCS, gap */

struct sim_chunk {
	struct sim_msg *m;
	uint64_t off;
	uint32_t len;
	uint64_t t_assign;
	bool first;
	bool delivered;
	struct sim_chunk *prev, *next;	/* conn's in-flight list or resend */
};

struct sim_msg {
	int src, dst;
	uint64_t len, key;
	uint64_t next_off;
	uint32_t nchunks, arrived, outstanding;
	bool assigned_all;
	uint32_t rail_mask;
	struct sim_msg *next;		/* the peer's send queue */
};

struct sim_list {
	struct sim_chunk *head, *tail;
};

struct sim_conn {
	struct nz_est est;
	uint64_t held;			/* assigned, not acknowledged */
	struct sim_list chunks;
	bool down;			/* the health code noticed */
	uint64_t dead_at;		/* the link died then; SIM_NEVER */
};

/* src's view of dst. */
struct sim_peer {
	struct sim_conn conn[SIM_MAX_RAILS];
	struct sim_msg *tx_head, *tx_tail;
	struct sim_list resend;
	uint32_t rr;			/* which rail pulls first */
};

enum sim_ev_kind { EV_ARRIVE, EV_ACK, EV_DETECT, EV_FN };

struct sim_ev {
	uint64_t t, seq;
	uint8_t kind;
	uint8_t rail;
	int src, dst;
	struct sim_chunk *ch;
	void (*fn)(void *, uint64_t);
	void *ctx;
	uint64_t arg;
};

struct sim_net {
	struct sim_cfg cfg;
	sim_msg_cb cb;
	void *ctx;
	uint64_t now, seq, rng;
	struct sim_peer *peers;		/* [src * nodes + dst] */
	uint64_t *egress, *ingress;	/* [node * nrails + rail]: free at */
	struct sim_ev *heap;
	size_t nev, cap;
	double eff;			/* payload share of the wire */
	struct sim_result st;
};

/* ---- events: a binary heap on (time, sequence) ---- */

static bool ev_before(const struct sim_ev *a, const struct sim_ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int ev_push(struct sim_net *n, struct sim_ev *e)
{
	size_t i;

	if (n->nev == n->cap) {
		size_t cap = n->cap ? 2 * n->cap : 1024;
		struct sim_ev *h = realloc(n->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		n->heap = h;
		n->cap = cap;
	}
	e->seq = n->seq++;
	for (i = n->nev++; i > 0; i = (i - 1) / 2) {
		if (!ev_before(e, &n->heap[(i - 1) / 2]))
			break;
		n->heap[i] = n->heap[(i - 1) / 2];
	}
	n->heap[i] = *e;
	return 0;
}

static void ev_pop(struct sim_net *n, struct sim_ev *out)
{
	struct sim_ev last = n->heap[--n->nev];
	size_t i = 0, c;

	*out = n->heap[0];
	for (;;) {
		c = 2 * i + 1;
		if (c >= n->nev)
			break;
		if (c + 1 < n->nev && ev_before(&n->heap[c + 1], &n->heap[c]))
			c++;
		if (!ev_before(&n->heap[c], &last))
			break;
		n->heap[i] = n->heap[c];
		i = c;
	}
	if (n->nev)
		n->heap[i] = last;
}

/* splitmix64: the same draws for the same seed. */
static double sim_rand(struct sim_net *n)
{
	uint64_t z = (n->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0;
}

/* ---- lists ---- */

static void list_add_tail(struct sim_list *l, struct sim_chunk *c)
{
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
}

static void list_del(struct sim_list *l, struct sim_chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->prev = c->next = NULL;
}

/* ---- configuration ---- */

void sim_cfg_init(struct sim_cfg *c)
{
	memset(c, 0, sizeof(*c));
	for (int r = 0; r < SIM_MAX_RAILS; r++) {
		c->rail[r].fail_ns = SIM_NEVER;
		c->rail[r].fail_node = -1;
	}
	c->mtu = 9000;
	/* Nezha-only bench-failover: gaps of 40-55 ms (health.rst). */
	c->detect_ns = 50000000;
	c->seed = 1;
	/* benchmarks.rst run 4: MPTCP 70.3 of the rails' 76.3 Mbit/s. */
	c->mptcp_overhead = 0.08;
	/* Linux's least retransmission timeout. */
	c->mptcp_stall_ns = 200000000;
	c->model = SIM_NEZHA;
	c->algo = -1;
}

uint32_t sim_auto_unit(const struct sim_cfg *c)
{
	double slow = 0;

	for (int r = 0; r < c->nrails; r++)
		if (!slow || c->rail[r].rate < slow)
			slow = c->rail[r].rate;
	/* The largest of 16/32/64 KiB the slowest link carries in 8 ms. */
	slow = slow * 8 / 1e6;		/* Mbit/s */
	if (slow < 33)
		return 16u << 10;
	if (slow < 66)
		return 32u << 10;
	return 64u << 10;
}

/* ---- links ---- */

static uint64_t link_dead_at(const struct sim_net *n, int a, int b, int r)
{
	const struct sim_rail_cfg *rc = &n->cfg.rail[r];

	if (rc->degrade || rc->fail_ns == SIM_NEVER)
		return SIM_NEVER;
	if (rc->fail_node >= 0 && rc->fail_node != a && rc->fail_node != b)
		return SIM_NEVER;
	return rc->fail_ns;
}

static bool link_degraded(const struct sim_net *n, int a, int b, int r)
{
	const struct sim_rail_cfg *rc = &n->cfg.rail[r];

	return rc->degrade && rc->fail_ns != SIM_NEVER &&
	       (rc->fail_node < 0 || rc->fail_node == a || rc->fail_node == b);
}

/* When bytes that start on (a -> b, rail r) at t are through a NIC. */
static uint64_t ser_end(const struct sim_net *n, int a, int b, int r,
			uint64_t t, double bytes)
{
	const struct sim_rail_cfg *rc = &n->cfg.rail[r];
	double rate = rc->rate * n->eff, left = bytes;
	uint64_t resume;

	if (!link_degraded(n, a, b, r))
		return t + (uint64_t)llround(bytes / rate * 1e9);
	/* MPTCP: full rate, a stall, then the survivors' rate. */
	if (t < rc->fail_ns) {
		double can = (double)(rc->fail_ns - t) / 1e9 * rate;

		if (left <= can)
			return t + (uint64_t)llround(left / rate * 1e9);
		left -= can;
		t = rc->fail_ns;
	}
	resume = rc->fail_ns + rc->stall_ns;
	if (t < resume)
		t = resume;
	return t + (uint64_t)llround(left / (rc->rate_after * n->eff) * 1e9);
}

/* ---- the scheduler (sched.c's glue around sched_est.c) ---- */

static struct sim_peer *peer_of(struct sim_net *n, int a, int b)
{
	return &n->peers[(size_t)a * n->cfg.nodes + b];
}

static bool conn_usable(const struct sim_conn *c)
{
	return !c->down;
}

static uint32_t usable_mask(const struct sim_net *n, const struct sim_peer *p)
{
	uint32_t m = 0;

	for (int r = 0; r < n->cfg.nrails; r++)
		if (conn_usable(&p->conn[r]))
			m |= 1u << r;
	return m;
}

static uint64_t conn_window(const struct sim_net *n, const struct sim_conn *c)
{
	uint32_t unit = n->cfg.unit;
	uint64_t w = (uint64_t)SIM_WINDOW_UNITS * unit;

	if (c->est.bw)
		w = nz_est_window(&c->est, SIM_TARGET_MS, unit);
	return w > unit ? w : unit;
}

/* The rail's transport's restart_rtts (ops->restart_rtts in the module). */
static uint32_t restart_rtts(const struct sim_net *n, int rail)
{
	return n->cfg.rail[rail].rdma ? 0 : SIM_TCP_RESTART_RTTS;
}

/* nz_sched_msg_new(): the rails a message sent to an idle peer uses. */
static void msg_pick_rails(struct sim_net *n, struct sim_peer *p,
			   struct sim_msg *m)
{
	struct nz_sched_cand c[SIM_MAX_RAILS], add;
	uint32_t cnt = 0, mask;

	m->rail_mask = (1u << n->cfg.nrails) - 1;
	if (p->tx_head)
		return;
	for (int r = 0; r < n->cfg.nrails; r++) {
		const struct sim_conn *conn = &p->conn[r];

		if (!conn_usable(conn))
			continue;
		add.slot = (u32)r;
		add.a = nz_est_start_ns(&conn->est, m->len,
					restart_rtts(n, r));
		add.bw = conn->est.bw;
		nz_est_cand_add(c, &cnt, &add);
	}
	if (cnt < 2)
		return;
	mask = nz_est_pick_rails(c, cnt, m->len, n->cfg.unit);
	if (mask)
		m->rail_mask = mask;
}

/* nz_sched_tail_defer(): the rule itself is sched_est.c's. */
static bool tail_defer(const struct sim_peer *p, int nrails, int slot,
		       uint64_t len)
{
	struct nz_est_conn c[SIM_MAX_RAILS];
	uint64_t need, rest = 0;

	for (int r = 0; r < nrails; r++) {
		c[r].usable = conn_usable(&p->conn[r]);
		c[r].bw = p->conn[r].est.bw;
		c[r].held = p->conn[r].held;
	}
	need = nz_est_tail_need(c, (u32)nrails, (u32)slot, len);
	if (!need)
		return false;
	for (const struct sim_msg *m = p->tx_head; m; m = m->next) {
		rest += m->len - m->next_off;
		if (rest >= need)
			return false;
	}
	return true;
}

static void conn_assigned(struct sim_net *n, struct sim_conn *c, int slot,
			  struct sim_chunk *ch)
{
	struct nz_est *e = &c->est;

	ch->t_assign = n->now;
	ch->first = nz_est_assign(e, n->now, c->held, ch->len,
				  restart_rtts(n, slot));
	if (e->state == NZ_SCHED_COLD)
		e->state = NZ_SCHED_HOT;
	list_add_tail(&c->chunks, ch);
	c->held += ch->len;
}

/* nz_sched_next_chunk(): NULL when conn takes nothing now. */
static struct sim_chunk *next_chunk(struct sim_net *n, struct sim_peer *p,
				    int slot)
{
	struct sim_conn *conn = &p->conn[slot];
	uint32_t unit = n->cfg.unit, usable = usable_mask(n, p);
	uint64_t window, len;
	struct sim_chunk *ch;
	bool full, first = true;

	if (!conn_usable(conn))
		return NULL;
	window = conn_window(n, conn);
	ch = p->resend.head;
	if (ch && conn->held < 2 * window) {
		list_del(&p->resend, ch);
		conn_assigned(n, conn, slot, ch);
		ch->first = false;
		return ch;
	}
	full = conn->held >= window ||
	       (window >= 2ULL * unit && conn->held + unit > window);
	if (full && ch) {
		conn->est.sample_limited = true;
		return NULL;
	}
	for (struct sim_msg *m = p->tx_head; m; m = m->next) {
		if (m->assigned_all)
			continue;
		if (!(m->rail_mask & (1u << slot)) && (m->rail_mask & usable))
			continue;
		if (full) {
			conn->est.sample_limited = true;
			return NULL;
		}
		len = nz_wire_chunk_len(m->len, m->next_off, 1, unit);
		if (first && (m->rail_mask & ~(1u << slot) & usable) &&
		    tail_defer(p, n->cfg.nrails, slot, len))
			return NULL;
		first = false;
		ch = calloc(1, sizeof(*ch));
		if (!ch)
			return NULL;
		ch->m = m;
		ch->off = m->next_off;
		ch->len = (uint32_t)len;
		m->next_off += len;
		m->assigned_all = m->next_off == m->len;
		m->outstanding++;
		conn_assigned(n, conn, slot, ch);
		return ch;
	}
	return NULL;
}

/* Put ch on the wire of (a -> b, rail r). */
static int transmit(struct sim_net *n, int a, int b, int r,
		    struct sim_chunk *ch)
{
	const struct sim_rail_cfg *rc = &n->cfg.rail[r];
	uint64_t *eg = &n->egress[(size_t)a * n->cfg.nrails + r];
	uint64_t *in = &n->ingress[(size_t)b * n->cfg.nrails + r];
	double wire = (double)ch->len + (n->cfg.mtu ? NZ_WIRE_HDR_LEN : 0);
	uint64_t start = *eg > n->now ? *eg : n->now, end, rx, rtt;
	uint32_t pkts, lost = 0;
	struct sim_ev e = { .kind = EV_ARRIVE, .rail = (uint8_t)r,
			    .src = a, .dst = b, .ch = ch };

	end = ser_end(n, a, b, r, start, wire);
	if (rc->loss > 0) {
		/* TCP: a lost packet costs a round trip of recovery;
		 * RDMA (go-back-N): a round trip and the chunk again. */
		pkts = n->cfg.mtu ? (uint32_t)(wire / (n->cfg.mtu - SIM_MSS_OVERHEAD)) + 1 : 1;
		for (uint32_t i = 0; i < pkts; i++)
			lost += sim_rand(n) < rc->loss;
		rtt = 2 * rc->lat_ns;
		for (uint32_t i = 0; i < lost; i++)
			end = rc->rdma ? ser_end(n, a, b, r, end + rtt, wire) :
					 end + rtt;
	}
	*eg = end;
	rx = end + rc->lat_ns;
	/* The receiver's NIC: busy with other senders' bytes? */
	if (*in + (end - start) > rx)
		rx = *in + (end - start);
	*in = rx;
	n->st.rail_bytes[r] += ch->len;
	e.t = rx;
	return ev_push(n, &e);
}

static void pump(struct sim_net *n, int a, int b)
{
	struct sim_peer *p = peer_of(n, a, b);
	int R = n->cfg.nrails;
	bool more = true;

	while (more) {
		more = false;
		for (int i = 0; i < R; i++) {
			int r = (int)((p->rr + (uint32_t)i) % (uint32_t)R);
			struct sim_chunk *ch = next_chunk(n, p, r);

			if (!ch)
				continue;
			if (transmit(n, a, b, r, ch))
				return;
			more = true;
		}
		p->rr++;
	}
}

/* ---- events ---- */

static void on_arrive(struct sim_net *n, const struct sim_ev *e)
{
	const struct sim_rail_cfg *rc = &n->cfg.rail[e->rail];
	struct sim_conn *c = &peer_of(n, e->src, e->dst)->conn[e->rail];
	struct sim_chunk *ch = e->ch;
	struct sim_ev ack = *e;

	if (c->dead_at <= n->now)
		return;			/* lost with the link; ch may be gone */
	if (!ch->delivered) {
		ch->delivered = true;
		if (++ch->m->arrived == ch->m->nchunks)
			n->cb(n->ctx, ch->m, true);
	}
	ack.kind = EV_ACK;
	ack.t = n->now + rc->lat_ns;
	ev_push(n, &ack);
}

static void on_ack(struct sim_net *n, const struct sim_ev *e)
{
	struct sim_peer *p = peer_of(n, e->src, e->dst);
	struct sim_conn *c = &p->conn[e->rail];
	struct sim_chunk *ch = e->ch;
	struct sim_msg *m = ch->m, **pp;

	if (c->dead_at <= n->now || c->down)
		return;
	list_del(&c->chunks, ch);
	c->held -= ch->len;
	if (nz_est_acked(&c->est, n->now, ch->len, ch->first, ch->t_assign,
			 n->cfg.unit, !c->held))
		c->est.state = NZ_SCHED_HOT;
	free(ch);
	if (!--m->outstanding && m->assigned_all) {
		for (pp = &p->tx_head; *pp != m; pp = &(*pp)->next)
			;
		*pp = m->next;
		if (p->tx_tail == m) {
			p->tx_tail = NULL;
			for (struct sim_msg *x = p->tx_head; x; x = x->next)
				p->tx_tail = x;
		}
		n->cb(n->ctx, m, false);
		free(m);
	}
	pump(n, e->src, e->dst);
}

/* The health code noticed: the dead connections' chunks are resent. */
static void on_detect(struct sim_net *n, const struct sim_ev *e)
{
	int N = n->cfg.nodes;

	for (int a = 0; a < N; a++)
		for (int b = 0; b < N; b++) {
			struct sim_peer *p = peer_of(n, a, b);
			struct sim_conn *c = &p->conn[e->rail];
			struct sim_chunk *ch;

			if (a == b || c->down || c->dead_at > n->now)
				continue;
			c->down = true;
			while ((ch = c->chunks.head)) {
				list_del(&c->chunks, ch);
				list_add_tail(&p->resend, ch);
				n->st.resent++;
			}
			c->held = 0;
		}
	for (int a = 0; a < N; a++)
		for (int b = 0; b < N; b++)
			if (a != b)
				pump(n, a, b);
}

/* ---- API ---- */

struct sim_net *sim_net_new(const struct sim_cfg *cfg, sim_msg_cb cb,
			    void *ctx)
{
	struct sim_net *n = calloc(1, sizeof(*n));
	size_t N = (size_t)cfg->nodes;
	uint32_t rtt_us;

	if (!n)
		return NULL;
	n->cfg = *cfg;
	if (!n->cfg.unit)
		n->cfg.unit = sim_auto_unit(cfg);
	n->cb = cb;
	n->ctx = ctx;
	n->rng = cfg->seed;
	n->eff = cfg->mtu ? (double)(cfg->mtu - SIM_MSS_OVERHEAD) /
			    (cfg->mtu + SIM_ETH_OVERHEAD) : 1.0;
	n->peers = calloc(N * N, sizeof(*n->peers));
	n->egress = calloc(N * cfg->nrails, sizeof(*n->egress));
	n->ingress = calloc(N * cfg->nrails, sizeof(*n->ingress));
	if (!n->peers || !n->egress || !n->ingress) {
		sim_net_free(n);
		return NULL;
	}
	for (size_t a = 0; a < N; a++)
		for (size_t b = 0; b < N; b++)
			for (int r = 0; r < cfg->nrails; r++) {
				struct sim_conn *c = &n->peers[a * N + b].conn[r];

				c->dead_at = SIM_NEVER;
				/* Gloo: one NIC per collective. */
				c->down = cfg->model == SIM_GLOO && r;
				/* The heartbeats measured the path already. */
				rtt_us = (uint32_t)(2 * cfg->rail[r].lat_ns / 1000);
				c->est.min_rtt_us = rtt_us ? rtt_us : 1;
				c->est.srtt_us = c->est.min_rtt_us;
			}
	return n;
}

void sim_net_free(struct sim_net *n)
{
	size_t N;

	if (!n)
		return;
	N = (size_t)n->cfg.nodes;
	if (n->peers) {
		for (size_t i = 0; i < N * N; i++) {
			struct sim_peer *p = &n->peers[i];
			struct sim_chunk *ch;
			struct sim_msg *m;

			for (int r = 0; r < n->cfg.nrails; r++)
				while ((ch = p->conn[r].chunks.head)) {
					list_del(&p->conn[r].chunks, ch);
					free(ch);
				}
			while ((ch = p->resend.head)) {
				list_del(&p->resend, ch);
				free(ch);
			}
			while ((m = p->tx_head)) {
				p->tx_head = m->next;
				free(m);
			}
		}
	}
	free(n->peers);
	free(n->egress);
	free(n->ingress);
	free(n->heap);
	free(n);
}

int sim_arm_failures(struct sim_net *n, uint64_t t0)
{
	size_t N = (size_t)n->cfg.nodes;

	for (int r = 0; r < n->cfg.nrails; r++) {
		struct sim_rail_cfg *rc = &n->cfg.rail[r];
		struct sim_ev e = { .kind = EV_DETECT, .rail = (uint8_t)r };

		if (rc->fail_ns == SIM_NEVER)
			continue;
		/* From now on the configured time is absolute. */
		rc->fail_ns += t0;
		if (rc->degrade)
			continue;
		for (size_t a = 0; a < N; a++)
			for (size_t b = 0; b < N; b++)
				n->peers[a * N + b].conn[r].dead_at =
					link_dead_at(n, (int)a, (int)b, r);
		e.t = rc->fail_ns + n->cfg.detect_ns;
		if (ev_push(n, &e))
			return -ENOMEM;
	}
	return 0;
}

uint64_t sim_now(const struct sim_net *n)
{
	return n->now;
}

struct sim_msg *sim_send(struct sim_net *n, int src, int dst, uint64_t len,
			 uint64_t key)
{
	struct sim_peer *p = peer_of(n, src, dst);
	struct sim_msg *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->src = src;
	m->dst = dst;
	m->len = len;
	m->key = key;
	m->nchunks = len ? (uint32_t)((len + n->cfg.unit - 1) / n->cfg.unit) : 1;
	msg_pick_rails(n, p, m);
	if (p->tx_tail)
		p->tx_tail->next = m;
	else
		p->tx_head = m;
	p->tx_tail = m;
	pump(n, src, dst);
	return m;
}

int sim_msg_src(const struct sim_msg *m)
{
	return m->src;
}

int sim_msg_dst(const struct sim_msg *m)
{
	return m->dst;
}

uint64_t sim_msg_len(const struct sim_msg *m)
{
	return m->len;
}

uint64_t sim_msg_key(const struct sim_msg *m)
{
	return m->key;
}

int sim_at(struct sim_net *n, uint64_t t, void (*fn)(void *, uint64_t),
	   void *ctx, uint64_t arg)
{
	struct sim_ev e = { .t = t, .kind = EV_FN, .fn = fn, .ctx = ctx,
			    .arg = arg };

	return ev_push(n, &e);
}

void sim_run(struct sim_net *n)
{
	struct sim_ev e;

	while (n->nev) {
		ev_pop(n, &e);
		n->now = e.t;
		switch (e.kind) {
		case EV_ARRIVE:
			on_arrive(n, &e);
			break;
		case EV_ACK:
			on_ack(n, &e);
			break;
		case EV_DETECT:
			on_detect(n, &e);
			break;
		default:
			e.fn(e.ctx, e.arg);
			break;
		}
	}
}

bool sim_stuck(const struct sim_net *n)
{
	size_t N = (size_t)n->cfg.nodes;

	for (size_t i = 0; i < N * N; i++)
		if (n->peers[i].tx_head)
			return true;
	return false;
}

void sim_stats(const struct sim_net *n, struct sim_result *r)
{
	memcpy(r->rail_bytes, n->st.rail_bytes, sizeof(r->rail_bytes));
	r->resent = n->st.resent;
}
