// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl's parsing and output, on the host: keywords by unique prefix,
 * numbers, the words and lines of a batch file, the JSON writer, and the
 * Prometheus text format of "stats -o prometheus" from made-up values.
 * (The command line itself, exit codes and schemas: test_nezhactl_cli.)
 */
#include <errno.h>
#include <string.h>
#include "tap.h"
#include "../../tools/parse.h"
#include "../../tools/json.h"
#include "../../tools/stats.h"

static const struct nzctl_kw kws[] = {
	{ "show", 0 }, { "list", 0 }, { "set", 1 }, { "del", 2 }, { "delete", 2 },
	{ "dev", 3 }, { NULL, 0 },
};

static int tok(const char *line, const char *want)
{
	char buf[256], *argv[16], got[256] = "";
	const char *err;
	int argc;

	snprintf(buf, sizeof(buf), "%s", line);
	argc = nzctl_tokenize(buf, argv, 16, &err);
	if (argc < 0)
		return !strcmp(want, "ERR");
	for (int i = 0; i < argc; i++) {
		strcat(got, argv[i]);
		strcat(got, "|");
	}
	if (strcmp(got, want))
		tap_diag("tokenize '%s': got '%s', want '%s'", line, got, want);
	return !strcmp(got, want);
}

static char *capture(void (*fn)(FILE *f, void *arg), void *arg)
{
	static char buf[65536];
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	memset(buf, 0, sizeof(buf));
	fn(f, arg);
	fclose(f);
	return buf;
}

static void json_doc(FILE *f, void *arg)
{
	struct nzj j;

	nzj_init(&j, f, *(int *)arg);
	nzj_obj_open(&j, NULL);
	nzj_str(&j, "name", "r\"0\\\n\x01");
	nzj_u64(&j, "big", 18446744073709551615ULL);
	nzj_arr_open(&j, "empty");
	nzj_arr_close(&j);
	nzj_arr_open(&j, "list");
	nzj_i64(&j, NULL, -1);
	nzj_bool(&j, NULL, 1);
	nzj_null(&j, NULL);
	nzj_dbl(&j, NULL, 0.5);
	nzj_dbl(&j, NULL, 1.0 / 0.0);
	nzj_arr_close(&j);
	nzj_obj_open(&j, "o");
	nzj_obj_close(&j);
	nzj_obj_close(&j);
	nzj_end(&j);
}

static void set(struct nzst_values *v, const struct nzst_metric *tbl, const char *file,
		const char *val)
{
	for (const struct nzst_metric *m = tbl; m->file; m++) {
		if (strcmp(m->file, file))
			continue;
		v->m[v->n] = m;
		snprintf(v->v[v->n], NZST_VALUE_LEN, "%s", val);
		v->n++;
		return;
	}
	tap_diag("no metric %s", file);
}

static struct nzst_all all;

static void prom(FILE *f, void *arg)
{
	(void)arg;
	nzst_print(f, &all, NZST_PROMETHEUS, 0);
}

/* Every line: a comment (# HELP/# TYPE NAME ...) or NAME{labels} NUMBER. */
static int prom_valid(const char *text, char *why, size_t len)
{
	char line[1024], lastfam[256] = "";
	const char *p = text;

	while (*p) {
		size_t n = strcspn(p, "\n");
		char name[256];

		snprintf(line, sizeof(line), "%.*s", (int)n, p);
		p += n + (p[n] == '\n');
		if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7)) {
			if (sscanf(line + 7, "%255s", name) != 1)
				goto bad;
			if (!strncmp(line, "# TYPE ", 7)) {
				const char *t = line + 7 + strlen(name);

				if (strcmp(t, " counter") && strcmp(t, " gauge"))
					goto bad;
				if (strstr(t, "counter") && !strstr(name, "_total"))
					goto bad;
				snprintf(lastfam, sizeof(lastfam), "%s", name);
			}
			continue;
		}
		n = strspn(line, "abcdefghijklmnopqrstuvwxyz_0123456789");
		snprintf(name, sizeof(name), "%.*s", (int)n, line);
		/* A sample belongs to the family whose TYPE came last. */
		if (!n || strcmp(name, lastfam))
			goto bad;
		if (line[n] == '{') {
			const char *e = strstr(line, "} ");

			if (!e)
				goto bad;
			n = (size_t)(e - line) + 1;
		}
		if (line[n] != ' ')
			goto bad;
		{
			char *end;

			strtod(line + n + 1, &end);
			if (end == line + n + 1 || *end)
				goto bad;
		}
	}
	return 1;
bad:
	snprintf(why, len, "%s", line);
	return 0;
}

int main(void)
{
	char *argv[8], why[1024], *out;
	const char *err;
	uint32_t v;
	int pretty;

	tap_plan(33);
	/* Keywords. */
	tap_ok(nzctl_kw_find("show", kws) == 0 && nzctl_kw_find("sh", kws) == 0,
	       "a keyword and its unique prefix");
	tap_ok(nzctl_kw_find("s", kws) == NZCTL_KW_AMBIGUOUS, "\"s\" is ambiguous (show, set)");
	tap_ok(nzctl_kw_find("de", kws) == NZCTL_KW_AMBIGUOUS, "\"de\" is ambiguous (del, dev)");
	tap_ok(nzctl_kw_find("dev", kws) == 3, "an exact keyword wins over longer ones");
	tap_ok(nzctl_kw_find("dele", kws) == 2 && nzctl_kw_find("del", kws) == 2,
	       "aliases of one meaning are no ambiguity");
	tap_ok(nzctl_kw_find("x", kws) == NZCTL_KW_NONE && nzctl_kw_find("", kws) == NZCTL_KW_NONE &&
	       nzctl_kw_find("shows", kws) == NZCTL_KW_NONE, "unknown, empty and too long are none");
	{
		char list[64];

		tap_ok(nzctl_kw_candidates("s", kws, list, sizeof(list)) == 2 &&
		       !strcmp(list, "show, set"), "the candidates of a prefix are named (%s)", list);
	}
	/* Numbers. */
	tap_ok(!nzctl_parse_u32("65535", 65535, &v) && v == 65535, "u32 at its maximum");
	tap_ok(nzctl_parse_u32("65536", 65535, &v) && nzctl_parse_u32("-1", 65535, &v) &&
	       nzctl_parse_u32(" 1", 65535, &v) && nzctl_parse_u32("1k", 65535, &v) &&
	       nzctl_parse_u32("", 65535, &v) && nzctl_parse_u32("99999999999999999999", ~0u, &v),
	       "u32: above the maximum, signs, blanks, suffixes, empty, overflow refused");
	tap_ok(!nzctl_parse_mode("0660", &v) && v == 0660 && !nzctl_parse_mode("660", &v) &&
	       v == 0660 && nzctl_parse_mode("0668", &v) && nzctl_parse_mode("010000", &v),
	       "modes are octal, 0..07777");
	/* Batch lines. */
	tap_ok(tok("rail add r0  proto\ttcp dev eth1\n", "rail|add|r0|proto|tcp|dev|eth1|"),
	       "words split on blanks");
	tap_ok(tok("   # a comment", "") && tok("", "") && tok("\n", ""), "comments and blank lines");
	tap_ok(tok("health set grace 10 # five", "health|set|grace|10|"), "a trailing comment");
	tap_ok(tok("device set group \"my group\" mode '0660'", "device|set|group|my group|mode|0660|"),
	       "double and single quotes group words");
	tap_ok(tok("a\\ b \"c\\\"d\" e#f", "a b|c\"d|e#f|"), "backslashes; # inside a word is no comment");
	tap_ok(tok("rail \"add", "ERR"), "an unterminated quote is an error");
	tap_ok(nzctl_tokenize(strcpy((char[64]){ 0 }, "a b c d e f g h i"), argv, 8, &err) == -E2BIG,
	       "too many words is an error");
	tap_ok(nzctl_line_continues("rail add \\\n", 11) && !nzctl_line_continues("a \\\\\n", 5) &&
	       !nzctl_line_continues("a\n", 2), "a line continues after one backslash, not two");
	/* JSON. */
	pretty = 0;
	out = capture(json_doc, &pretty);
	tap_ok(!strcmp(out, "{\"name\":\"r\\\"0\\\\\\n\\u0001\",\"big\":18446744073709551615,"
			    "\"empty\":[],\"list\":[-1,true,null,0.5,null],\"o\":{}}\n"),
	       "compact JSON: escapes, u64 range, empty containers, no NaN/inf");
	pretty = 1;
	out = capture(json_doc, &pretty);
	tap_ok(!strncmp(out, "{\n  \"name\": ", 12) && strstr(out, "\n  \"list\": [\n    -1,\n") &&
	       strstr(out, "\"empty\": [],") && out[strlen(out) - 2] == '}',
	       "pretty JSON indents by two");

	/* Prometheus, from made-up sysfs values. */
	set(&all.module, nzst_module_info, "release", "0.1.0");
	set(&all.module, nzst_module_info, "open_files", "2");
	set(&all.module_stats, nzst_module_stats, "cmds_submitted", "10");
	all.nrails = 2;
	snprintf(all.rails[0].name, 64, "r0");
	set(&all.rails[0].info, nzst_rail_info, "proto", "tcp");
	set(&all.rails[0].info, nzst_rail_info, "dev", "eth\"1");
	set(&all.rails[0].info, nzst_rail_info, "state", "up");
	set(&all.rails[0].info, nzst_rail_info, "speed_mbps", "25000");
	set(&all.rails[0].stats, nzst_rail_stats, "bytes_tx", "123456789012");
	set(&all.rails[0].stats, nzst_rail_stats, "conns", "1");
	set(&all.rails[0].stats, nzst_rail_stats, "last_failover_ms", "1500");
	set(&all.rails[0].stats, nzst_rail_stats, "failovers", "not-a-number");
	all.rails[0].npeers = 1;
	snprintf(all.rails[0].peers[0].comm, 24, "00c0ffee00000001");
	all.rails[0].peers[0].peer = 1;
	set(&all.rails[0].peers[0].vals, nzst_peer_files, "srtt_us", "2300");
	set(&all.rails[0].peers[0].vals, nzst_peer_files, "state", "up");
	set(&all.rails[0].peers[0].vals, nzst_peer_files, "bytes_tx", "7");
	snprintf(all.rails[1].name, 64, "r1");
	set(&all.rails[1].info, nzst_rail_info, "state", "no-link");
	set(&all.rails[1].stats, nzst_rail_stats, "bytes_tx", "5");
	set(&all.rails[1].rdma, nzst_rail_rdma, "wc_errors", "3");
	out = capture(prom, NULL);
	tap_ok(prom_valid(out, why, sizeof(why)), "the Prometheus text format (line: %s)",
	       prom_valid(out, why, sizeof(why)) ? "all" : why);
	tap_ok(strstr(out, "# TYPE nezha_rail_sent_bytes_total counter\n"
			   "nezha_rail_sent_bytes_total{rail=\"r0\"} 123456789012\n"
			   "nezha_rail_sent_bytes_total{rail=\"r1\"} 5\n") != NULL,
	       "one family, a sample per rail, counters end in _total");
	tap_ok(strstr(out, "nezha_rail_link_speed_bits_per_second{rail=\"r0\"} 25000000000\n") &&
	       strstr(out, "nezha_rail_last_failover_boottime_seconds{rail=\"r0\"} 1.5\n") &&
	       strstr(out, "nezha_peer_smoothed_rtt_seconds{rail=\"r0\",comm=\"00c0ffee00000001\","
			   "rank=\"0\",peer=\"1\"} 0.0023\n"),
	       "units: bits/s from Mbit/s, seconds from ms and us");
	tap_ok(strstr(out, "nezha_rail_info{rail=\"r0\",proto=\"tcp\",dev=\"eth\\\"1\",state=\"up\"} 1\n") != NULL,
	       "labels of the _info metric, quotes escaped");
	tap_ok(strstr(out, "nezha_rail_up{rail=\"r0\"} 1\nnezha_rail_up{rail=\"r1\"} 0\n") != NULL,
	       "nezha_rail_up from the state");
	tap_ok(!strstr(out, "not-a-number") && !strstr(out, "nezha_rail_failovers_total"),
	       "a value that is not a number is left out, not printed");
	tap_ok(strstr(out, "nezha_rail_rdma_wc_errors_total{rail=\"r1\"} 3\n") &&
	       !strstr(out, "nezha_rail_rdma_wc_errors_total{rail=\"r0\"}"),
	       "RDMA counters for the rails that have them");
	tap_ok(strstr(out, "nezha_commands_submitted_total 10\n") &&
	       strstr(out, "nezha_open_files 2\n") &&
	       strstr(out, "nezha_info{release=\"0.1.0\"} 1\n"), "module-wide metrics, no labels");
	{
		/* Every family's TYPE once: no family is split in two. */
		const char *p = out;
		int dup = 0;

		while ((p = strstr(p, "# TYPE "))) {
			char name[128], pat[160];

			sscanf(p + 7, "%127s", name);
			snprintf(pat, sizeof(pat), "# TYPE %s ", name);
			p += 7;
			dup += strstr(p, pat) != NULL;
		}
		tap_ok(!dup, "each family is declared once");
	}
	{
		char bad[] = "# TYPE x gauge\nx{a=\"b\"} one\n";

		tap_ok(!prom_valid(bad, why, sizeof(why)), "the format check itself fails on a bad sample");
	}
	/* JSON and text of the same values. */
	{
		static char buf[65536];
		FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

		nzst_print(f, &all, NZST_JSON, 0);
		fclose(f);
		tap_ok(strstr(buf, "\"rails\":[{\"name\":\"r0\",\"info\":{\"proto\":\"tcp\"") &&
		       strstr(buf, "\"failovers\":null") && strstr(buf, "\"bytes_tx\":123456789012"),
		       "stats JSON: numbers, null for what is not one");
		f = fmemopen(buf, sizeof(buf) - 1, "w");
		nzst_print(f, &all, NZST_TEXT, 0);
		fclose(f);
		tap_ok(strstr(buf, "rail r0: proto tcp dev eth\"1 state up speed_mbps 25000\n") &&
		       strstr(buf, "    peer 1 comm 00c0ffee00000001 (rank 0): srtt_us 2300 state up bytes_tx 7\n"),
		       "stats text");
	}
	tap_ok(1, "done");
	return tap_failed ? 1 : 0;
}
