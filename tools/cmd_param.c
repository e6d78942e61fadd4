// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl param [show [NAME]]
 * nezhactl param set NAME VALUE [NAME VALUE ...]
 *
 * The module parameters of nezha and nezha_rdma (the scheduler's knobs,
 * the transports' buffers): /sys/module/<module>/parameters/<name>.  A
 * parameter is named alone ("sched_mode") or with its module
 * ("nezha_rdma.rx_depth"), and may be shortened to a unique prefix.  Those
 * that can only be set when the module loads are refused with a pointer to
 * /etc/modprobe.d.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "nezhactl.h"

#define NZCTL_PARAM_USAGE \
	"nezhactl [-j] [-p] param [show [NAME]]\n" \
	"       nezhactl param set NAME VALUE [NAME VALUE ...]"

static const char *const nzctl_param_mods[] = { "nezha", "nezha_rdma" };
#define NZCTL_NMODS 2
#define NZCTL_MAX_PARAMS 64

struct nzctl_param {
	char mod[16];
	char name[64];
	char full[96];		/* module.name */
	int writable;
};

static int nzctl_param_cmp(const void *a, const void *b)
{
	return strcmp(((const struct nzctl_param *)a)->full,
		      ((const struct nzctl_param *)b)->full);
}

/* Every parameter of the loaded modules, sorted; count or -errno. */
static int nzctl_param_list(struct nzctl_param *p, int cap)
{
	char dir[512], path[700];
	int n = 0, loaded = 0;

	for (int m = 0; m < NZCTL_NMODS; m++) {
		struct dirent *de;
		DIR *d;

		snprintf(dir, sizeof(dir), "%s/%s/parameters", nzctl.sysmodule,
			 nzctl_param_mods[m]);
		d = opendir(dir);
		if (!d)
			continue;
		loaded++;
		while ((de = readdir(d)) && n < cap) {
			struct stat st;

			if (de->d_name[0] == '.')
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
			    (int)sizeof(path) || stat(path, &st) || !S_ISREG(st.st_mode))
				continue;
			snprintf(p[n].mod, sizeof(p[n].mod), "%s", nzctl_param_mods[m]);
			if (snprintf(p[n].name, sizeof(p[n].name), "%s", de->d_name) >=
			    (int)sizeof(p[n].name) ||
			    snprintf(p[n].full, sizeof(p[n].full), "%s.%s",
				     nzctl_param_mods[m], de->d_name) >= (int)sizeof(p[n].full))
				continue;
			p[n].writable = !!(st.st_mode & S_IWUSR);
			n++;
		}
		closedir(d);
	}
	if (!loaded) {
		fprintf(stderr, "nezhactl: param: the nezha module is not loaded (no %s/nezha/parameters)\n",
			nzctl.sysmodule);
		return -ENOENT;
	}
	qsort(p, (size_t)n, sizeof(*p), nzctl_param_cmp);
	return n;
}

/* The parameter arg names (exactly, or by unique prefix, with or without
 * its module); index, or NZCTL_EUSAGE after saying why. */
static int nzctl_param_find(const char *arg, const struct nzctl_param *p, int n)
{
	struct nzctl_kw kws[2 * NZCTL_MAX_PARAMS + 1];
	int k = 0;

	for (int i = 0; i < n; i++) {
		kws[k++] = (struct nzctl_kw){ p[i].full, i };
		kws[k++] = (struct nzctl_kw){ p[i].name, i };
	}
	kws[k] = (struct nzctl_kw){ NULL, 0 };
	return nzctl_kw(arg, kws, "param", NZCTL_PARAM_USAGE);
}

static void nzctl_param_path(const struct nzctl_param *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/parameters/%s", nzctl.sysmodule, p->mod, p->name);
}

static int nzctl_param_show(int argc, char **argv, struct nzctl_param *p, int n)
{
	char path[700], v[256];
	int only = -1;

	if (argc > 2)
		return nzctl_usage_err(NZCTL_PARAM_USAGE, "param show: too many arguments");
	if (argc == 2 && (only = nzctl_param_find(argv[1], p, n)) < 0)
		return only;
	if (nzctl.json)
		nzj_obj_open(&nzctl.j, NULL);
	for (int m = 0; m < NZCTL_NMODS; m++) {
		int opened = 0;

		for (int i = 0; i < n; i++) {
			if (strcmp(p[i].mod, nzctl_param_mods[m]) || (only >= 0 && i != only))
				continue;
			nzctl_param_path(&p[i], path, sizeof(path));
			if (nzctl_read_value(path, v, sizeof(v)))
				snprintf(v, sizeof(v), "?");
			if (!nzctl.json) {
				printf("%s %s%s\n", p[i].full, v, p[i].writable ? "" : " (load time)");
				continue;
			}
			if (!opened++)
				nzj_obj_open(&nzctl.j, nzctl_param_mods[m]);
			nzj_obj_open(&nzctl.j, p[i].name);
			{
				char *end;
				unsigned long long x;

				errno = 0;
				x = strtoull(v, &end, 10);
				if (*v >= '0' && *v <= '9' && !*end && !errno)
					nzj_u64(&nzctl.j, "value", x);
				else
					nzj_str(&nzctl.j, "value", v);
			}
			nzj_bool(&nzctl.j, "writable", p[i].writable);
			nzj_obj_close(&nzctl.j);
		}
		if (opened)
			nzj_obj_close(&nzctl.j);
	}
	if (nzctl.json) {
		nzj_obj_close(&nzctl.j);
		nzj_end(&nzctl.j);
	}
	return 0;
}

static int nzctl_param_set(int argc, char **argv, struct nzctl_param *p, int n)
{
	int idx[NZCTL_MAX_PARAMS], i, first = 0;
	char path[700];

	if (argc < 3 || argc % 2 == 0)
		return nzctl_usage_err(NZCTL_PARAM_USAGE, "param set: NAME VALUE pairs");
	/* Every name first: a usage error changes nothing. */
	for (i = 1; i < argc; i += 2) {
		int k = nzctl_param_find(argv[i], p, n);

		if (k < 0)
			return k;
		if (!p[k].writable)
			return nzctl_usage_err(NULL,
					       "param set: %s can only be set when the module loads: "
					       "put \"options %s %s=%s\" in /etc/modprobe.d/nezha.conf",
					       p[k].full, p[k].mod, p[k].name, argv[i + 1]);
		if (i / 2 < NZCTL_MAX_PARAMS)
			idx[i / 2] = k;
	}
	for (i = 1; i < argc; i += 2) {
		const struct nzctl_param *q = &p[idx[i / 2]];
		FILE *f;
		int ret = 0;

		nzctl_param_path(q, path, sizeof(path));
		f = fopen(path, "w");
		if (!f || fputs(argv[i + 1], f) < 0)
			ret = -errno;
		if (f && fclose(f) && !ret)
			ret = -errno;	/* the module's refusal comes here */
		if (ret) {
			fprintf(stderr, "nezhactl: param set %s %s: %s\n", q->full,
				argv[i + 1], strerror(-ret));
			first = first ? first : ret;
		}
	}
	return first;
}

int nzctl_param(int argc, char **argv)
{
	static const struct nzctl_kw subs[] = {
		{ "show", 0 }, { "list", 0 }, { "set", 1 }, { NULL, 0 },
	};
	struct nzctl_param p[NZCTL_MAX_PARAMS];
	int sub = 0, n;

	if (argc > 1 && nzctl_is_help(argv[1])) {
		printf("usage: %s\n", NZCTL_PARAM_USAGE);
		return 0;
	}
	if (argc > 1 && (sub = nzctl_kw(argv[1], subs, "param", NZCTL_PARAM_USAGE)) < 0)
		return sub;
	n = nzctl_param_list(p, NZCTL_MAX_PARAMS);
	if (n < 0)
		return n;
	if (argc <= 1)
		return nzctl_param_show(1, argv, p, n);
	return sub ? nzctl_param_set(argc - 1, argv + 1, p, n) :
		     nzctl_param_show(argc - 1, argv + 1, p, n);
}
