/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Host tests: nezha-aggd's core and UDP loop (tools/aggd_*.c) serving on
 * 127.0.0.1 from a thread of the test.
 */
#ifndef NZ_TEST_AGG_NODE_H
#define NZ_TEST_AGG_NODE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include "../../tools/aggd.h"

struct agg_node {
	struct aggd *n;
	struct aggd_udp udp;
	pthread_t tid;
	atomic_int stop;
	int ret;			/* aggd_run()'s, once stopped */
	struct sockaddr_in addr;	/* where it listens */
};

/* Create a node of cfg on 127.0.0.1 (a free port) and serve: 0 or -errno. */
int agg_node_start(struct agg_node *t, const struct aggd_cfg *cfg);
/* The same on this port (a node started again where it was). */
int agg_node_start_on(struct agg_node *t, const struct aggd_cfg *cfg, uint16_t port);
/* Stop serving and close the socket; t->n stays for its counters
 * (aggd_destroy() it). */
void agg_node_stop(struct agg_node *t);

#endif /* NZ_TEST_AGG_NODE_H */
