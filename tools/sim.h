/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nezha-sim: a discrete-event model of N nodes x R rails
 * (Documentation/sim.rst).
 *
 * sim_net.c   links (rate, latency, loss, failure), NIC queues, and the
 *             module's scheduler: per (node, peer, rail) connections whose
 *             window, rail choice, tail rule and estimates are computed by
 *             kmod/sched_est.c, the file nezha.ko runs, and whose chunks
 *             are cut by kmod/wire.c's nz_wire_chunk_len().
 * sim_coll.c  libnezha's collective schedules (coll_algo.c's DAG, as
 *             nz_allreduce() builds it) executed over sim_net, and the
 *             Gloo and MPTCP models.
 *
 * Time is simulated, in ns; nothing reads a clock.  Given the same
 * configuration and seed a run gives the same figures.
 */
#ifndef NZ_SIM_H
#define NZ_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_MAX_RAILS	8
#define SIM_NEVER	UINT64_MAX

struct sim_rail_cfg {
	double rate;		/* bytes/s on the wire (link rate / 8) */
	uint64_t lat_ns;	/* one way */
	double loss;		/* per packet, 0..1 */
	bool rdma;		/* RC QP: no slow start, go-back-N on loss */
	uint64_t fail_ns;	/* the rail goes down then, counted from the
				 * start of the collective reported; SIM_NEVER */
	int fail_node;		/* ... on this node only; -1: on every node */
	/*
	 * The MPTCP model's one rail does not die at fail_ns: it carries
	 * nothing for stall_ns, then goes on at rate_after.
	 */
	bool degrade;
	uint64_t stall_ns;
	double rate_after;
};

enum sim_model {
	SIM_NEZHA,		/* every rail, the module's scheduler */
	SIM_GLOO,		/* one NIC (rail 0) per collective, ring */
	SIM_MPTCP,		/* one connection, a subflow per rail, ring */
};

struct sim_cfg {
	int nodes, nrails;
	struct sim_rail_cfg rail[SIM_MAX_RAILS];
	uint32_t unit;		/* chunk unit; 0: libnezha's rule */
	uint32_t mtu;		/* payload efficiency of TCP/IP frames */
	uint64_t detect_ns;	/* a failed rail is noticed after this */
	uint64_t seed;
	double reduce_rate;	/* bytes/s of a local reduction; 0: free */
	double mptcp_overhead;	/* fraction of the rails' sum MPTCP loses */
	uint64_t mptcp_stall_ns;	/* MPTCP: a subflow's loss stalls this long */
	enum sim_model model;
	int algo;		/* enum nz_coll_algo forced; -1: libnezha's choice */
};

struct sim_result {
	int err;		/* 0, or -ENETDOWN: the collective cannot finish */
	uint64_t ns;		/* time of the collective */
	int algo;		/* enum nz_coll_algo used */
	uint64_t rail_bytes[SIM_MAX_RAILS];	/* payload bytes sent per rail */
	uint64_t resent;	/* chunks sent again after a failure */
};

/* Defaults for everything but nodes and rails. */
void sim_cfg_init(struct sim_cfg *c);
/* libnezha's chunk unit for these rails (libnezha.rst, Chunk unit). */
uint32_t sim_auto_unit(const struct sim_cfg *c);

/* ---- sim_net.c: the network and the module's scheduler ---- */

struct sim_net;
struct sim_msg;

/* Called when a message is delivered whole to dst / acknowledged to src. */
typedef void (*sim_msg_cb)(void *ctx, struct sim_msg *m, bool delivered);

struct sim_net *sim_net_new(const struct sim_cfg *cfg, sim_msg_cb cb,
			    void *ctx);
void sim_net_free(struct sim_net *n);
uint64_t sim_now(const struct sim_net *n);
/* Queue a send of len bytes from src to dst; returns NULL on ENOMEM. */
struct sim_msg *sim_send(struct sim_net *n, int src, int dst, uint64_t len,
			 uint64_t key);
int sim_msg_src(const struct sim_msg *m);
int sim_msg_dst(const struct sim_msg *m);
uint64_t sim_msg_len(const struct sim_msg *m);
uint64_t sim_msg_key(const struct sim_msg *m);
/* A local event at time t calls fn(ctx, arg). */
int sim_at(struct sim_net *n, uint64_t t, void (*fn)(void *, uint64_t),
	   void *ctx, uint64_t arg);
/*
 * The rails' failures happen at their fail_ns after t0 (until this call
 * nothing fails).  0 or -ENOMEM.
 */
int sim_arm_failures(struct sim_net *n, uint64_t t0);
/* Run events until none is left. */
void sim_run(struct sim_net *n);
/* Messages not yet acknowledged whose every rail to the peer is down. */
bool sim_stuck(const struct sim_net *n);
void sim_stats(const struct sim_net *n, struct sim_result *r);

/* ---- sim_coll.c: collectives ---- */

/*
 * One allreduce of bytes (float32 sum) on every node, started at once,
 * iters times back to back on the same network (estimates carry over);
 * r gets the last one, the only one the rails' failures hit.  0 or
 * -errno; r->err is -ENETDOWN when the collective could not finish.
 */
int sim_allreduce(const struct sim_cfg *cfg, uint64_t bytes, int iters,
		  struct sim_result *r);
/* A point-to-point send of bytes from node 0 to node 1. */
int sim_p2p(const struct sim_cfg *cfg, uint64_t bytes, struct sim_result *r);

#endif /* NZ_SIM_H */
