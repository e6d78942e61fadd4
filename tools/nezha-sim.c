// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-sim: allreduce times of N nodes x R rails, modelled
 * (Documentation/sim.rst).
 *
 *   nezha-sim --nodes 8 --rails 40mbit,40mbit --lat 0.2ms \
 *             --sizes 8,64K,1M,16M,64M --fail rail1@0.5s
 *   nezha-sim --validate     the 2-, 4- and 8-guest test beds against their measurements
 *   nezha-sim --project      32 and 128 nodes, the paper's setups
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nezha.h"
#include "sim.h"

#define MAX_SIZES	32

struct unit {
	const char *suffix;
	double scale;
};

/* A number and one of units' suffixes: the number times its scale. */
static int parse_scaled(const char *s, const struct unit *units, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -EINVAL;
	for (; units->suffix; units++)
		if (!strcmp(end, units->suffix)) {
			*out = v * units->scale;
			return 0;
		}
	return -EINVAL;
}

static int parse_time(const char *s, uint64_t *ns)
{
	static const struct unit units[] = {
		{ "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 }, { "ns", 1 }, { NULL, 0 }
	};
	double v;

	if (parse_scaled(s, units, &v))
		return -EINVAL;
	*ns = (uint64_t)(v + 0.5);
	return 0;
}

/* A link rate in bits/s, as tc writes it; returns bytes/s. */
static int parse_rate(const char *s, double *bytes_per_s)
{
	static const struct unit units[] = {
		{ "bit", 1 / 8.0 }, { "kbit", 1e3 / 8 }, { "mbit", 1e6 / 8 },
		{ "gbit", 1e9 / 8 }, { NULL, 0 }
	};

	if (parse_scaled(s, units, bytes_per_s) || *bytes_per_s <= 0)
		return -EINVAL;
	return 0;
}

static int parse_size(const char *s, uint64_t *b)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		return -EINVAL;
	if (*end == 'K')
		v <<= 10;
	else if (*end == 'M')
		v <<= 20;
	else if (*end == 'G')
		v <<= 30;
	else if (*end)
		return -EINVAL;
	if (*end && end[1])
		return -EINVAL;
	*b = v;
	return 0;
}

/* RATE[:tcp|:rdma][:LATENCY][:lossP], e.g. 100gbit:rdma:3us */
static int parse_rail(char *spec, struct sim_rail_cfg *r, uint64_t lat,
		      double loss)
{
	char *save = NULL, *tok;
	int ret = -EINVAL;

	r->lat_ns = lat;
	r->loss = loss;
	for (tok = strtok_r(spec, ":", &save); tok;
	     tok = strtok_r(NULL, ":", &save)) {
		if (!strcmp(tok, "tcp"))
			r->rdma = false;
		else if (!strcmp(tok, "rdma"))
			r->rdma = true;
		else if (!strncmp(tok, "loss", 4))
			r->loss = strtod(tok + 4, NULL);
		else if (!parse_rate(tok, &r->rate))
			ret = 0;
		else if (parse_time(tok, &r->lat_ns))
			return -EINVAL;
	}
	return ret;
}

/* railK[:nodeM]@TIME */
static int parse_fail(const char *s, struct sim_cfg *c)
{
	int rail, node = -1, n = 0;
	const char *at = strchr(s, '@');
	uint64_t t;

	if (!at || sscanf(s, "rail%d%n", &rail, &n) != 1)
		return -EINVAL;
	if (s[n] == ':' && sscanf(s + n, ":node%d", &node) != 1)
		return -EINVAL;
	if (rail < 0 || rail >= c->nrails || parse_time(at + 1, &t))
		return -EINVAL;
	c->rail[rail].fail_ns = t;
	c->rail[rail].fail_node = node;
	return 0;
}

static void size_str(uint64_t b, char *buf, size_t len)
{
	if (b >= (1u << 20) && !(b & ((1u << 20) - 1)))
		snprintf(buf, len, "%lluM", (unsigned long long)(b >> 20));
	else if (b >= 1024 && !(b & 1023))
		snprintf(buf, len, "%lluK", (unsigned long long)(b >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)b);
}

static void describe(const struct sim_cfg *c)
{
	printf("# %d nodes; rails:", c->nodes);
	for (int r = 0; r < c->nrails; r++) {
		const struct sim_rail_cfg *rc = &c->rail[r];

		printf("%s %.6g Mbit/s %s %.6g ms", r ? "," : "",
		       rc->rate * 8 / 1e6, rc->rdma ? "rdma" : "tcp",
		       rc->lat_ns / 1e6);
		if (rc->loss > 0)
			printf(" loss %g", rc->loss);
		if (rc->fail_ns != SIM_NEVER) {
			printf(" (fails at %.6g s", rc->fail_ns / 1e9);
			if (rc->fail_node >= 0)
				printf(" on node %d", rc->fail_node);
			printf(")");
		}
	}
	printf("; unit %u B; MTU %u; seed %llu\n",
	       c->unit ? c->unit : sim_auto_unit(c), c->mtu,
	       (unsigned long long)c->seed);
}

static double busbw(uint64_t bytes, int n, uint64_t ns)
{
	return ns ? (double)bytes / (ns / 1e9) * 2 * (n - 1) / n / 1e6 : 0;
}

static void fmt_ms(const struct sim_result *r, char *buf, size_t len)
{
	if (r->err)
		snprintf(buf, len, "fails");
	else
		snprintf(buf, len, "%.3f", r->ns / 1e6);
}

static double ratio(const struct sim_result *a, const struct sim_result *b)
{
	return a->err || b->err || !b->ns ? 0 : (double)a->ns / b->ns;
}

/* One row per size: Nezha, Gloo, MPTCP. */
static int table(const struct sim_cfg *cfg, const uint64_t *sizes, int nsizes,
		 int iters)
{
	struct sim_result rn, rg, rm;
	struct sim_cfg c;
	char sz[24], a[24], b[24], m[24];
	uint64_t tot;
	int ret;

	describe(cfg);
	printf("%-6s %-5s %12s %10s %12s %12s %8s %8s %6s\n", "size", "algo",
	       "nezha_ms", "busbw_MB/s", "gloo_ms", "mptcp_ms", "gloo/nz",
	       "mptcp/nz", "rail0%");
	for (int i = 0; i < nsizes; i++) {
		c = *cfg;
		c.model = SIM_NEZHA;
		ret = sim_allreduce(&c, sizes[i], iters, &rn);
		c.model = SIM_GLOO;
		if (!ret)
			ret = sim_allreduce(&c, sizes[i], iters, &rg);
		c.model = SIM_MPTCP;
		if (!ret)
			ret = sim_allreduce(&c, sizes[i], iters, &rm);
		if (ret) {
			fprintf(stderr, "nezha-sim: %s\n", strerror(-ret));
			return 1;
		}
		size_str(sizes[i], sz, sizeof(sz));
		fmt_ms(&rn, a, sizeof(a));
		fmt_ms(&rg, b, sizeof(b));
		fmt_ms(&rm, m, sizeof(m));
		tot = 0;
		for (int k = 0; k < cfg->nrails; k++)
			tot += rn.rail_bytes[k];
		printf("%-6s %-5s %12s %10.2f %12s %12s %8.2f %8.2f %6.1f\n", sz,
		       nz_coll_algo_name((enum nz_coll_algo)rn.algo), a,
		       rn.err ? 0 : busbw(sizes[i], cfg->nodes, rn.ns), b, m,
		       ratio(&rg, &rn), ratio(&rm, &rn),
		       tot ? 100.0 * rn.rail_bytes[0] / tot : 0);
	}
	return 0;
}

/* One measured allreduce time; 0: not measured. */
struct sim_meas {
	uint64_t bytes;
	double nezha_ms, gloo_ms;
	int algo;		/* forced on both the guests and the model; -1 not */
};

/* A test-bed run the model is held against (Documentation/sim.rst). */
struct sim_bed {
	const char *what;
	int nodes;
	double rate;		/* bytes/s of each of 2 rails */
	uint32_t unit;		/* the chunk unit those guests used */
	const struct sim_meas *m;
	size_t n;
};

/*
 * 2 guests, 2 rails of 40 Mbit/s (tbf), MTU 9000, idle host, nezha-bench
 * allreduce and Gloo (torch 1.13) in one boot, tree d2b5edd
 * (Documentation/collectives.rst, "Jumbo frames", the run on the final
 * tree of 2026-11-30).  Busbw in MB/s turned into time (2 ranks: busbw =
 * algbw).  Their NICs reported no speed before vm.sh -s (6eb4224): unit
 * 64 KiB.
 */
static const struct sim_meas two_guests[] = {
	{ 32u << 10, 8.7, 13.4, -1 },
	{ 64u << 10, 17.8, 17.7, -1 },
	{ 1u << 20, 1048576 / 6.3e3, 1048576 / 4.57e3, -1 },
	{ 4u << 20, 4194304 / 8.6e3, 4194304 / 4.65e3, -1 },
	{ 16u << 20, 16777216 / 8.7e3, 16777216 / 4.79e3, -1 },
	{ 64u << 20, 67108864 / 8.6e3, 67108864 / 4.86e3, -1 },
};

/*
 * 8 guests of one vCPU on 2 host cores, 2 rails of 5 Mbit/s (tbf), MTU
 * 9000, nezha-bench allreduce and Gloo in one boot: NZ_BENCH_NODES=8
 * NZ_RATE=5mbit NZ_BENCH_MAX=16M make bench-coll, 2026-12-06, tree
 * 7cca1b5 (collectives.rst, "Eight guests"); time per allreduce, the
 * largest of the ranks.  The rows with an algorithm forced: the same 8
 * guests and rails, 2026-12-07, tree fc345b6, nezha-bench allreduce -A
 * hd|ring -n 3 -w 1 (no Gloo run): 1 MiB the median of 7 runs in 4
 * boots (hd) and of 4 in 3 (ring), 256 and 512 KiB one run each.
 */
static const struct sim_meas eight_guests[] = {
	{ 8, 81.4, 83.8, -1 },
	{ 64u << 10, 304.7, 448.6, -1 },
	{ 1u << 20, 2862.8, 3049.8, -1 },
	{ 4u << 20, 6780.2, 12041.8, -1 },
	{ 16u << 20, 26007.3, 48145.2, -1 },
	{ 256u << 10, 976.5, 0, NZ_ALGO_HD },
	{ 256u << 10, 519.9, 0, NZ_ALGO_RING },
	{ 512u << 10, 1541.7, 0, NZ_ALGO_HD },
	{ 512u << 10, 979.5, 0, NZ_ALGO_RING },
	{ 1u << 20, 2765.9, 0, NZ_ALGO_HD },
	{ 1u << 20, 1679.4, 0, NZ_ALGO_RING },
};

/*
 * 4 guests, the same rails, 2026-12-07, tree fc345b6, nezha-bench
 * allreduce -A hd|ring -n 3 -w 1 -c 0 (no Gloo run): the mean of 2 runs
 * in one boot.
 */
static const struct sim_meas four_guests[] = {
	{ 256u << 10, 517.4, 0, NZ_ALGO_HD },
	{ 256u << 10, 383.6, 0, NZ_ALGO_RING },
	{ 1u << 20, 1449.4, 0, NZ_ALGO_HD },
	{ 1u << 20, 1360.7, 0, NZ_ALGO_RING },
};

static const struct sim_bed beds[] = {
	{ "2 guests x 2 rails of 40 Mbit/s (collectives.rst, tree d2b5edd)",
	  2, 40e6 / 8, 64u << 10, two_guests,
	  sizeof(two_guests) / sizeof(two_guests[0]) },
	{ "4 guests x 2 rails of 5 Mbit/s (sim.rst, \"Validation\")",
	  4, 5e6 / 8, 16u << 10, four_guests,
	  sizeof(four_guests) / sizeof(four_guests[0]) },
	{ "8 guests x 2 rails of 5 Mbit/s (collectives.rst, \"Eight guests\")",
	  8, 5e6 / 8, 16u << 10, eight_guests,
	  sizeof(eight_guests) / sizeof(eight_guests[0]) },
};

static void testbed(struct sim_cfg *c, int nodes, double rate)
{
	sim_cfg_init(c);
	c->nodes = nodes;
	c->nrails = 2;
	for (int r = 0; r < 2; r++) {
		c->rail[r].rate = rate;
		c->rail[r].lat_ns = 200000;
	}
}

/* "12.3" or "-" when not measured. */
static const char *ms_str(double ms, char *buf, size_t len)
{
	if (ms > 0)
		snprintf(buf, len, "%.1f", ms);
	else
		snprintf(buf, len, "-");
	return buf;
}

static const char *err_str(double sim, double meas, char *buf, size_t len)
{
	if (meas > 0)
		snprintf(buf, len, "%+.0f%%", 100 * (sim / meas - 1));
	else
		snprintf(buf, len, "-");
	return buf;
}

static int validate_bed(const struct sim_bed *b, int iters)
{
	char sz[32], m1[16], e1[16], m2[16], s2[16], e2[16];
	struct sim_result rn, rg;
	struct sim_cfg c;
	double gloo_sim;
	int ret;

	testbed(&c, b->nodes, b->rate);
	c.unit = b->unit;
	printf("# validation: %s\n", b->what);
	describe(&c);
	printf("%-9s %10s %10s %7s   %10s %10s %7s\n", "size", "nezha_meas",
	       "nezha_sim", "error", "gloo_meas", "gloo_sim", "error");
	for (size_t i = 0; i < b->n; i++) {
		const struct sim_meas *m = &b->m[i];

		c.algo = m->algo;
		c.model = SIM_NEZHA;
		ret = sim_allreduce(&c, m->bytes, iters, &rn);
		if (ret)
			return ret;
		/* A row with Nezha's algorithm forced has no Gloo run. */
		gloo_sim = -1;
		if (m->algo < 0) {
			c.model = SIM_GLOO;
			ret = sim_allreduce(&c, m->bytes, iters, &rg);
			if (ret)
				return ret;
			gloo_sim = rg.ns / 1e6;
		}
		size_str(m->bytes, sz, sizeof(sz));
		if (m->algo >= 0) {
			size_t l = strlen(sz);

			snprintf(sz + l, sizeof(sz) - l, " %s",
				 nz_coll_algo_name((enum nz_coll_algo)m->algo));
		}
		printf("%-9s %10s %10.1f %7s   %10s %10s %7s\n", sz,
		       ms_str(m->nezha_ms, m1, sizeof(m1)), rn.ns / 1e6,
		       err_str(rn.ns / 1e6, m->nezha_ms, e1, sizeof(e1)),
		       ms_str(m->gloo_ms, m2, sizeof(m2)),
		       ms_str(gloo_sim, s2, sizeof(s2)),
		       err_str(gloo_sim, m->gloo_ms, e2, sizeof(e2)));
	}
	return 0;
}

static int validate(int iters)
{
	int ret = 0;

	for (size_t i = 0; i < sizeof(beds) / sizeof(beds[0]) && !ret; i++) {
		if (i)
			printf("\n");
		ret = validate_bed(&beds[i], iters);
	}
	return ret;
}

/* The paper's setups (Documentation/sim.rst, "Projections"). */
static int project(int iters)
{
	static const uint64_t sizes[] = { 8, 64u << 10, 1u << 20, 16u << 20,
					  64u << 20 };
	static const int nodes[] = { 32, 128 };
	struct sim_result nofail;
	struct sim_cfg c;
	int ret;

	for (size_t k = 0; k < 2; k++) {
		printf("\n## %d nodes, test bed rails: 2 x TCP 40 Mbit/s, 0.2 ms\n",
		       nodes[k]);
		testbed(&c, nodes[k], 40e6 / 8);
		ret = table(&c, sizes, 5, iters);
		if (ret)
			return ret;

		printf("\n## %d nodes, two TCP rails: 2 x 25 Gbit/s, 20 us\n",
		       nodes[k]);
		sim_cfg_init(&c);
		c.nodes = nodes[k];
		c.nrails = 2;
		for (int r = 0; r < 2; r++) {
			c.rail[r].rate = 25e9 / 8;
			c.rail[r].lat_ns = 20000;
		}
		ret = table(&c, sizes, 5, iters);
		if (ret)
			return ret;

		printf("\n## %d nodes, TCP + RDMA: TCP 25 Gbit/s 20 us + RDMA 100 Gbit/s 3 us\n",
		       nodes[k]);
		c.rail[1].rate = 100e9 / 8;
		c.rail[1].lat_ns = 3000;
		c.rail[1].rdma = true;
		ret = table(&c, sizes, 5, iters);
		if (ret)
			return ret;

		/* rail 1 dies half way through a 64 MiB allreduce. */
		printf("\n## %d nodes, 2 x TCP 25 Gbit/s, rail 1 fails half way through (one allreduce)\n",
		       nodes[k]);
		c.rail[1] = c.rail[0];
		ret = sim_allreduce(&c, 64u << 20, 1, &nofail);
		if (ret)
			return ret;
		c.rail[1].fail_ns = nofail.ns / 2;
		ret = table(&c, sizes + 4, 1, 1);
		if (ret)
			return ret;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nezha-sim [--nodes N] --rails SPEC[,SPEC...] [--lat T] [--loss P]\n"
		"                 [--sizes S,...] [--fail railK[:nodeM]@T] [--iters K]\n"
		"                 [--seed S] [--unit B] [--mtu M] [--detect T]\n"
		"                 [--reduce-rate RATE] [--mptcp-overhead F] [--algo NAME]\n"
		"       nezha-sim --validate | --project\n"
		"SPEC: RATE[:tcp|:rdma][:LATENCY][:lossP], e.g. 40mbit, 100gbit:rdma:3us\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nodes", required_argument, NULL, 'n' },
		{ "rails", required_argument, NULL, 'r' },
		{ "lat", required_argument, NULL, 'l' },
		{ "loss", required_argument, NULL, 'L' },
		{ "sizes", required_argument, NULL, 's' },
		{ "fail", required_argument, NULL, 'f' },
		{ "iters", required_argument, NULL, 'i' },
		{ "seed", required_argument, NULL, 'S' },
		{ "unit", required_argument, NULL, 'u' },
		{ "mtu", required_argument, NULL, 'm' },
		{ "detect", required_argument, NULL, 'd' },
		{ "reduce-rate", required_argument, NULL, 'R' },
		{ "mptcp-overhead", required_argument, NULL, 'o' },
		{ "algo", required_argument, NULL, 'a' },
		{ "validate", no_argument, NULL, 'V' },
		{ "project", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	uint64_t sizes[MAX_SIZES], lat = 200000, v;
	char *rails = NULL, *fails[SIM_MAX_RAILS], *tok, *save = NULL;
	int nsizes = 0, nfails = 0, iters = 2, opt, mode = 0;
	double loss = 0;
	struct sim_cfg c;
	enum nz_coll_algo algo;

	sim_cfg_init(&c);
	c.nodes = 2;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			c.nodes = atoi(optarg);
			break;
		case 'r':
			rails = optarg;
			break;
		case 'l':
			if (parse_time(optarg, &lat))
				goto bad;
			break;
		case 'L':
			loss = strtod(optarg, NULL);
			break;
		case 's':
			for (tok = strtok_r(optarg, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				if (nsizes == MAX_SIZES ||
				    parse_size(tok, &sizes[nsizes++]))
					goto bad;
			}
			break;
		case 'f':
			if (nfails == SIM_MAX_RAILS)
				goto bad;
			fails[nfails++] = optarg;
			break;
		case 'i':
			iters = atoi(optarg);
			break;
		case 'S':
			c.seed = strtoull(optarg, NULL, 0);
			break;
		case 'u':
			if (parse_size(optarg, &v) || v < 4096 || v > (1u << 24) ||
			    (v & (v - 1)))
				goto bad;
			c.unit = (uint32_t)v;
			break;
		case 'm':
			c.mtu = (uint32_t)atoi(optarg);
			break;
		case 'd':
			if (parse_time(optarg, &c.detect_ns))
				goto bad;
			break;
		case 'R':
			if (parse_rate(optarg, &c.reduce_rate))
				goto bad;
			break;
		case 'o':
			c.mptcp_overhead = strtod(optarg, NULL);
			break;
		case 'a':
			if (nz_coll_algo_parse(optarg, &algo))
				goto bad;
			c.algo = (int)algo;
			break;
		case 'V':
		case 'P':
			mode = opt;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (iters < 1 || optind != argc)
		goto bad;
	if (mode == 'V')
		return validate(iters) ? 1 : 0;
	if (mode == 'P')
		return project(iters) ? 1 : 0;
	if (!rails || c.nodes < 2 || c.nodes > 1024)
		goto bad;
	for (tok = strtok_r(rails, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (c.nrails == SIM_MAX_RAILS ||
		    parse_rail(tok, &c.rail[c.nrails++], lat, loss))
			goto bad;
	}
	for (int i = 0; i < nfails; i++)
		if (parse_fail(fails[i], &c))
			goto bad;
	if (!nsizes) {
		static const uint64_t def[] = { 8, 64u << 10, 1u << 20,
						16u << 20, 64u << 20 };

		memcpy(sizes, def, sizeof(def));
		nsizes = 5;
	}
	return table(&c, sizes, nsizes, iters);
bad:
	usage(stderr);
	return 2;
}
