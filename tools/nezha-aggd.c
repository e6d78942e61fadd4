// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-aggd: the aggregation node of Nezha's in-network aggregation rail,
 * a program that plays a SHARP/SwitchML-style switch on a UDP port
 * (Documentation/aggregation.rst).  It serves the jobs whose key files it
 * was given; the pool of slots is allocated once, here, at start.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggd.h"
#include "nezha.h"
#include "sha256.h"

static atomic_int stop_flag, dump_flag;

static void on_stop(int sig)
{
	(void)sig;
	atomic_store(&stop_flag, 1);
}

static void on_usr1(int sig)
{
	(void)sig;
	atomic_store(&dump_flag, 1);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nezha-aggd --key-file FILE [--key-file FILE]... [OPTIONS]\n"
		"\n"
		"  --key-file FILE   a job key (nezhactl key generate); the jobs under\n"
		"                    it may use this node; up to %d\n"
		"  --bind ADDR       the address to listen on (default: every IPv4 one)\n"
		"  --port P          UDP port (default %d)\n"
		"  --slots N         the slot pool, fixed at start (default 512)\n"
		"  --max-jobs J      jobs registered at once (default 16, at most %d)\n"
		"  --job-slots S     most slots one job may hold (default 256)\n"
		"  --rate PPS        packets/s per source address, 0: no limit\n"
		"                    (default 200000)\n"
		"  --burst B         token bucket depth (default max(PPS/10, %d))\n"
		"  --idle SEC        release a job silent this long (default 60)\n"
		"  --stats SEC       print the counters every SEC seconds\n"
		"  --drop-rx-every K, --drop-tx-every K\n"
		"                    tests only: lose every Kth DATA in / RESULT out\n"
		"\n"
		"SIGUSR1 prints the counters; SIGINT/SIGTERM stop, printing them.\n",
		AGGD_MAX_KEYS, NZA_PORT, AGGD_MAX_JOBS, 2 * NZA_MAX_WINDOW);
}

static int parse_uint(const char *opt, const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || *out > max) {
		fprintf(stderr, "nezha-aggd: %s: '%s' is not a number from 0 to %lu\n",
			opt, s, max);
		return -EINVAL;
	}
	return 0;
}

enum { O_PORT = 1, O_BIND, O_SLOTS, O_JOBS, O_JOB_SLOTS, O_RATE, O_BURST, O_IDLE,
       O_STATS, O_KEY, O_DROP_RX, O_DROP_TX, O_HELP };

static const struct option opts[] = {
	{ "port", required_argument, NULL, O_PORT },
	{ "bind", required_argument, NULL, O_BIND },
	{ "slots", required_argument, NULL, O_SLOTS },
	{ "max-jobs", required_argument, NULL, O_JOBS },
	{ "job-slots", required_argument, NULL, O_JOB_SLOTS },
	{ "rate", required_argument, NULL, O_RATE },
	{ "burst", required_argument, NULL, O_BURST },
	{ "idle", required_argument, NULL, O_IDLE },
	{ "stats", required_argument, NULL, O_STATS },
	{ "key-file", required_argument, NULL, O_KEY },
	{ "drop-rx-every", required_argument, NULL, O_DROP_RX },
	{ "drop-tx-every", required_argument, NULL, O_DROP_TX },
	{ "help", no_argument, NULL, O_HELP },
	{ 0 },
};

struct args {
	struct aggd_cfg cfg;
	const char *bind;
	unsigned long port, stats;
};

static int parse_one(struct args *a, int c, const char *name, const char *v)
{
	unsigned long x;
	int ret;

	if (c == O_BIND) {
		a->bind = v;
		return 0;
	}
	if (c == O_KEY) {
		if (a->cfg.nkeys == AGGD_MAX_KEYS) {
			fprintf(stderr, "nezha-aggd: at most %d key files\n", AGGD_MAX_KEYS);
			return -EINVAL;
		}
		ret = nz_job_key_read_file(v, a->cfg.keys[a->cfg.nkeys]);
		if (ret)
			return ret;	/* libnezha said why on stderr */
		a->cfg.nkeys++;
		return 0;
	}
	ret = parse_uint(name, v, c == O_PORT ? 65535 : c == O_SLOTS ? AGGD_MAX_SLOTS :
			 c == O_JOBS ? AGGD_MAX_JOBS : c == O_JOB_SLOTS ? NZA_MAX_WINDOW :
			 c == O_IDLE ? 86400 : 100000000, &x);
	if (ret)
		return ret;
	switch (c) {
	case O_PORT: a->port = x; break;
	case O_SLOTS: a->cfg.slots = x; break;
	case O_JOBS: a->cfg.max_jobs = x; break;
	case O_JOB_SLOTS: a->cfg.job_slots = x; break;
	case O_RATE: a->cfg.rate = x; break;
	case O_BURST: a->cfg.burst = x; break;
	case O_IDLE: a->cfg.idle_ns = x * 1000000000ull; break;
	case O_STATS: a->stats = x; break;
	case O_DROP_RX: a->cfg.drop_rx_every = x; break;
	case O_DROP_TX: a->cfg.drop_tx_every = x; break;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	int c, idx;

	*a = (struct args){
		.cfg = { .slots = 512, .max_jobs = 16, .job_slots = 256, .rate = 200000,
			 .idle_ns = 60ull * 1000000000ull },
		.port = NZA_PORT,
	};
	while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
		if (c == O_HELP) {
			usage(stdout);
			exit(0);
		}
		if (c == '?' || parse_one(a, c, opts[idx].name, optarg))
			return -EINVAL;
	}
	if (optind < argc) {
		fprintf(stderr, "nezha-aggd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!a->cfg.nkeys) {
		fprintf(stderr, "nezha-aggd: no --key-file: the node serves only jobs whose key it holds\n");
		return -EINVAL;
	}
	if (!a->cfg.slots || !a->cfg.max_jobs || !a->cfg.job_slots) {
		fprintf(stderr, "nezha-aggd: --slots, --max-jobs and --job-slots must be at least 1\n");
		return -EINVAL;
	}
	return 0;
}

static void signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
}

int main(int argc, char **argv)
{
	struct aggd_run_opts run = { .stop = &stop_flag, .dump = &dump_flag, .out = stdout };
	struct aggd_udp udp;
	struct aggd *node;
	struct args a;
	int ret;

	if (parse_args(argc, argv, &a)) {
		usage(stderr);
		return 2;
	}
	ret = aggd_udp_open(&udp, a.bind, (uint16_t)a.port);
	if (ret) {
		fprintf(stderr, "nezha-aggd: cannot listen on %s port %lu: %s\n",
			a.bind ? a.bind : "0.0.0.0", a.port, strerror(-ret));
		return 1;
	}
	ret = aggd_create(&a.cfg, aggd_udp_send, &udp, &node);
	nzi_wipe(a.cfg.keys, sizeof(a.cfg.keys));
	if (ret) {
		fprintf(stderr, "nezha-aggd: %s\n", strerror(-ret));
		return 1;
	}
	signals();
	run.stats_sec = (unsigned int)a.stats;
	printf("nezha-aggd: UDP %s:%u, %u keys, %u slots (pool %zu KiB, %zu KiB in all), "
	       "%u jobs of at most %u slots, rate %u/s per source\n",
	       a.bind ? a.bind : "0.0.0.0", aggd_udp_port(&udp), a.cfg.nkeys, a.cfg.slots,
	       aggd_pool_bytes(node) >> 10, aggd_total_bytes(node) >> 10, a.cfg.max_jobs,
	       a.cfg.job_slots, a.cfg.rate);
	fflush(stdout);
	ret = aggd_run(node, &udp, &run);
	aggd_stats_print(node, stdout);
	printf("nezha-aggd: %llu packets not sent (socket buffer full)\n",
	       (unsigned long long)udp.tx_errors);
	aggd_destroy(node);
	close(udp.fd);
	if (ret) {
		fprintf(stderr, "nezha-aggd: socket: %s\n", strerror(-ret));
		return 1;
	}
	return 0;
}
