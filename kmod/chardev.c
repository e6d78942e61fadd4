// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/nezha: file operations and the io_uring command path.
 *
 * Every command arrives as an IORING_OP_URING_CMD SQE128.  The handler copies
 * the 80-byte payload once, validates it against the opcode table (allowed
 * flags, reserved fields, bytes of the payload union the opcode does not
 * use), then calls the opcode's issue function.  The handler returns
 * -EIOCBQUEUED and posts every result through io_uring_cmd_done(), so no
 * result value (an injected -EAGAIN included) is ever mistaken by io_uring
 * for a request to retry -- but for a command done at once with result 0
 * and nothing in big_cqe (a plain NOP), which it returns as 0 for io_uring
 * to complete in its batch (NZ_ISSUE_DONE).
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/io_uring.h>
#include <linux/nospec.h>
#include <linux/sched/mm.h>
#include <linux/nsproxy.h>
#include <net/net_namespace.h>
#include "nezha.h"
#include "rail.h"
#include "comm.h"

static ushort dev_mode = 0660;
module_param(dev_mode, ushort, 0444);
MODULE_PARM_DESC(dev_mode, "permission bits of /dev/nezha (default 0660)");

/*
 * An issue function's "done, result 0": the handler returns 0 to io_uring,
 * which completes the command in its batch of the submission.  Linux 6.1
 * posts a command completed through io_uring_cmd_done() at once, under
 * the completion lock and with a wake-up check each: a plain NOP cost
 * 4 times io_uring's own NOP at batch 64 (make bench-nop, 2026-12-05).
 */
#define NZ_ISSUE_DONE	1

struct nz_cmd_def {
	const char *name;
	u32 flags;		/* NZ_*_F_* flags the opcode accepts */
	u8 payload;		/* bytes of the nz_sqe union it reads */
	bool comm;		/* needs a communicator */
	bool fixed;		/* accepts IORING_URING_CMD_FIXED */
	int (*issue)(struct nz_file *f, struct io_uring_cmd *cmd,
		     const struct nz_sqe *sqe, unsigned int issue_flags);
};

static int nz_cmd_nop(struct nz_file *f, struct io_uring_cmd *cmd,
		      const struct nz_sqe *sqe, unsigned int issue_flags);
static int nz_cmd_version(struct nz_file *f, struct io_uring_cmd *cmd,
			  const struct nz_sqe *sqe, unsigned int issue_flags);

static int nz_cmd_cancel(struct nz_file *f, struct io_uring_cmd *cmd,
			 const struct nz_sqe *sqe, unsigned int issue_flags);

static const struct nz_cmd_def nz_cmd_defs[__NZ_CMD_MAX] = {
	[NZ_CMD_NOP] = {
		.name = "nop",
		.flags = NZ_NOP_FLAGS,
		.payload = sizeof(struct nz_sqe_nop),
		.issue = nz_cmd_nop,
	},
	[NZ_CMD_VERSION] = {
		.name = "version",
		.payload = sizeof(struct nz_sqe_version),
		.issue = nz_cmd_version,
	},
	[NZ_CMD_SEND] = {
		.name = "send",
		.flags = NZ_XFER_FLAGS,
		.payload = sizeof(struct nz_sqe_xfer),
		.comm = true,
		.fixed = true,
		.issue = nz_cmd_send,
	},
	[NZ_CMD_RECV] = {
		.name = "recv",
		.flags = NZ_XFER_FLAGS,
		.payload = sizeof(struct nz_sqe_xfer),
		.comm = true,
		.fixed = true,
		.issue = nz_cmd_recv,
	},
	[NZ_CMD_CANCEL] = {
		.name = "cancel",
		.flags = NZ_XFER_FLAGS,
		.payload = sizeof(struct nz_sqe_xfer),
		.comm = true,
		.issue = nz_cmd_cancel,
	},
};

static struct nz_req *nz_cmd_req(struct io_uring_cmd *cmd)
{
	return *(struct nz_req **)cmd->pdu;
}

static void nz_post(struct io_uring_cmd *cmd, s32 res, u64 res2,
		    unsigned int issue_flags)
{
	if (res >= 0)
		atomic64_inc(&nz_stats.cmds_completed);
	else
		atomic64_inc(&nz_stats.cmds_failed);
	if (res == -ECANCELED)
		atomic64_inc(&nz_stats.cmds_cancelled);
	io_uring_cmd_done(cmd, res, res2, issue_flags);
}

void nz_req_init(struct nz_req *req, struct nz_file *f,
		 struct io_uring_cmd *cmd)
{
	INIT_LIST_HEAD(&req->node);
	req->cmd = cmd;
	req->file = f;
	/* The issuer (submitter, io-wq or SQPOLL thread) shares its mm. */
	req->mm = current->mm;
	if (req->mm)
		mmgrab(req->mm);
	*(struct nz_req **)cmd->pdu = req;
}

/* Free a request that was never queued (an issue function's error path). */
void nz_req_free(struct nz_req *req)
{
	if (req->mm)
		mmdrop(req->mm);
	kfree(req);
}

/* Every thread of the process that submitted req has exited. */
bool nz_req_owner_gone(const struct nz_req *req)
{
	return !req->mm || !atomic_read(&req->mm->mm_users);
}

static struct nz_req *nz_req_alloc(struct nz_file *f, struct io_uring_cmd *cmd)
{
	struct nz_req *req = kzalloc(sizeof(*req), GFP_KERNEL_ACCOUNT);

	if (req)
		nz_req_init(req, f, cmd);
	return req;
}

/* Queue req on its file; fails with -ECANCELED once the file is dying. */
int nz_req_queue(struct nz_req *req)
{
	struct nz_file *f = req->file;
	int ret = 0;

	ret = nz_user_charge_cmd(f->user);
	if (ret)
		return ret;
	spin_lock_bh(&f->lock);
	if (f->dying)
		ret = -ECANCELED;
	else
		list_add_tail(&req->node, &f->pending);
	spin_unlock_bh(&f->lock);
	if (ret)
		nz_user_uncharge_cmd(f->user);
	else
		atomic_inc(&nz_stats.inflight);
	return ret;
}

static void nz_req_task_cb(struct io_uring_cmd *cmd, unsigned int issue_flags)
{
	struct nz_req *req = nz_cmd_req(cmd);
	s32 res = req->result;
	u64 res2 = req->res2;

	nz_req_free(req);
	nz_post(cmd, res, res2, issue_flags);
}

/*
 * Complete an asynchronous command from any context.  The caller must own
 * req, that is have removed it from its file's pending list, or be the one
 * that would.
 */
void nz_req_complete(struct nz_req *req, s32 result, u64 res2)
{
	struct nz_file *f = req->file;

	spin_lock_bh(&f->lock);
	list_del_init(&req->node);
	spin_unlock_bh(&f->lock);
	atomic_dec(&nz_stats.inflight);
	nz_user_uncharge_cmd(f->user);

	req->result = result;
	req->res2 = res2;
	io_uring_cmd_complete_in_task(req->cmd, nz_req_task_cb);
}

static void nz_nop_expired(struct work_struct *work)
{
	struct nz_req *req = container_of(to_delayed_work(work),
					  struct nz_req, dwork);

	nz_req_complete(req, req->result, req->res2);
}

static int nz_cmd_nop(struct nz_file *f, struct io_uring_cmd *cmd,
		      const struct nz_sqe *sqe, unsigned int issue_flags)
{
	const struct nz_sqe_nop *nop = &sqe->nop;
	bool inject = sqe->flags & NZ_NOP_F_RESULT;
	bool defer = sqe->flags & NZ_NOP_F_DEFER;
	struct nz_req *req;
	int ret;

	if ((!inject && (nop->result || nop->res2)) ||
	    (!defer && nop->delay_us) || nop->delay_us > NZ_NOP_MAX_DELAY_US)
		return -EINVAL;
	if (!defer && (!inject || (!nop->result && !nop->res2)))
		return NZ_ISSUE_DONE;
	if (!defer) {
		nz_post(cmd, nop->result, nop->res2, issue_flags);
		return 0;
	}

	req = nz_req_alloc(f, cmd);
	if (!req)
		return -ENOMEM;
	req->result = inject ? nop->result : 0;
	req->res2 = inject ? nop->res2 : 0;
	INIT_DELAYED_WORK(&req->dwork, nz_nop_expired);
	ret = nz_req_queue(req);
	if (ret) {
		nz_req_free(req);
		return ret;
	}
	queue_delayed_work(nz_wq, &req->dwork, usecs_to_jiffies(nop->delay_us));
	return 0;
}

static int nz_cmd_version(struct nz_file *f, struct io_uring_cmd *cmd,
			  const struct nz_sqe *sqe, unsigned int issue_flags)
{
	const struct nz_sqe_version *v = &sqe->version;
	struct nz_version info;

	if (v->rsvd || v->len < sizeof(info))
		return -EINVAL;
	nz_fill_version(&info);
	if (copy_to_user(u64_to_user_ptr(v->addr), &info, sizeof(info)))
		return -EFAULT;
	nz_post(cmd, sizeof(info), 0, issue_flags);
	return 0;
}

/* Reject what this ABI version does not define; see uapi/linux/nezha.h. */
static const struct nz_cmd_def *nz_cmd_check(const struct io_uring_cmd *cmd,
					     const struct nz_sqe *sqe)
{
	const struct nz_cmd_def *def;
	u32 op = cmd->cmd_op;

	if (op >= __NZ_CMD_MAX)
		return NULL;
	def = &nz_cmd_defs[array_index_nospec(op, __NZ_CMD_MAX)];
	if (!def->issue || sqe->rsvd || (sqe->flags & ~def->flags))
		return NULL;
	if (!def->comm && sqe->comm_id)
		return NULL;
	if ((cmd->flags & IORING_URING_CMD_FIXED) && !def->fixed)
		return NULL;
	if (memchr_inv(sqe->__pad + def->payload, 0,
		       sizeof(sqe->__pad) - def->payload))
		return NULL;
	return def;
}

static int nz_cmd_cancel(struct nz_file *f, struct io_uring_cmd *cmd,
			 const struct nz_sqe *sqe, unsigned int issue_flags)
{
	int n = nz_cancel_recvs(f, sqe);

	if (n < 0)
		return n;
	nz_post(cmd, n, 0, issue_flags);
	return 0;
}

static int nz_uring_cmd(struct io_uring_cmd *cmd, unsigned int issue_flags)
{
	struct nz_file *f = cmd->file->private_data;
	const struct nz_cmd_def *def;
	struct nz_sqe sqe;
	int ret;

	atomic64_inc(&nz_stats.cmds_submitted);
	if (!(issue_flags & IO_URING_F_SQE128)) {
		ret = -EINVAL;
		goto reject;
	}
	memcpy(&sqe, cmd->cmd, sizeof(sqe));
	def = nz_cmd_check(cmd, &sqe);
	if (!def) {
		ret = -EINVAL;
		goto reject;
	}
	ret = def->issue(f, cmd, &sqe, issue_flags);
	if (ret == NZ_ISSUE_DONE) {
		atomic64_inc(&nz_stats.cmds_completed);
		return 0;
	}
	if (ret == -EINVAL)
		atomic64_inc(&nz_stats.cmds_rejected);
	if (ret)
		nz_post(cmd, ret, 0, issue_flags);
	return -EIOCBQUEUED;

reject:
	atomic64_inc(&nz_stats.cmds_rejected);
	nz_post(cmd, ret, 0, issue_flags);
	return -EIOCBQUEUED;
}

static long nz_ioctl_rail_list(struct nz_rail_list __user *ulist)
{
	struct nz_rail_info rails[NZ_MAX_RAILS];
	struct nz_rail_list list;
	u32 n;

	if (copy_from_user(&list, ulist, sizeof(list)))
		return -EFAULT;
	if (list.rsvd)
		return -EINVAL;
	nz_rail_list(rails, min_t(u32, list.count, NZ_MAX_RAILS), &n);
	/* Only entries nz_rail_list() wrote: min(count, n) <= its capacity. */
	if (copy_to_user(u64_to_user_ptr(list.rails), rails,
			 min(list.count, n) * sizeof(rails[0])))
		return -EFAULT;
	list.count = n;
	if (copy_to_user(ulist, &list, sizeof(list)))
		return -EFAULT;
	return 0;
}

static long nz_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct nz_version info;

	switch (cmd) {
	case NZ_IOC_RAIL_LIST:
		return nz_ioctl_rail_list((void __user *)arg);
	case NZ_IOC_COMM_CREATE:
		return nz_comm_ioctl_create(file->private_data,
					    (void __user *)arg);
	case NZ_IOC_COMM_WAIT:
		return nz_comm_ioctl_wait(file->private_data,
					  (void __user *)arg);
	case NZ_IOC_COMM_DESTROY:
		return nz_comm_ioctl_destroy(file->private_data,
					     (void __user *)arg);
	case NZ_IOC_VERSION:
		nz_fill_version(&info);
		if (copy_to_user((void __user *)arg, &info, sizeof(info)))
			return -EFAULT;
		return 0;
	default:
		return -ENOTTY;
	}
}

static int nz_open(struct inode *inode, struct file *file)
{
	struct nz_file *f = kzalloc(sizeof(*f), GFP_KERNEL_ACCOUNT);

	if (!f)
		return -ENOMEM;
	f->user = nz_user_get(file->f_cred->euid);
	if (!f->user) {
		kfree(f);
		return -ENOMEM;
	}
	/* Like a socket's: the namespace its rails and addresses are in. */
	f->net = get_net(current->nsproxy->net_ns);
	spin_lock_init(&f->lock);
	INIT_LIST_HEAD(&f->pending);
	mutex_init(&f->comm_lock);
	INIT_LIST_HEAD(&f->comms);
	file->private_data = f;
	atomic64_inc(&nz_stats.opens);
	atomic_inc(&nz_stats.open_files);
	return 0;
}

/*
 * io_uring holds a reference to the file for every command in flight, so
 * release runs only after each of them was completed: nothing can still be
 * pending here.  Mark the file dying anyway, so that a future path that
 * queues work without such a reference fails instead of leaking.
 */
static int nz_release(struct inode *inode, struct file *file)
{
	struct nz_file *f = file->private_data;
	bool busy;

	nz_comm_file_release(f);
	spin_lock_bh(&f->lock);
	f->dying = true;
	busy = !list_empty(&f->pending);
	spin_unlock_bh(&f->lock);
	if (busy) {
		/* Leak rather than free memory a command still points to. */
		pr_err("release with commands pending; file state leaked\n");
		return 0;
	}
	nz_user_put(f->user);
	put_net(f->net);
	kfree(f);
	atomic_dec(&nz_stats.open_files);
	return 0;
}

static const struct file_operations nz_fops = {
	.owner = THIS_MODULE,
	.open = nz_open,
	.release = nz_release,
	.unlocked_ioctl = nz_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.uring_cmd = nz_uring_cmd,
	.llseek = noop_llseek,
};

static struct miscdevice nz_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = NZ_DEVICE_NAME,
	.fops = &nz_fops,
};

int nz_chardev_init(void)
{
	nz_misc.mode = dev_mode & 0777;
	return misc_register(&nz_misc);
}

void nz_chardev_exit(void)
{
	misc_deregister(&nz_misc);
}
