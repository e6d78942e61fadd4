// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libnezha: a rank's side of the aggregation rail (agg_client.h).
 *
 * Join: HELLO -> CHALLENGE (a cookie for our address) -> JOIN (cookie,
 * MAC under the job key) -> ACCEPT (MAC over our nonce) or REFUSE.  Each
 * step is sent again every rto until timeout: a lost packet costs one rto.
 *
 * Allreduce: blocks of one packet, numbered for the whole life of the job
 * (seq), so that every rank names the same block with the same number.
 * Block seq may be sent once the result of block seq - window is here:
 * that is the node's rule for reusing a slot.  A block whose result is
 * not back after the retransmission timeout is sent again -- the node adds
 * it once and, when the result was what got lost, answers with the result
 * it kept.
 *
 * The timeout follows the measured round trip, as TCP's does (RFC 6298:
 * srtt + 4 rttvar, from blocks sent once only, Karn's rule), with
 * cfg.rto_ms as its first value and floor, and doubles after a round of
 * timeouts (at most NZA_RTO_MAX_US).  A fixed 20 ms made busy guests
 * resend six times what they sent, each resend a MAC and a packet more
 * for the node and the rank: on a slow path a short fixed timeout feeds
 * on itself.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg_client.h"
#include "agg_wire.h"
#include "internal.h"
#include "reduce.h"

#define NZA_RTO_MAX_US	200000
#define NZA_BATCH	32	/* packets per sendmmsg / recvmmsg */

struct nzi_agg {
	struct nzi_agg_cfg cfg;		/* node, local: at node_ss, local_ss */
	struct sockaddr_storage node_ss, local_ss;
	uint8_t key[NZA_KEY_LEN];
	int fd;
	uint32_t handle;
	uint16_t window;
	bool broken;
	atomic_bool cancel;		/* nzi_agg_cancel(), another thread */
	uint64_t next_seq;		/* the job's next block */
	struct nza_data_key data;
	struct nzi_agg_stats st;
	uint64_t tx_n, rx_n;		/* for the drop hooks */
	int64_t *deadline;		/* per slot of the window: resend at (us) */
	int64_t *sent;			/* per slot: first sent at (us) */
	bool *resent;			/* per slot: sent more than once */
	bool *done;			/* per slot: the result is in */
	int64_t srtt, rttvar, rto;	/* us; srtt 0: no sample yet */
	int64_t backed_off;		/* us: when rto last doubled */
	uint8_t pkt[NZA_PKT_MAX + 1];
	/* Data packets go out, and results come in, in batches. */
	unsigned int ntx;
	size_t txlen[NZA_BATCH];
	uint8_t txb[NZA_BATCH][NZA_PKT_MAX];
	uint8_t rxb[NZA_BATCH][NZA_PKT_MAX + 1];
};

/* A send's errno that means a packet lost, as a network loses one: the
 * protocol sends it again. */
static bool send_lost(int err)
{
	return err == ECONNREFUSED || err == ENOBUFS || err == EAGAIN;
}

static int send_pkt(struct nzi_agg *a, size_t len)
{
	if (send(a->fd, a->pkt, len, 0) < 0 && !send_lost(errno))
		return -errno;
	return 0;
}

/*
 * Wait up to ms for datagrams: up to max (at most NZA_BATCH) into a->rxb,
 * their lengths in len[]; how many (0 on timeout) or -errno.
 */
static int recv_batch(struct nzi_agg *a, int ms, size_t *len, unsigned int max)
{
	struct pollfd p = { .fd = a->fd, .events = POLLIN };
	struct mmsghdr msgs[NZA_BATCH];
	struct iovec iov[NZA_BATCH];
	int n;

	for (unsigned int i = 0; i < max; i++) {
		iov[i] = (struct iovec){ a->rxb[i], sizeof(a->rxb[i]) };
		msgs[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
	}
	for (;;) {
		n = recvmmsg(a->fd, msgs, max, MSG_DONTWAIT, NULL);
		if (n > 0)
			break;
		if (n < 0 && (errno == ECONNREFUSED || errno == EINTR))
			continue;	/* an ICMP error of an earlier send */
		if (n < 0 && errno != EAGAIN)
			return -errno;
		if (ms <= 0)
			return 0;
		n = poll(&p, 1, ms);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			return 0;
	}
	for (int i = 0; i < n; i++)
		len[i] = msgs[i].msg_len;
	return n;
}

/* Wait up to ms for a datagram into a->pkt; its length, 0 on timeout. */
static ssize_t recv_pkt(struct nzi_agg *a, int ms)
{
	size_t len;
	int n = recv_batch(a, ms, &len, 1);

	if (n <= 0)
		return n;
	memcpy(a->pkt, a->rxb[0], len);
	return (ssize_t)len;
}

static int refusal_errno(uint16_t reason)
{
	return reason == NZA_R_NO_SLOTS || reason == NZA_R_NO_JOBS ? -ENOSPC : -EINVAL;
}

/* One answer to our JOIN: 1 accepted, 0 keep waiting, or -errno (final). */
static int join_answer(struct nzi_agg *a, const uint8_t *nonce, size_t len, bool *unknown_key)
{
	uint8_t mac[NZI_SHA256_LEN];
	struct nza_accept acc;
	struct nza_refuse ref;

	if (!nza_decode_refuse(a->pkt, len, &ref) && ref.job_id == a->cfg.job_id) {
		nza_refuse_mac(a->key, nonce, a->pkt, mac);
		if (nzi_mac_equal(mac, ref.mac, sizeof(mac)))
			return refusal_errno(ref.reason);
		/* Unauthenticated: anyone could have sent it; advice only. */
		*unknown_key |= ref.reason == NZA_R_UNKNOWN_KEY;
		return 0;
	}
	if (nza_decode_accept(a->pkt, len, &acc) || acc.job_id != a->cfg.job_id ||
	    acc.rank != a->cfg.rank || acc.nranks != a->cfg.nranks ||
	    acc.slots != a->cfg.window)
		return 0;
	nza_accept_mac(a->key, nonce, a->pkt, mac);
	if (!nzi_mac_equal(mac, acc.mac, sizeof(mac))) {
		a->st.drop_mac++;
		return 0;
	}
	a->handle = acc.handle;
	a->window = acc.slots;
	nza_data_key(a->key, a->cfg.job_id, acc.session, &a->data);
	return 1;
}

static int join_exchange(struct nzi_agg *a)
{
	int64_t end = nzi_now_ms() + a->cfg.timeout_ms;
	struct nza_join jn = { .job_id = a->cfg.job_id, .rank = a->cfg.rank,
			       .nranks = a->cfg.nranks, .slots = a->cfg.window };
	struct nza_hello h;
	bool have_cookie = false, unknown_key = false;
	int ret;

	nza_key_id(a->key, jn.key_id);
	if ((ret = nzi_random(h.nonce, sizeof(h.nonce))) ||
	    (ret = nzi_random(jn.nonce, sizeof(jn.nonce))))
		return ret;
	while (nzi_now_ms() < end) {
		int64_t wait_end = nzi_now_ms() + a->cfg.rto_ms;
		struct nza_challenge c;
		ssize_t n;

		if (a->cfg.abort && atomic_load(a->cfg.abort))
			return -ECANCELED;
		a->st.join_tries++;
		if (!have_cookie) {
			ret = send_pkt(a, nza_encode_hello(a->pkt, &h));
		} else {
			nza_encode_join(a->pkt, &jn);
			nza_join_mac(a->key, a->pkt, jn.mac);
			ret = send_pkt(a, nza_encode_join(a->pkt, &jn));
		}
		if (ret)
			return ret;
		while ((n = recv_pkt(a, (int)(wait_end - nzi_now_ms()))) > 0) {
			if (!have_cookie) {
				if (nza_decode_challenge(a->pkt, n, &c) ||
				    memcmp(c.nonce, h.nonce, sizeof(h.nonce)))
					continue;
				memcpy(jn.cookie, c.cookie, sizeof(jn.cookie));
				have_cookie = true;
				break;	/* JOIN at once */
			}
			ret = join_answer(a, jn.nonce, n, &unknown_key);
			if (ret)
				return ret < 0 ? ret : 0;
		}
		if (n < 0)
			return (int)n;
	}
	return unknown_key ? -EKEYREJECTED : -ETIMEDOUT;
}

int nzi_agg_join(const struct nzi_agg_cfg *cfg, struct nzi_agg **out)
{
	struct nzi_agg *a;
	int ret;

	if (!cfg || !out || !cfg->node || !cfg->key || !cfg->nranks ||
	    cfg->nranks > NZA_MAX_RANKS || cfg->rank >= cfg->nranks || !cfg->window ||
	    cfg->window > NZA_MAX_WINDOW || cfg->node_len > sizeof(a->node_ss) ||
	    (cfg->local && cfg->local_len > sizeof(a->local_ss)))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	atomic_init(&a->cancel, false);
	a->cfg = *cfg;
	a->cfg.key = NULL;
	memcpy(&a->node_ss, cfg->node, cfg->node_len);
	a->cfg.node = (const struct sockaddr *)&a->node_ss;
	if (cfg->local) {
		memcpy(&a->local_ss, cfg->local, cfg->local_len);
		a->cfg.local = (const struct sockaddr *)&a->local_ss;
	}
	if (!a->cfg.rto_ms)
		a->cfg.rto_ms = 20;
	if (!a->cfg.timeout_ms)
		a->cfg.timeout_ms = 10000;
	memcpy(a->key, cfg->key, NZA_KEY_LEN);
	a->rto = (int64_t)a->cfg.rto_ms * 1000;
	a->deadline = calloc(cfg->window, sizeof(*a->deadline));
	a->sent = calloc(cfg->window, sizeof(*a->sent));
	a->resent = calloc(cfg->window, sizeof(*a->resent));
	a->done = calloc(cfg->window, sizeof(*a->done));
	a->fd = socket(cfg->node->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (!a->deadline || !a->sent || !a->resent || !a->done || a->fd < 0) {
		ret = a->fd < 0 ? -errno : -ENOMEM;
		goto out_free;
	}
	/* From the aggregation rail's address: out by its device. */
	if (cfg->local && bind(a->fd, cfg->local, cfg->local_len)) {
		ret = -errno;
		goto out_free;
	}
	/* connect(): the kernel hands us only the node's datagrams. */
	if (connect(a->fd, cfg->node, cfg->node_len)) {
		ret = -errno;
		goto out_free;
	}
	ret = join_exchange(a);
	if (ret)
		goto out_free;
	*out = a;
	return 0;

out_free:
	if (a->fd >= 0)
		close(a->fd);
	free(a->deadline);
	free(a->sent);
	free(a->resent);
	free(a->done);
	nzi_wipe(a, sizeof(*a));
	free(a);
	return ret;
}

int nzi_agg_rejoin(struct nzi_agg *a)
{
	if (!a)
		return -EINVAL;
	return a->broken ? -EPIPE : join_exchange(a);
}

void nzi_agg_tmpl_set(struct nzi_agg_tmpl *t, const struct nzi_agg_cfg *cfg)
{
	memset(t, 0, sizeof(*t));
	t->cfg = *cfg;
	t->cfg.drop_tx_every = t->cfg.drop_rx_every = t->cfg.drop_rx_after = 0;
	if (cfg->node && cfg->node_len <= sizeof(t->node)) {
		memcpy(&t->node, cfg->node, cfg->node_len);
		t->cfg.node = (const struct sockaddr *)&t->node;
	} else {
		t->cfg.node = NULL;	/* nzi_agg_join() refuses it */
	}
	if (cfg->local && cfg->local_len <= sizeof(t->local)) {
		memcpy(&t->local, cfg->local, cfg->local_len);
		t->cfg.local = (const struct sockaddr *)&t->local;
	} else {
		t->cfg.local = NULL;
	}
	if (cfg->key) {
		memcpy(t->key, cfg->key, sizeof(t->key));
		t->cfg.key = t->key;
	}
}

void nzi_agg_tmpl_of(struct nzi_agg_tmpl *t, const struct nzi_agg *a)
{
	struct nzi_agg_cfg cfg = a->cfg;

	cfg.key = a->key;
	nzi_agg_tmpl_set(t, &cfg);
}

static int wire_dtype(enum nz_dtype dt)
{
	switch (dt) {
	case NZ_FLOAT32: return NZA_F32;
	case NZ_FLOAT16: return NZA_F16;
	case NZ_BFLOAT16: return NZA_BF16;
	case NZ_INT32: return NZA_I32;
	default: return -EOPNOTSUPP;
	}
}

static int wire_op(enum nz_redop op)
{
	switch (op) {
	case NZ_SUM:
	case NZ_AVG: return NZA_OP_SUM;
	case NZ_MIN: return NZA_OP_MIN;
	case NZ_MAX: return NZA_OP_MAX;
	default: return -EOPNOTSUPP;
	}
}

/* One allreduce's blocks: block i holds elements [i * per, ...). */
struct agg_xfer {
	uint8_t *buf;
	size_t count, nblocks, per, lo, hi;
	uint64_t base;
	uint8_t dtype, op;
	unsigned int esize;
};

static uint16_t block_count(const struct agg_xfer *x, size_t i)
{
	size_t left = x->count - i * x->per;

	return (uint16_t)(left < x->per ? left : x->per);
}

/* Send the data packets queued: one sendmmsg for up to NZA_BATCH. */
static int flush_tx(struct nzi_agg *a)
{
	struct mmsghdr msgs[NZA_BATCH];
	struct iovec iov[NZA_BATCH];
	unsigned int done = 0;

	for (unsigned int i = 0; i < a->ntx; i++) {
		iov[i] = (struct iovec){ a->txb[i], a->txlen[i] };
		msgs[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
	}
	while (done < a->ntx) {
		int n = sendmmsg(a->fd, msgs + done, a->ntx - done, 0);

		if (n > 0) {
			done += (unsigned int)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && !send_lost(errno)) {
			a->ntx = 0;
			return -errno;
		} else {
			done++;	/* a packet the network lost: sent again later */
		}
	}
	a->ntx = 0;
	return 0;
}

static int send_block(struct nzi_agg *a, const struct agg_xfer *x, size_t i, bool again)
{
	uint8_t *pkt = a->txb[a->ntx];
	struct nza_data d = {
		.type = NZA_DATA, .handle = a->handle, .rank = a->cfg.rank,
		.count = block_count(x, i), .dtype = x->dtype, .op = x->op, .seq = x->base + i,
		.payload = pkt + NZA_DATA_HDR_LEN,
	};
	int64_t now = nzi_now_us();
	size_t len;

	a->deadline[i % a->window] = now + a->rto;
	if (again) {
		a->resent[i % a->window] = true;
	} else {
		a->sent[i % a->window] = now;
		a->resent[i % a->window] = false;
	}
	a->st.data_sent++;
	if (a->cfg.drop_tx_every && ++a->tx_n % a->cfg.drop_tx_every == 0) {
		a->st.drop_injected++;
		return 0;
	}
	nza_to_wire(pkt + NZA_DATA_HDR_LEN, x->buf + i * x->per * x->esize, d.count, x->esize);
	len = nza_encode_data(pkt, &d);
	nza_data_seal(&a->data, pkt, len);
	a->txlen[a->ntx++] = len;
	return a->ntx == NZA_BATCH ? flush_tx(a) : 0;
}

/* RFC 6298's estimator, in microseconds. */
static void rtt_sample(struct nzi_agg *a, int64_t r)
{
	int64_t floor = (int64_t)a->cfg.rto_ms * 1000;

	if (r < 1)
		r = 1;
	if (!a->srtt) {
		a->srtt = r;
		a->rttvar = r / 2;
	} else {
		int64_t err = a->srtt > r ? a->srtt - r : r - a->srtt;

		a->rttvar += (err - a->rttvar) / 4;
		a->srtt += (r - a->srtt) / 8;
	}
	a->rto = a->srtt + 4 * a->rttvar;
	if (a->rto < floor)
		a->rto = floor;
	if (a->rto > NZA_RTO_MAX_US)
		a->rto = NZA_RTO_MAX_US;
	a->st.rtt_us = (uint64_t)a->srtt;
	a->st.rto_us = (uint64_t)a->rto;
}

/* A datagram of len bytes in pkt: the result of an outstanding block? */
static void take_result(struct nzi_agg *a, struct agg_xfer *x, const uint8_t *pkt, size_t len)
{
	struct nza_data d;
	size_t i;

	if (nza_decode_data(pkt, len, &d) || d.type != NZA_RESULT || d.handle != a->handle) {
		a->st.drop_malformed++;
		return;
	}
	if (!nza_data_mac_ok(&a->data, pkt, len)) {
		a->st.drop_mac++;
		return;
	}
	++a->rx_n;
	if ((a->cfg.drop_rx_every && a->rx_n % a->cfg.drop_rx_every == 0) ||
	    (a->cfg.drop_rx_after && a->rx_n > a->cfg.drop_rx_after)) {
		a->st.drop_injected++;
		return;
	}
	i = d.seq - x->base;
	if (d.seq < x->base + x->lo || d.seq >= x->base + x->hi || a->done[i % a->window] ||
	    d.dtype != x->dtype || d.op != x->op || d.count != block_count(x, i)) {
		a->st.results_stray++;	/* a duplicate, or of a block past */
		return;
	}
	nza_from_wire(x->buf + i * x->per * x->esize, d.payload, d.count, x->esize);
	a->done[i % a->window] = true;
	a->st.results++;
	if (!a->resent[i % a->window])
		rtt_sample(a, nzi_now_us() - a->sent[i % a->window]);
}

static int xfer_run(struct nzi_agg *a, struct agg_xfer *x)
{
	int64_t progress = nzi_now_us(), tmo = (int64_t)a->cfg.timeout_ms * 1000;
	int ret;

	while (x->lo < x->nblocks) {
		int64_t now = nzi_now_us(), next = now + a->rto;
		size_t len[NZA_BATCH];
		bool timed_out = false;
		int n;

		if (atomic_load_explicit(&a->cancel, memory_order_relaxed))
			return -ECANCELED;

		while (x->hi < x->nblocks && x->hi - x->lo < a->window) {
			a->done[x->hi % a->window] = false;
			if ((ret = send_block(a, x, x->hi++, false)))
				return ret;
		}
		for (size_t i = x->lo; i < x->hi; i++) {
			int64_t dl = a->deadline[i % a->window];

			if (a->done[i % a->window])
				continue;
			if (dl <= now) {
				a->st.retransmits++;
				timed_out = true;
				if ((ret = send_block(a, x, i, true)))
					return ret;
				dl = a->deadline[i % a->window];
			}
			if (dl < next)
				next = dl;
		}
		/* Back off, at most once a timeout: the blocks of one window
		 * time out one after the other. */
		if (timed_out && a->rto < NZA_RTO_MAX_US && now - a->backed_off >= a->rto) {
			a->rto = 2 * a->rto < NZA_RTO_MAX_US ? 2 * a->rto : NZA_RTO_MAX_US;
			a->backed_off = now;
			a->st.rto_us = (uint64_t)a->rto;
		}
		if ((ret = flush_tx(a)))
			return ret;
		n = recv_batch(a, (int)((next - now + 999) / 1000), len, NZA_BATCH);
		if (n < 0)
			return n;
		for (int k = 0; k < n; k++)
			take_result(a, x, a->rxb[k], len[k]);
		if (a->done[x->lo % a->window])
			progress = nzi_now_us();
		while (x->lo < x->hi && a->done[x->lo % a->window])
			x->lo++;
		if (nzi_now_us() - progress > tmo)
			return -ETIMEDOUT;
	}
	return 0;
}

int nzi_agg_allreduce(struct nzi_agg *a, void *buf, size_t count, enum nz_dtype dtype,
		      enum nz_redop op)
{
	struct agg_xfer x = { .buf = buf, .count = count, .base = a ? a->next_seq : 0 };
	int wd = wire_dtype(dtype), wo = wire_op(op), ret;

	if (!a || (!buf && count))
		return -EINVAL;
	if (wd < 0 || wo < 0)
		return -EOPNOTSUPP;
	if (a->broken)
		return -EPIPE;
	if (!count)
		return 0;
	x.dtype = (uint8_t)wd;
	x.op = (uint8_t)wo;
	x.esize = nza_dtype_size(x.dtype);
	x.per = nza_dtype_elems(x.dtype);
	x.nblocks = (count + x.per - 1) / x.per;
	ret = xfer_run(a, &x);
	a->next_seq += x.nblocks;
	if (ret) {
		a->broken = true;	/* the ranks no longer agree on seq */
		return ret;
	}
	if (op == NZ_AVG)
		return nz_reduce_finish_avg(buf, count, dtype, a->cfg.nranks);
	return 0;
}

void nzi_agg_cancel(struct nzi_agg *a)
{
	if (a)
		atomic_store(&a->cancel, true);
}

unsigned int nzi_agg_window(const struct nzi_agg *a)
{
	return a->window;
}

const struct nzi_agg_stats *nzi_agg_stats(const struct nzi_agg *a)
{
	return &a->st;
}

void nzi_agg_close(struct nzi_agg *a)
{
	struct nza_data d;
	size_t len;

	if (!a)
		return;
	d = (struct nza_data){ .type = NZA_LEAVE, .handle = a->handle, .rank = a->cfg.rank,
			       .seq = a->next_seq };
	len = nza_encode_data(a->pkt, &d);
	nza_data_seal(&a->data, a->pkt, len);
	send_pkt(a, len);
	close(a->fd);
	free(a->deadline);
	free(a->sent);
	free(a->resent);
	free(a->done);
	nzi_wipe(a, sizeof(*a));
	free(a);
}
