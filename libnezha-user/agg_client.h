/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libnezha internal: a rank's side of the aggregation rail
 * (Documentation/aggregation.rst).  Join a job at an aggregation node
 * (nezha-aggd), then allreduce buffers through it: the buffer goes out in
 * blocks of one packet, at most a window of them outstanding, each
 * retransmitted when its result is late, and the results are written back
 * in place.  This is what the rail of the module and the library's split
 * will call; not exported from libnezha.so.
 *
 * Every rank of the job must call nzi_agg_allreduce() with the same count,
 * dtype and op, in the same order (as for any collective).  Not thread
 * safe: one thread per struct nzi_agg.
 */
#ifndef NEZHA_AGG_CLIENT_H
#define NEZHA_AGG_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nezha_dtype.h"

struct nzi_agg_cfg {
	const struct sockaddr *node;	/* the node's UDP address */
	socklen_t node_len;
	const struct sockaddr *local;	/* NULL, or the address to send from */
	socklen_t local_len;
	const uint8_t *key;		/* the job key, NZ_JOB_KEY_LEN bytes */
	uint64_t job_id;		/* the same on every rank of the job */
	uint16_t rank, nranks;
	uint16_t window;		/* slots to ask for: blocks in flight */
	unsigned int rto_ms;		/* first and least retransmission timeout
					 * (0: 20); then the measured round trip's */
	unsigned int timeout_ms;	/* no progress this long: -ETIMEDOUT (0: 10000) */
	const atomic_bool *abort;	/* NULL, or set: the join ends (-ECANCELED) */
	/* Tests only: lose every Nth DATA sent / RESULT received, and every
	 * RESULT after the first drop_rx_after (0: none). */
	unsigned int drop_tx_every, drop_rx_every, drop_rx_after;
};

struct nzi_agg_stats {
	uint64_t data_sent, retransmits, results, results_stray;
	uint64_t drop_mac, drop_malformed, drop_injected;
	uint64_t join_tries;
	uint64_t rtt_us, rto_us;	/* smoothed round trip, timeout now */
};

struct nzi_agg;

/*
 * A join's configuration kept for later joins (a communicator coming back
 * to a node after it stopped using it): the addresses and the key copied
 * in, cfg's pointers aimed at them, the tests' drop hooks cleared.  It
 * points into itself: set it where it stays, do not copy it.
 */
struct nzi_agg_tmpl {
	struct nzi_agg_cfg cfg;
	struct sockaddr_storage node, local;
	uint8_t key[32];		/* NZ_JOB_KEY_LEN */
};

void nzi_agg_tmpl_set(struct nzi_agg_tmpl *t, const struct nzi_agg_cfg *cfg);
/* The configuration a was joined with. */
void nzi_agg_tmpl_of(struct nzi_agg_tmpl *t, const struct nzi_agg *a);

/*
 * Join cfg->job_id at the node.  Returns 0 and *out, or -errno:
 * -ENOSPC   the node refused: no free slots or jobs (it said so under the key)
 * -EINVAL   a bad cfg, or the node refused this window or size for the job
 * -EKEYREJECTED  the node does not hold the job's key (after timeout_ms)
 * -ETIMEDOUT     no answer within timeout_ms
 */
int nzi_agg_join(const struct nzi_agg_cfg *cfg, struct nzi_agg **out);

/*
 * buf[i] = the reduction over all ranks of their buf[i], for i < count.
 * dtype: NZ_FLOAT32, NZ_FLOAT16, NZ_BFLOAT16 or NZ_INT32; op: NZ_SUM,
 * NZ_MIN, NZ_MAX or NZ_AVG (the sum, divided here).  Returns 0, -EINVAL,
 * -EOPNOTSUPP (another dtype or op), -ETIMEDOUT (no progress for
 * timeout_ms: the node or a rank is gone; buf is then partly reduced and
 * the struct is of no further use: -EPIPE), -ECANCELED (nzi_agg_cancel(),
 * the same) or a socket's -errno.
 */
int nzi_agg_allreduce(struct nzi_agg *a, void *buf, size_t count, enum nz_dtype dtype,
		      enum nz_redop op);

/*
 * From another thread: the allreduce under way (and any later) ends with
 * -ECANCELED within a retransmission timeout (at most 200 ms), instead
 * of waiting out timeout_ms for a node that does not answer.
 */
void nzi_agg_cancel(struct nzi_agg *a);

/*
 * Join again, on a's socket, the job a joined: the node keeps the rank in
 * the job (and the job from its idle reaping).  The node may answer with
 * another session (it had released the job): a then uses that.  0 or as
 * nzi_agg_join(); a broken a: -EPIPE.
 */
int nzi_agg_rejoin(struct nzi_agg *a);

/* The window the node granted (slots of the job). */
unsigned int nzi_agg_window(const struct nzi_agg *a);
const struct nzi_agg_stats *nzi_agg_stats(const struct nzi_agg *a);

/* Send LEAVE (once, best effort: the node also releases idle jobs), close,
 * wipe the keys. */
void nzi_agg_close(struct nzi_agg *a);

#endif /* NEZHA_AGG_CLIENT_H */
