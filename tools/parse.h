/* SPDX-License-Identifier: GPL-2.0 */
/* nezhactl: pure parsing helpers (tools/parse.c), unit-tested on the host. */
#ifndef NZCTL_PARSE_H
#define NZCTL_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* A keyword and what it means; tables end with { NULL, 0 }. */
struct nzctl_kw {
	const char *name;
	int id;			/* >= 0; aliases share one */
};

#define NZCTL_KW_NONE		(-1)
#define NZCTL_KW_AMBIGUOUS	(-2)

/*
 * The id of the keyword arg names: the keyword itself, or a prefix of
 * keywords that all have one id.  NZCTL_KW_NONE if no keyword starts with
 * arg, NZCTL_KW_AMBIGUOUS if keywords of several ids do.
 */
int nzctl_kw_find(const char *arg, const struct nzctl_kw *kws);
/* "a, b, c": the keywords arg is a prefix of (all, if arg is ""). */
size_t nzctl_kw_candidates(const char *arg, const struct nzctl_kw *kws,
			   char *buf, size_t len);

/* Decimal 0..max, nothing else (no sign, no blank, no suffix). */
int nzctl_parse_u32(const char *s, uint32_t max, uint32_t *out);
/* An octal file mode, 0..07777. */
int nzctl_parse_mode(const char *s, uint32_t *out);

/* Words of a batch line, in place; argc, or -errno with *err saying why. */
int nzctl_tokenize(char *line, char **argv, int max, const char **err);
int nzctl_line_continues(const char *line, size_t len);

#endif /* NZCTL_PARSE_H */
