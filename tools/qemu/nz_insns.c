// SPDX-License-Identifier: GPL-2.0
/*
 * nz_insns: a QEMU TCG plugin that counts the guest instructions executed
 * from each translated block's address, for an exact profile of where a
 * guest's CPU time goes (Documentation/benchmarks.rst, "CPU cost per
 * byte").  perf in a TCG guest cannot give one: its clock samples land in
 * the idle loop, 99 % of them in our runs.  Instructions are not cycles,
 * but they are repeatable to the instruction and compare two data paths
 * doing the same work.
 *
 * The guest brackets what it wants counted with a marker instruction,
 * "xchg %bx,%bx" (66 87 db, which nothing else executes; nz_mark does it
 * from user space).  At each marker the plugin writes the counts since the
 * previous one to OUT.N (N = 1, 2, ...: "ADDRESS COUNT" lines, hex address
 * of a block's first instruction, decimal instructions executed from it)
 * and starts again from zero.  Symbols are the reader's business
 * (scripts/insn-profile.py, with the guest's /proc/kallsyms).
 *
 *   qemu-system-x86_64 ... -plugin file=nz_insns.so,out=PREFIX
 *
 * Exact with one vCPU per guest (bench-cpu's default).  With more, vCPUs
 * running the same block add to its counter unlocked (QEMU's inline add is
 * not atomic) and may lose a count now and then, and the dump at a marker
 * races the other vCPUs' counting.
 *
 * Built against QEMU's plugin ABI version 1 (QEMU 7.x), which Debian ships
 * without its header: the few declarations used are below.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the parts of QEMU's plugin ABI (version 1) that we use ---------- */

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;	/* not looked at */

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
	void (*cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
	enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
	void (*cb)(unsigned int vcpu, void *data),
	enum qemu_plugin_cb_flags flags, void *data);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
						 size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

#define NZ_EXPORT __attribute__((visibility("default")))
NZ_EXPORT int qemu_plugin_version = 1;

/* ---- counting ---------------------------------------------------------- */

/*
 * One counter per translation of a block.  A block translated again (its
 * code flushed, or the same address in another address space) gets
 * another; the dump adds them up by address.  Counters are never freed:
 * QEMU's generated code keeps pointing at them.
 */
struct counter {
	uint64_t count;		/* added to by the generated code */
	uint64_t vaddr;
};

#define CHUNK_COUNTERS 65536

struct chunk {
	struct chunk *next;
	unsigned int used;
	struct counter c[CHUNK_COUNTERS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct chunk *chunks;
static char *out_prefix;
static unsigned int dumps;

static const unsigned char marker[] = { 0x66, 0x87, 0xdb };

static struct counter *counter_new(uint64_t vaddr)
{
	struct counter *c = NULL;

	pthread_mutex_lock(&lock);
	if (!chunks || chunks->used == CHUNK_COUNTERS) {
		struct chunk *n = calloc(1, sizeof(*n));

		if (n) {
			n->next = chunks;
			chunks = n;
		}
	}
	if (chunks && chunks->used < CHUNK_COUNTERS) {
		c = &chunks->c[chunks->used++];
		c->vaddr = vaddr;
	}
	pthread_mutex_unlock(&lock);
	return c;
}

static int by_vaddr(const void *a, const void *b)
{
	const struct counter *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* Write the counts since the last dump to OUT.N and zero them. */
static void dump(void)
{
	struct counter *all;
	size_t n = 0, i;
	struct chunk *k;
	char path[4096];
	FILE *f;

	pthread_mutex_lock(&lock);
	for (k = chunks; k; k = k->next)
		n += k->used;
	all = malloc((n ? n : 1) * sizeof(*all));
	n = 0;
	for (k = chunks; all && k; k = k->next) {
		for (i = 0; i < k->used; i++) {
			if (!k->c[i].count)
				continue;
			all[n++] = k->c[i];
			k->c[i].count = 0;
		}
	}
	dumps++;
	snprintf(path, sizeof(path), "%s.%u", out_prefix, dumps);
	pthread_mutex_unlock(&lock);
	if (!all)
		return;
	qsort(all, n, sizeof(*all), by_vaddr);
	f = fopen(path, "w");
	if (f) {
		for (i = 0; i < n; i++) {
			uint64_t sum = all[i].count;

			while (i + 1 < n && all[i + 1].vaddr == all[i].vaddr)
				sum += all[++i].count;
			fprintf(f, "%" PRIx64 " %" PRIu64 "\n", all[i].vaddr, sum);
		}
		fclose(f);
	}
	free(all);
}

static void on_marker(unsigned int vcpu, void *data)
{
	(void)vcpu;
	(void)data;
	dump();
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), i;
	struct counter *c;

	(void)id;
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		if (qemu_plugin_insn_size(insn) == sizeof(marker) &&
		    !memcmp(qemu_plugin_insn_data(insn), marker, sizeof(marker)))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker,
							       QEMU_PLUGIN_CB_NO_REGS,
							       NULL);
	}
	c = counter_new(qemu_plugin_tb_vaddr(tb));
	if (c)
		qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
							 &c->count, n);
}

NZ_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
				  int argc, char **argv);

int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
			int argc, char **argv)
{
	int i;

	(void)info;
	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out_prefix = strdup(argv[i] + 4);
	if (!out_prefix) {
		fprintf(stderr, "nz_insns: out=PREFIX is required\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	return 0;
}
