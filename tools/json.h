/* SPDX-License-Identifier: GPL-2.0 */
/* nezhactl: a small streaming JSON writer (tools/json.c). */
#ifndef NZCTL_JSON_H
#define NZCTL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define NZJ_MAX_DEPTH 16

struct nzj {
	FILE *f;
	int pretty;
	int depth;
	bool first[NZJ_MAX_DEPTH];
};

/* key is NULL for a value in an array or at the top. */
void nzj_init(struct nzj *j, FILE *f, int pretty);
void nzj_obj_open(struct nzj *j, const char *key);
void nzj_obj_close(struct nzj *j);
void nzj_arr_open(struct nzj *j, const char *key);
void nzj_arr_close(struct nzj *j);
void nzj_str(struct nzj *j, const char *key, const char *v);
void nzj_u64(struct nzj *j, const char *key, uint64_t v);
void nzj_i64(struct nzj *j, const char *key, int64_t v);
void nzj_dbl(struct nzj *j, const char *key, double v);
void nzj_bool(struct nzj *j, const char *key, bool v);
void nzj_null(struct nzj *j, const char *key);
/* Ends a top-level value with a newline. */
void nzj_end(struct nzj *j);

#endif /* NZCTL_JSON_H */
