// SPDX-License-Identifier: GPL-2.0
/*
 * Messages: the SEND and RECV commands, matching receives to incoming
 * messages, the receive and transmit hooks the transports call,
 * acknowledgements, completion and timeouts.
 *
 * Reference rule: a message holds one reference for being on a peer list;
 * it is dropped when the message completes.  Every chunk in flight and
 * every payload read in progress hold one more.  The last put may sleep
 * (it unpins user pages), so it never happens under peer->lock: paths that
 * finish a message under the lock collect it and complete it afterwards.
 */
#include <linux/module.h>
#include <linux/error-injection.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/hash.h>
#include <linux/io_uring.h>
#include "comm.h"
#include "transport.h"

static unsigned int unexpected_mb = 256;
module_param(unexpected_mb, uint, 0644);
MODULE_PARM_DESC(unexpected_mb,
		 "per-peer budget (MiB) for messages that arrive before their receive");

/*
 * Each message that arrives before its receive is charged its bytes and
 * what the module keeps for it besides, so that empty ones cost budget too,
 * and there are at most unexpected_msgs of them: every arrival looks its
 * message up on that list, under the peer's lock.
 */
static unsigned int unexpected_msgs = 65536;
module_param(unexpected_msgs, uint, 0644);
MODULE_PARM_DESC(unexpected_msgs,
		 "per-peer count of messages that arrive before their receive");

/*
 * A (tag, sequence) entry per tag ever used with a peer lives as long as
 * the communicator: the sequence numbers must go on matching the peer's.
 * A user naming a new tag in every SEND would grow them without end.
 */
static unsigned int max_tags = 65536;

/*
 * ACKs and heartbeat echoes queued on a connection and not yet written.  A
 * peer that sends (or resends the same chunk, or asks for echoes) and never
 * reads would grow the queue without end; a working one has at most its
 * window of chunks unacknowledged, a few thousand on the fastest NICs.
 * Past the limit we answer nothing more (stats/ctrl_dropped): a peer
 * that reads again gets its chunks' ACKs once they are sent anew.
 */
static unsigned int max_ctrl_frames = 65536;
module_param(max_ctrl_frames, uint, 0644);
MODULE_PARM_DESC(max_ctrl_frames,
		 "ACKs and echoes one connection may have queued for a peer that does not read");
module_param(max_tags, uint, 0644);
MODULE_PARM_DESC(max_tags,
		 "distinct tags one communicator may use with each peer (-ENOSPC past it)");

/*
 * The longest message one SEND or RECV may name.  Its pages are pinned for
 * the whole transfer, so this also bounds the page arrays allocated for it
 * (16 bytes a page: 256 GiB is a 1 GiB array, below kvmalloc's INT_MAX).
 * Below this, RLIMIT_MEMLOCK decides for users without CAP_IPC_LOCK.
 */
#define NZ_MAX_MSG_MB_LIMIT	(256U << 10)
static unsigned int max_msg_mb = 16U << 10;

static int nz_max_msg_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (!v || v > NZ_MAX_MSG_MB_LIMIT)
		return -ERANGE;
	WRITE_ONCE(max_msg_mb, v);
	return 0;
}

static const struct kernel_param_ops nz_max_msg_ops = {
	.set = nz_max_msg_set,
	.get = param_get_uint,
};
module_param_cb(max_msg_mb, &nz_max_msg_ops, &max_msg_mb, 0644);
MODULE_PARM_DESC(max_msg_mb,
		 "longest SEND or RECV in MiB (default 16384, at most 262144)");

static struct kmem_cache *nz_chunk_cache;

/* ---- user buffers ------------------------------------------------------ */

/* A SEND or RECV length this module accepts; -EMSGSIZE otherwise. */
static int nz_xfer_len_ok(u64 len)
{
	return len > ((u64)READ_ONCE(max_msg_mb) << 20) ? -EMSGSIZE : 0;
}

/*
 * Charge npages to the caller's pinned pages (VmPin), limited by
 * RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, as RDMA's ib_umem_get() does:
 * one atomic, no mmap lock on the command path.
 */
static int nz_ubuf_charge(struct nz_ubuf *b, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct mm_struct *mm = current->mm;

	if (!mm)
		return -EFAULT;
	if (atomic64_add_return(npages, &mm->pinned_vm) > limit &&
	    !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(mm);
	b->mm = mm;
	b->locked = npages;
	return 0;
}

static void nz_ubuf_uncharge(struct nz_ubuf *b)
{
	if (!b->mm)
		return;
	atomic64_sub(b->locked, &b->mm->pinned_vm);
	mmdrop(b->mm);
	b->mm = NULL;
	b->locked = 0;
}

/*
 * A registered buffer is a bio_vec array; reaching byte off of it with
 * iov_iter_advance() walks every segment before it, and a message's chunks
 * did so each time (the O(pages) walk showed in the profile of a fixed-
 * buffer send).  io_uring registers one page per segment, the first from
 * the buffer's offset in its page: then the segment holding any byte is
 * found by arithmetic.  Checked once per command, not assumed: a kernel
 * that lays the buffer out in larger segments takes the walk.
 */
static bool nz_ubuf_fixed_pages(const struct iov_iter *it)
{
	unsigned long i;

	if (!iov_iter_is_bvec(it))
		return false;
	for (i = 1; i < it->nr_segs; i++)
		if (it->bvec[i].bv_offset ||
		    (it->bvec[i].bv_len != PAGE_SIZE && i + 1 < it->nr_segs))
			return false;
	return true;
}

static void nz_ubuf_fixed_seek(const struct nz_ubuf *b, u64 off,
			       struct iov_iter *it)
{
	u64 pos = b->fixed.iov_offset + off, first = b->fixed.bvec[0].bv_len;
	unsigned long idx = 0;

	*it = b->fixed;
	if (pos >= first) {
		idx = 1 + ((pos - first) >> PAGE_SHIFT);
		pos = (pos - first) & ~PAGE_MASK;
	}
	it->bvec += idx;
	it->nr_segs -= idx;
	it->iov_offset = pos;
	it->count -= off;
}

static int nz_ubuf_pin(struct nz_ubuf *b, struct io_uring_cmd *cmd, u64 addr,
		       u64 len, bool write)
{
	unsigned long npages, i;
	u64 left = len;
	int got, ret;

	memset(b, 0, sizeof(*b));
	b->len = len;
	b->dirty = write;
	if (!len)
		return 0;
	if (cmd->flags & IORING_URING_CMD_FIXED) {
		b->is_fixed = true;
		ret = io_uring_cmd_import_fixed(addr, len,
						write ? ITER_DEST : ITER_SOURCE,
						&b->fixed, cmd);
		if (!ret)
			b->fixed_pages = nz_ubuf_fixed_pages(&b->fixed);
		return ret;
	}
	if (addr + len < addr || addr + len > TASK_SIZE_MAX)
		return -EFAULT;
	/* The caller checked len against max_msg_mb: npages fits an int. */
	b->first_off = offset_in_page(addr);
	npages = DIV_ROUND_UP(b->first_off + len, PAGE_SIZE);
	ret = nz_ubuf_charge(b, npages);
	if (ret)
		return ret;
	b->pages = kvmalloc_array(npages, sizeof(*b->pages),
				  GFP_KERNEL_ACCOUNT);
	b->bvec = kvmalloc_array(npages, sizeof(*b->bvec), GFP_KERNEL_ACCOUNT);
	ret = -ENOMEM;
	if (!b->pages || !b->bvec)
		goto out_free;
	/* Long term: a transfer may wait for its peer for minutes. */
	got = pin_user_pages_fast(addr & PAGE_MASK, npages,
				  FOLL_LONGTERM | (write ? FOLL_WRITE : 0),
				  b->pages);
	if (got != npages) {
		if (got > 0)
			unpin_user_pages(b->pages, got);
		ret = got < 0 ? got : -EFAULT;
		goto out_free;
	}
	b->npages = npages;
	for (i = 0; i < npages; i++) {
		unsigned int off = i ? 0 : b->first_off;
		unsigned int n = min_t(u64, PAGE_SIZE - off, left);

		b->bvec[i].bv_page = b->pages[i];
		b->bvec[i].bv_offset = off;
		b->bvec[i].bv_len = n;
		left -= n;
	}
	return 0;

out_free:
	kvfree(b->pages);
	kvfree(b->bvec);
	b->pages = NULL;
	b->bvec = NULL;
	nz_ubuf_uncharge(b);
	return ret;
}

static void nz_ubuf_release(struct nz_ubuf *b)
{
	if (b->npages)
		unpin_user_pages_dirty_lock(b->pages, b->npages, b->dirty);
	kvfree(b->pages);
	kvfree(b->bvec);
	b->npages = 0;
	b->pages = NULL;
	b->bvec = NULL;
	nz_ubuf_uncharge(b);
}

/* An iterator over [off, off + len) of the buffer. */
static void nz_ubuf_iter(const struct nz_ubuf *b, unsigned int dir, u64 off,
			 u64 len, struct iov_iter *it)
{
	u64 pos, avail;
	unsigned long idx;

	if (b->is_fixed) {
		if (b->fixed_pages && off < b->fixed.count) {
			nz_ubuf_fixed_seek(b, off, it);
		} else {
			*it = b->fixed;
			iov_iter_advance(it, off);
		}
		iov_iter_truncate(it, len);
		return;
	}
	if (!b->npages) {
		iov_iter_kvec(it, dir, NULL, 0, 0);
		return;
	}
	/* Jump straight to the page that holds off. */
	pos = b->first_off + off;
	idx = pos >> PAGE_SHIFT;
	avail = b->first_off + b->len - ((u64)idx << PAGE_SHIFT) -
		(idx ? 0 : b->first_off);
	iov_iter_bvec(it, dir, b->bvec + idx, b->npages - idx, avail);
	iov_iter_advance(it, idx ? offset_in_page(pos) : off);
	iov_iter_truncate(it, len);
}

/* ---- message lifetime ---------------------------------------------------- */

static void nz_msg_release(struct kref *ref)
{
	struct nz_msg *m = container_of(ref, struct nz_msg, ref);

	nz_ubuf_release(&m->ubuf);
	kvfree(m->kbuf);
	kvfree(m->map);
	kfree(m->abort);
	kfree(m);
}

static void nz_msg_put(struct nz_msg *m)
{
	kref_put(&m->ref, nz_msg_release);
}

static struct nz_msg *nz_msg_alloc(struct nz_peer *p, enum nz_msg_dir dir)
{
	struct nz_msg *m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);

	if (!m)
		return NULL;
	kref_init(&m->ref);
	INIT_LIST_HEAD(&m->node);
	m->peer = p;
	m->dir = dir;
	return m;
}

static void nz_chunk_free(struct nz_chunk *ch)
{
	if (ch->msg)
		nz_msg_put(ch->msg);
	kmem_cache_free(nz_chunk_cache, ch);
}

/* Chunks of messages already done, off their lists: free them unlocked. */
static void nz_chunks_free_list(struct list_head *chunks)
{
	struct nz_chunk *ch, *tmp;

	list_for_each_entry_safe(ch, tmp, chunks, node)
		nz_chunk_free(ch);
}

/*
 * A send failed: tell its receiver, which may hold part of it or a receive
 * for it, and whose duplicate window would otherwise stop at its msg_id
 * for good (1024 messages later every frame of ours is out of window).
 * Not to a peer that left or a communicator going away: nothing follows.
 */
static void nz_msg_withdraw(struct nz_msg *m, s32 result)
{
	struct nz_peer *p = m->peer;
	struct nz_abort *ab = m->abort;

	if (!ab || p->left || READ_ONCE(p->comm->dead))
		return;
	m->abort = NULL;
	ab->msg_id = m->msg_id;
	ab->tag = m->tag;
	ab->tag_seq = m->tag_seq;
	ab->reason = -result;
	ab->sent = 0;
	list_add_tail(&ab->node, &p->aborts);
	atomic64_inc(&nz_stats.msgs_aborted);
}

/* Lowest msg_id of a withdrawn send not yet answered; 0 if none. */
u64 nz_peer_oldest_abort(const struct nz_peer *p)
{
	const struct nz_abort *ab;
	u64 oldest = 0;

	lockdep_assert_held(&p->lock);
	list_for_each_entry(ab, &p->aborts, node)
		if (!oldest || ab->msg_id < oldest)
			oldest = ab->msg_id;
	return oldest;
}

/* An ABORT waits for a path it has not been written on yet. */
static bool nz_peer_abort_unsent(const struct nz_peer *p)
{
	const struct nz_abort *ab;
	u32 up = 0, s;

	lockdep_assert_held(&p->lock);
	for (s = 0; s < p->comm->nrails; s++)
		if (p->conns[s].state == NZ_CONN_UP)
			up |= BIT(s);
	list_for_each_entry(ab, &p->aborts, node)
		if (up & ~ab->sent)
			return true;
	return false;
}

void nz_peer_free_aborts(struct nz_peer *p)
{
	struct nz_abort *ab, *tmp;
	LIST_HEAD(list);

	spin_lock_bh(&p->lock);
	list_splice_init(&p->aborts, &list);
	spin_unlock_bh(&p->lock);
	list_for_each_entry_safe(ab, tmp, &list, node)
		kfree(ab);
}

/*
 * Decide a message's result and take it off its list; under peer->lock.
 * Returns true when the caller must call nz_msg_complete() after
 * unlocking (no payload read is still writing into its buffer).
 */
static bool nz_msg_set_done(struct nz_msg *m, s32 result)
{
	struct nz_peer *p = m->peer;

	lockdep_assert_held(&p->lock);
	if (m->done)
		return false;
	m->done = true;
	m->result = result;
	list_del_init(&m->node);
	if (m->dir == NZ_MSG_RX && m->arrived)
		nz_seqwin_mark_done(&p->rxwin, m->msg_id);
	if (m->budget) {
		p->unexpected_bytes -= m->budget;
		p->unexpected_msgs--;
		m->budget = 0;
	}
	if (m->dir == NZ_MSG_TX) {
		p->tx_inflight_msgs--;
		if (result < 0)
			nz_msg_withdraw(m, result);
	}
	if (m->writers || m->cqe_posted)
		return false;
	m->cqe_posted = true;
	return true;
}

/*
 * A copy to or from m's buffer ended, under peer->lock.  True when that was
 * the last one of a message whose result is decided: the caller must then
 * call nz_msg_complete() after unlocking.
 */
static bool nz_msg_writer_done(struct nz_msg *m)
{
	lockdep_assert_held(&m->peer->lock);
	m->writers--;
	if (!m->done || m->writers || m->cqe_posted)
		return false;
	m->cqe_posted = true;
	return true;
}

/*
 * Under peer->lock, once ch's transport is closed: a write it had begun
 * never reports done, so it stops counting as a writer here.  A message
 * that was only waiting for it goes on done, to complete after unlocking.
 */
static void nz_chunk_write_lost(struct nz_chunk *ch, struct list_head *done)
{
	if (!ch->busy)
		return;
	ch->busy = false;
	if (nz_msg_writer_done(ch->msg))
		list_add_tail(&ch->msg->node, done);
}

/* Post the result and drop the list reference; never under a spinlock. */
static void nz_msg_complete(struct nz_msg *m)
{
	struct nz_xreq *x = m->xreq;
	s32 res = m->result;

	if (x) {
		/* A message held in the kernel is copied out only now. */
		if (res >= 0 && m->kbuf && m->total) {
			struct iov_iter it;

			nz_ubuf_iter(&m->ubuf, ITER_DEST, 0, m->total, &it);
			if (copy_to_iter(m->kbuf, m->total, &it) != m->total)
				res = -EFAULT;
		}
		m->xreq = NULL;
		nz_req_complete(&x->base, res, 0);
	}
	nz_msg_put(m);
}

static void nz_complete_list(struct list_head *done)
{
	struct nz_msg *m, *tmp;

	list_for_each_entry_safe(m, tmp, done, node) {
		list_del_init(&m->node);
		nz_msg_complete(m);
	}
}

static struct nz_xreq *nz_xreq_alloc(struct nz_file *f,
				     struct io_uring_cmd *cmd,
				     struct nz_comm *comm, u32 timeout_ms)
{
	struct nz_xreq *x = kzalloc(sizeof(*x), GFP_KERNEL_ACCOUNT);

	if (!x)
		return NULL;
	nz_req_init(&x->base, f, cmd);
	x->timeout = msecs_to_jiffies(timeout_ms ? timeout_ms : comm->timeout_ms);
	x->deadline = jiffies + x->timeout;
	return x;
}

/* ---- tags ---------------------------------------------------------------- */

static struct nz_tagseq *nz_tagseq_get(struct nz_peer *p, u64 tag,
				       struct nz_tagseq **spare)
{
	struct hlist_head *head = &p->tags[hash_64(tag, NZ_TAG_HASH_BITS)];
	struct nz_tagseq *t;

	hlist_for_each_entry(t, head, node)
		if (t->tag == tag)
			return t;
	if (p->ntags >= READ_ONCE(max_tags)) {
		atomic64_inc(&nz_stats.tags_refused);
		pr_notice_ratelimited("comm %u: rank %u used max_tags (%u) tags with rank %u: new tag refused\n",
				      p->comm->id, p->comm->rank,
				      READ_ONCE(max_tags), p->rank);
		return NULL;
	}
	p->ntags++;
	t = *spare;
	*spare = NULL;
	t->tag = tag;
	hlist_add_head(&t->node, head);
	return t;
}

void nz_peer_free_tags(struct nz_peer *p)
{
	struct hlist_node *tmp;
	struct nz_tagseq *t;
	int i;

	for (i = 0; i < ARRAY_SIZE(p->tags); i++)
		hlist_for_each_entry_safe(t, tmp, &p->tags[i], node) {
			hlist_del(&t->node);
			kfree(t);
		}
}

/* ---- commands ------------------------------------------------------------- */

static void nz_peer_kick(struct nz_peer *p)
{
	u32 s;

	for (s = 0; s < p->comm->nrails; s++)
		nz_conn_kick(&p->conns[s]);
}

static struct nz_peer *nz_xfer_peer(struct nz_comm *comm,
				    const struct nz_sqe_xfer *x)
{
	if (x->peer >= comm->size || x->peer == comm->rank)
		return NULL;
	return comm->peers[x->peer];
}

int nz_cmd_send(struct nz_file *f, struct io_uring_cmd *cmd,
		const struct nz_sqe *sqe, unsigned int issue_flags)
{
	const struct nz_sqe_xfer *x = &sqe->xfer;
	struct nz_tagseq *spare, *t;
	struct nz_comm *comm;
	struct nz_xreq *xr;
	struct nz_peer *p;
	struct nz_msg *m;
	u32 s, mask;
	int ret;

	comm = nz_file_comm_get(f, sqe->comm_id);
	if (!comm)
		return -EINVAL;
	ret = -EINVAL;
	p = nz_xfer_peer(comm, x);
	if (!p)
		goto out_put_comm;
	ret = nz_xfer_len_ok(x->len);
	if (ret)
		goto out_put_comm;
	ret = -ENOMEM;
	m = nz_msg_alloc(p, NZ_MSG_TX);
	spare = kzalloc(sizeof(*spare), GFP_KERNEL_ACCOUNT);
	xr = nz_xreq_alloc(f, cmd, comm, x->timeout_ms);
	if (!m || !spare || !xr)
		goto out_free;
	/* Allocated now: a send fails where nothing may sleep. */
	m->abort = kzalloc(sizeof(*m->abort), GFP_KERNEL_ACCOUNT);
	if (!m->abort)
		goto out_free;
	m->tag = x->tag;
	m->total = x->len;
	m->len = x->len;
	ret = nz_ubuf_pin(&m->ubuf, cmd, x->addr, x->len, false);
	if (ret)
		goto out_free;
	ret = nz_req_queue(&xr->base);
	if (ret)
		goto out_free;

	spin_lock_bh(&p->lock);
	if (comm->dead || p->left) {
		spin_unlock_bh(&p->lock);
		nz_req_complete(&xr->base, comm->dead ? -ECANCELED : -ECONNRESET,
				0);
		xr = NULL;
		ret = 0;
		goto out_free;
	}
	t = nz_tagseq_get(p, x->tag, &spare);
	if (!t) {
		spin_unlock_bh(&p->lock);
		nz_req_complete(&xr->base, -ENOSPC, 0);
		xr = NULL;
		ret = 0;
		goto out_free;
	}
	m->tag_seq = t->tx_next++;
	m->msg_id = p->next_msg_id++;
	m->xreq = xr;
	p->tx_inflight_msgs++;
	nz_sched_msg_new(p, m);
	mask = m->rail_mask;
	list_add_tail(&m->node, &p->tx_msgs);
	spin_unlock_bh(&p->lock);
	kfree(spare);
	/* Only the rails the scheduler chose: no idle work on the others. */
	for (s = 0; s < comm->nrails; s++)
		if (mask & BIT(s))
			nz_conn_kick(&p->conns[s]);
	nz_comm_put(comm);
	return 0;

out_free:
	if (xr)
		nz_req_free(&xr->base);
	kfree(spare);
	if (m)
		nz_msg_put(m);
out_put_comm:
	nz_comm_put(comm);
	return ret;
}
ALLOW_ERROR_INJECTION(nz_cmd_send, ERRNO);

/* An incoming message waiting for this receive, under peer->lock. */
static struct nz_msg *nz_find_unclaimed(struct nz_peer *p, u64 tag, u64 seq)
{
	struct nz_msg *m;

	list_for_each_entry(m, &p->rx_msgs, node)
		if (m->tag == tag && m->tag_seq == seq && !m->xreq &&
		    !m->discard)
			return m;
	return NULL;
}

int nz_cmd_recv(struct nz_file *f, struct io_uring_cmd *cmd,
		const struct nz_sqe *sqe, unsigned int issue_flags)
{
	const struct nz_sqe_xfer *x = &sqe->xfer;
	struct nz_tagseq *spare, *t;
	struct nz_msg *m, *u = NULL;
	struct nz_comm *comm;
	struct nz_xreq *xr;
	struct nz_peer *p;
	bool complete = false;
	int ret;

	comm = nz_file_comm_get(f, sqe->comm_id);
	if (!comm)
		return -EINVAL;
	ret = -EINVAL;
	p = nz_xfer_peer(comm, x);
	if (!p)
		goto out_put_comm;
	ret = nz_xfer_len_ok(x->len);
	if (ret)
		goto out_put_comm;
	ret = -ENOMEM;
	m = nz_msg_alloc(p, NZ_MSG_RX);
	spare = kzalloc(sizeof(*spare), GFP_KERNEL_ACCOUNT);
	xr = nz_xreq_alloc(f, cmd, comm, x->timeout_ms);
	if (!m || !spare || !xr)
		goto out_free;
	m->tag = x->tag;
	m->len = x->len;
	ret = nz_ubuf_pin(&m->ubuf, cmd, x->addr, x->len, true);
	if (ret)
		goto out_free;
	ret = nz_req_queue(&xr->base);
	if (ret)
		goto out_free;

	spin_lock_bh(&p->lock);
	if (comm->dead) {
		spin_unlock_bh(&p->lock);
		nz_req_complete(&xr->base, -ECANCELED, 0);
		xr = NULL;
		ret = 0;
		goto out_free;
	}
	t = nz_tagseq_get(p, x->tag, &spare);
	if (!t) {
		spin_unlock_bh(&p->lock);
		nz_req_complete(&xr->base, -ENOSPC, 0);
		xr = NULL;
		ret = 0;
		goto out_free;
	}
	m->tag_seq = t->rx_next++;
	u = nz_find_unclaimed(p, m->tag, m->tag_seq);
	if (!u && p->left) {
		/* Nothing more will come from a peer that left. */
		spin_unlock_bh(&p->lock);
		nz_req_complete(&xr->base, -ECONNRESET, 0);
		xr = NULL;
		ret = 0;
		goto out_free;
	}
	if (!u) {
		m->xreq = xr;
		list_add_tail(&m->node, &p->posted);
		spin_unlock_bh(&p->lock);
		kfree(spare);
		nz_peer_kick(p);	/* a stalled connection may wait for it */
		nz_comm_put(comm);
		return 0;
	}
	if (u->gone_err) {
		/* Withdrawn by its sender, or refused by us: it never comes. */
		s32 err = u->gone_err;

		complete = nz_msg_set_done(u, err);
		spin_unlock_bh(&p->lock);
		nz_req_complete(&xr->base, err, 0);
		xr = NULL;
		ret = 0;
		if (complete)
			nz_msg_complete(u);
		goto out_free;
	}
	if (u->total > m->len) {
		/* Too long for the buffer: drain the rest of it. */
		u->discard = true;
		if (u->complete)
			complete = nz_msg_set_done(u, 0);
		spin_unlock_bh(&p->lock);
		nz_req_complete(&xr->base, -EMSGSIZE, 0);
		xr = NULL;
		ret = 0;
		if (complete)
			nz_msg_complete(u);
		goto out_free;
	}
	/* The message arrived first: it takes over this receive. */
	u->ubuf = m->ubuf;
	memset(&m->ubuf, 0, sizeof(m->ubuf));
	u->len = m->len;
	u->xreq = xr;
	if (u->complete)
		complete = nz_msg_set_done(u, u->total);
	spin_unlock_bh(&p->lock);
	if (complete)
		nz_msg_complete(u);
	xr = NULL;
	ret = 0;
	nz_peer_kick(p);

out_free:
	if (xr)
		nz_req_free(&xr->base);
	kfree(spare);
	if (m)
		nz_msg_put(m);
out_put_comm:
	nz_comm_put(comm);
	return ret;
}
ALLOW_ERROR_INJECTION(nz_cmd_recv, ERRNO);

/* ---- receive path ---------------------------------------------------------- */

static struct nz_msg *nz_find_arrived(struct nz_peer *p, u64 msg_id)
{
	struct nz_msg *m;

	list_for_each_entry(m, &p->rx_msgs, node)
		if (m->msg_id == msg_id)
			return m;
	return NULL;
}

static struct nz_msg *nz_find_posted(struct nz_peer *p, u64 tag, u64 seq)
{
	struct nz_msg *m;

	list_for_each_entry(m, &p->posted, node)
		if (m->tag == tag && m->tag_seq == seq)
			return m;
	return NULL;
}

/* Queue an ACK or echo; false (counted) if the peer reads none of them. */
static bool nz_conn_queue_ctrl(struct nz_conn *conn, struct nz_ctrl *c)
{
	lockdep_assert_held(&conn->peer->lock);
	if (conn->nctrl >= READ_ONCE(max_ctrl_frames)) {
		atomic64_inc(&conn->rail->stats.ctrl_dropped);
		pr_notice_ratelimited("rail %s: rank %u reads none of its %u ACKs and echoes: dropping more\n",
				      conn->rail->name, conn->peer->rank,
				      conn->nctrl);
		return false;
	}
	list_add_tail(&c->node, &conn->ctrl);
	conn->nctrl++;
	return true;
}

/*
 * A connection held back for want of budget (no receive posted for the
 * message at its head, the peer's unexpected messages filling the budget)
 * for a whole timeout: its message is refused instead of holding the path
 * -- and whatever the peer sends after it, its ABORT included -- for ever.
 */
bool nz_conn_refuse_due(const struct nz_conn *conn)
{
	return READ_ONCE(conn->rx_blocked) &&
	       time_after(jiffies, READ_ONCE(conn->blocked_since) +
			  msecs_to_jiffies(conn->peer->comm->timeout_ms));
}

/* What nz_rx_lookup() allocated but did not use; freed after unlock. */
struct nz_rx_spare {
	struct nz_msg *msg;
	u64 *map;
	void *kbuf;
	struct nz_ctrl *ctrl;		/* a REFUSE */
	struct nz_xreq *toolong;	/* receive to fail with -EMSGSIZE */
};

static void nz_rx_spare_free(struct nz_rx_spare *s)
{
	if (s->toolong)
		nz_req_complete(&s->toolong->base, -EMSGSIZE, 0);
	if (s->msg)
		nz_msg_put(s->msg);
	kvfree(s->map);
	kvfree(s->kbuf);
	kfree(s->ctrl);
}

/* The receive of (tag, seq) was posted and is gone (failed unmatched). */
static bool nz_tag_rx_passed(struct nz_peer *p, u64 tag, u64 seq)
{
	struct nz_tagseq *t;

	hlist_for_each_entry(t, &p->tags[hash_64(tag, NZ_TAG_HASH_BITS)], node)
		if (t->tag == tag)
			return seq < t->rx_next;
	return false;
}

/*
 * Keep a message that will never arrive, so that the receive that claims
 * it fails with err at once and the one after gets the next message.  It
 * costs a message slot of the unexpected budget; past that limit it is
 * not kept, and that receive waits for its timeout instead.  Under
 * p->lock; takes *grave.
 */
static void nz_rx_grave(struct nz_peer *p, u64 msg_id, u64 tag, u64 seq,
			s32 err, struct nz_msg **grave)
{
	struct nz_msg *m = *grave;

	if (!m || p->unexpected_msgs >= READ_ONCE(unexpected_msgs))
		return;
	*grave = NULL;
	m->msg_id = msg_id;
	m->tag = tag;
	m->tag_seq = seq;
	m->gone_err = err;
	m->budget = sizeof(*m);
	p->unexpected_bytes += m->budget;
	p->unexpected_msgs++;
	list_add_tail(&m->node, &p->rx_msgs);
}

/*
 * We will not deliver the peer's message fd->msg_id: its receive gave up
 * before it came (-ECONNABORTED), or it found no receive and no room for a
 * whole timeout (-ENOBUFS).  It is done for the duplicate window, so every
 * frame of it is drained and acknowledged; the REFUSE goes first on this
 * path, ahead of this frame's ACK, so the send fails instead of completing.
 * Under p->lock.
 */
static void nz_rx_refuse(struct nz_conn *conn, const struct nz_frame_data *fd,
			 s32 err, struct nz_rx_spare *s)
{
	struct nz_peer *p = conn->peer;

	nz_seqwin_mark_done(&p->rxwin, fd->msg_id);
	if (err == -ENOBUFS)
		nz_rx_grave(p, fd->msg_id, fd->tag, fd->tag_seq, err, &s->msg);
	nz_frame_init(&s->ctrl->f, NZ_FRAME_REFUSE);
	s->ctrl->f.abort.msg_id = fd->msg_id;
	s->ctrl->f.abort.reason = -err;
	if (nz_conn_queue_ctrl(conn, s->ctrl))
		s->ctrl = NULL;
	atomic64_inc(&nz_stats.msgs_refused);
}

/*
 * Find or create the message a DATA frame belongs to.  Returns 0 with *out
 * referenced (NULL: drain and acknowledge the frame: a duplicate of a
 * finished message, or one we refuse), or an error: -EAGAIN when the
 * unexpected-message budget is full (the connection stalls until a
 * receive is posted or budget frees up, for a whole timeout at most:
 * refuse), -EPROTO.
 */
static int nz_rx_lookup(struct nz_conn *conn, const struct nz_frame_data *fd,
			struct nz_msg **out, struct nz_rx_spare *s,
			bool refuse)
{
	struct nz_peer *p = conn->peer;
	u64 budget = (u64)READ_ONCE(unexpected_mb) << 20;
	u32 unit = p->comm->unit;
	u64 words = nz_reasm_bitmap_words(fd->total, unit);
	u64 cost = fd->total + sizeof(struct nz_msg) + words * sizeof(u64);
	struct mem_cgroup *old;
	struct nz_msg *m, *posted;
	int tries, ret = 0;
	s32 gone;

	*out = NULL;
	for (tries = 0; tries < 3; tries++) {
		spin_lock_bh(&p->lock);
		if (nz_seqwin_is_done(&p->rxwin, fd->msg_id))
			goto out_unlock;
		ret = -EPROTO;
		if (!nz_seqwin_in_window(&p->rxwin, fd->msg_id))
			goto out_unlock;
		ret = 0;
		m = nz_find_arrived(p, fd->msg_id);
		if (m)
			goto found;
		posted = nz_find_posted(p, fd->tag, fd->tag_seq);
		gone = 0;
		if (!posted && nz_tag_rx_passed(p, fd->tag, fd->tag_seq)) {
			gone = -ECONNABORTED;
		} else if (!posted &&
			   (p->unexpected_bytes + cost > budget ||
			    p->unexpected_msgs >= READ_ONCE(unexpected_msgs))) {
			ret = -EAGAIN;
			if (!refuse)
				goto out_unlock;
			gone = -ENOBUFS;
		}
		if (gone && s->ctrl && (gone != -ENOBUFS || s->msg)) {
			nz_rx_refuse(conn, fd, gone, s);
			ret = 0;
			goto out_unlock;
		}
		if (!gone && (words == 0 || s->map) &&
		    (posted || (s->msg && s->kbuf)))
			goto create;
		spin_unlock_bh(&p->lock);

		/* Charged to the receiver's creator, not to this worker. */
		old = set_active_memcg(p->comm->memcg);
		if (gone && !s->ctrl)
			s->ctrl = kzalloc(sizeof(*s->ctrl), GFP_KERNEL);
		if ((gone == -ENOBUFS || (!gone && !posted)) && !s->msg)
			s->msg = nz_msg_alloc(p, NZ_MSG_RX);
		if (!gone && words && !s->map)
			s->map = kvcalloc(words, sizeof(u64),
					  GFP_KERNEL_ACCOUNT);
		if (!gone && !posted && !s->kbuf)
			s->kbuf = kvmalloc(max_t(u64, fd->total, 1),
					   GFP_KERNEL_ACCOUNT);
		set_active_memcg(old);
		if (gone ? !s->ctrl || (gone == -ENOBUFS && !s->msg) :
		    (words && !s->map) || (!posted && (!s->msg || !s->kbuf)))
			return -ENOMEM;
	}
	return -EAGAIN;

create:
	if (posted) {
		m = posted;
		list_del_init(&m->node);
		if (fd->total > m->len) {
			/* Fail the receive now, drain the message. */
			s->toolong = m->xreq;
			m->xreq = NULL;
			m->discard = true;
		}
	} else {
		m = s->msg;
		s->msg = NULL;
		m->kbuf = s->kbuf;
		s->kbuf = NULL;
		m->budget = cost;
		p->unexpected_bytes += cost;
		p->unexpected_msgs++;
	}
	m->msg_id = fd->msg_id;
	m->tag = fd->tag;
	m->tag_seq = fd->tag_seq;
	m->total = fd->total;
	m->map = s->map;
	s->map = NULL;
	nz_reasm_init(&m->reasm, fd->total, unit, m->map);
	m->arrived = true;
	list_add_tail(&m->node, &p->rx_msgs);
found:
	kref_get(&m->ref);
	*out = m;
out_unlock:
	spin_unlock_bh(&p->lock);
	return ret;
}

static bool nz_reasm_seen(const struct nz_reasm *r, u64 offset)
{
	u64 u = offset >> r->unit_shift;

	if (!r->nunits)
		return r->zero_seen;
	return u < r->nunits && (r->map[u / 64] & BIT_ULL(u % 64));
}

int nz_conn_rx_data(struct nz_conn *conn, const struct nz_frame *f,
		    struct nz_rx_dest *d)
{
	const struct nz_frame_data *fd = &f->data;
	struct nz_peer *p = conn->peer;
	struct nz_rx_spare s = { };
	struct nz_msg *m;
	int ret;

	memset(d, 0, sizeof(*d));
	d->f = *f;
	if (!nz_wire_chunk_ok(fd->total, fd->offset, f->len, p->comm->unit))
		return -EPROTO;
	ret = nz_rx_lookup(conn, fd, &m, &s, nz_conn_refuse_due(conn));
	nz_rx_spare_free(&s);
	if (ret == -EAGAIN && !READ_ONCE(conn->rx_blocked))
		WRITE_ONCE(conn->blocked_since, jiffies);
	if (ret)
		return ret;
	if (!m) {
		/* A duplicate of a finished message: drain, acknowledge. */
		d->drain = true;
		return 0;
	}
	spin_lock_bh(&p->lock);
	if (fd->total != m->total) {
		spin_unlock_bh(&p->lock);
		nz_msg_put(m);
		return -EPROTO;
	}
	if (m->done || m->discard || nz_reasm_seen(&m->reasm, fd->offset)) {
		/* Drained; still accounted, so that the message can finish. */
		d->drain = true;
	} else if (m->kbuf) {
		d->kv.iov_base = m->kbuf + fd->offset;
		d->kv.iov_len = f->len;
		iov_iter_kvec(&d->iter, ITER_DEST, &d->kv, 1, f->len);
	} else {
		nz_ubuf_iter(&m->ubuf, ITER_DEST, fd->offset, f->len,
			     &d->iter);
	}
	m->writers++;
	d->msg = m;		/* the lookup's reference */
	spin_unlock_bh(&p->lock);
	return 0;
}
ALLOW_ERROR_INJECTION(nz_conn_rx_data, ERRNO);

int nz_conn_rx_data_done(struct nz_conn *conn, struct nz_rx_dest *d)
{
	struct nz_peer *p = conn->peer;
	struct nz_msg *m = d->msg;
	bool complete = false, release = false;
	struct nz_ctrl *ack;
	int ret = 0;

	ack = kzalloc(sizeof(*ack), GFP_KERNEL);
	if (!ack)
		ret = -ENOMEM;
	spin_lock_bh(&p->lock);
	if (m) {
		m->writers--;
		if (!ret && !m->done)
			ret = nz_reasm_add(&m->reasm, d->f.data.offset,
					   d->f.len);
		if (ret == NZ_REASM_NEW) {
			p->last_progress = jiffies;
			atomic64_add(d->f.len, &conn->bytes_rx);
			atomic64_inc(&conn->chunks_rx);
			atomic64_add(d->f.len, &conn->rail->stats.bytes_rx);
			atomic64_inc(&conn->rail->stats.chunks_rx);
			ret = 0;
		} else if (ret == NZ_REASM_DUP) {
			ret = 0;
		}
		if (!ret && !m->complete && !m->done &&
		    nz_reasm_done(&m->reasm)) {
			m->complete = true;
			if (m->xreq)
				complete = nz_msg_set_done(m, m->total);
			else if (m->discard)
				complete = nz_msg_set_done(m, 0);
			else
				nz_seqwin_mark_done(&p->rxwin, m->msg_id);
		}
		if (m->done && !m->writers && !m->cqe_posted) {
			m->cqe_posted = true;
			complete = true;
		}
		release = m->complete && m->writers;
	}
	if (!ret && ack) {
		nz_frame_init(&ack->f, NZ_FRAME_ACK);
		ack->f.ack.msg_id = d->f.data.msg_id;
		ack->f.ack.offset = d->f.data.offset;
		ack->f.ack.len = d->f.len;
		if (nz_conn_queue_ctrl(conn, ack))
			ack = NULL;
	}
	spin_unlock_bh(&p->lock);
	kfree(ack);
	if (complete)
		nz_msg_complete(m);
	if (release)	/* another rail is still half-way through a copy */
		nz_peer_release_writers(p);
	if (m)
		nz_msg_put(m);
	nz_conn_kick(conn);
	return ret;
}

/*
 * The transport is in the middle of a frame for a message that completed
 * meanwhile (its bytes came over other rails): let go of the message, and
 * read the rest of the frame into nothing; it is still acknowledged at its
 * end (nz_conn_rx_data_done() with no message).  What it wrote so far is
 * the same data the other copy brought.  Returns true if it let go.
 */
bool nz_conn_rx_data_release(struct nz_conn *conn, struct nz_rx_dest *d)
{
	if (!d->msg || d->drain || !READ_ONCE(d->msg->complete))
		return false;
	nz_conn_rx_data_abort(conn, d);
	d->drain = true;
	return true;
}

/* The transport gave up on a frame whose payload it was reading. */
void nz_conn_rx_data_abort(struct nz_conn *conn, struct nz_rx_dest *d)
{
	struct nz_peer *p = conn->peer;
	struct nz_msg *m = d->msg;
	bool complete = false;

	if (!m)
		return;
	spin_lock_bh(&p->lock);
	complete = nz_msg_writer_done(m);
	spin_unlock_bh(&p->lock);
	if (complete)
		nz_msg_complete(m);
	nz_msg_put(m);
	d->msg = NULL;
}

static struct nz_chunk *nz_chunk_find(struct list_head *list,
				      const struct nz_frame_ack *a)
{
	struct nz_chunk *ch;

	list_for_each_entry(ch, list, node)
		if (ch->msg->msg_id == a->msg_id && ch->offset == a->offset &&
		    ch->len == a->len)
			return ch;
	return NULL;
}

/*
 * An ACK names a chunk by (message, offset, length), whichever copy of it
 * the receiver saw.  The chunk is normally on the connection the ACK came
 * back on, but not always: a path we suspected (silent for a while, maybe
 * only busy) had its chunk moved to peer->resend, or resent on another
 * path, before the ACK of the first copy arrived.  That ACK still proves
 * the bytes arrived; ignoring it left the message waiting for a resend the
 * receiver no longer needed (and, if the receiver then left the job,
 * failed it with -ECONNRESET although every byte had arrived).
 */
static int nz_conn_rx_ack(struct nz_conn *conn, const struct nz_frame_ack *a)
{
	struct nz_peer *p = conn->peer;
	struct nz_conn *owner = conn;
	struct nz_chunk *found;
	bool complete = false, free_it;
	struct nz_msg *m;
	u32 s;

	spin_lock_bh(&p->lock);
	found = nz_chunk_find(&conn->chunks, a);
	if (!found) {
		owner = NULL;
		found = nz_chunk_find(&p->resend, a);
	}
	for (s = 0; !found && s < p->comm->nrails; s++) {
		if (&p->conns[s] == conn)
			continue;
		found = nz_chunk_find(&p->conns[s].chunks, a);
		if (found)
			owner = &p->conns[s];
	}
	if (!found) {
		/* Stale: the chunk was acknowledged already. */
		spin_unlock_bh(&p->lock);
		return 0;
	}
	list_del(&found->node);
	if (owner)
		owner->inflight_bytes -= found->len;
	/* A sample only for the path that carried the copy it times. */
	if (owner == conn)
		nz_sched_acked(conn, found);
	else
		atomic64_inc(&conn->rail->stats.acks_late);
	p->last_progress = jiffies;
	m = found->msg;
	m->outstanding--;
	if (m->assigned_all && !m->outstanding)
		complete = nz_msg_set_done(m, m->total);
	/*
	 * Its writer has not returned yet: it frees the chunk, maybe as soon
	 * as we unlock -- so decide here, never look at found after.
	 */
	free_it = !found->busy;
	if (!free_it)
		found->acked = true;
	spin_unlock_bh(&p->lock);
	if (complete)
		nz_msg_complete(m);
	if (free_it)
		nz_chunk_free(found);
	nz_conn_kick(conn);
	if (owner && owner != conn)
		nz_conn_kick(owner);
	return 0;
}

/*
 * The peer withdrew its message a->msg_id (its send failed).  Whatever we
 * hold of it goes, the receive that has it or will claim it fails with
 * -ECONNABORTED, and the duplicate window moves past it.  Answered with
 * ABORT_ACK every time, repeats included: the peer stops repeating then.
 */
static int nz_conn_rx_abort(struct nz_conn *conn, const struct nz_frame_abort *a)
{
	struct nz_peer *p = conn->peer;
	struct nz_msg *m, *grave;
	struct mem_cgroup *old;
	struct nz_ctrl *ack;
	LIST_HEAD(done);
	int ret = 0;

	ack = kzalloc(sizeof(*ack), GFP_KERNEL);
	old = set_active_memcg(p->comm->memcg);
	grave = nz_msg_alloc(p, NZ_MSG_RX);
	set_active_memcg(old);
	if (!ack || !grave) {
		ret = -ENOMEM;
		goto out;
	}
	spin_lock_bh(&p->lock);
	if (nz_seqwin_is_done(&p->rxwin, a->msg_id))
		goto answer;		/* delivered, refused, or a repeat */
	if (!nz_seqwin_in_window(&p->rxwin, a->msg_id)) {
		spin_unlock_bh(&p->lock);
		ret = -EPROTO;
		goto out;
	}
	atomic64_inc(&nz_stats.msgs_withdrawn);
	m = nz_find_arrived(p, a->msg_id);
	if (!m)
		m = nz_find_posted(p, a->tag, a->tag_seq);
	if (m && m->arrived && (m->tag != a->tag || m->tag_seq != a->tag_seq)) {
		spin_unlock_bh(&p->lock);
		ret = -EPROTO;
		goto out;
	}
	if (m && (m->xreq || m->arrived)) {
		/* A receive has it, or part of it waits for one: both end. */
		if (!m->xreq)
			nz_rx_grave(p, a->msg_id, a->tag, a->tag_seq,
				    -ECONNABORTED, &grave);
		if (nz_msg_set_done(m, -ECONNABORTED))
			list_add_tail(&m->node, &done);
	} else if (!nz_tag_rx_passed(p, a->tag, a->tag_seq)) {
		nz_rx_grave(p, a->msg_id, a->tag, a->tag_seq, -ECONNABORTED,
			    &grave);
	}
	nz_seqwin_mark_done(&p->rxwin, a->msg_id);
answer:
	nz_frame_init(&ack->f, NZ_FRAME_ABORT_ACK);
	ack->f.abort.msg_id = a->msg_id;
	if (nz_conn_queue_ctrl(conn, ack))
		ack = NULL;
	spin_unlock_bh(&p->lock);
	nz_complete_list(&done);
	/* Budget came back: a path held back for it may go on. */
	nz_peer_kick(p);
out:
	kfree(ack);
	if (grave)
		nz_msg_put(grave);
	return ret;
}

/* The receiver took note of our ABORT: stop repeating it. */
static int nz_conn_rx_abort_ack(struct nz_conn *conn,
				const struct nz_frame_abort *a)
{
	struct nz_peer *p = conn->peer;
	struct nz_abort *ab, *found = NULL;

	spin_lock_bh(&p->lock);
	list_for_each_entry(ab, &p->aborts, node)
		if (ab->msg_id == a->msg_id) {
			found = ab;
			list_del(&ab->node);
			break;
		}
	spin_unlock_bh(&p->lock);
	kfree(found);
	/* The window may have waited behind it. */
	if (found)
		nz_peer_kick(p);
	return 0;
}

/* The receiver will not deliver our message a->msg_id: fail the send. */
static int nz_conn_rx_refuse(struct nz_conn *conn,
			     const struct nz_frame_abort *a)
{
	struct nz_peer *p = conn->peer;
	struct nz_abort *ab = NULL;
	bool complete = false;
	struct nz_msg *m;
	s32 err;

	/* Only what the receiver may say; anything else is a plain abort. */
	err = a->reason == ENOBUFS ? -ENOBUFS : -ECONNABORTED;
	spin_lock_bh(&p->lock);
	list_for_each_entry(m, &p->tx_msgs, node)
		if (m->msg_id == a->msg_id) {
			/* It is done on its side already: no ABORT. */
			ab = m->abort;
			m->abort = NULL;
			complete = nz_msg_set_done(m, err);
			atomic64_inc(&nz_stats.sends_refused);
			break;
		}
	spin_unlock_bh(&p->lock);
	kfree(ab);
	if (complete)
		nz_msg_complete(m);
	return 0;
}

int nz_conn_rx_ctrl(struct nz_conn *conn, const struct nz_frame *f)
{
	struct nz_ctrl *c;

	switch (f->type) {
	case NZ_FRAME_ACK:
		return nz_conn_rx_ack(conn, &f->ack);
	case NZ_FRAME_HEARTBEAT:
		/* Its arrival is what counts; echo only the ones asked for. */
		if (!(f->hb.seq & NZ_HB_ECHO))
			return 0;
		c = kzalloc(sizeof(*c), GFP_KERNEL);
		if (!c)
			return -ENOMEM;
		nz_frame_init(&c->f, NZ_FRAME_HEARTBEAT_ACK);
		c->f.hb = f->hb;
		spin_lock_bh(&conn->peer->lock);
		if (nz_conn_queue_ctrl(conn, c)) {
			atomic64_inc(&conn->rail->stats.hb_frames);
			c = NULL;
		}
		spin_unlock_bh(&conn->peer->lock);
		kfree(c);
		nz_conn_kick(conn);
		return 0;
	case NZ_FRAME_HEARTBEAT_ACK:
		nz_sched_rtt(conn, f->hb.ts_ns, f->hb.seq);
		return 0;
	case NZ_FRAME_ABORT:
		return nz_conn_rx_abort(conn, &f->abort);
	case NZ_FRAME_ABORT_ACK:
		return nz_conn_rx_abort_ack(conn, &f->abort);
	case NZ_FRAME_REFUSE:
		return nz_conn_rx_refuse(conn, &f->abort);
	case NZ_FRAME_CLOSE:
		/* The peer left the job in order, or refused us. */
		return f->close.reason == NZ_CLOSE_NORMAL ? -ESHUTDOWN :
		       -ECONNRESET;
	default:
		return -EPROTO;
	}
}
ALLOW_ERROR_INJECTION(nz_conn_rx_ctrl, ERRNO);

/* ---- transmit path ---------------------------------------------------------- */

int nz_conn_tx_next(struct nz_conn *conn, struct nz_tx_item *it)
{
	struct nz_peer *p = conn->peer;
	struct nz_chunk *spare, *ch, *tmp;
	struct nz_ctrl *c = NULL;
	struct nz_abort *ab;
	LIST_HEAD(dead);
	bool flushed;
	struct nz_msg *m;

	spare = kmem_cache_zalloc(nz_chunk_cache, GFP_KERNEL);
	spin_lock_bh(&p->lock);
	if (!list_empty(&conn->ctrl)) {
		c = list_first_entry(&conn->ctrl, struct nz_ctrl, node);
		list_del(&c->node);
		conn->nctrl--;
		flushed = !conn->nctrl && READ_ONCE(p->comm->dead);
		WRITE_ONCE(conn->tx_last, jiffies);
		spin_unlock_bh(&p->lock);
		it->f = c->f;
		it->chunk = NULL;
		kfree(c);
		/* nz_comm_destroy() waits for the last one. */
		if (flushed)
			wake_up_all(&p->comm->waitq);
		if (spare)
			kmem_cache_free(nz_chunk_cache, spare);
		return 0;
	}
	/* A withdrawn send, on every path until the receiver answers. */
	list_for_each_entry(ab, &p->aborts, node) {
		if (conn->state != NZ_CONN_UP || (ab->sent & BIT(conn->slot)))
			continue;
		ab->sent |= BIT(conn->slot);
		nz_frame_init(&it->f, NZ_FRAME_ABORT);
		it->f.abort.msg_id = ab->msg_id;
		it->f.abort.tag = ab->tag;
		it->f.abort.tag_seq = ab->tag_seq;
		it->f.abort.reason = ab->reason;
		it->chunk = NULL;
		WRITE_ONCE(conn->tx_last, jiffies);
		spin_unlock_bh(&p->lock);
		if (spare)
			kmem_cache_free(nz_chunk_cache, spare);
		return 0;
	}
	/* Chunks to resend of a message that failed meanwhile: never sent. */
	list_for_each_entry_safe(ch, tmp, &p->resend, node)
		if (ch->msg->done)
			list_move_tail(&ch->node, &dead);
	ch = (spare && conn->state == NZ_CONN_UP) ?
		nz_sched_next_chunk(conn, &spare) : NULL;
	if (!ch) {
		spin_unlock_bh(&p->lock);
		nz_chunks_free_list(&dead);
		if (spare)
			kmem_cache_free(nz_chunk_cache, spare);
		return -ENODATA;
	}
	m = ch->msg;
	ch->busy = true;
	m->writers++;
	WRITE_ONCE(conn->tx_last, jiffies);
	nz_frame_init(&it->f, NZ_FRAME_DATA);
	it->f.len = ch->len;
	it->f.data.msg_id = m->msg_id;
	it->f.data.tag = m->tag;
	it->f.data.tag_seq = m->tag_seq;
	it->f.data.total = m->total;
	it->f.data.offset = ch->offset;
	it->chunk = ch;
	/* The chunk's reference keeps the pages pinned while we send. */
	nz_ubuf_iter(&m->ubuf, ITER_SOURCE, ch->offset, ch->len, &it->iter);
	spin_unlock_bh(&p->lock);
	nz_chunks_free_list(&dead);
	if (spare)
		kmem_cache_free(nz_chunk_cache, spare);
	return 0;
}
ALLOW_ERROR_INJECTION(nz_conn_tx_next, ERRNO);

void nz_conn_tx_done(struct nz_conn *conn, struct nz_tx_item *it)
{
	struct nz_chunk *ch = it->chunk;
	struct nz_peer *p = conn->peer;
	bool free_it = false, moved = false, complete = false;
	struct nz_msg *m;

	if (!ch)
		return;
	atomic64_add(it->f.len, &conn->bytes_tx);
	atomic64_inc(&conn->chunks_tx);
	atomic64_add(it->f.len, &conn->rail->stats.bytes_tx);
	atomic64_inc(&conn->rail->stats.chunks_tx);
	m = ch->msg;
	spin_lock_bh(&p->lock);
	ch->busy = false;
	complete = nz_msg_writer_done(m);
	if (ch->acked) {
		free_it = true;
	} else if (READ_ONCE(conn->suspect) && !m->done) {
		/* Written on a path we gave up on: send it elsewhere too. */
		conn->inflight_bytes -= ch->len;
		list_move_tail(&ch->node, &p->resend);
		moved = true;
	}
	spin_unlock_bh(&p->lock);
	if (complete)
		nz_msg_complete(m);
	if (free_it)
		nz_chunk_free(ch);
	if (moved)
		nz_peer_kick(p);
}

/*
 * The transport gave up on it->chunk half-way through writing it (the
 * connection closes, or the write failed): that write will never report
 * done.  The chunk stops counting as a writer of its message, so that a
 * message waiting only for it posts its CQE now.  One still on the
 * connection's list stays there for nz_conn_requeue_chunks(); one that was
 * acknowledged meanwhile (a copy sent on another path arrived first) is on
 * no list any more, and is freed here.  Before, such a send never
 * completed: with 16 ranks on 8 guests, where overloaded paths are
 * suspected and torn down all the time, a rank hung in alltoall with its
 * send's CQE held back for good.
 */
void nz_conn_tx_abort(struct nz_conn *conn, struct nz_tx_item *it)
{
	struct nz_chunk *ch = it->chunk;
	struct nz_peer *p = conn->peer;
	bool complete = false, free_it;
	struct nz_msg *m;

	if (!ch)
		return;
	it->chunk = NULL;
	m = ch->msg;
	spin_lock_bh(&p->lock);
	if (ch->busy) {
		ch->busy = false;
		complete = nz_msg_writer_done(m);
	}
	free_it = ch->acked;
	spin_unlock_bh(&p->lock);
	if (complete)
		nz_msg_complete(m);
	if (free_it)
		nz_chunk_free(ch);
}

/*
 * The connection lost its transport: every chunk it carried and that was
 * not acknowledged goes back to the peer, to be sent again on any rail.
 * The receiver drops what it already has and acknowledges it anyway.
 */
u32 nz_conn_requeue_chunks(struct nz_conn *conn, bool all)
{
	struct nz_peer *p = conn->peer;
	struct nz_chunk *ch, *tmp;
	LIST_HEAD(done);
	LIST_HEAD(dead);
	u32 n = 0;

	spin_lock_bh(&p->lock);
	list_for_each_entry_safe(ch, tmp, &conn->chunks, node) {
		/*
		 * Unless the transport is gone (all), the chunk it is writing
		 * stays: it moves when the write is done (nz_conn_tx_done()),
		 * so its pages are never read after another copy completed it.
		 */
		if (ch->busy && !all)
			continue;
		conn->inflight_bytes -= ch->len;
		nz_chunk_write_lost(ch, &done);
		ch->sent = false;
		/* A message that failed is never read again: drop its chunks. */
		if (ch->msg->done) {
			list_move_tail(&ch->node, &dead);
			continue;
		}
		list_move_tail(&ch->node, &p->resend);
		n++;
	}
	if (all) {
		struct nz_abort *ab;

		conn->inflight_bytes = 0;
		/* An ABORT written here may be lost with it: again, later. */
		list_for_each_entry(ab, &p->aborts, node)
			ab->sent &= ~BIT(conn->slot);
	}
	spin_unlock_bh(&p->lock);
	nz_complete_list(&done);
	nz_chunks_free_list(&dead);
	return n;
}

void nz_conn_free_ctrl(struct nz_conn *conn)
{
	struct nz_peer *p = conn->peer;
	struct nz_ctrl *c, *tmp;
	LIST_HEAD(list);

	spin_lock_bh(&p->lock);
	list_splice_init(&conn->ctrl, &list);
	conn->nctrl = 0;
	spin_unlock_bh(&p->lock);
	list_for_each_entry_safe(c, tmp, &list, node)
		kfree(c);
}

/* ---- timeouts and teardown -------------------------------------------------- */

/*
 * A transfer times out when its deadline has passed *and* nothing at all
 * moved with its peer for as long: a long queue behind a slow rail is
 * progress, not a hang.
 */
static s32 nz_msg_expired(const struct nz_msg *m)
{
	const struct nz_xreq *x = m->xreq;

	if (!x)
		return 0;
	if (nz_req_owner_gone(&x->base))
		return -ECANCELED;
	if (time_after(jiffies, x->deadline) &&
	    time_after(jiffies, m->peer->last_progress + x->timeout))
		return -ETIMEDOUT;
	return 0;
}

/*
 * What a transfer that timed out was waiting for, in one line: the message
 * and every path to its peer.  A timeout means nothing moved with the peer
 * for the whole timeout: this is what tells a lost wake-up from a peer
 * that stopped.  Under p->lock.
 */
static void nz_msg_describe(const struct nz_msg *m, char *buf, size_t len)
{
	const struct nz_peer *p = m->peer;
	size_t n;
	u32 s;

	n = scnprintf(buf, len, "%s of %llu bytes, %s; resend %s; paths:",
		      m->dir == NZ_MSG_TX ? "send" : "receive", m->total,
		      m->dir == NZ_MSG_TX ?
		      (m->assigned_all ? "all assigned" : "not all assigned") :
		      (m->complete ? "complete" :
		       m->arrived ? "arriving" : "nothing arrived"),
		      list_empty(&p->resend) ? "empty" : "waiting");
	for (s = 0; s < p->comm->nrails; s++) {
		const struct nz_conn *c = &p->conns[s];

		n += scnprintf(buf + n, len - n, " %s %s%s%s in flight %llu, %u ctrl, silent %u",
			       c->rail ? c->rail->name : "?",
			       nz_conn_state_name(c->state),
			       c->suspect ? " suspect" : "",
			       c->rx_blocked ? " blocked" : "",
			       c->inflight_bytes, c->nctrl, c->silent);
	}
}

/*
 * A transfer whose deadline passed a whole timeout ago and that has not
 * expired: its own bytes may not move, but other transfers with the peer
 * do, and those keep it alive (nz_msg_expired()).  That is right for one
 * queued behind a long transfer; for one the peer will never send, it is a
 * wait without end that nothing else reports.  Said once per transfer.
 */
static bool nz_msg_overdue(struct nz_msg *m)
{
	const struct nz_xreq *x = m->xreq;

	if (!x || m->overdue_said ||
	    !time_after(jiffies, x->deadline + x->timeout))
		return false;
	m->overdue_said = true;
	return true;
}

static void nz_scan_list(struct list_head *list, struct list_head *done,
			 s32 force, char *why, char *late, size_t len)
{
	struct nz_msg *m, *tmp;
	s32 err;

	list_for_each_entry_safe(m, tmp, list, node) {
		err = force ? force : nz_msg_expired(m);
		if (!err && late && !late[0] && nz_msg_overdue(m))
			nz_msg_describe(m, late, len);
		if (!err)
			continue;
		if (!m->xreq && !force)
			continue;
		if (err == -ETIMEDOUT && why && !why[0])
			nz_msg_describe(m, why, len);
		/* A peer that left delivered this one whole: keep it. */
		if (force == -ECONNRESET && m->complete && !m->xreq)
			continue;
		if (nz_msg_set_done(m, err))
			list_add_tail(&m->node, done);
	}
}

/* Fail the peer's commands whose deadline passed or whose task exits. */
void nz_peer_scan(struct nz_peer *p)
{
	LIST_HEAD(done);
	char why[384], late[384];
	bool kick;

	why[0] = 0;
	late[0] = 0;
	spin_lock_bh(&p->lock);
	nz_scan_list(&p->tx_msgs, &done, 0, why, late, sizeof(why));
	nz_scan_list(&p->posted, &done, 0, why, late, sizeof(why));
	nz_scan_list(&p->rx_msgs, &done, 0, why, late, sizeof(why));
	kick = nz_peer_abort_unsent(p);
	spin_unlock_bh(&p->lock);
	if (kick)
		nz_peer_kick(p);
	if (why[0])
		pr_warn_ratelimited("transfer with rank %u timed out: %s\n",
				    p->rank, why);
	if (late[0])
		pr_warn_ratelimited("transfer with rank %u past its deadline by a whole timeout, kept alive by other traffic with that rank: %s\n",
				    p->rank, late);
	nz_complete_list(&done);
}

/*
 * Fail the commands waiting on a peer that has no connection left (after
 * the grace period); data held for it and chunks it may still need stay,
 * so a connection that comes back later finds a consistent state.
 */
u32 nz_peer_fail_pending(struct nz_peer *p, s32 err)
{
	struct nz_msg *m, *tmp;
	struct list_head *lists[] = { &p->tx_msgs, &p->posted, &p->rx_msgs };
	LIST_HEAD(done);
	u32 n = 0;
	int i;

	spin_lock_bh(&p->lock);
	for (i = 0; i < ARRAY_SIZE(lists); i++)
		list_for_each_entry_safe(m, tmp, lists[i], node)
			if (m->xreq && nz_msg_set_done(m, err)) {
				list_add_tail(&m->node, &done);
				n++;
			}
	spin_unlock_bh(&p->lock);
	nz_complete_list(&done);
	return n;
}

/* Fail everything: the communicator goes away (connections are closed). */
void nz_peer_fail_all(struct nz_peer *p, s32 err)
{
	struct nz_chunk *ch, *tmp;
	LIST_HEAD(chunks);
	LIST_HEAD(done);

	spin_lock_bh(&p->lock);
	nz_scan_list(&p->tx_msgs, &done, err, NULL, NULL, 0);
	nz_scan_list(&p->posted, &done, err, NULL, NULL, 0);
	nz_scan_list(&p->rx_msgs, &done, err, NULL, NULL, 0);
	list_splice_init(&p->resend, &chunks);
	spin_unlock_bh(&p->lock);
	nz_complete_list(&done);
	list_for_each_entry_safe(ch, tmp, &chunks, node)
		nz_chunk_free(ch);
	/* Nobody is left to tell. */
	nz_peer_free_aborts(p);
}

/* Chunks still on a connection when the communicator is torn down. */
void nz_conn_drop_chunks(struct nz_conn *conn)
{
	struct nz_chunk *ch;
	LIST_HEAD(chunks);
	LIST_HEAD(done);

	spin_lock_bh(&conn->peer->lock);
	list_for_each_entry(ch, &conn->chunks, node)
		nz_chunk_write_lost(ch, &done);
	list_splice_init(&conn->chunks, &chunks);
	conn->inflight_bytes = 0;
	spin_unlock_bh(&conn->peer->lock);
	nz_complete_list(&done);
	nz_chunks_free_list(&chunks);
}

/* ---- chunk allocation, for sched.c ------------------------------------------ */

int nz_msg_init(void)
{
	nz_chunk_cache = KMEM_CACHE(nz_chunk, 0);
	return nz_chunk_cache ? 0 : -ENOMEM;
}

void nz_msg_exit(void)
{
	kmem_cache_destroy(nz_chunk_cache);
}
