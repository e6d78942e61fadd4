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
				nz_health_conn_retry(conn);
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
		nz_health_conn_retry(conn);
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
	nz_peer_kick_all(conn->peer);
}
