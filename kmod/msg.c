// SPDX-License-Identifier: GPL-2.0
/*
 * Messages: their lifetime and results, the SEND and RECV commands, tags,
 * withdrawn sends (ABORT), and the timeouts and teardown of a peer's
 * transfers.  The receive path is rx.c, the transmit path and the
 * acknowledgements tx.c, user buffers ubuf.c (their shared calls: msg.h).
 *
 * Reference rule: a message holds one reference for being on a peer list;
 * it is dropped when the message completes.  Every chunk in flight and
 * every payload read in progress hold one more.  The last put may sleep
 * (it unpins user pages), so it never happens under peer->lock: paths that
 * finish a message under the lock collect it and complete it afterwards.
 */
#include <linux/module.h>
#include <linux/error-injection.h>
#include <linux/io_uring.h>
#include <linux/slab.h>
#include <linux/hash.h>
#include <linux/nospec.h>
#include "msg.h"

/*
 * A (tag, sequence) entry per tag ever used with a peer lives as long as
 * the communicator: the sequence numbers must go on matching the peer's.
 * A user naming a new tag in every SEND would grow them without end.
 */
static unsigned int max_tags = 65536;
module_param(max_tags, uint, 0644);
MODULE_PARM_DESC(max_tags,
		 "distinct tags one communicator may use with each peer (-ENOSPC past it)");

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

void nz_msg_put(struct nz_msg *m)
{
	kref_put(&m->ref, nz_msg_release);
}

struct nz_msg *nz_msg_alloc(struct nz_peer *p, enum nz_msg_dir dir)
{
	struct nz_msg *m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);

	if (!m)
		return NULL;
	kref_init(&m->ref);
	INIT_LIST_HEAD(&m->node);
	INIT_WORK(&m->zc_work, nz_msg_zc_release);
	m->peer = p;
	m->dir = dir;
	return m;
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
	list_splice_init(&p->refusals, &list);
	spin_unlock_bh(&p->lock);
	list_for_each_entry_safe(ab, tmp, &list, node)
		kfree(ab);
}

/*
 * Decide a message's result and take it off its list; under peer->lock.
 * Returns true when the caller must call nz_msg_complete() after
 * unlocking (no payload read is still writing into its buffer).
 */
bool nz_msg_set_done(struct nz_msg *m, s32 result)
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
bool nz_msg_writer_done(struct nz_msg *m)
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
void nz_chunk_write_lost(struct nz_chunk *ch, struct list_head *done)
{
	if (!ch->busy)
		return;
	ch->busy = false;
	if (nz_msg_writer_done(ch->msg))
		list_add_tail(&ch->msg->node, done);
}

/* Post the result and drop the list reference; never under a spinlock. */
void nz_msg_complete(struct nz_msg *m)
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

void nz_complete_list(struct list_head *done)
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

/* The (tag, sequence) entry of tag with p, or NULL; under p->lock. */
struct nz_tagseq *nz_tagseq_find(struct nz_peer *p, u64 tag)
{
	struct nz_tagseq *t;

	hlist_for_each_entry(t, &p->tags[hash_64(tag, NZ_TAG_HASH_BITS)], node)
		if (t->tag == tag)
			return t;
	return NULL;
}

static struct nz_tagseq *nz_tagseq_get(struct nz_peer *p, u64 tag,
				       struct nz_tagseq **spare)
{
	struct nz_tagseq *t = nz_tagseq_find(p, tag);

	if (t)
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
	hlist_add_head(&t->node, &p->tags[hash_64(tag, NZ_TAG_HASH_BITS)]);
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

void nz_peer_kick(struct nz_peer *p)
{
	u32 s;

	for (s = 0; s < p->comm->nrails; s++)
		nz_conn_kick(&p->conns[s]);
}

/*
 * The peer a SEND, RECV or CANCEL names, or NULL (-EINVAL); also refuses a
 * timeout longer than a communicator may have: a command that could never
 * expire would hold its pages and charges, and an exec() that waits for it.
 */
static struct nz_peer *nz_xfer_peer(struct nz_comm *comm,
				    const struct nz_sqe_xfer *x)
{
	if (x->peer >= comm->size || x->peer == comm->rank ||
	    x->timeout_ms > NZ_MAX_TIMEOUT_MS)
		return NULL;
	return comm->peers[array_index_nospec(x->peer, comm->size)];
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

/*
 * NZ_CMD_CANCEL: fail the receives on (peer, tag) still waiting for their
 * message, as if they had timed out (their (tag, seq) stays passed, so
 * the message is refused when it comes).  Returns how many, or -EINVAL.
 */
int nz_cancel_recvs(struct nz_file *f, const struct nz_sqe *sqe)
{
	const struct nz_sqe_xfer *x = &sqe->xfer;
	struct nz_msg *m, *tmp;
	struct nz_comm *comm;
	struct nz_peer *p;
	LIST_HEAD(done);
	int n = 0;

	if (x->addr || x->len || x->timeout_ms)
		return -EINVAL;
	comm = nz_file_comm_get(f, sqe->comm_id);
	if (!comm)
		return -EINVAL;
	p = nz_xfer_peer(comm, x);
	if (!p) {
		nz_comm_put(comm);
		return -EINVAL;
	}
	spin_lock_bh(&p->lock);
	list_for_each_entry_safe(m, tmp, &p->posted, node) {
		if (m->tag != x->tag || !m->xreq)
			continue;
		n++;
		if (nz_msg_set_done(m, -ECANCELED))
			list_add_tail(&m->node, &done);
	}
	spin_unlock_bh(&p->lock);
	nz_complete_list(&done);	/* counted in stats/cmds_cancelled */
	nz_comm_put(comm);
	return n;
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
