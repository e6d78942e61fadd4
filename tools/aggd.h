/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nezha-aggd's core: the aggregation node as plain C over one struct, with
 * no socket inside.  Packets come in through aggd_input() with the time;
 * packets go out through the send callback.  The daemon (nezha-aggd.c,
 * aggd_run.c) and the host tests drive the same code.
 *
 *   aggd_core.c   configuration, pool and jobs, rate limit, HELLO/JOIN,
 *                 LEAVE, idle reaping, counters
 *   aggd_slot.c   DATA: the slot state machine, the reduction, RESULTs
 *   aggd_run.c    the UDP loop around the core
 *
 * Everything is allocated by aggd_create(); nothing is allocated per
 * packet or per job.  Not thread safe: one thread drives one node.
 */
#ifndef NEZHA_AGGD_H
#define NEZHA_AGGD_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "agg_wire.h"

#define AGGD_MAX_KEYS		16
#define AGGD_MAX_JOBS		256
#define AGGD_MAX_SLOTS		65536

struct aggd_cfg {
	unsigned int slots;		/* the pool, fixed at start */
	unsigned int max_jobs;		/* jobs registered at once */
	unsigned int job_slots;		/* most slots one job may hold */
	uint32_t rate;			/* packets/s per source address; 0: none */
	uint32_t burst;			/* token bucket depth; 0: derived */
	uint64_t idle_ns;		/* a job silent this long is released */
	unsigned int nkeys;
	uint8_t keys[AGGD_MAX_KEYS][NZA_KEY_LEN];
	/* Tests only: drop every Nth DATA received / RESULT sent (0: none). */
	unsigned int drop_rx_every, drop_tx_every;
	/* Tests only: the cookie secret (else drawn at random). */
	const uint8_t *cookie_secret;
};

/* A peer's address: what recvfrom() gives, kept in 28 bytes. */
struct aggd_addr {
	socklen_t len;
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} u;
};

typedef void (*aggd_send_fn)(void *arg, const struct aggd_addr *to,
			     const uint8_t *buf, size_t len);

/* Every counter the node keeps (printed by aggd_stats_print()). */
struct aggd_stats {
	uint64_t rx, rx_bytes, tx, tx_bytes;
	/* Dropped, by reason. */
	uint64_t drop_rate;		/* the source's token bucket was empty */
	uint64_t drop_malformed;	/* failed to decode */
	uint64_t drop_type;		/* a node-to-rank type sent to the node */
	uint64_t drop_cookie;		/* JOIN with a cookie not for its address */
	uint64_t drop_join_mac;		/* JOIN under a known key id, bad MAC */
	uint64_t drop_no_job;		/* DATA/LEAVE for no live job */
	uint64_t drop_mac;		/* DATA/LEAVE whose MAC fails */
	uint64_t drop_addr;		/* DATA from another address than the rank's */
	uint64_t drop_stale;		/* DATA for a block already past */
	uint64_t drop_early;		/* DATA for a block its slot cannot take yet */
	uint64_t drop_dup;		/* DATA already counted, result not ready */
	uint64_t drop_mismatch;		/* DATA whose dtype/op/count differs */
	uint64_t drop_injected;		/* --drop-every (tests) */
	/* Protocol events. */
	uint64_t challenges, joins, rejoins, refusals, leaves, jobs_reaped;
	uint64_t refuse_reason[NZA_R_LAST + 1];
	uint64_t contributions, results, results_resent;
	/* Gauges. */
	uint64_t jobs_active, slots_used;
};

struct aggd;

/* 0, or -EINVAL for a bad configuration, -ENOMEM; *out on success. */
int aggd_create(const struct aggd_cfg *cfg, aggd_send_fn send, void *arg,
		struct aggd **out);
void aggd_destroy(struct aggd *n);
/* One received datagram. now_ns: CLOCK_MONOTONIC. */
void aggd_input(struct aggd *n, const struct aggd_addr *from, const uint8_t *buf,
		size_t len, uint64_t now_ns);
/* Release jobs idle for cfg->idle_ns; call about once a second. */
void aggd_tick(struct aggd *n, uint64_t now_ns);
const struct aggd_stats *aggd_stats(const struct aggd *n);
/* Bytes allocated by aggd_create() for the slot pool, and in all. */
size_t aggd_pool_bytes(const struct aggd *n);
size_t aggd_total_bytes(const struct aggd *n);
/* One line of counters (the daemon's --stats and SIGUSR1 output). */
void aggd_stats_print(const struct aggd *n, FILE *f);

/* ---- aggd_run.c: the node on a UDP socket ---- */

#define AGGD_TX_BATCH	64

struct aggd_udp {
	int fd;
	uint64_t tx_errors;		/* a send failed: the packet is lost */
	uint64_t loops, batches;	/* poll wake-ups, recvmmsg batches */
	uint64_t tx_batches;		/* sendmmsg calls */
	/* Answers queued by aggd_udp_send(), sent by aggd_udp_flush(). */
	unsigned int ntx;
	struct aggd_addr tx_to[AGGD_TX_BATCH];
	size_t tx_len[AGGD_TX_BATCH];
	uint8_t tx_buf[AGGD_TX_BATCH][NZA_PKT_MAX];
};

/* Bind a UDP socket to bind_addr (NULL: every address) and port (0: any);
 * 0 or -errno.  The port bound: aggd_udp_port(). */
int aggd_udp_open(struct aggd_udp *u, const char *bind_addr, uint16_t port);
uint16_t aggd_udp_port(const struct aggd_udp *u);
/* The send callback for aggd_create(): arg is the struct aggd_udp.  The
 * packet is queued (copied) and goes with the next aggd_udp_flush(), or
 * at once when the queue is full. */
void aggd_udp_send(void *arg, const struct aggd_addr *to, const uint8_t *buf, size_t len);
/* Send what is queued, in as few system calls as sendmmsg() allows. */
void aggd_udp_flush(struct aggd_udp *u);

struct aggd_run_opts {
	atomic_int *stop;		/* non-zero: return */
	atomic_int *dump;		/* non-zero: print the counters, clear it */
	unsigned int stats_sec;		/* print them every so often; 0: never */
	FILE *out;
};

/* Serve until *stop; 0, or -errno when the socket fails. */
int aggd_run(struct aggd *n, struct aggd_udp *u, const struct aggd_run_opts *o);

#endif /* NEZHA_AGGD_H */
