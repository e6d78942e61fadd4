// SPDX-License-Identifier: GPL-2.0
/*
 * The transmit path: the next frame for a connection (control frames,
 * ABORTs, chunks), a chunk's write done or abandoned, chunks moved off a
 * lost connection; and the sender's side of the answers: ACK, ABORT_ACK,
 * REFUSE and DONE.
 */
#include <linux/module.h>
#include <linux/error-injection.h>
#include <linux/slab.h>
#include "msg.h"

static struct kmem_cache *nz_chunk_cache;

void nz_chunk_free(struct nz_chunk *ch)
{
	if (ch->msg)
		nz_msg_put(ch->msg);
	kmem_cache_free(nz_chunk_cache, ch);
}

/* Chunks of messages already done, off their lists: free them unlocked. */
void nz_chunks_free_list(struct list_head *chunks)
{
	struct nz_chunk *ch, *tmp;

	list_for_each_entry_safe(ch, tmp, chunks, node)
		nz_chunk_free(ch);
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
int nz_conn_rx_ack(struct nz_conn *conn, const struct nz_frame_ack *a)
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

/* The receiver took note of our ABORT: stop repeating it. */
int nz_conn_rx_abort_ack(struct nz_conn *conn, const struct nz_frame_abort *a)
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
int nz_conn_rx_refuse(struct nz_conn *conn, const struct nz_frame_abort *a)
{
	struct nz_peer *p = conn->peer;
	struct nz_abort *ab = NULL;
	bool complete = false;
	struct nz_msg *m;
	s32 err;

	/* Only what the receiver may say; anything else is a plain abort. */
	err = a->reason == ENOBUFS || a->reason == EMSGSIZE ? -(s32)a->reason :
	      -ECONNABORTED;
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

static bool nz_done_names(const struct nz_frame_done *d, u64 msg_id)
{
	u64 i = msg_id - d->base;

	if (msg_id < d->floor)
		return false;
	return msg_id < d->base ||
	       (i < NZ_DONE_MASK_BITS && (d->mask & BIT_ULL(i)));
}

/* Under p->lock: take every chunk of a finished send off its list. */
static void nz_peer_unlist_done_chunks(struct nz_peer *p, struct list_head *l,
				       struct nz_conn *owner,
				       struct list_head *dead)
{
	struct nz_chunk *ch, *tmp;

	list_for_each_entry_safe(ch, tmp, l, node) {
		if (!ch->msg->done)
			continue;
		list_del(&ch->node);
		if (owner)
			owner->inflight_bytes -= ch->len;
		/* Its writer frees it (nz_conn_tx_done()). */
		if (ch->busy)
			ch->acked = true;
		else
			list_add_tail(&ch->node, dead);
	}
}

/*
 * The receiver leaves the job and says which of our messages it finished
 * (DONE, ahead of its CLOSE on this path).  Those complete now, whatever
 * chunks we still hold of them: their ACKs may have gone down with a path
 * we lost meanwhile, and once the CLOSE of the receiver's last path came,
 * such a send failed with -ECONNRESET although it was delivered.  A
 * message it refused is never named.
 */
int nz_conn_rx_done(struct nz_conn *conn, const struct nz_frame_done *d)
{
	struct nz_peer *p = conn->peer;
	struct nz_msg *m, *tmp;
	LIST_HEAD(done);
	LIST_HEAD(dead);
	u32 n = 0, s;

	spin_lock_bh(&p->lock);
	list_for_each_entry_safe(m, tmp, &p->tx_msgs, node) {
		if (!nz_done_names(d, m->msg_id))
			continue;
		n++;
		if (nz_msg_set_done(m, m->total))
			list_add_tail(&m->node, &done);
	}
	if (n) {
		p->last_progress = jiffies;
		for (s = 0; s < p->comm->nrails; s++)
			nz_peer_unlist_done_chunks(p, &p->conns[s].chunks,
						   &p->conns[s], &dead);
		nz_peer_unlist_done_chunks(p, &p->resend, NULL, &dead);
	}
	spin_unlock_bh(&p->lock);
	if (n)
		atomic64_add(n, &conn->rail->stats.sends_confirmed);
	nz_complete_list(&done);
	nz_chunks_free_list(&dead);
	return 0;
}

/* ---- zero-copy transmit (TCP) ----------------------------------------------- */

/*
 * A TCP rail may send a chunk straight from the pinned user pages
 * (MSG_ZEROCOPY with our own ubuf_info, as io_uring's SEND_ZC does): TCP
 * then references the pages from its socket buffers until it no longer
 * needs them -- acknowledged by the peer's TCP, or purged when the socket
 * is reset -- and calls back as each buffer goes.  A send completes only
 * when its receiver acknowledged every byte, so the pages cannot change
 * under a transmission that still matters; but a send that fails (timeout,
 * cancel, a path lost) would post its CQE while a socket may still
 * transmit from them, and the user, free to write the buffer again, would
 * change what a late retransmission carries.  So the socket's hold counts
 * as a writer of the message, and the CQE waits for the last callback.
 * That wait is bounded: the receiver reads or refuses within its timeout,
 * and a connection that closes resets its socket (transport_tcp.c).
 *
 * nz_msg_zc_release(): the last reference went (nz_msg_zc_callback()),
 * the hold ends.
 */
void nz_msg_zc_release(struct work_struct *work)
{
	struct nz_msg *m = container_of(work, struct nz_msg, zc_work);
	struct nz_peer *p = m->peer;
	struct nz_comm *comm = p->comm;
	bool complete;

	spin_lock_bh(&p->lock);
	m->zc_armed = false;
	complete = nz_msg_writer_done(m);
	spin_unlock_bh(&p->lock);
	atomic_dec(&p->zc_held);
	if (complete)
		nz_msg_complete(m);
	nz_msg_put(m);
	nz_comm_put(comm);
	if (atomic_dec_and_test(&nz_stats.zerocopy_held))
		wake_up_var(&nz_stats.zerocopy_held);
}

/*
 * TCP dropped a reference: a socket buffer was freed (skb), or a
 * sendmsg() or our writer returned (NULL).  Any context but hard IRQ.
 */
static void nz_msg_zc_callback(struct sk_buff *skb, struct ubuf_info *uarg,
			       bool zerocopy_success)
{
	struct nz_msg *m = container_of(uarg, struct nz_msg, zc);

	if (refcount_dec_and_test(&uarg->refcnt))
		queue_work(nz_wq, &m->zc_work);
}

/*
 * A reference for a writer about to send a chunk of m without copying, or
 * NULL (copy it): the hold starts with the first; while it ends (its
 * release queued) the writer copies.  Under p->lock.
 */
static struct ubuf_info *nz_msg_zc_get(struct nz_msg *m)
{
	lockdep_assert_held(&m->peer->lock);
	if (m->zc_armed)
		return refcount_inc_not_zero(&m->zc.refcnt) ? &m->zc : NULL;
	m->zc.callback = nz_msg_zc_callback;
	/*
	 * DONT_ORPHAN, as io_uring's SEND_ZC sets it.  Without it, 6.1 copies
	 * the pages of a cloned socket buffer that TCP must change (a partial
	 * ACK while the device still holds the clone: pskb_expand_head()),
	 * and that copy clears the buffer's "pure zero-copy" flag between
	 * the charge and the uncharge of its socket memory: in the p2p suite
	 * inet_sock_destruct() warned about sk_forward_alloc at the end of
	 * the first job.  Pages kept, not copied, only make the release come
	 * later.
	 */
	m->zc.flags = SKBFL_ZEROCOPY_FRAG | SKBFL_DONT_ORPHAN;
	refcount_set(&m->zc.refcnt, 1);
	m->zc_armed = true;
	m->writers++;
	kref_get(&m->ref);
	kref_get(&m->peer->comm->ref);
	atomic_inc(&m->peer->zc_held);
	atomic_inc(&nz_stats.zerocopy_held);
	return &m->zc;
}

/* The writer's reference, once its write returned or was abandoned. */
static void nz_tx_zc_put(struct nz_tx_item *it)
{
	if (it->zc) {
		it->zc->callback(NULL, it->zc, true);
		it->zc = NULL;
	}
}

/*
 * Module exit, once every socket is released: TCP may still free buffers
 * that name our callback (a reset socket's, a device's queue).
 */
void nz_tx_zc_exit(void)
{
	atomic_t *held = &nz_stats.zerocopy_held;

	while (!wait_var_event_timeout(held, !atomic_read(held), 10 * HZ))
		pr_warn("waiting for %d zero-copy sends the network stack still holds\n",
			atomic_read(held));
}

/* ---- transmit path ---------------------------------------------------------- */

/* The oldest ACK or echo queued on conn, if any: into *f, under p->lock. */
static bool nz_conn_pop_ctrl(struct nz_conn *conn, struct nz_frame *f)
{
	struct nz_peer *p = conn->peer;
	struct nz_ctrl *c;
	bool flushed;

	lockdep_assert_held(&p->lock);
	c = list_first_entry_or_null(&conn->ctrl, struct nz_ctrl, node);
	if (!c)
		return false;
	list_del(&c->node);
	conn->nctrl--;
	flushed = !conn->nctrl && READ_ONCE(p->comm->dead);
	WRITE_ONCE(conn->tx_last, jiffies);
	*f = c->f;
	kfree(c);
	/* What our queue on the rail holds up now (wire.h, NZ_HB_LATE). */
	if (f->type == NZ_FRAME_HEARTBEAT || f->type == NZ_FRAME_HEARTBEAT_ACK)
		f->hb.seq = (f->hb.seq & ~NZ_HB_LATE_MASK) |
			    NZ_HB_LATE(nz_rail_egress_ms(conn->rail));
	/* nz_comm_destroy() waits for the last one. */
	if (flushed)
		wake_up_all(&p->comm->waitq);
	return true;
}

/*
 * Another queued ACK or echo to write behind the frame just taken, so that
 * a transport writes them together (one TCP segment for a run's ACKs, not
 * one each).  -ENODATA when there is none.
 */
int nz_conn_tx_next_ctrl(struct nz_conn *conn, struct nz_frame *f)
{
	struct nz_peer *p = conn->peer;
	bool got;

	spin_lock_bh(&p->lock);
	got = nz_conn_pop_ctrl(conn, f);
	spin_unlock_bh(&p->lock);
	return got ? 0 : -ENODATA;
}

int nz_conn_tx_next(struct nz_conn *conn, struct nz_tx_item *it)
{
	struct nz_peer *p = conn->peer;
	struct nz_chunk *spare = NULL, *ch, *tmp;
	struct nz_abort *ab;
	LIST_HEAD(dead);
	struct nz_msg *m;
	int ret = 0;

	it->zc = NULL;
	it->chunk = NULL;
again:
	spin_lock_bh(&p->lock);
	if (nz_conn_pop_ctrl(conn, &it->f))
		goto out;
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
		WRITE_ONCE(conn->tx_last, jiffies);
		goto out;
	}
	/* Chunks to resend of a message that failed meanwhile: never sent. */
	list_for_each_entry_safe(ch, tmp, &p->resend, node)
		if (ch->msg->done)
			list_move_tail(&ch->node, &dead);
	ch = conn->state == NZ_CONN_UP ?
		nz_sched_next_chunk(conn, &spare) : NULL;
	if (ch == ERR_PTR(-ENOMEM)) {
		/*
		 * A new chunk is due: allocate it now, not on every call
		 * (most calls write an ACK or find nothing), and decide anew.
		 */
		spin_unlock_bh(&p->lock);
		spare = kmem_cache_zalloc(nz_chunk_cache, GFP_KERNEL);
		if (spare)
			goto again;	/* dead keeps what it holds */
		nz_chunks_free_list(&dead);
		return -ENODATA;	/* the next kick tries again */
	}
	if (!ch) {
		ret = -ENODATA;
		goto out;
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
	if (it->zc_min && ch->len >= it->zc_min)
		it->zc = nz_msg_zc_get(m);
out:
	spin_unlock_bh(&p->lock);
	nz_chunks_free_list(&dead);
	if (spare)
		kmem_cache_free(nz_chunk_cache, spare);
	return ret;
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
	if (it->zc) {
		atomic64_inc(&nz_stats.chunks_zerocopy);
		nz_tx_zc_put(it);
	}
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
	nz_tx_zc_put(it);
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
