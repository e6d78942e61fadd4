// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl stats: text, JSON and Prometheus output of what tools/cmd_stats.c
 * read from sysfs.  No system call here: host unit tests feed it made-up
 * values and check the output.
 *
 * Prometheus names (https://prometheus.io/docs/practices/naming/): prefix
 * nezha_, nezha_rail_ or nezha_peer_; counters end in _total; times are in
 * seconds and rates in bytes per second; what is not a number (a rail's
 * protocol, a connection's state) is a label of an _info metric of value
 * 1.  Labels: rail, and for connections comm (the communicator's serial,
 *     not its job id), rank and peer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"
#include "stats.h"

const struct nzst_metric nzst_module_info[] = {
	{ "release", NZST_LABEL, "release", 1, NULL },
	{ "abi_version", NZST_LABEL, "abi", 1, NULL },
	{ "open_files", NZST_GAUGE, "open_files", 1, "Open files of /dev/nezha." },
	{ "inflight", NZST_GAUGE, "inflight_commands", 1, "Commands queued and not completed." },
	{ "comms", NZST_GAUGE, "communicators", 1, "Communicators that exist." },
	{ "zerocopy_held", NZST_GAUGE, "zerocopy_held", 1,
	  "Sends whose pages TCP still references (zero-copy)." },
	{ NULL, 0, NULL, 0, NULL },
};

const struct nzst_metric nzst_module_stats[] = {
	{ "opens", NZST_COUNTER, "opens", 1, "Opens of /dev/nezha." },
	{ "cmds_submitted", NZST_COUNTER, "commands_submitted", 1, "Commands submitted." },
	{ "cmds_completed", NZST_COUNTER, "commands_completed", 1, "Commands completed." },
	{ "cmds_failed", NZST_COUNTER, "commands_failed", 1, "Commands completed with an error." },
	{ "cmds_rejected", NZST_COUNTER, "commands_rejected", 1, "Commands refused as malformed." },
	{ "cmds_cancelled", NZST_COUNTER, "commands_cancelled", 1, "Commands cancelled." },
	{ "comms_refused", NZST_COUNTER, "communicators_refused", 1,
	  "Communicators refused: their user was at max_user_comms." },
	{ "cmds_refused", NZST_COUNTER, "commands_refused", 1,
	  "Commands refused: their user was at max_user_cmds." },
	{ "tags_refused", NZST_COUNTER, "tags_refused", 1,
	  "Sends and receives refused: a new tag past max_tags." },
	{ "msgs_aborted", NZST_COUNTER, "messages_aborted", 1,
	  "Failed sends withdrawn from their receivers (ABORT)." },
	{ "msgs_withdrawn", NZST_COUNTER, "messages_withdrawn", 1,
	  "Messages their senders withdrew (ABORT received)." },
	{ "msgs_refused", NZST_COUNTER, "messages_refused", 1,
	  "Messages refused: their receive gave up first, or no room for a whole timeout." },
	{ "sends_refused", NZST_COUNTER, "sends_refused", 1,
	  "Sends failed because their receiver refused them." },
	{ "chunks_zerocopy", NZST_COUNTER, "chunks_zerocopy", 1,
	  "Chunks TCP rails sent from the user's pages, without a copy." },
	{ "msgs_unexpected", NZST_COUNTER, "messages_unexpected", 1,
	  "Messages that arrived before their receive, held in a kernel buffer." },
	{ "bytes_unexpected", NZST_COUNTER, "unexpected_bytes", 1,
	  "Bytes of the messages that arrived before their receive." },
	{ NULL, 0, NULL, 0, NULL },
};

const struct nzst_metric nzst_rail_info[] = {
	{ "id", NZST_LABEL, "id", 1, NULL },
	{ "proto", NZST_LABEL, "proto", 1, NULL },
	{ "dev", NZST_LABEL, "dev", 1, NULL },
	{ "addr", NZST_LABEL, "addr", 1, NULL },
	{ "port", NZST_LABEL, "port", 1, NULL },
	{ "state", NZST_LABEL, "state", 1, NULL },
	{ "weight", NZST_GAUGE, "weight", 1, "Configured weight of the rail." },
	{ "speed_mbps", NZST_GAUGE, "link_speed_bits_per_second", 1e6,
	  "Link speed of the rail's netdev (0: unknown)." },
	{ NULL, 0, NULL, 0, NULL },
};

const struct nzst_metric nzst_rail_stats[] = {
	{ "bytes_tx", NZST_COUNTER, "sent_bytes", 1, "Payload bytes sent on the rail." },
	{ "bytes_rx", NZST_COUNTER, "received_bytes", 1, "Payload bytes received on the rail." },
	{ "chunks_tx", NZST_COUNTER, "sent_chunks", 1, "DATA frames sent." },
	{ "chunks_rx", NZST_COUNTER, "received_chunks", 1, "DATA frames received." },
	{ "errors", NZST_COUNTER, "errors", 1, "Connections closed on an error." },
	{ "handshakes_refused", NZST_COUNTER, "handshakes_refused", 1,
	  "Handshakes refused (wrong key, unknown job, ...)." },
	{ "conns", NZST_GAUGE, "connections", 1, "Connections up on the rail." },
	{ "failovers", NZST_COUNTER, "failovers", 1,
	  "Connections lost while their communicator lived; traffic moved to other rails." },
	{ "false_suspects", NZST_COUNTER, "false_suspects", 1,
	  "Suspected paths that echoed within 250 ms: alive, only late." },
	{ "chunks_resent", NZST_COUNTER, "resent_chunks", 1,
	  "Unacknowledged chunks handed to another connection." },
	{ "acks_late", NZST_COUNTER, "late_acks", 1,
	  "ACKs of chunks already moved off the connection that sent them." },
	{ "sends_confirmed", NZST_COUNTER, "sends_confirmed", 1,
	  "Sends completed by a leaving receiver's DONE (their ACKs were lost)." },
	{ "ctrl_dropped", NZST_COUNTER, "control_frames_dropped", 1,
	  "ACKs and echoes not queued: the peer read none of max_ctrl_frames." },
	{ "hb_frames", NZST_COUNTER, "heartbeat_frames", 1,
	  "Health probes and their echoes queued (HEARTBEAT, HEARTBEAT_ACK)." },
	{ "redials", NZST_COUNTER, "redials", 1,
	  "Dials started at once because the peer's end of the rail came back." },
	{ "last_failover_ms", NZST_GAUGE, "last_failover_boottime_seconds", 1e-3,
	  "CLOCK_BOOTTIME of the last failover (0: none)." },
	{ NULL, 0, NULL, 0, NULL },
};

const struct nzst_metric nzst_rail_rdma[] = {
	{ "device", NZST_LABEL, "rdma_device", 1, NULL },
	{ "ib_port", NZST_LABEL, "ib_port", 1, NULL },
	{ "netdev", NZST_LABEL, "netdev", 1, NULL },
	{ "gid_index", NZST_LABEL, "gid_index", 1, NULL },
	{ "send_posted", NZST_COUNTER, "rdma_send_posted", 1, "RDMA send work requests posted." },
	{ "send_completed", NZST_COUNTER, "rdma_send_completed", 1, "RDMA send completions." },
	{ "recv_posted", NZST_COUNTER, "rdma_recv_posted", 1, "RDMA receive work requests posted." },
	{ "recv_completed", NZST_COUNTER, "rdma_recv_completed", 1, "RDMA receive completions." },
	{ "wc_errors", NZST_COUNTER, "rdma_wc_errors", 1, "Work completions with an error." },
	{ "async_errors", NZST_COUNTER, "rdma_async_errors", 1, "Asynchronous device events (errors)." },
	{ "credit_stalls", NZST_COUNTER, "rdma_credit_stalls", 1, "Sends that waited for credits." },
	{ "credit_updates", NZST_COUNTER, "rdma_credit_updates", 1, "Credit updates sent." },
	{ "cm_rejects", NZST_COUNTER, "rdma_cm_rejects", 1, "rdma_cm connection requests rejected." },
	{ "device_removals", NZST_COUNTER, "rdma_device_removals", 1, "Removals of the RDMA device." },
	{ "qps", NZST_GAUGE, "rdma_qps", 1, "Queue pairs of the rail." },
	{ NULL, 0, NULL, 0, NULL },
};

const struct nzst_metric nzst_peer_files[] = {
	{ "state", NZST_LABEL, "state", 1, NULL },
	{ "sched_state", NZST_LABEL, "sched_state", 1, NULL },
	{ "bytes_tx", NZST_COUNTER, "sent_bytes", 1, "Payload bytes sent on the connection." },
	{ "bytes_rx", NZST_COUNTER, "received_bytes", 1, "Payload bytes received on the connection." },
	{ "chunks_tx", NZST_COUNTER, "sent_chunks", 1, "DATA frames sent on the connection." },
	{ "chunks_rx", NZST_COUNTER, "received_chunks", 1, "DATA frames received on the connection." },
	{ "errors", NZST_COUNTER, "errors", 1, "Times the connection's transport closed on an error." },
	{ "heartbeats_tx", NZST_COUNTER, "heartbeats_sent", 1, "HEARTBEAT frames queued." },
	{ "sched_transitions", NZST_COUNTER, "sched_transitions", 1,
	  "Scheduler state changes of the connection." },
	{ "inflight_bytes", NZST_GAUGE, "inflight_bytes", 1, "Bytes sent and not acknowledged." },
	{ "window_bytes", NZST_GAUGE, "window_bytes", 1, "Bytes it may have unacknowledged." },
	{ "est_bw", NZST_GAUGE, "estimated_bandwidth_bytes_per_second", 1,
	  "Delivered bandwidth, smoothed (0 until measured)." },
	{ "srtt_us", NZST_GAUGE, "smoothed_rtt_seconds", 1e-6, "Smoothed heartbeat round trip." },
	{ "min_rtt_us", NZST_GAUGE, "min_rtt_seconds", 1e-6, "Lowest idle heartbeat round trip." },
	{ "start_us", NZST_GAUGE, "startup_latency_seconds", 1e-6,
	  "Start-up latency of a chunk sent from idle." },
	{ "chunk_unit", NZST_GAUGE, "chunk_unit_bytes", 1, "The communicator's chunk unit." },
	{ NULL, 0, NULL, 0, NULL },
};

/* ---- text ------------------------------------------------------------------ */

static void nzst_text_values(FILE *f, const struct nzst_values *v, int skip)
{
	for (int i = 0; i < v->n; i++)
		if ((int)v->m[i]->kind != skip)
			fprintf(f, " %s %s", v->m[i]->file, v->v[i]);
}

static void nzst_text(FILE *f, const struct nzst_all *all)
{
	fprintf(f, "nezha:");
	nzst_text_values(f, &all->module, NZST_LABEL);
	nzst_text_values(f, &all->module_stats, NZST_LABEL);
	fputc('\n', f);
	for (int r = 0; r < all->nrails; r++) {
		const struct nzst_rail *rail = &all->rails[r];

		fprintf(f, "rail %s:", rail->name);
		nzst_text_values(f, &rail->info, NZST_COUNTER);
		fputc('\n', f);
		fprintf(f, "   ");
		nzst_text_values(f, &rail->stats, NZST_LABEL);
		fputc('\n', f);
		if (rail->rdma.n) {
			fprintf(f, "    rdma:");
			nzst_text_values(f, &rail->rdma, -1);
			fputc('\n', f);
		}
		for (int p = 0; p < rail->npeers; p++) {
			const struct nzst_peer *peer = &rail->peers[p];

			fprintf(f, "    peer %u comm %s (rank %u):", peer->peer, peer->comm,
				peer->rank);
			nzst_text_values(f, &peer->vals, -1);
			fputc('\n', f);
		}
	}
}

/* ---- JSON ------------------------------------------------------------------ */

static void nzst_json_value(struct nzj *j, const struct nzst_metric *m, const char *v)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (m->kind != NZST_LABEL && *v >= '0' && *v <= '9' && !*end && !errno)
		nzj_u64(j, m->file, n);
	else if (m->kind != NZST_LABEL)
		nzj_null(j, m->file);	/* a counter that is not a number */
	else
		nzj_str(j, m->file, v);
}

static void nzst_json_values(struct nzj *j, const char *key, const struct nzst_values *v)
{
	nzj_obj_open(j, key);
	for (int i = 0; i < v->n; i++)
		nzst_json_value(j, v->m[i], v->v[i]);
	nzj_obj_close(j);
}

static void nzst_json(FILE *f, const struct nzst_all *all, int pretty)
{
	struct nzj j;

	nzj_init(&j, f, pretty);
	nzj_obj_open(&j, NULL);
	nzst_json_values(&j, "module", &all->module);
	nzst_json_values(&j, "commands", &all->module_stats);
	nzj_arr_open(&j, "rails");
	for (int r = 0; r < all->nrails; r++) {
		const struct nzst_rail *rail = &all->rails[r];

		nzj_obj_open(&j, NULL);
		nzj_str(&j, "name", rail->name);
		nzst_json_values(&j, "info", &rail->info);
		nzst_json_values(&j, "stats", &rail->stats);
		if (rail->rdma.n)
			nzst_json_values(&j, "rdma", &rail->rdma);
		nzj_arr_open(&j, "peers");
		for (int p = 0; p < rail->npeers; p++) {
			const struct nzst_peer *peer = &rail->peers[p];

			nzj_obj_open(&j, NULL);
			nzj_str(&j, "comm", peer->comm);
			nzj_u64(&j, "rank", peer->rank);
			nzj_u64(&j, "peer", peer->peer);
			nzst_json_values(&j, "stats", &peer->vals);
			nzj_obj_close(&j);
		}
		nzj_arr_close(&j);
		nzj_obj_close(&j);
	}
	nzj_arr_close(&j);
	nzj_obj_close(&j);
	nzj_end(&j);
}

/* ---- Prometheus ------------------------------------------------------------ */

static void nzst_label_value(FILE *f, const char *v)
{
	fputc('"', f);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

/* Labels of one sample: the object's (rail, comm...), then its _info ones. */
struct nzst_obj {
	const char *rail, *comm;
	unsigned int rank, peer;
	int is_peer;
};

static void nzst_labels(FILE *f, const struct nzst_obj *o, const struct nzst_values *info)
{
	int n = 0;

	fputc('{', f);
	if (o->rail) {
		fprintf(f, "rail=");
		nzst_label_value(f, o->rail);
		n++;
	}
	if (o->is_peer)
		fprintf(f, ",comm=\"%s\",rank=\"%u\",peer=\"%u\"", o->comm, o->rank, o->peer);
	for (int i = 0; info && i < info->n; i++) {
		if (info->m[i]->kind != NZST_LABEL)
			continue;
		fprintf(f, "%s%s=", n++ ? "," : "", info->m[i]->name);
		nzst_label_value(f, info->v[i]);
	}
	fputc('}', f);
}

static int nzst_number(const char *v, double scale, double *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (end == v || *end || errno)
		return -EINVAL;
	*out = d * scale;
	return 0;
}

static void nzst_sample_value(FILE *f, double d)
{
	if (d == (double)(long long)d && d < 9e15 && d > -9e15)
		fprintf(f, " %lld\n", (long long)d);
	else
		fprintf(f, " %.9g\n", d);
}

/* One metric family: HELP, TYPE, then a sample per object that has it. */
struct nzst_family {
	const char *prefix;
	const struct nzst_metric *m;
	int nobj;
	const struct nzst_obj *obj;
	const struct nzst_values *const *vals;		/* per object */
};

static void nzst_prom_family(FILE *f, const struct nzst_family *fam)
{
	const struct nzst_metric *m = fam->m;
	int header = 0;

	for (int o = 0; o < fam->nobj; o++) {
		const struct nzst_values *v = fam->vals[o];
		double d;

		for (int i = 0; i < v->n; i++) {
			if (v->m[i] != m || nzst_number(v->v[i], m->scale, &d))
				continue;
			if (!header++) {
				fprintf(f, "# HELP %s%s%s %s\n", fam->prefix, m->name,
					m->kind == NZST_COUNTER ? "_total" : "", m->help);
				fprintf(f, "# TYPE %s%s%s %s\n", fam->prefix, m->name,
					m->kind == NZST_COUNTER ? "_total" : "",
					m->kind == NZST_COUNTER ? "counter" : "gauge");
			}
			fprintf(f, "%s%s%s", fam->prefix, m->name,
				m->kind == NZST_COUNTER ? "_total" : "");
			if (fam->obj[o].rail || fam->obj[o].is_peer)
				nzst_labels(f, &fam->obj[o], NULL);
			nzst_sample_value(f, d);
		}
	}
}

static void nzst_prom_table(FILE *f, const char *prefix, const struct nzst_metric *tbl,
			    int nobj, const struct nzst_obj *obj,
			    const struct nzst_values *const *vals)
{
	for (const struct nzst_metric *m = tbl; m->file; m++) {
		struct nzst_family fam = { prefix, m, nobj, obj, vals };

		if (m->kind != NZST_LABEL)
			nzst_prom_family(f, &fam);
	}
}

/* name_info{labels} 1 for each object that has labels. */
static void nzst_prom_info(FILE *f, const char *name, const char *help, int nobj,
			   const struct nzst_obj *obj, const struct nzst_values *const *vals)
{
	if (!nobj)
		return;
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (int o = 0; o < nobj; o++) {
		fputs(name, f);
		nzst_labels(f, &obj[o], vals[o]);
		fputs(" 1\n", f);
	}
}

static int nzst_is(const struct nzst_values *v, const char *file, const char *want)
{
	for (int i = 0; i < v->n; i++)
		if (!strcmp(v->m[i]->file, file))
			return !strcmp(v->v[i], want);
	return 0;
}

static void nzst_prometheus(FILE *f, const struct nzst_all *all)
{
	const struct nzst_values *mv[2] = { &all->module, &all->module_stats };
	struct nzst_obj mobj[1] = { { 0 } };
	const struct nzst_values **rv, **pv;
	struct nzst_obj *robj, *pobj;
	int np = 0, k;

	for (int r = 0; r < all->nrails; r++)
		np += all->rails[r].npeers;
	rv = calloc((size_t)all->nrails * 3 + 1, sizeof(*rv));
	robj = calloc((size_t)all->nrails + 1, sizeof(*robj));
	pv = calloc((size_t)np + 1, sizeof(*pv));
	pobj = calloc((size_t)np + 1, sizeof(*pobj));
	if (!rv || !robj || !pv || !pobj)
		goto out;

	nzst_prom_info(f, "nezha_info", "The loaded module.", 1, mobj, mv);
	nzst_prom_table(f, "nezha_", nzst_module_info, 1, mobj, mv);
	nzst_prom_table(f, "nezha_", nzst_module_stats, 1, mobj, mv + 1);

	for (int r = 0; r < all->nrails; r++)
		robj[r].rail = all->rails[r].name;
	for (int r = 0; r < all->nrails; r++)
		rv[r] = &all->rails[r].info;
	nzst_prom_info(f, "nezha_rail_info", "A configured rail.", all->nrails, robj, rv);
	if (all->nrails)
		fprintf(f, "# HELP nezha_rail_up Whether the rail is up (link, admin, not failed).\n"
			"# TYPE nezha_rail_up gauge\n");
	for (int r = 0; r < all->nrails; r++) {
		fputs("nezha_rail_up", f);
		nzst_labels(f, &robj[r], NULL);
		fprintf(f, " %d\n", nzst_is(&all->rails[r].info, "state", "up"));
	}
	nzst_prom_table(f, "nezha_rail_", nzst_rail_info, all->nrails, robj, rv);
	for (int r = 0; r < all->nrails; r++)
		rv[r] = &all->rails[r].stats;
	nzst_prom_table(f, "nezha_rail_", nzst_rail_stats, all->nrails, robj, rv);
	for (int r = 0; r < all->nrails; r++)
		rv[r] = &all->rails[r].rdma;
	nzst_prom_table(f, "nezha_rail_", nzst_rail_rdma, all->nrails, robj, rv);

	k = 0;
	for (int r = 0; r < all->nrails; r++) {
		for (int p = 0; p < all->rails[r].npeers; p++, k++) {
			const struct nzst_peer *peer = &all->rails[r].peers[p];

			pobj[k] = (struct nzst_obj){ all->rails[r].name, peer->comm, peer->rank,
						     peer->peer, 1 };
			pv[k] = &peer->vals;
		}
	}
	nzst_prom_info(f, "nezha_peer_info", "A connection of a communicator over a rail.",
		       np, pobj, pv);
	nzst_prom_table(f, "nezha_peer_", nzst_peer_files, np, pobj, pv);
out:
	free(rv);
	free(robj);
	free(pv);
	free(pobj);
}

void nzst_print(FILE *f, const struct nzst_all *all, int fmt, int pretty)
{
	if (fmt == NZST_PROMETHEUS)
		nzst_prometheus(f, all);
	else if (fmt == NZST_JSON)
		nzst_json(f, all, pretty);
	else
		nzst_text(f, all);
}
