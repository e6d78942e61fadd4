// SPDX-License-Identifier: GPL-2.0
/*
 * Connections, one per (peer, rail slot) of a communicator: their
 * transport state coming and going (attach, detach, failure, dialling,
 * shutdown) and a rail's change applied to each.  The communicators
 * themselves are in comm.c, the handshake that admits a connection in
 * handshake.c.
 */
#include <linux/module.h>
#include <linux/error-injection.h>
#include "comm.h"
#include "transport.h"

/* ---- connections -------------------------------------------------------- */

void nz_conn_kick(struct nz_conn *conn)
{
	spin_lock_bh(&conn->kick_lock);
	if (conn->tp && !conn->tp_dead)
		conn->rail->ops->conn_kick(conn);
	spin_unlock_bh(&conn->kick_lock);
}

void nz_peer_kick_all(struct nz_peer *p)
{
	u32 s;

	for (s = 0; s < p->comm->nrails; s++)
		nz_conn_kick(&p->conns[s]);
}

/* A message completed with frames still half-read into it elsewhere. */
void nz_peer_release_writers(struct nz_peer *p)
{
	struct nz_conn *conn;
	u32 s;

	for (s = 0; s < p->comm->nrails; s++) {
		conn = &p->conns[s];
		spin_lock_bh(&conn->kick_lock);
		if (conn->tp && !conn->tp_dead &&
		    conn->rail->ops->conn_release_msg)
			conn->rail->ops->conn_release_msg(conn);
		spin_unlock_bh(&conn->kick_lock);
	}
}

int nz_conn_attach(struct nz_conn *conn, void *tp)
{
	struct nz_peer *p = conn->peer;

	lockdep_assert_held(&conn->io_lock);
	spin_lock_bh(&p->lock);
	if (conn->state == NZ_CONN_DEAD || conn->tp) {
		spin_unlock_bh(&p->lock);
		return -ESHUTDOWN;
	}
	conn->state = NZ_CONN_UP;
	nz_sched_conn_up(conn);
	conn->counted = true;
	p->conns_up++;
	if (!conn->established) {
		conn->established = true;
		p->conns_established++;
	}
	p->down_since = 0;
	spin_unlock_bh(&p->lock);

	spin_lock_bh(&conn->kick_lock);
	conn->tp = tp;
	conn->tp_dead = false;
	spin_unlock_bh(&conn->kick_lock);
	atomic_inc(&conn->rail->stats.conns);
	nz_health_conn_up(conn);
	nz_health_event(conn, NZ_EV_CONN_UP, 0, 0);
	wake_up_all(&p->comm->waitq);
	nz_peer_kick_all(p);
	return 0;
}
ALLOW_ERROR_INJECTION(nz_conn_attach, ERRNO);

/*
 * Close the connection's transport state.  Its unacknowledged chunks go
 * back to the peer for the surviving connections; its pending control
 * frames are dropped (the other side resends what it did not see acked).
 * err is 0 for an orderly close, else why the path was lost: that is a
 * failover, counted, announced and traced.
 */
void nz_conn_detach(struct nz_conn *conn, int err)
{
	struct nz_rail_stats *st = &conn->rail->stats;
	struct nz_peer *p = conn->peer;
	u32 resent;

	lockdep_assert_held(&conn->io_lock);
	if (!conn->tp)
		return;
	spin_lock_bh(&conn->kick_lock);
	conn->tp_dead = true;
	spin_unlock_bh(&conn->kick_lock);
	conn->rail->ops->conn_close(conn);
	spin_lock_bh(&conn->kick_lock);
	conn->tp = NULL;
	spin_unlock_bh(&conn->kick_lock);
	/* What its transport held back went with it (heartbeat.c probes). */
	WRITE_ONCE(conn->rx_blocked, false);

	spin_lock_bh(&p->lock);
	/* Teardown may already have marked it DEAD: count by what we added. */
	if (conn->counted) {
		conn->counted = false;
		p->conns_up--;
		atomic_dec(&st->conns);
	}
	if (conn->state == NZ_CONN_UP)
		conn->state = NZ_CONN_IDLE;
	if (!p->conns_up && !p->down_since)
		p->down_since = jiffies;
	spin_unlock_bh(&p->lock);
	resent = nz_conn_requeue_chunks(conn, true);
	nz_conn_free_ctrl(conn);
	if (err && !READ_ONCE(p->comm->dead)) {
		if (err != -ENETDOWN && err != -ENODEV) {
			atomic64_inc(&st->errors);
			atomic64_inc(&conn->errors);
		}
		atomic64_inc(&st->failovers);
		atomic64_add(resent, &st->resent);
		atomic64_set(&st->last_failover_ms, nz_health_now_ms());
		pr_info("rail %s: path to rank %u lost (%d), %u chunks rerouted\n",
			conn->rail->name, p->rank, err, resent);
	}
	nz_health_event(conn, NZ_EV_CONN_DOWN, err, resent);
	wake_up_all(&p->comm->waitq);
	nz_peer_kick_all(p);
}

/*
 * A client's connection or dial failed: dial again after the backoff, or
 * at once, once, if the peer asked for a dial meanwhile (nz_conn_redial()).
 */
static void nz_conn_retry(struct nz_conn *conn)
{
	if (test_and_clear_bit(0, &conn->redial))
		nz_health_conn_connect_in(conn, 0);
	else
		nz_health_conn_retry(conn);
}

static void nz_conn_fail_work(struct work_struct *work)
{
	struct nz_conn *conn = container_of(work, struct nz_conn, fail_work);
	void *tp;

	mutex_lock(&conn->io_lock);
	spin_lock_bh(&conn->kick_lock);
	tp = conn->fail_tp;
	conn->fail_tp = NULL;
	spin_unlock_bh(&conn->kick_lock);
	if (tp && conn->tp == tp) {
		if (conn->fail_err == -ESHUTDOWN) {
			/*
			 * The peer is leaving the job: no error, no reconnect.
			 * It closes every rail; frames sent before a rail's
			 * CLOSE arrive before it, but the CLOSE of one rail may
			 * overtake an ACK on another.  So the peer has left --
			 * and what is pending with it cannot finish -- only
			 * once no connection to it is up any more.
			 */
			struct nz_peer *p = conn->peer;
			bool gone;

			nz_conn_detach(conn, 0);
			spin_lock_bh(&p->lock);
			gone = !p->conns_up;
			if (gone)
				p->left = true;
			spin_unlock_bh(&p->lock);
			if (gone)
				nz_peer_fail_all(p, -ECONNRESET);
		} else {
			nz_conn_detach(conn, conn->fail_err);
			if (conn->client)
				nz_conn_retry(conn);
		}
	}
	mutex_unlock(&conn->io_lock);
}

/* The transport saw tp fail; tear it down from process context. */
void nz_conn_fail(struct nz_conn *conn, void *tp, int err)
{
	spin_lock_bh(&conn->kick_lock);
	if (!conn->fail_tp) {
		conn->fail_tp = tp;
		conn->fail_err = err;
	}
	spin_unlock_bh(&conn->kick_lock);
	queue_work(nz_wq, &conn->fail_work);
}

/*
 * Fail the connection's live transport state, if it has one, with err.
 * Queued under kick_lock while it is live: nz_conn_detach() marks it dead
 * under that lock before nz_conn_shutdown() cancels the work, so a caller
 * that is no transport of conn's (another path's rx: nz_conn_redial())
 * cannot queue the work after that.
 */
void nz_conn_fail_live(struct nz_conn *conn, int err)
{
	spin_lock_bh(&conn->kick_lock);
	if (!conn->tp_dead && conn->tp) {
		if (!conn->fail_tp) {
			conn->fail_tp = conn->tp;
			conn->fail_err = err;
		}
		queue_work(nz_wq, &conn->fail_work);
	}
	spin_unlock_bh(&conn->kick_lock);
}

static bool nz_rail_usable(const struct nz_rail *rail)
{
	return !READ_ONCE(rail->dead) && !READ_ONCE(rail->admin_down);
}

static void nz_conn_connect_work(struct work_struct *work)
{
	struct nz_conn *conn = container_of(to_delayed_work(work),
					    struct nz_conn, connect_work);
	int ret;

	if (conn->state == NZ_CONN_DEAD || conn->tp || READ_ONCE(conn->peer->left))
		return;
	if (!nz_rail_usable(conn->rail)) {
		if (!READ_ONCE(conn->rail->dead))
			nz_health_conn_retry(conn);
		return;
	}
	ret = conn->rail->ops->conn_connect(conn);
	if (ret && ret != -ESHUTDOWN)
		nz_conn_retry(conn);
}

void nz_conn_init(struct nz_peer *p, u32 slot)
{
	struct nz_conn *conn = &p->conns[slot];

	conn->peer = p;
	conn->slot = slot;
	conn->rail = p->comm->rails[slot];
	conn->client = p->comm->rank > p->rank;
	conn->state = NZ_CONN_IDLE;
	mutex_init(&conn->io_lock);
	mutex_init(&conn->dial_lock);
	spin_lock_init(&conn->kick_lock);
	INIT_LIST_HEAD(&conn->chunks);
	conn->tp_held = U64_MAX;
	INIT_LIST_HEAD(&conn->ctrl);
	INIT_DELAYED_WORK(&conn->connect_work, nz_conn_connect_work);
	INIT_WORK(&conn->fail_work, nz_conn_fail_work);
}

/*
 * A transport's connect registers what it is dialling, so that teardown
 * can end it (ops->dial_abort).  conn->dial: NULL, that state, or an error
 * once an abort ran -- sticky until the dial ends, so an abort between two
 * steps of a connect is never lost.  0, or -ESHUTDOWN: do not dial, the
 * connection or its rail is going away.
 */
int nz_conn_dial_begin(struct nz_conn *conn, void *dial)
{
	int ret = 0;

	mutex_lock(&conn->dial_lock);
	if (READ_ONCE(conn->state) == NZ_CONN_DEAD ||
	    READ_ONCE(conn->rail->dead))
		ret = -ESHUTDOWN;
	else
		conn->dial = dial;
	mutex_unlock(&conn->dial_lock);
	return ret;
}

/* The dial is over; -ECANCELED if it was aborted meanwhile. */
int nz_conn_dial_end(struct nz_conn *conn)
{
	int ret = 0;

	mutex_lock(&conn->dial_lock);
	if (IS_ERR(conn->dial))
		ret = PTR_ERR(conn->dial);
	conn->dial = NULL;
	mutex_unlock(&conn->dial_lock);
	return ret;
}

/* A connect in progress on conn gives up (teardown, rail gone or down). */
static void nz_conn_abort_dial(struct nz_conn *conn)
{
	mutex_lock(&conn->dial_lock);
	if (!IS_ERR_OR_NULL(conn->dial) && conn->rail->ops->dial_abort)
		conn->rail->ops->dial_abort(conn->dial);
	if (conn->dial)
		conn->dial = ERR_PTR(-ECANCELED);
	mutex_unlock(&conn->dial_lock);
}

/*
 * No reconnect from now on, and a dial to a peer that never answers gives
 * up now rather than hold us for seconds.  Its work still has to return.
 */
void nz_conn_stop_dial(struct nz_conn *conn)
{
	spin_lock_bh(&conn->peer->lock);
	conn->state = NZ_CONN_DEAD;
	spin_unlock_bh(&conn->peer->lock);
	nz_conn_abort_dial(conn);
}

/* Stop a connection for good: no reconnect, no transport, no chunks. */
void nz_conn_shutdown(struct nz_conn *conn)
{
	nz_conn_stop_dial(conn);
	cancel_delayed_work_sync(&conn->connect_work);
	mutex_lock(&conn->io_lock);
	nz_conn_detach(conn, 0);
	nz_sysfs_conn_del(conn);
	mutex_unlock(&conn->io_lock);
	/* Only now can no transport work queue a failure any more. */
	cancel_work_sync(&conn->fail_work);
	nz_conn_drop_chunks(conn);
	nz_conn_free_ctrl(conn);
}

/* ---- the peer's end of a rail came back ------------------------------------ */

#define NZ_STALE_MS	1000	/* quiet that makes a replaced connection stale */

/*
 * Queue a HEARTBEAT with flags seq to p on the first of conns[0..n) (NULL
 * entries skipped) that is up and has room; returns that one or NULL.
 */
static struct nz_conn *nz_conn_send_hb(struct nz_peer *p,
				       struct nz_conn **conns, u32 n, u64 seq)
{
	struct nz_conn *via = NULL;
	struct nz_ctrl *c;
	u32 i;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	nz_frame_init(&c->f, NZ_FRAME_HEARTBEAT);
	c->f.hb.ts_ns = ktime_get_ns();
	c->f.hb.seq = seq;
	spin_lock_bh(&p->lock);
	for (i = 0; i < n && !via; i++) {
		if (conns[i] && conns[i]->state == NZ_CONN_UP &&
		    conns[i]->nctrl < 64)
			via = conns[i];
	}
	if (via) {
		list_add_tail(&c->node, &via->ctrl);
		via->nctrl++;
		atomic64_inc(&via->rail->stats.hb_frames);
		c = NULL;
	}
	spin_unlock_bh(&p->lock);
	kfree(c);
	if (via)
		nz_conn_kick(via);
	return via;
}

/*
 * The connection's rail came back here (link up, rail set up) and we are
 * its server: ask the peer, on another path to it, to dial now.  Its
 * client backs off up to 2 s between dials, and a dial begun while the
 * link was down waits out TCP's SYN retries (1 s, then 2 s more): the
 * path came back up to 3 s late (make drill-coll, health.rst).  Paths
 * that are not suspect first; a suspect one is silent, not gone.
 */
static void nz_conn_ask_redial(struct nz_conn *conn)
{
	struct nz_peer *p = conn->peer;
	struct nz_conn *via[2 * NZ_MAX_RAILS] = {};
	u32 s, n = p->comm->nrails;

	if (conn->client || READ_ONCE(conn->tp) || READ_ONCE(p->left))
		return;
	for (s = 0; s < n; s++) {
		struct nz_conn *o = &p->conns[s];

		if (o != conn)
			via[READ_ONCE(o->suspect) ? n + s : s] = o;
	}
	nz_conn_send_hb(p, via, 2 * n, NZ_HB_REDIAL(conn->slot));
}

/*
 * Did conn, up for a while, hear nothing for a while?  A connection the
 * peer asks us to replace is then one it dropped while we heard nothing
 * (a receiver's idle path is not probed).  A new one -- the peer asked
 * before it accepted it, and the ask came late -- has just spoken.
 */
static bool nz_conn_stale(const struct nz_conn *conn)
{
	unsigned long last = READ_ONCE(conn->rx_last);

	if (time_before(last, conn->up_since))
		last = conn->up_since;
	return time_after(jiffies, last + msecs_to_jiffies(NZ_STALE_MS));
}

/*
 * The peer asks us to dial its end of conn's rail now.  A dial under way
 * began while that end was down, its SYN lost: abort it, and the connect
 * work dials anew.  A connection we still have there is one the peer no
 * longer has: closed now if stale, else probed (the peer's RST fails it).
 * Probing alone was not enough: our data queued behind segments lost
 * while the link was down goes out only at TCP's next retransmission,
 * seconds later.  The reconnect then comes at once, not after the
 * backoff.  At most every NZ_REDIAL_MIN_MS per connection, only where we
 * dial: a peer (which holds the job key) can make us dial no more often
 * than that.
 */
#define NZ_REDIAL_MIN_MS	100

static void nz_conn_redial(struct nz_conn *conn)
{
	bool dialing;

	if (!conn->client || READ_ONCE(conn->state) == NZ_CONN_DEAD ||
	    !nz_rail_usable(conn->rail))
		return;
	if (conn->redial_last &&
	    time_before(jiffies, conn->redial_last +
			msecs_to_jiffies(NZ_REDIAL_MIN_MS)))
		return;
	conn->redial_last = jiffies;
	atomic64_inc(&conn->rail->stats.redials);
	if (READ_ONCE(conn->tp)) {
		/* Its failure, now or after the probe, is retried at once. */
		set_bit(0, &conn->redial);
		if (nz_conn_stale(conn))
			nz_conn_fail_live(conn, -ECONNRESET);
		else
			nz_conn_send_hb(conn->peer, &conn, 1, NZ_HB_ECHO);
		return;
	}
	mutex_lock(&conn->dial_lock);
	dialing = !IS_ERR_OR_NULL(conn->dial);
	if (dialing) {
		set_bit(0, &conn->redial);
		if (conn->rail->ops->dial_abort)
			conn->rail->ops->dial_abort(conn->dial);
		conn->dial = ERR_PTR(-ECANCELED);
	}
	mutex_unlock(&conn->dial_lock);
	if (!dialing)
		nz_health_conn_connect_in(conn, 0);
}

/* A HEARTBEAT from p named these slots (NZ_HB_REDIAL bits, shifted down). */
void nz_peer_redial(struct nz_peer *p, u64 slots)
{
	u32 s;

	for (s = 0; s < p->comm->nrails; s++)
		if (slots & BIT_ULL(s))
			nz_conn_redial(&p->conns[s]);
}

/* ---- rails changing under communicators ------------------------------------ */

static void nz_conn_close_for_rail(struct nz_conn *conn, int err,
				   bool removed)
{
	nz_conn_abort_dial(conn);
	mutex_lock(&conn->io_lock);
	nz_conn_detach(conn, err);
	if (removed)	/* before the rail's own directory goes */
		nz_sysfs_conn_del(conn);
	else if (conn->client)
		nz_health_conn_retry(conn);
	mutex_unlock(&conn->io_lock);
}

void nz_conn_rail_update(struct nz_conn *conn, enum nz_rail_change how)
{
	if (how == NZ_RAIL_REMOVED) {
		nz_conn_close_for_rail(conn, -ENODEV, true);
		return;
	}
	if (how == NZ_RAIL_LINK_DOWN || READ_ONCE(conn->rail->admin_down)) {
		nz_conn_close_for_rail(conn, -ENETDOWN, false);
		return;
	}
	if (conn->client && !conn->tp)
		nz_health_conn_connect_in(conn, 0);
	else
		nz_conn_ask_redial(conn);
	nz_peer_kick_all(conn->peer);
}
