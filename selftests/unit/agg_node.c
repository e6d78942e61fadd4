// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests: an aggregation node in a thread (agg_node.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include "agg_node.h"

static void *agg_node_main(void *arg)
{
	struct agg_node *t = arg;
	struct aggd_run_opts o = { .stop = &t->stop, .out = stdout };

	t->ret = aggd_run(t->n, &t->udp, &o);
	return NULL;
}

int agg_node_start(struct agg_node *t, const struct aggd_cfg *cfg)
{
	return agg_node_start_on(t, cfg, 0);
}

int agg_node_start_on(struct agg_node *t, const struct aggd_cfg *cfg, uint16_t port)
{
	int ret = aggd_udp_open(&t->udp, "127.0.0.1", port);

	if (ret)
		return ret;
	ret = aggd_create(cfg, aggd_udp_send, &t->udp, &t->n);
	if (ret) {
		close(t->udp.fd);
		return ret;
	}
	t->addr = (struct sockaddr_in){ .sin_family = AF_INET,
					.sin_port = htons(aggd_udp_port(&t->udp)),
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	atomic_store(&t->stop, 0);
	if (pthread_create(&t->tid, NULL, agg_node_main, t)) {
		aggd_destroy(t->n);
		close(t->udp.fd);
		return -EAGAIN;
	}
	return 0;
}

void agg_node_stop(struct agg_node *t)
{
	atomic_store(&t->stop, 1);
	pthread_join(t->tid, NULL);
	close(t->udp.fd);
}
