// SPDX-License-Identifier: GPL-2.0
/*
 * Every timer of Nezha lives here.  The rest of the code reports events
 * (a connection came up, a connection failed); this file decides when
 * something happens next.
 *
 *  - comm->scan_work, every NZ_SCAN_MS while the communicator lives:
 *    fails commands whose deadline passed (-ETIMEDOUT) or whose submitting
 *    task is exiting (-ECANCELED; Linux 6.1 cannot cancel a uring command,
 *    so an exiting task waits for us).
 *  - conn->connect_work, client side only: (re)connect after a failure,
 *    with exponential backoff from NZ_BACKOFF_MIN_MS to NZ_BACKOFF_MAX_MS
 *    and +-25% jitter so that a whole job does not reconnect in lockstep.
 *
 * A timer is never armed on a dying object: comm->dead and NZ_CONN_DEAD are
 * checked before re-arming, and teardown cancels synchronously after
 * setting them.
 */
#include <linux/module.h>
#include <linux/random.h>
#include "comm.h"

#define NZ_SCAN_MS		50
#define NZ_BACKOFF_MIN_MS	50
#define NZ_BACKOFF_MAX_MS	2000

static void nz_expired_scan(struct work_struct *work)
{
	struct nz_comm *comm = container_of(to_delayed_work(work),
					    struct nz_comm, scan_work);
	u32 r;

	for (r = 0; r < comm->size; r++)
		if (comm->peers[r])
			nz_peer_scan(comm->peers[r]);
	if (!READ_ONCE(comm->dead))
		queue_delayed_work(nz_wq, &comm->scan_work,
				   msecs_to_jiffies(NZ_SCAN_MS));
}

void nz_health_comm_start(struct nz_comm *comm)
{
	INIT_DELAYED_WORK(&comm->scan_work, nz_expired_scan);
	queue_delayed_work(nz_wq, &comm->scan_work,
			   msecs_to_jiffies(NZ_SCAN_MS));
}

/* comm->dead is set: the scan does not re-arm itself after this. */
void nz_health_comm_stop(struct nz_comm *comm)
{
	cancel_delayed_work_sync(&comm->scan_work);
}

/* Arm the connect timer unless the connection is being torn down. */
void nz_health_conn_connect_in(struct nz_conn *conn, unsigned int ms)
{
	spin_lock_bh(&conn->peer->lock);
	if (conn->state != NZ_CONN_DEAD)
		mod_delayed_work(nz_wq, &conn->connect_work,
				 msecs_to_jiffies(ms));
	spin_unlock_bh(&conn->peer->lock);
}

void nz_health_conn_retry(struct nz_conn *conn)
{
	unsigned int ms = conn->backoff_ms;

	ms = clamp(ms * 2, NZ_BACKOFF_MIN_MS, NZ_BACKOFF_MAX_MS);
	conn->backoff_ms = ms;
	ms = ms - ms / 4 + get_random_u32_below(ms / 2 + 1);
	nz_health_conn_connect_in(conn, ms);
}

void nz_health_conn_up(struct nz_conn *conn)
{
	conn->backoff_ms = 0;
}
