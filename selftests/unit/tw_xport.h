/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Host tests: an in-process transport for libnezha's collectives (the
 * seam of coll.h) that behaves like the module's point to point: eager
 * sends, receives matched in order per (peer, tag), -EMSGSIZE for a
 * message longer than the buffer, -ECONNRESET once a peer has left,
 * -ETIMEDOUT after the transfer timeout, -ECANCELED for a receive the
 * engine cancels.  Completions are reported out of
 * order on purpose (NZ_TEST_NOJITTER=1: in order).  Ranks are threads.
 */
#ifndef NZ_TEST_TW_XPORT_H
#define NZ_TEST_TW_XPORT_H

#include <pthread.h>
#include <stdint.h>
#include "coll.h"

#define MAXR	8

struct tw_hdl {
	struct tw_hdl *next;		/* posted receives of the owner */
	struct tw_hdl *aprev, *anext;	/* every live handle of the owner */
	int owner, peer, recv;
	uint64_t tag;
	void *buf;
	size_t len;
	int done, polls;
	int64_t res, deadline;
};

struct tw_msg {
	struct tw_msg *next;
	int src;
	uint64_t tag;
	size_t len;
	unsigned char data[];
};

struct tw_world {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int n, timeout_ms, jitter;
	int ack_ms;			/* sends complete this late (the ack) */
	int dead[MAXR];
	struct tw_msg *unexp[MAXR];	/* by destination, in arrival order */
	struct tw_hdl *posted[MAXR];	/* by owner, in posting order */
	struct tw_hdl *all[MAXR];
	unsigned long msgs;
	unsigned long cancelled;	/* receives cancelled (tw_xport.cancel) */
};

struct tw_ctx {
	struct tw_world *w;
	int rank;
};

extern const struct nzi_coll_xport tw_xport;

/* n ranks; a transfer not complete after timeout_ms fails -ETIMEDOUT. */
void tw_init(struct tw_world *w, int n, int timeout_ms);
/* Rank r leaves: its transfers go, its peers' fail -ECONNRESET. */
void tw_kill(struct tw_world *w, int r);
void tw_destroy(struct tw_world *w);

#endif /* NZ_TEST_TW_XPORT_H */
