// SPDX-License-Identifier: GPL-2.0
/*
 * Per-user limits: what one local user of /dev/nezha may hold at once.
 *
 * Every open file is charged to the user who opened it (the file's
 * credentials, not whoever submits on it later: the file is the
 * capability), and every user has a count of communicators and of commands
 * in flight over all of that user's files.  A user at a limit gets an
 * error at once (-EMFILE for communicators, -EAGAIN for commands) and the
 * module counts the refusal in sysfs (stats/comms_refused,
 * stats/cmds_refused); other users' jobs are unaffected.  Pinned pages are
 * charged separately, to RLIMIT_MEMLOCK (ubuf.c).
 *
 * The defaults are far above what a training job uses (one communicator
 * per process group, a few hundred commands in flight) and low enough that
 * one user cannot exhaust the module's memory for everyone else.
 */
#include <linux/module.h>
#include <linux/hashtable.h>
#include <linux/slab.h>
#include <linux/cred.h>
#include <linux/refcount.h>
#include "nezha.h"

static unsigned int max_user_comms = 1024;
module_param(max_user_comms, uint, 0644);
MODULE_PARM_DESC(max_user_comms,
		 "communicators one user may hold at once, over all of that user's files (-EMFILE past it)");

static unsigned int max_user_cmds = 65536;
module_param(max_user_cmds, uint, 0644);
MODULE_PARM_DESC(max_user_cmds,
		 "commands one user may have in flight at once (-EAGAIN past it)");

struct nz_user {
	struct hlist_node node;
	kuid_t uid;
	refcount_t ref;			/* open files, under nz_users_lock */
	atomic_t comms;
	atomic_t cmds;
};

#define NZ_USER_HASH_BITS 6
static DEFINE_HASHTABLE(nz_users, NZ_USER_HASH_BITS);
static DEFINE_SPINLOCK(nz_users_lock);

/* The user an entry counts for. */
kuid_t nz_user_uid(const struct nz_user *u)
{
	return u->uid;
}

/* The entry of uid, created on its first open file; NULL if out of memory. */
struct nz_user *nz_user_get(kuid_t uid)
{
	u32 key = __kuid_val(uid);
	struct nz_user *u, *fresh;

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	spin_lock(&nz_users_lock);
	hash_for_each_possible(nz_users, u, node, key) {
		if (uid_eq(u->uid, uid)) {
			refcount_inc(&u->ref);
			spin_unlock(&nz_users_lock);
			kfree(fresh);
			return u;
		}
	}
	u = fresh;
	if (u) {
		u->uid = uid;
		refcount_set(&u->ref, 1);
		hash_add(nz_users, &u->node, key);
	}
	spin_unlock(&nz_users_lock);
	return u;
}

void nz_user_put(struct nz_user *u)
{
	if (!u)
		return;
	spin_lock(&nz_users_lock);
	if (!refcount_dec_and_test(&u->ref)) {
		spin_unlock(&nz_users_lock);
		return;
	}
	hash_del(&u->node);
	spin_unlock(&nz_users_lock);
	/* Every communicator and command was uncharged before its file went. */
	WARN_ON_ONCE(atomic_read(&u->comms) || atomic_read(&u->cmds));
	kfree(u);
}

static int nz_user_charge(atomic_t *count, unsigned int limit,
			  atomic64_t *refused, int err)
{
	if (atomic_inc_return(count) > limit) {
		atomic_dec(count);
		atomic64_inc(refused);
		return err;
	}
	return 0;
}

int nz_user_charge_comm(struct nz_user *u)
{
	int ret = nz_user_charge(&u->comms, READ_ONCE(max_user_comms),
				 &nz_stats.comms_refused, -EMFILE);

	if (ret)
		pr_notice_ratelimited("uid %u: at max_user_comms (%u): communicator refused\n",
				      from_kuid(&init_user_ns, u->uid),
				      READ_ONCE(max_user_comms));
	return ret;
}

void nz_user_uncharge_comm(struct nz_user *u)
{
	atomic_dec(&u->comms);
}

int nz_user_charge_cmd(struct nz_user *u)
{
	int ret = nz_user_charge(&u->cmds, READ_ONCE(max_user_cmds),
				 &nz_stats.cmds_refused, -EAGAIN);

	if (ret)
		pr_notice_ratelimited("uid %u: at max_user_cmds (%u): command refused\n",
				      from_kuid(&init_user_ns, u->uid),
				      READ_ONCE(max_user_cmds));
	return ret;
}

void nz_user_uncharge_cmd(struct nz_user *u)
{
	atomic_dec(&u->cmds);
}
