// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-bench p2p: point-to-point bandwidth and latency between two ranks
 * (bootstrapped from the environment, torchrun style).  Rank 0 sends, rank
 * 1 receives.  For every message size:
 *
 *  - bandwidth: rank 0 starts a window of nz_isend()s, rank 1 the matching
 *    nz_irecv()s; when rank 1 has them all it sends an 8-byte ack, and rank
 *    0 starts the next window.  time = elapsed / messages; algbw = size /
 *    time.  For point to point the bus bandwidth equals algbw.
 *  - latency: ping-pong of one message, half the round trip.
 *  - --check: one more, untimed window whose data follows a pattern
 *    derived from (size, message, offset); rank 1 counts the bytes that
 *    differ and reports them to rank 0 (#wrong).
 *
 * Rank 0 sends its parameters to rank 1 first, so both always run the same
 * plan.  After the table, rank 0 prints each rail's share of the bytes it
 * sent during the timed bandwidth runs, from
 * /sys/class/nezha/rail-NAME/stats/bytes_tx.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nezha.h"
#include "bench.h"

enum { TAG_PARAMS = 1, TAG_SYNC, TAG_DATA, TAG_ACK, TAG_PING, TAG_PONG, TAG_CHECK };
enum { MODE_BW = 1, MODE_LAT = 2, MODE_BOTH = 3 };

#define NZB_WINDOW_BYTES	(16u << 20)	/* auto window: this much in flight */
#define NZB_MAX_WINDOW		64
#define NZB_LAT_MAX		(1u << 20)	/* "both": no ping-pong above */
#define NZB_MAX_SIZES		64

/* The plan, as rank 0 sends it to rank 1 (same binary on both sides). */
struct nzb_params {
	uint64_t min, max;
	uint32_t factor, iters, warmup, window, mode, check, reg;
	uint32_t rsvd;
};

struct nzb_p2p {
	struct nz_comm *comm;
	struct nzb_params p;
	int rank;
	unsigned char *buf;
	size_t buflen;
	int nrails;
	/* rank 0: bytes_tx per size and rail, -1 when unreadable */
	size_t sizes[NZB_MAX_SIZES];
	int64_t rail_tx[NZB_MAX_SIZES][NZ_MAX_RAILS];
	int nsizes;
	char rail_err[160];
};

static int nzb_fail(const struct nzb_p2p *b, const char *what, size_t size,
		    int ret)
{
	fprintf(stderr, "nezha-bench p2p: rank %d: %s (size %zu): %s: %s\n",
		b->rank, what, size, strerror(-ret), nz_last_error());
	return ret;
}

static unsigned int nzb_window(const struct nzb_p2p *b, size_t size)
{
	size_t w = b->p.window;

	if (!w) {
		w = NZB_WINDOW_BYTES / size;
		w = w < 1 ? 1 : w > NZB_MAX_WINDOW ? NZB_MAX_WINDOW : w;
	}
	return (unsigned int)w;
}

/* ---- Data pattern (--check) ---- */

static uint64_t nzb_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t nzb_seed(size_t size, unsigned int msg)
{
	return nzb_mix((uint64_t)size) ^ ((uint64_t)msg << 48);
}

static void nzb_fill(unsigned char *p, size_t len, uint64_t seed)
{
	size_t i, words = len / 8;

	for (i = 0; i < words; i++) {
		uint64_t v = nzb_mix(seed + i);

		memcpy(p + 8 * i, &v, 8);
	}
	if (len % 8) {
		uint64_t v = nzb_mix(seed + i);

		memcpy(p + 8 * i, &v, len % 8);
	}
}

/* Bytes of p[0..len) that differ from the pattern. */
static uint64_t nzb_count_wrong(const unsigned char *p, size_t len, uint64_t seed)
{
	uint64_t wrong = 0;

	for (size_t i = 0; i * 8 < len; i++) {
		uint64_t v = nzb_mix(seed + i), got = 0;
		size_t n = len - i * 8 < 8 ? len - i * 8 : 8;

		memcpy(&got, p + 8 * i, n);
		if (n < 8)
			v &= (1ULL << (8 * n)) - 1;
		for (; got != v; got >>= 8, v >>= 8)
			wrong += (got & 0xff) != (v & 0xff);
	}
	return wrong;
}

/* ---- Rail statistics ---- */

static int64_t nzb_rail_tx(struct nzb_p2p *b, const char *rail)
{
	char path[128];
	unsigned long long v;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/sys/class/nezha/rail-%s/stats/bytes_tx", rail);
	f = fopen(path, "r");
	if (!f) {
		if (!b->rail_err[0])
			snprintf(b->rail_err, sizeof(b->rail_err), "%s: %s", path,
				 strerror(errno));
		return -1;
	}
	ok = fscanf(f, "%llu", &v) == 1;
	fclose(f);
	return ok ? (int64_t)v : -1;
}

static void nzb_rails_snap(struct nzb_p2p *b, int64_t *out)
{
	for (int s = 0; s < b->nrails; s++)
		out[s] = nzb_rail_tx(b, nz_comm_rail_name(b->comm, s));
}

/* ---- Exchanges ---- */

/* Both ranks at the same point: a token there and back. */
static int nzb_sync(struct nzb_p2p *b)
{
	uint64_t t = 0;
	int ret;

	if (b->rank == 0) {
		ret = nz_send(b->comm, &t, sizeof(t), 1, TAG_SYNC);
		if (!ret)
			ret = nz_recv(b->comm, &t, sizeof(t), 1, TAG_SYNC, NULL);
	} else {
		ret = nz_recv(b->comm, &t, sizeof(t), 0, TAG_SYNC, NULL);
		if (!ret)
			ret = nz_send(b->comm, &t, sizeof(t), 0, TAG_SYNC);
	}
	return ret;
}

/* One window of w messages of size bytes, rank 0 -> rank 1, then an ack. */
static int nzb_window_xfer(struct nzb_p2p *b, size_t size, unsigned int w,
			   uint64_t tag, uint64_t *ack)
{
	struct nz_request *reqs[NZB_MAX_WINDOW];
	struct nz_status st[NZB_MAX_WINDOW];
	int ret = 0;

	for (unsigned int k = 0; k < w && !ret; k++) {
		if (b->rank == 0)
			ret = nz_isend(b->comm, b->buf + k * size, size, 1, tag, &reqs[k]);
		else
			ret = nz_irecv(b->comm, b->buf + k * size, size, 0, tag, &reqs[k]);
		if (ret)
			w = k;	/* wait for those started, report the error */
	}
	{
		int wret = nz_waitall(reqs, w, st);

		if (!ret)
			ret = wret;
	}
	if (ret)
		return ret;
	if (b->rank == 0)
		return nz_recv(b->comm, ack, sizeof(*ack), 1, TAG_ACK, NULL);
	for (unsigned int k = 0; k < w; k++)
		if (st[k].bytes != size) {
			fprintf(stderr, "nezha-bench p2p: rank 1: message of %zu bytes, expected %zu\n",
				st[k].bytes, size);
			return -EBADMSG;
		}
	return nz_send(b->comm, ack, sizeof(*ack), 0, TAG_ACK);
}

/* The bytes each rail carried since before[], for the report. */
static void nzb_record_split(struct nzb_p2p *b, size_t size, const int64_t *before)
{
	int64_t after[NZ_MAX_RAILS];

	if (b->nsizes < NZB_MAX_SIZES) {
		nzb_rails_snap(b, after);
		b->sizes[b->nsizes] = size;
		for (int s = 0; s < b->nrails; s++)
			b->rail_tx[b->nsizes][s] = before[s] < 0 || after[s] < 0 ? -1 :
						   after[s] - before[s];
		b->nsizes++;
	}
}

static int nzb_bandwidth(struct nzb_p2p *b, size_t size, double *usec)
{
	unsigned int w = nzb_window(b, size), n = b->p.warmup + b->p.iters;
	int64_t before[NZ_MAX_RAILS];
	double t0 = 0;
	uint64_t ack = 0;
	int ret;

	for (unsigned int it = 0; it < n; it++) {
		if (it == b->p.warmup) {
			if (b->rank == 0)
				nzb_rails_snap(b, before);
			t0 = nzb_now();
		}
		ret = nzb_window_xfer(b, size, w, TAG_DATA, &ack);
		if (ret)
			return nzb_fail(b, "bandwidth", size, ret);
	}
	*usec = (nzb_now() - t0) * 1e6 / ((double)b->p.iters * w);
	if (b->rank == 0)
		nzb_record_split(b, size, before);
	return 0;
}


static int nzb_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Ping-pong; *usec is the mean half round trip, *p50 the median one (the
 * figure that a few descheduled iterations of a virtual machine do not
 * move).  Both ranks record the rails' split when no bandwidth run did:
 * a round trip is a ping on one rail and a pong on another.
 */
static int nzb_latency(struct nzb_p2p *b, size_t size, double *usec,
		       double *p50)
{
	unsigned int n = b->p.warmup + b->p.iters;
	int64_t before[NZ_MAX_RAILS];
	double t0 = 0, t, *rt;
	int ret = 0;

	rt = calloc(b->p.iters, sizeof(*rt));
	if (!rt)
		return nzb_fail(b, "latency", size, -ENOMEM);
	for (unsigned int it = 0; it < n && !ret; it++) {
		if (it == b->p.warmup) {
			if (b->p.mode == MODE_LAT)
				nzb_rails_snap(b, before);
			t0 = nzb_now();
		}
		t = nzb_now();
		if (b->rank == 0) {
			ret = nz_send(b->comm, b->buf, size, 1, TAG_PING);
			if (!ret)
				ret = nz_recv(b->comm, b->buf, size, 1, TAG_PONG, NULL);
		} else {
			ret = nz_recv(b->comm, b->buf, size, 0, TAG_PING, NULL);
			if (!ret)
				ret = nz_send(b->comm, b->buf, size, 0, TAG_PONG);
		}
		if (it >= b->p.warmup)
			rt[it - b->p.warmup] = (nzb_now() - t) * 1e6 / 2.0;
	}
	if (ret) {
		free(rt);
		return nzb_fail(b, "latency", size, ret);
	}
	*usec = (nzb_now() - t0) * 1e6 / (2.0 * b->p.iters);
	qsort(rt, b->p.iters, sizeof(*rt), nzb_cmp_double);
	*p50 = rt[b->p.iters / 2];
	free(rt);
	if (b->p.mode == MODE_LAT)
		nzb_record_split(b, size, before);
	return 0;
}

/* The untimed checked window; rank 0 learns the count of wrong bytes. */
static int nzb_check(struct nzb_p2p *b, size_t size, uint64_t *wrong)
{
	unsigned int w = nzb_window(b, size);
	int ret;

	for (unsigned int k = 0; k < w; k++) {
		if (b->rank == 0)
			nzb_fill(b->buf + k * size, size, nzb_seed(size, k));
		else
			memset(b->buf + k * size, 0, size);
	}
	*wrong = 0;
	if (b->rank == 1) {
		/* Rank 1 counts after its receives, before it acks. */
		struct nz_request *reqs[NZB_MAX_WINDOW];

		for (unsigned int k = 0; k < w; k++) {
			ret = nz_irecv(b->comm, b->buf + k * size, size, 0, TAG_CHECK, &reqs[k]);
			if (ret) {
				nz_waitall(reqs, k, NULL);
				return nzb_fail(b, "check", size, ret);
			}
		}
		ret = nz_waitall(reqs, w, NULL);
		if (ret)
			return nzb_fail(b, "check", size, ret);
		for (unsigned int k = 0; k < w; k++)
			*wrong += nzb_count_wrong(b->buf + k * size, size, nzb_seed(size, k));
		ret = nz_send(b->comm, wrong, sizeof(*wrong), 0, TAG_ACK);
	} else {
		ret = nzb_window_xfer(b, size, w, TAG_CHECK, wrong);
	}
	return ret ? nzb_fail(b, "check", size, ret) : 0;
}

/* ---- Report ---- */

static void nzb_header(const struct nzb_p2p *b, const char *fixed)
{
	printf("# nezha-bench p2p: rank 0 -> rank 1, %d rail%s:", b->nrails,
	       b->nrails == 1 ? "" : "s");
	for (int s = 0; s < b->nrails; s++)
		printf(" %s", nz_comm_rail_name(b->comm, s));
	printf(", chunk unit %d KiB", nz_comm_unit(b->comm) / 1024);
	printf("\n# %u iterations after %u warm-up, window %s, data check %s, buffers %s\n",
	       b->p.iters, b->p.warmup, b->p.window ? "fixed" : "auto (16 MiB, at most 64)",
	       b->p.check ? "on" : "off", fixed);
	printf("# time: per message in a window (bandwidth), half round trip (latency:\n"
	       "# mean, and median over the iterations)\n#\n");
	printf("# %12s %6s %12s %12s %12s %8s %12s %12s\n", "size(B)", "window", "time(us)",
	       "algbw(MB/s)", "busbw(MB/s)", "#wrong", "lat(us)", "p50lat(us)");
	fflush(stdout);
}

static void nzb_row(size_t size, unsigned int w, double bw_us, double lat_us,
		    double p50_us, int check, uint64_t wrong)
{
	char t[16] = "-", a[16] = "-", l[16] = "-", m[16] = "-", x[24] = "N/A";

	if (bw_us > 0) {
		snprintf(t, sizeof(t), "%.1f", bw_us);
		snprintf(a, sizeof(a), "%.2f", (double)size / bw_us);
	}
	if (lat_us > 0) {
		snprintf(l, sizeof(l), "%.1f", lat_us);
		snprintf(m, sizeof(m), "%.1f", p50_us);
	}
	if (check)
		snprintf(x, sizeof(x), "%llu", (unsigned long long)wrong);
	printf("  %12zu %6u %12s %12s %12s %8s %12s %12s\n", size, w, t, a, a, x, l, m);
	fflush(stdout);
}

static void nzb_rail_report(const struct nzb_p2p *b)
{
	int64_t total[NZ_MAX_RAILS] = { 0 }, sum = 0;

	if (!b->nsizes)
		return;
	if (b->rail_err[0]) {
		printf("# rail split: not available (%s)\n", b->rail_err);
		return;
	}
	printf("# rail split of the bytes rank %d sent in the timed %s runs (bytes_tx):\n",
	       b->rank, b->p.mode == MODE_LAT ? "latency" : "bandwidth");
	printf("# %12s", "size(B)");
	for (int s = 0; s < b->nrails; s++)
		printf(" %9s", nz_comm_rail_name(b->comm, s));
	printf("\n");
	for (int i = 0; i < b->nsizes; i++) {
		int64_t row = 0;

		for (int s = 0; s < b->nrails; s++)
			row += b->rail_tx[i][s] > 0 ? b->rail_tx[i][s] : 0;
		printf("  %12zu", b->sizes[i]);
		for (int s = 0; s < b->nrails; s++) {
			total[s] += b->rail_tx[i][s] > 0 ? b->rail_tx[i][s] : 0;
			if (row)
				printf(" %8.1f%%", 100.0 * (double)b->rail_tx[i][s] / (double)row);
			else
				printf(" %9s", "-");
		}
		printf("\n");
	}
	for (int s = 0; s < b->nrails; s++)
		sum += total[s];
	printf("# rail totals:");
	for (int s = 0; s < b->nrails; s++)
		printf(" %s %lld B (%.1f%%)%s", nz_comm_rail_name(b->comm, s),
		       (long long)total[s], sum ? 100.0 * (double)total[s] / (double)sum : 0.0,
		       s + 1 < b->nrails ? "," : "");
	printf("\n");
}

/* ---- Driver ---- */

static int nzb_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmg";
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	const char *u = *end ? strchr(units, *end | 0x20) : NULL;

	if (u) {
		v <<= 10 * (u - units + 1);
		end++;
	}
	if (end == s || *end || !v || v > (1ULL << 34))
		return -EINVAL;
	*out = v;
	return 0;
}

static void nzb_usage(void)
{
	fprintf(stderr,
		"usage: nezha-bench p2p [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
		"                       [-W WINDOW] [-m bw|lat|both] [-T SECONDS] [--check]\n"
		"                       [--no-register]\n"
		"  run on 2 ranks, set up like torchrun: MASTER_ADDR MASTER_PORT RANK WORLD_SIZE,\n"
		"  and the job key: NEZHA_JOB_KEY or NEZHA_JOB_KEY_FILE (nezhactl key generate)\n"
		"  sizes take K/M/G suffixes; defaults -b 4K -e 16M -f 4 -n 10 -w 2 -m both\n"
		"  -W 0 (default): a window of 16 MiB worth of messages, 1..64\n"
		"  -T: give up when one wait lasts longer than this, in seconds (120)\n"
		"  rank 1 follows rank 0's plan; only -T is its own\n");
}

static int nzb_options(int argc, char **argv, struct nzb_params *p, int *wait_s)
{
	static const struct option longopts[] = {
		{ "check", no_argument, NULL, 'c' },
		{ "no-register", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long v;
	int opt;

	*p = (struct nzb_params){ .min = 4096, .max = 16 << 20, .factor = 4, .iters = 10,
				  .warmup = 2, .mode = MODE_BOTH, .reg = 1 };
	while ((opt = getopt_long(argc, argv, "b:e:f:n:w:W:m:T:ch", longopts, NULL)) != -1) {
		switch (opt) {
		case 'b':
			if (nzb_parse_size(optarg, &p->min))
				goto bad;
			break;
		case 'e':
			if (nzb_parse_size(optarg, &p->max))
				goto bad;
			break;
		case 'f': case 'n': case 'w': case 'W': case 'T':
			v = strtol(optarg, NULL, 10);
			if (v < 0 || v > 1000000 || (opt == 'f' && v < 2) ||
			    (opt == 'n' && v < 1) || (opt == 'W' && v > NZB_MAX_WINDOW))
				goto bad;
			if (opt == 'f')
				p->factor = (uint32_t)v;
			else if (opt == 'n')
				p->iters = (uint32_t)v;
			else if (opt == 'w')
				p->warmup = (uint32_t)v;
			else if (opt == 'W')
				p->window = (uint32_t)v;
			else
				*wait_s = (int)v;
			break;
		case 'm':
			if (!strcmp(optarg, "bw"))
				p->mode = MODE_BW;
			else if (!strcmp(optarg, "lat"))
				p->mode = MODE_LAT;
			else if (!strcmp(optarg, "both"))
				p->mode = MODE_BOTH;
			else
				goto bad;
			break;
		case 'c':
			p->check = 1;
			break;
		case 'R':
			p->reg = 0;
			break;
		default:
			goto bad;
		}
	}
	if (optind != argc || p->min > p->max)
		goto bad;
	return 0;
bad:
	nzb_usage();
	return -EINVAL;
}

/* The largest buffer any step of the plan needs. */
static size_t nzb_buflen(const struct nzb_p2p *b)
{
	size_t need = 0;

	for (uint64_t s = b->p.min; s <= b->p.max; s *= b->p.factor) {
		size_t n = (size_t)s * nzb_window(b, (size_t)s);

		need = n > need ? n : need;
	}
	return need;
}

static int nzb_run(struct nzb_p2p *b)
{
	double sum_bw = 0, peak = 0;
	size_t peak_size = 0;
	uint64_t bad = 0;
	int nbw = 0;

	for (uint64_t s = b->p.min; s <= b->p.max; s *= b->p.factor) {
		size_t size = (size_t)s;
		double bw_us = 0, lat_us = 0, p50_us = 0;
		uint64_t wrong = 0;
		bool lat = b->p.mode == MODE_LAT ||
			   ((b->p.mode & MODE_LAT) && size <= NZB_LAT_MAX);
		int ret = nzb_sync(b);

		if (ret)
			return nzb_fail(b, "sync", size, ret);
		if (b->p.check)
			ret = nzb_check(b, size, &wrong);
		if (!ret && (b->p.mode & MODE_BW))
			ret = nzb_bandwidth(b, size, &bw_us);
		if (!ret && lat)
			ret = nzb_latency(b, size, &lat_us, &p50_us);
		if (ret)
			return ret;
		if (b->rank)
			continue;
		nzb_row(size, nzb_window(b, size), bw_us, lat_us, p50_us, b->p.check,
			wrong);
		bad += wrong;
		if (bw_us > 0) {
			sum_bw += (double)size / bw_us;
			nbw++;
			if ((double)size / bw_us > peak) {
				peak = (double)size / bw_us;
				peak_size = size;
			}
		}
	}
	if (b->rank == 0 && nbw) {
		printf("# Avg bus bandwidth: %.2f MB/s\n", sum_bw / nbw);
		printf("# Peak algbw: %.2f MB/s (%.1f Mbit/s) at %zu B\n", peak, peak * 8,
		       peak_size);
	}
	if (bad) {
		printf("# DATA CHECK FAILED: %llu bytes differ from what was sent\n",
		       (unsigned long long)bad);
		return -EBADMSG;
	}
	return 0;
}

int nzb_bench_p2p(int argc, char **argv)
{
	struct nzb_p2p b = { 0 };
	const char *fixed = "not registered (--no-register)";
	int wait_s = 120, ret, idx;

	ret = nzb_options(argc, argv, &b.p, &wait_s);
	if (ret)
		return ret;
	ret = nz_comm_init_env(&b.comm);
	if (ret) {
		fprintf(stderr, "nezha-bench p2p: %s\n", nz_last_error());
		return ret;
	}
	b.rank = nz_comm_rank(b.comm);
	b.nrails = nz_comm_nrails(b.comm);
	if (nz_comm_size(b.comm) != 2) {
		fprintf(stderr, "nezha-bench p2p: needs exactly 2 ranks (WORLD_SIZE=2), not %d\n",
			nz_comm_size(b.comm));
		ret = -EINVAL;
		goto out;
	}
	nz_comm_set_wait_timeout(b.comm, wait_s * 1000);
	/* One plan for both: rank 0's. */
	if (b.rank == 0)
		ret = nz_send(b.comm, &b.p, sizeof(b.p), 1, TAG_PARAMS);
	else
		ret = nz_recv(b.comm, &b.p, sizeof(b.p), 0, TAG_PARAMS, NULL);
	if (ret) {
		nzb_fail(&b, "exchanging the plan", sizeof(b.p), ret);
		goto out;
	}
	b.buflen = nzb_buflen(&b);
	b.buf = aligned_alloc(4096, (b.buflen + 4095) & ~(size_t)4095);
	if (!b.buf) {
		ret = -ENOMEM;
		fprintf(stderr, "nezha-bench p2p: cannot allocate %zu bytes\n", b.buflen);
		goto out;
	}
	memset(b.buf, 0, b.buflen);
	if (b.p.reg) {
		ret = nz_comm_register_buffer(b.comm, b.buf, b.buflen, &idx);
		fixed = ret ? "not registered" : "registered (io_uring fixed buffers)";
		if (ret && b.rank == 0)
			printf("# buffers not registered: %s\n", nz_last_error());
	}
	if (b.rank == 0)
		nzb_header(&b, fixed);
	ret = nzb_run(&b);
	if (b.rank == 0 || b.p.mode == MODE_LAT)
		nzb_rail_report(&b);
	if (b.rank != 0 && !ret)
		printf("# nezha-bench p2p rank 1: done\n");
out:
	nz_comm_destroy(b.comm);
	free(b.buf);
	return ret;
}
