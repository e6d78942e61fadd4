// SPDX-License-Identifier: GPL-2.0
/*
 * A streaming JSON writer for nezhactl -j: compact (one line) or, with
 * pretty set, indented by two spaces.  It writes what it is told in the
 * order it is told; the caller keeps objects and arrays balanced.
 */
#include <math.h>
#include <inttypes.h>
#include "json.h"

void nzj_init(struct nzj *j, FILE *f, int pretty)
{
	j->f = f;
	j->pretty = pretty;
	j->depth = 0;
	j->first[0] = true;
}

static void nzj_indent(struct nzj *j)
{
	if (!j->pretty)
		return;
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

static void nzj_string(struct nzj *j, const char *s)
{
	fputc('"', j->f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", j->f); break;
		case '\\': fputs("\\\\", j->f); break;
		case '\n': fputs("\\n", j->f); break;
		case '\t': fputs("\\t", j->f); break;
		case '\r': fputs("\\r", j->f); break;
		default:
			if (*p < 0x20)
				fprintf(j->f, "\\u%04x", *p);
			else
				fputc(*p, j->f);
		}
	}
	fputc('"', j->f);
}

/* The separator and the key of the next member. */
static void nzj_key(struct nzj *j, const char *key)
{
	if (!j->first[j->depth])
		fputc(',', j->f);
	if (j->depth)
		nzj_indent(j);
	j->first[j->depth] = false;
	if (key) {
		nzj_string(j, key);
		fputs(j->pretty ? ": " : ":", j->f);
	}
}

static void nzj_open(struct nzj *j, const char *key, char c)
{
	nzj_key(j, key);
	fputc(c, j->f);
	if (j->depth + 1 < NZJ_MAX_DEPTH)
		j->depth++;
	j->first[j->depth] = true;
}

static void nzj_close(struct nzj *j, char c)
{
	bool empty = j->first[j->depth];

	if (j->depth)
		j->depth--;
	if (!empty)
		nzj_indent(j);
	fputc(c, j->f);
}

void nzj_obj_open(struct nzj *j, const char *key) { nzj_open(j, key, '{'); }
void nzj_obj_close(struct nzj *j) { nzj_close(j, '}'); }
void nzj_arr_open(struct nzj *j, const char *key) { nzj_open(j, key, '['); }
void nzj_arr_close(struct nzj *j) { nzj_close(j, ']'); }

void nzj_str(struct nzj *j, const char *key, const char *v)
{
	nzj_key(j, key);
	nzj_string(j, v);
}

void nzj_u64(struct nzj *j, const char *key, uint64_t v)
{
	nzj_key(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void nzj_i64(struct nzj *j, const char *key, int64_t v)
{
	nzj_key(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void nzj_dbl(struct nzj *j, const char *key, double v)
{
	nzj_key(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.17g", v);
	else
		fputs("null", j->f);	/* JSON has no NaN or infinity */
}

void nzj_bool(struct nzj *j, const char *key, bool v)
{
	nzj_key(j, key);
	fputs(v ? "true" : "false", j->f);
}

void nzj_null(struct nzj *j, const char *key)
{
	nzj_key(j, key);
	fputs("null", j->f);
}

void nzj_end(struct nzj *j)
{
	fputc('\n', j->f);
	j->first[0] = true;
}
