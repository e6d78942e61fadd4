// SPDX-License-Identifier: GPL-2.0
/*
 * The receive path: DATA frames matched to receives or held for one
 * (within the unexpected budget), refused when nobody will take them,
 * the ACKs and echoes queued in answer, and the control frames a peer
 * sends, ABORT among them.
 */
#include <linux/module.h>
#include <linux/error-injection.h>
#include <linux/memcontrol.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include "msg.h"

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
 * What a leaving receiver says it has (DONE): every message of the peer
 * from floor up to base, and base + i for each bit i of mask at or above
 * floor, is finished here.  A refused message is never named -- its send
 * must fail, not complete -- so floor is just above the newest refusal we
 * keep a record of (a sender never has older ones in flight than the
 * window behind it).  False when there is nothing to say (the peer sent
 * us nothing).  Under p->lock.
 */
static bool nz_peer_done(struct nz_peer *p, struct nz_frame *f)
{
	u64 base = p->rxwin.base, floor = 1, mask = 0, i;
	struct nz_abort *r;

	lockdep_assert_held(&p->lock);
	list_for_each_entry(r, &p->refusals, node)
		floor = max(floor, r->msg_id + 1);
	for (i = 0; i < NZ_DONE_MASK_BITS; i++)
		if (base + i >= floor && nz_seqwin_is_done(&p->rxwin, base + i))
			mask |= BIT_ULL(i);
	if (floor >= base && !mask)
		return false;
	nz_frame_init(f, NZ_FRAME_DONE);
	f->done.base = base;
	f->done.mask = mask;
	f->done.floor = floor;
	return true;
}

/* For a transport writing its last frames on conn: DONE, if any. */
bool nz_conn_done_frame(struct nz_conn *conn, struct nz_frame *f)
{
	struct nz_peer *p = conn->peer;
	bool ret;

	spin_lock_bh(&p->lock);
	ret = nz_peer_done(p, f);
	spin_unlock_bh(&p->lock);
	return ret;
}

/*
 * Leaving the job (nz_comm_destroy()): DONE on every path up now, behind
 * the ACKs still queued.  An ACK written on a path that went down is lost
 * with it; the sender would resend that chunk on another path, but we
 * will not be there to answer.  The transports write DONE once more right
 * before their CLOSE (nz_conn_done_frame()): what is still queued when
 * the wait for it runs out is dropped, and a path may come up meanwhile.
 * Best effort: without memory the sender's send fails as before.
 */
void nz_peer_confirm_done(struct nz_peer *p)
{
	struct nz_ctrl *c, *tmp;
	u32 nrails = p->comm->nrails, s;
	LIST_HEAD(pool);
	struct nz_frame f;
	bool say;

	for (s = 0; s < nrails; s++) {
		c = kzalloc(sizeof(*c), GFP_KERNEL);
		if (!c)
			break;
		list_add(&c->node, &pool);
	}
	spin_lock_bh(&p->lock);
	say = nz_peer_done(p, &f);
	for (s = 0; s < nrails && !list_empty(&pool) && say; s++) {
		if (p->conns[s].state != NZ_CONN_UP)
			continue;
		c = list_first_entry(&pool, struct nz_ctrl, node);
		c->f = f;
		list_del(&c->node);
		if (!nz_conn_queue_ctrl(&p->conns[s], c))
			list_add(&c->node, &pool);
	}
	spin_unlock_bh(&p->lock);
	nz_peer_kick_all(p);
	list_for_each_entry_safe(c, tmp, &pool, node)
		kfree(c);
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
	struct nz_abort *rec;		/* its record, for later frames */
	struct nz_xreq *toolong;	/* receive to fail with -EMSGSIZE */
	struct nz_msg *failed;		/* a posted receive, done: complete it */
};

static void nz_rx_spare_free(struct nz_rx_spare *s)
{
	if (s->toolong)
		nz_req_complete(&s->toolong->base, -EMSGSIZE, 0);
	if (s->failed)
		nz_msg_complete(s->failed);
	if (s->msg)
		nz_msg_put(s->msg);
	kvfree(s->map);
	kvfree(s->kbuf);
	kfree(s->ctrl);
	kfree(s->rec);
}

/* The receive of (tag, seq) was posted and is gone (failed unmatched). */
static bool nz_tag_rx_passed(struct nz_peer *p, u64 tag, u64 seq)
{
	struct nz_tagseq *t = nz_tagseq_find(p, tag);

	return t && seq < t->rx_next;
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
 * A message we refused, if fd->msg_id is one: its (positive) reason, or 0.
 * The record goes once the peer sends a msg_id NZ_SEQWIN_SIZE past it: it
 * never has more in flight from its oldest unfinished send, so by then it
 * has our REFUSE.  Under p->lock.
 */
static u32 nz_rx_refused(struct nz_peer *p, u64 msg_id)
{
	struct nz_abort *r, *tmp;
	u32 reason = 0;

	list_for_each_entry_safe(r, tmp, &p->refusals, node) {
		if (r->msg_id == msg_id) {
			reason = r->reason;
		} else if (msg_id - r->msg_id >= NZ_SEQWIN_SIZE &&
			   msg_id > r->msg_id) {
			list_del(&r->node);
			kfree(r);
		}
	}
	return reason;
}

/*
 * Queue a REFUSE of msg_id on this path, ahead of the ACK of the frame
 * that came with it: every frame of a refused message is answered that
 * way, on whichever path it comes -- one answered by a bare ACK on a path
 * whose REFUSE died with another would let the send complete.  Under
 * p->lock; takes s->ctrl.
 */
static void nz_rx_queue_refuse(struct nz_conn *conn, u64 msg_id, u32 reason,
			       struct nz_rx_spare *s)
{
	nz_frame_init(&s->ctrl->f, NZ_FRAME_REFUSE);
	s->ctrl->f.abort.msg_id = msg_id;
	s->ctrl->f.abort.reason = reason;
	if (nz_conn_queue_ctrl(conn, s->ctrl))
		s->ctrl = NULL;
}

/*
 * We will not deliver the peer's message fd->msg_id: its receive gave up
 * before it came (-ECONNABORTED), or it found no receive and no room for a
 * whole timeout (-ENOBUFS).  It is done for the duplicate window, so every
 * frame of it is drained, and refused before it is acknowledged, so that
 * the send fails instead of completing.  Under p->lock; takes s->rec.
 */
static void nz_rx_refuse(struct nz_conn *conn, const struct nz_frame_data *fd,
			 s32 err, struct nz_rx_spare *s)
{
	struct nz_peer *p = conn->peer;

	nz_seqwin_mark_done(&p->rxwin, fd->msg_id);
	if (err == -ENOBUFS)
		nz_rx_grave(p, fd->msg_id, fd->tag, fd->tag_seq, err, &s->msg);
	/* Forget those this msg_id proves answered: at most a window kept. */
	nz_rx_refused(p, fd->msg_id);
	s->rec->msg_id = fd->msg_id;
	s->rec->reason = -err;
	list_add_tail(&s->rec->node, &p->refusals);
	s->rec = NULL;
	nz_rx_queue_refuse(conn, fd->msg_id, -err, s);
	atomic64_inc(&nz_stats.msgs_refused);
}

/*
 * Find or create the message a DATA frame belongs to.  Returns 0 with *out
 * referenced (NULL: drain and acknowledge the frame: a duplicate of a
 * finished message, or one we refuse), or an error: -EAGAIN when the
 * unexpected-message budget is full (the connection stalls until a
 * receive is posted or budget frees up, for a whole timeout at most:
 * refuse), -EPROTO.
 *
 * A message longer than the receive posted for it fails that receive and
 * is drained, which needs its reassembly map: sized by the total the peer
 * claims (up to NZ_MAX_MSG), not by the receive, so it is charged to the
 * unexpected budget like a message that came first.  One that does not
 * fit is refused at once (-EMSGSIZE), its receive failed with it.
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
	u64 dcost = sizeof(struct nz_msg) + words * sizeof(u64);
	struct mem_cgroup *old;
	struct nz_msg *m, *posted;
	int tries, ret = 0;
	bool toolong = false;
	u32 reason;
	s32 gone;

	*out = NULL;
	for (tries = 0; tries < 3; tries++) {
		spin_lock_bh(&p->lock);
		if (nz_seqwin_is_done(&p->rxwin, fd->msg_id)) {
			/* A repeat: drained; refused again if it was. */
			reason = list_empty(&p->refusals) ? 0 :
				 nz_rx_refused(p, fd->msg_id);
			if (!reason)
				goto out_unlock;
			if (s->ctrl) {
				nz_rx_queue_refuse(conn, fd->msg_id, reason, s);
				goto out_unlock;
			}
			spin_unlock_bh(&p->lock);
			s->ctrl = kzalloc(sizeof(*s->ctrl), GFP_KERNEL);
			if (!s->ctrl)
				return -ENOMEM;
			continue;
		}
		ret = -EPROTO;
		if (!nz_seqwin_in_window(&p->rxwin, fd->msg_id))
			goto out_unlock;
		ret = 0;
		m = nz_find_arrived(p, fd->msg_id);
		if (m)
			goto found;
		posted = nz_find_posted(p, fd->tag, fd->tag_seq);
		toolong = posted && fd->total > posted->len;
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
		} else if (toolong &&
			   (p->unexpected_bytes + dcost > budget ||
			    p->unexpected_msgs >= READ_ONCE(unexpected_msgs))) {
			gone = -EMSGSIZE;
		}
		if (gone && s->ctrl && s->rec && (gone != -ENOBUFS || s->msg)) {
			if (toolong && nz_msg_set_done(posted, -EMSGSIZE))
				s->failed = posted;
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
		if (gone && !s->rec)
			s->rec = kzalloc(sizeof(*s->rec), GFP_KERNEL_ACCOUNT);
		if ((gone == -ENOBUFS || (!gone && !posted)) && !s->msg)
			s->msg = nz_msg_alloc(p, NZ_MSG_RX);
		if (!gone && words && !s->map)
			s->map = kvcalloc(words, sizeof(u64),
					  GFP_KERNEL_ACCOUNT);
		if (!gone && !posted && !s->kbuf)
			s->kbuf = kvmalloc(max_t(u64, fd->total, 1),
					   GFP_KERNEL_ACCOUNT);
		set_active_memcg(old);
		if (gone ? !s->ctrl || !s->rec || (gone == -ENOBUFS && !s->msg) :
		    (words && !s->map) || (!posted && (!s->msg || !s->kbuf)))
			return -ENOMEM;
	}
	return -EAGAIN;

create:
	if (posted) {
		m = posted;
		list_del_init(&m->node);
		if (toolong) {
			/* Fail the receive now, drain the message. */
			s->toolong = m->xreq;
			m->xreq = NULL;
			m->discard = true;
			m->budget = dcost;
			p->unexpected_bytes += dcost;
			p->unexpected_msgs++;
		}
	} else {
		m = s->msg;
		s->msg = NULL;
		m->kbuf = s->kbuf;
		s->kbuf = NULL;
		m->budget = cost;
		p->unexpected_bytes += cost;
		p->unexpected_msgs++;
		atomic64_inc(&nz_stats.msgs_unexpected);
		atomic64_add(fd->total, &nz_stats.bytes_unexpected);
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

/*
 * A frame's payload is all in: account it and queue its ACK.  The caller
 * kicks the connection to write the ACK (nz_conn_kick()), once for all the
 * frames it read in a row: a wake-up of the transmit work for each 64 KiB
 * chunk cost the receiver more than TCP's own work on it.
 */
int nz_conn_rx_data_end(struct nz_conn *conn, struct nz_rx_dest *d)
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
	return ret;
}

/* The same, and the ACK written now. */
int nz_conn_rx_data_done(struct nz_conn *conn, struct nz_rx_dest *d)
{
	int ret = nz_conn_rx_data_end(conn, d);

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

/*
 * A HEARTBEAT: its arrival is what counts (the rx marks); echo only the
 * ones asked for.  Its queue report and the echo are one visit to
 * peer->lock.
 */
static int nz_conn_rx_heartbeat(struct nz_conn *conn,
				const struct nz_frame_heartbeat *hb)
{
	bool echo = hb->seq & NZ_HB_ECHO;
	struct nz_peer *p = conn->peer;
	struct nz_ctrl *c = NULL;
	int ret = 0;

	if (hb->seq & NZ_HB_REDIAL_ALL)
		nz_peer_redial(p, (hb->seq & NZ_HB_REDIAL_ALL) >>
				  NZ_HB_REDIAL_SHIFT);
	if (echo) {
		c = kzalloc(sizeof(*c), GFP_KERNEL);
		if (c) {
			nz_frame_init(&c->f, NZ_FRAME_HEARTBEAT_ACK);
			c->f.hb = *hb;
		} else {
			ret = -ENOMEM;
		}
	}
	spin_lock_bh(&p->lock);
	nz_conn_peer_late(conn, NZ_HB_LATE_MS(hb->seq));
	if (c && nz_conn_queue_ctrl(conn, c)) {
		atomic64_inc(&conn->rail->stats.hb_frames);
		c = NULL;
	}
	spin_unlock_bh(&p->lock);
	kfree(c);
	if (echo && !ret)
		nz_conn_kick(conn);
	return ret;
}

int nz_conn_rx_ctrl(struct nz_conn *conn, const struct nz_frame *f)
{
	switch (f->type) {
	case NZ_FRAME_ACK:
		return nz_conn_rx_ack(conn, &f->ack);
	case NZ_FRAME_HEARTBEAT:
		return nz_conn_rx_heartbeat(conn, &f->hb);
	case NZ_FRAME_HEARTBEAT_ACK:
		spin_lock_bh(&conn->peer->lock);
		nz_conn_peer_late(conn, NZ_HB_LATE_MS(f->hb.seq));
		nz_sched_rtt(conn, f->hb.ts_ns, f->hb.seq);
		spin_unlock_bh(&conn->peer->lock);
		return 0;
	case NZ_FRAME_ABORT:
		return nz_conn_rx_abort(conn, &f->abort);
	case NZ_FRAME_ABORT_ACK:
		return nz_conn_rx_abort_ack(conn, &f->abort);
	case NZ_FRAME_REFUSE:
		return nz_conn_rx_refuse(conn, &f->abort);
	case NZ_FRAME_DONE:
		return nz_conn_rx_done(conn, &f->done);
	case NZ_FRAME_CLOSE:
		/* The peer left the job in order, or refused us. */
		return f->close.reason == NZ_CLOSE_NORMAL ? -ESHUTDOWN :
		       -ECONNRESET;
	default:
		return -EPROTO;
	}
}
ALLOW_ERROR_INJECTION(nz_conn_rx_ctrl, ERRNO);
