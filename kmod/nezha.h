/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Nezha core structures and the prototypes each file exports, grouped by
 * file.  One concern per file: see Documentation/design.rst.
 */
#ifndef _NZ_NEZHA_H
#define _NZ_NEZHA_H

#include <linux/types.h>
#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/mutex.h>
#include <linux/uidgid.h>
#include <uapi/linux/nezha.h>

#define NZ_RELEASE "0.1.0"

struct io_uring_cmd;
struct nz_user;
struct net;

/* Module-wide statistics, exported one value per file in sysfs. */
struct nz_stats {
	atomic64_t opens;		/* successful open() of /dev/nezha */
	atomic64_t cmds_submitted;	/* uring_cmd issued to the module */
	atomic64_t cmds_completed;	/* CQEs posted with res >= 0 */
	atomic64_t cmds_failed;		/* CQEs posted with res < 0 */
	atomic64_t cmds_rejected;	/* malformed SQEs (-EINVAL) */
	atomic64_t cmds_cancelled;	/* completed with -ECANCELED */
	atomic_t open_files;		/* files currently open */
	atomic_t inflight;		/* commands queued, not completed */
	atomic_t comms;			/* communicators not yet freed */
	atomic64_t comms_refused;	/* COMM_CREATE past max_user_comms */
	atomic64_t cmds_refused;	/* commands past max_user_cmds */
	atomic64_t tags_refused;	/* SEND/RECV on a tag past max_tags */
	atomic64_t msgs_aborted;	/* our failed sends announced (ABORT) */
	atomic64_t msgs_withdrawn;	/* peers' ABORTs applied */
	atomic64_t msgs_refused;	/* peers' messages we refused (REFUSE) */
	atomic64_t sends_refused;	/* our sends a peer refused */
	atomic64_t chunks_zerocopy;	/* sent from the user's pages (TCP) */
	atomic64_t msgs_unexpected;	/* arrived before their RECV: kbuf */
	atomic64_t bytes_unexpected;	/* their lengths */
	atomic_t zerocopy_held;		/* sends whose pages TCP still holds */
};

extern struct nz_stats nz_stats;

/* One open file of /dev/nezha. */
struct nz_file {
	spinlock_t lock;		/* protects pending and dying */
	struct list_head pending;	/* struct nz_req not yet completed */
	bool dying;
	struct mutex comm_lock;		/* protects comms and next_comm_id */
	struct list_head comms;		/* struct nz_comm of this file */
	u32 next_comm_id;
	struct nz_user *user;		/* the opener: limits.c */
	struct net *net;		/* the opener's network namespace (held) */
};

/*
 * A command that completes asynchronously.  It lives on its file's pending
 * list from issue to completion; completion happens in the submitter's task
 * context (io_uring_cmd_complete_in_task) so io_uring_cmd_done() always runs
 * where io_uring expects it.
 */
struct nz_req {
	struct list_head node;
	struct io_uring_cmd *cmd;
	struct nz_file *file;
	/*
	 * The submitting process's address space, held (mmgrab) until the
	 * command completes: when its last user goes (the process exited)
	 * nobody can reap the completion, and Linux 6.1 cannot cancel a
	 * uring command, so the module must (nz_req_owner_gone()).
	 */
	struct mm_struct *mm;
	struct delayed_work dwork;	/* deferred NOP */
	s32 result;
	u64 res2;
};

/* main.c */
extern struct workqueue_struct *nz_wq;

/* limits.c */
struct nz_user *nz_user_get(kuid_t uid);
kuid_t nz_user_uid(const struct nz_user *u);
void nz_user_put(struct nz_user *u);
int nz_user_charge_comm(struct nz_user *u);
void nz_user_uncharge_comm(struct nz_user *u);
int nz_user_charge_cmd(struct nz_user *u);
void nz_user_uncharge_cmd(struct nz_user *u);

/* chardev.c */
int nz_chardev_init(void);
void nz_chardev_exit(void);
void nz_req_init(struct nz_req *req, struct nz_file *f,
		 struct io_uring_cmd *cmd);
int nz_req_queue(struct nz_req *req);
void nz_req_free(struct nz_req *req);
bool nz_req_owner_gone(const struct nz_req *req);
void nz_req_complete(struct nz_req *req, s32 result, u64 res2);

/* sysfs.c */
int nz_sysfs_init(void);
void nz_sysfs_exit(void);

/* netlink.c */
int nz_netlink_init(void);
void nz_netlink_exit(void);
void nz_fill_version(struct nz_version *v);

#endif /* _NZ_NEZHA_H */
