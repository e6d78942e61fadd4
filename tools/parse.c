// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl's parsing, with no system call inside (host unit tests link it
 * alone): keywords by unique prefix, numbers, and the words of a batch
 * line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parse.h"

int nzctl_kw_find(const char *arg, const struct nzctl_kw *kws)
{
	size_t len = strlen(arg);
	int found = NZCTL_KW_NONE;

	if (!len)
		return NZCTL_KW_NONE;
	for (const struct nzctl_kw *k = kws; k->name; k++) {
		if (!strcmp(arg, k->name))
			return k->id;		/* an exact match always wins */
		if (strncmp(arg, k->name, len))
			continue;
		if (found == NZCTL_KW_NONE)
			found = k->id;
		else if (found != k->id)
			found = NZCTL_KW_AMBIGUOUS;	/* aliases of one id are fine */
	}
	return found;
}

size_t nzctl_kw_candidates(const char *arg, const struct nzctl_kw *kws,
			   char *buf, size_t len)
{
	size_t n = 0, used = 0, alen = strlen(arg);

	if (len)
		buf[0] = '\0';
	for (const struct nzctl_kw *k = kws; k->name; k++) {
		int w;

		if (alen && strncmp(arg, k->name, alen))
			continue;
		w = snprintf(buf + used, len > used ? len - used : 0, "%s%s",
			     n ? ", " : "", k->name);
		if (w > 0 && used + (size_t)w < len)
			used += (size_t)w;
		n++;
	}
	return n;
}

int nzctl_parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int nzctl_parse_mode(const char *s, uint32_t *out)
{
	unsigned long v;
	char *end;

	if (*s < '0' || *s > '7')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 8);
	if (errno || *end || v > 07777)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/*
 * Split line in place into words: blanks separate them, "double" or
 * 'single' quotes group them, a backslash takes the next character as it
 * is, and a # at the start of a word comments out the rest of the line.
 */
int nzctl_tokenize(char *line, char **argv, int max, const char **err)
{
	char *r = line, *w = line;
	int argc = 0;

	*err = NULL;
	for (;;) {
		char quote = 0;

		while (*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r')
			r++;
		if (!*r || *r == '#')
			break;
		if (argc == max) {
			*err = "too many words";
			return -E2BIG;
		}
		argv[argc++] = w;
		for (; *r; r++) {
			if (quote) {
				if (*r == quote) {
					quote = 0;
					continue;
				}
				if (*r == '\\' && quote == '"' && r[1])
					r++;
				*w++ = *r;
				continue;
			}
			if (*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r')
				break;
			if (*r == '"' || *r == '\'') {
				quote = *r;
				continue;
			}
			if (*r == '\\' && r[1])
				r++;
			*w++ = *r;
		}
		if (quote) {
			*err = "unterminated quote";
			return -EINVAL;
		}
		if (*r)
			r++;
		*w++ = '\0';
	}
	return argc;
}

/* Does the line (without its newline) end in an unescaped backslash? */
int nzctl_line_continues(const char *line, size_t len)
{
	size_t n = 0;

	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	while (n < len && line[len - 1 - n] == '\\')
		n++;
	return n % 2;
}
