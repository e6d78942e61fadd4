// SPDX-License-Identifier: GPL-2.0
/*
 * Every timer of Nezha lives here, and every decision that a (peer, rail)
 * path is up or down.  The rest of the code reports events (a frame
 * arrived, a socket failed, a link went down); this file decides.
 *
 * Timers:
 *  - comm->hb_work, every hb_interval_ms (an hrtimer queues it on a
 *    high-priority queue): each connection that is up sends a HEARTBEAT.
 *    One on which nothing arrived (data, ACK or heartbeat) for half of
 *    hb_misses periods while chunks wait for an answer is in doubt: the
 *    other rails stop queueing more behind what they hold.  Silent for
 *    hb_misses periods, counted since chunks began to wait for an answer
 *    on it, and while another path to the same peer is alive, it becomes
 *    suspect: its unacknowledged chunks move to the other rails at once
 *    and it takes no new ones, but its socket stays and sends a heartbeat
 *    every period; the echo of one sent since re-admits it (not any
 *    arrival: frames from before the fault come in late), or, without
 *    an echo, arrivals after NZ_SUSPECT_MIN_MS (heartbeat.c).  Silent for
 *    NZ_DEAD_FACTOR times longer (at least NZ_DEAD_MIN_MS) while the
 *    peer is heard on another path, or NZ_DEAD_PEER_MS when it is heard
 *    on none, it is torn down and reconnected.  This is what catches a
 *    silent blackhole (packets dropped, link still up).
 *    Silence is time since the last arrival, so late runs still count; a
 *    stall of our own (a run more than NZ_STALL_MS late, as in a
 *    descheduled virtual machine) never counts as the path's silence.
 *  - comm->scan_work, every NZ_SCAN_MS: fails commands whose deadline
 *    passed (-ETIMEDOUT), whose submitting task is exiting (-ECANCELED:
 *    Linux 6.1 cannot cancel a uring command, so an exiting task waits for
 *    us), or whose peer has had no connection for grace_ms (-ENETDOWN).
 *  - conn->connect_work, client side: (re)connect after a failure, with
 *    exponential backoff from NZ_BACKOFF_MIN_MS to NZ_BACKOFF_MAX_MS and
 *    +-25% jitter so that a job does not reconnect in lockstep.  A path
 *    that keeps failing backs off further each time: flapping does not
 *    thrash.
 *
 * Events without a timer: a netdev going down, losing its carrier or
 * disappearing fails every connection of its rails at once; coming back
 * triggers an immediate reconnect.
 *
 * A timer is never armed on a dying object: comm->dead and NZ_CONN_DEAD
 * are checked (under the lock teardown sets them with) before re-arming,
 * and teardown cancels synchronously after setting them.
 */
#include <linux/hrtimer.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/random.h>
#include <linux/stringify.h>
#include <linux/timekeeping.h>
#include "comm.h"
#include "health_learn.h"

#define CREATE_TRACE_POINTS
#include "trace.h"

#define NZ_SCAN_MS		50
#define NZ_DEAD_FACTOR		20
#define NZ_STALL_MS		100
#define NZ_DEAD_MIN_MS		1000	/* a path silent that long is broken */
#define NZ_DEAD_PEER_MS		10000	/* a peer silent that long is gone */
#define NZ_BACKOFF_MIN_MS	50
#define NZ_BACKOFF_MAX_MS	2000
#define NZ_SUSPECT_DECAY_S	120	/* learned tolerance halves this often */
#define NZ_DECAY		(NZ_SUSPECT_DECAY_S * HZ)

struct nz_health_cfg nz_health = {
	.hb_interval_ms = 4,
	.hb_misses = 4,
	.grace_ms = 5000,
};

int nz_health_set(const u32 *interval_ms, const u32 *misses,
		  const u32 *grace_ms)
{
	if ((interval_ms && (*interval_ms < 1 || *interval_ms > 10000)) ||
	    (misses && (*misses < 2 || *misses > 100)) ||
	    (grace_ms && *grace_ms > 3600000))
		return -ERANGE;
	if (interval_ms)
		WRITE_ONCE(nz_health.hb_interval_ms, *interval_ms);
	if (misses)
		WRITE_ONCE(nz_health.hb_misses, *misses);
	if (grace_ms)
		WRITE_ONCE(nz_health.grace_ms, *grace_ms);
	return 0;
}

/* ---- events ---------------------------------------------------------------- */

void nz_health_event(struct nz_conn *conn, u32 type, int err, u32 resent)
{
	struct nz_comm *comm = conn->peer->comm;
	struct nz_event ev = {
		.type = type,
		.rail = conn->rail,
		.job = comm->job_id,
		.rank = comm->rank,
		.peer = conn->peer->rank,
		.err = err,
		.resent = resent,
	};

	trace_nezha_conn_state(conn->rail->name, comm->job_id, comm->rank,
			       conn->peer->rank, type, err, resent);
	nz_netlink_event(&ev);
}

/* ---- heartbeats ------------------------------------------------------------ */

/*
 * The heartbeat period is kept by an hrtimer, and the work it queues runs
 * on a high-priority queue: a delayed work of 4 ms came every 8 ms (two
 * ticks at HZ=250), and behind the rails' own work in a busy guest as late
 * as 20-36 ms, all of it added to the time a blackhole goes unnoticed.
 */
static struct workqueue_struct *nz_hb_wq;
/*
 * Dials (conn->connect_work) run on a queue of their own: a dial may block
 * its worker for up to a handshake timeout against a peer that does not
 * answer, and a user can ask for hundreds at once (a communicator of many
 * unreachable ranks).  On nz_wq they took every one of its 256 workers, so
 * the scans that fail the commands of an exited process -- and with them
 * its file and communicators -- waited for seconds behind them.
 */
static struct workqueue_struct *nz_dial_wq;

static enum hrtimer_restart nz_hb_timer(struct hrtimer *t)
{
	struct nz_comm *comm = container_of(t, struct nz_comm, hb_timer);

	if (READ_ONCE(comm->dead))
		return HRTIMER_NORESTART;
	queue_work(nz_hb_wq, &comm->hb_work);
	hrtimer_forward_now(t, ms_to_ktime(READ_ONCE(nz_health.hb_interval_ms)));
	return HRTIMER_RESTART;
}

static void nz_expired_heartbeat(struct work_struct *work)
{
	struct nz_comm *comm = container_of(work, struct nz_comm, hb_work);
	unsigned int ms = READ_ONCE(nz_health.hb_interval_ms);
	unsigned long period = msecs_to_jiffies(ms), now = jiffies;
	unsigned long since = now - comm->hb_last, stall = 0;
	u32 r, s;

	/*
	 * Ordinary lateness counts as time: silence is measured in time, not
	 * in runs, or a busy host would never see a path die.  A run that
	 * comes NZ_STALL_MS late means we were frozen: that time is nobody's
	 * silence.
	 */
	if (since > period + msecs_to_jiffies(NZ_STALL_MS))
		stall = since - period;
	comm->hb_last = now;
	for (s = 0; s < comm->nrails; s++)
		if (comm->rails[s])
			nz_rail_egress_sample(comm->rails[s],
					      ms * USEC_PER_MSEC / 2);
	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++)
			nz_conn_heartbeat(&comm->peers[r]->conns[s], stall);
}

/* ---- command deadlines and the no-rail grace ------------------------------- */

static void nz_expired_scan(struct work_struct *work)
{
	struct nz_comm *comm = container_of(to_delayed_work(work),
					    struct nz_comm, scan_work);
	unsigned long grace = msecs_to_jiffies(READ_ONCE(nz_health.grace_ms));
	struct nz_peer *p;
	unsigned long since;
	u32 r;

	for (r = 0; r < comm->size; r++) {
		p = comm->peers[r];
		if (!p)
			continue;
		nz_peer_scan(p);
		since = READ_ONCE(p->down_since);
		if (since && time_after(jiffies, since + grace))
			nz_peer_no_rail(p);
	}
	if (!READ_ONCE(comm->dead))
		queue_delayed_work(nz_wq, &comm->scan_work,
				   msecs_to_jiffies(NZ_SCAN_MS));
}

/* At creation: nz_health_comm_stop() may come without a start. */
void nz_health_comm_init(struct nz_comm *comm)
{
	INIT_DELAYED_WORK(&comm->scan_work, nz_expired_scan);
	INIT_WORK(&comm->hb_work, nz_expired_heartbeat);
	hrtimer_init(&comm->hb_timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL);
	comm->hb_timer.function = nz_hb_timer;
}

void nz_health_comm_start(struct nz_comm *comm)
{
	comm->hb_last = jiffies;
	queue_delayed_work(nz_wq, &comm->scan_work,
			   msecs_to_jiffies(NZ_SCAN_MS));
	hrtimer_start(&comm->hb_timer,
		      ms_to_ktime(READ_ONCE(nz_health.hb_interval_ms)),
		      HRTIMER_MODE_REL);
}

/* comm->dead is set: neither timer re-arms itself after this. */
void nz_health_comm_stop(struct nz_comm *comm)
{
	hrtimer_cancel(&comm->hb_timer);
	cancel_work_sync(&comm->hb_work);
	cancel_delayed_work_sync(&comm->scan_work);
}

/* ---- reconnects -------------------------------------------------------------- */

/* Arm the connect timer unless the connection is being torn down. */
void nz_health_conn_connect_in(struct nz_conn *conn, unsigned int ms)
{
	spin_lock_bh(&conn->peer->lock);
	if (conn->state != NZ_CONN_DEAD)
		mod_delayed_work(nz_dial_wq, &conn->connect_work,
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

/*
 * A connection came up.  Its backoff is forgotten only once it has stayed
 * up for a while (see nz_conn_heartbeat()), so a path that flaps keeps
 * backing off instead of reconnecting at full speed every time.
 */
void nz_health_conn_up(struct nz_conn *conn)
{
	conn->silent = 0;
	conn->owed_last = 0;
	conn->quiet_since = jiffies;
	conn->owed_since = jiffies;
	conn->probe_since = jiffies;
	conn->suspect = false;
	conn->doubt = false;
	conn->up_since = jiffies;
}

/*
 * How many silent heartbeat periods with chunks on the way put a path in
 * doubt (the others keep short queues: sched.c), make it suspect, and dead.
 */
bool nz_health_doubt(unsigned int silent)
{
	return silent >= max(READ_ONCE(nz_health.hb_misses) / 2, 2U);
}

bool nz_health_suspect(unsigned int silent)
{
	return silent >= READ_ONCE(nz_health.hb_misses);
}

/*
 * A busy node is not a dead path.  Descheduled for tens of ms (a shared
 * core, 4 guests on 2 CPUs), a peer answers late on every path, and at
 * the 16 ms suspect time each of its paths was suspected over and over:
 * 1,500 times per node in one 100 s run of 4-rank allreduces, each time
 * moving chunks that then went twice.  A suspect path whose echo comes
 * back within NZ_FALSE_ALARM_MS (or 16 suspect times, where the period
 * was set longer: at 80 ms, the debug lane's, 250 ms was shorter than the
 * 320 ms suspect time itself, and a path that echoed after 300 ms counted
 * as failed over) was alive: that peer's paths then
 * tolerate more silence before doubt and suspicion -- the suspect time
 * again on the first false alarm, doubled on each next one, at most
 * NZ_LEARN_MAX_MS -- and the tolerance halves every
 * NZ_SUSPECT_DECAY_S without one (30 s until 2026-12-06: a peer that
 * stalled once a minute was forgotten between its stalls).  A path that
 * is really gone stays silent far longer than that, so it does not
 * count; and where nothing is late (an idle host, a real cluster)
 * nothing is learned and a dead path is suspected after the suspect
 * time, as before.  Per peer: what
 * delays its answers delays them on every rail.  Only the communicator's
 * heartbeat work writes these fields.
 */
unsigned int nz_health_suspect_extra_ms(const struct nz_peer *p,
					unsigned long now)
{
	return nz_learn_extra(&p->learn, now, NZ_DECAY);
}

/* The suspect time, ms, before anything learned. */
static unsigned int nz_health_base_ms(void)
{
	return max(READ_ONCE(nz_health.hb_interval_ms), 1U) *
	       READ_ONCE(nz_health.hb_misses);
}

/*
 * In a job of more than 2 ranks, a new peer starts as if a false alarm
 * had just been seen: nothing is learned about it yet, and a job's first
 * seconds are its busiest (every rank connecting, allocating, warming
 * caches).  Without it, 4 guests of 2 Mbit/s rails running allreduces
 * suspected 4-16 healthy paths each in their first 10 s, and those
 * reroutes kept the job at 0.6x speed for 15 s.  The price is detection:
 * a blackhole in a job's first 2 minutes is suspected start_tolerance_ms
 * later, halving every NZ_SUSPECT_DECAY_S (Documentation/health.rst).
 * Not in a job of 2: there the peer's NIC queues hold only what it sends
 * us, so no other rank's traffic delays its answers, and the 2-rank
 * failover drills (make bench-failover: each a new job) lost 30 ms of
 * their median to it.  Zero turns it off.
 */
static unsigned int start_tolerance_ms = 32;
module_param(start_tolerance_ms, uint, 0644);
MODULE_PARM_DESC(start_tolerance_ms,
		 "Extra silence a new peer's paths are allowed before suspicion in jobs of more than 2 ranks, halving every " __stringify(NZ_SUSPECT_DECAY_S) " s (ms, default 32, at most 240)");

void nz_health_peer_init(struct nz_peer *p)
{
	nz_learn_start(&p->learn, jiffies, p->comm->size,
		       READ_ONCE(start_tolerance_ms));
}

/*
 * conn owed an answer for owed_ms and then spoke: late, but not suspect.
 * When that is at least half the silence its peer is now allowed, the
 * peer is still as late as what it taught us, and the lesson is kept:
 * its decay starts again, with room for twice this lateness (a peer
 * late by 60 ms of 80 allowed came within 20 ms of a false alarm, and
 * the next burst, longer, made one).  Before, a steadily busy peer was
 * unlearned every NZ_SUSPECT_DECAY_S and taught again by a false alarm:
 * 8 guests of 2 host cores running 4 MiB allreduces for 10 minutes
 * failed over 16-20 healthy paths each, one every 30-40 s, with no fault.  A peer
 * whose lateness passes makes no near misses, and its extra halves as
 * before.
 */
void nz_health_near_miss(struct nz_conn *conn, unsigned long now,
			 unsigned int owed_ms)
{
	nz_learn_near_miss(&conn->peer->learn, now, NZ_DECAY,
			   nz_health_base_ms(), owed_ms);
}

/* conn, suspect since conn->suspect_since, echoed a heartbeat. */
void nz_health_readmitted(struct nz_conn *conn, unsigned long now)
{
	unsigned int window = nz_learn_alarm_window_ms(nz_health_base_ms());

	if (time_after(now, conn->suspect_since + msecs_to_jiffies(window)))
		return;
	nz_learn_false_alarm(&conn->peer->learn, now, NZ_DECAY,
			     nz_health_base_ms());
	atomic64_inc(&conn->rail->stats.false_suspects);
}

/*
 * A path silent this long is torn down and dialled again.  When the peer
 * is heard on another path, the path is broken: after NZ_DEAD_FACTOR
 * times the suspect time, at least NZ_DEAD_MIN_MS.  When the peer is
 * silent on every path, it is the peer that stalls -- or this node: a
 * node of one vCPU running 8 ranks tore down 3,000 paths in 5 minutes,
 * each reconnect (a handshake, chunks sent again) adding to the load that
 * made it late -- or it is gone.  That takes NZ_DEAD_PEER_MS to decide;
 * the transfers with it then fail after the grace period.
 */
static unsigned int nz_health_dead_ms(void)
{
	return max(nz_health_base_ms() * NZ_DEAD_FACTOR,
		   (unsigned int)NZ_DEAD_MIN_MS);
}

/* Silent periods that tear down a path whose peer is heard elsewhere. */
bool nz_health_dead(unsigned int silent)
{
	unsigned int ms = max(READ_ONCE(nz_health.hb_interval_ms), 1U);

	return silent >= nz_health_dead_ms() / ms;
}

/* ... and one whose peer is heard on no path: never sooner. */
bool nz_health_peer_gone(unsigned int silent)
{
	unsigned int ms = max(READ_ONCE(nz_health.hb_interval_ms), 1U);

	return silent >= max_t(unsigned int, nz_health_dead_ms(), NZ_DEAD_PEER_MS) / ms;
}

/*
 * How often a path is probed while we only wait for its peer (nothing of
 * ours on it): eight times within the time that tears a silent path
 * down, 125 ms at the defaults.
 */
unsigned long nz_health_wait_period(void)
{
	return msecs_to_jiffies(nz_health_dead_ms() / 8);
}

/* ---- link events -------------------------------------------------------------- */

struct nz_link_event {
	struct work_struct work;
	struct nz_rail *rail;		/* holds a reference */
	bool up;
};

static void nz_link_event_work(struct work_struct *work)
{
	struct nz_link_event *ev = container_of(work, struct nz_link_event,
						work);

	nz_comm_rail_link(ev->rail, ev->up);
	nz_rail_put(ev->rail);
	kfree(ev);
}

struct nz_link_match {
	struct net_device *dev;
	bool up;
	bool notify;		/* a link change to report to the rail */
};

/*
 * Under RTNL.  A rail names its netdev; it follows the device by index,
 * but a device that went away (driver reload, hot unplug) comes back
 * under the same name with a new index: adopt it.
 */
static bool nz_link_adopt(struct nz_rail *rail, struct net_device *dev)
{
	if (strncmp(rail->netdev, dev->name, IFNAMSIZ) ||
	    __dev_get_by_index(rail->net, rail->ifindex))
		return false;
	pr_info("rail %s: %s is back (ifindex %d, was %d)\n", rail->name,
		dev->name, dev->ifindex, rail->ifindex);
	WRITE_ONCE(rail->ifindex, dev->ifindex);
	return true;
}

static int nz_link_match_rail(struct nz_rail *rail, void *arg)
{
	struct nz_link_match *m = arg;
	struct nz_link_event *ev;

	if (rail->net != dev_net(m->dev))
		return 0;
	if (rail->ifindex != m->dev->ifindex && !nz_link_adopt(rail, m->dev))
		return 0;
	if (!m->notify)
		return 0;
	/* A link that comes up may come up at another speed. */
	if (m->up)
		nz_rail_set_speed(rail, m->dev);
	ev = kzalloc(sizeof(*ev), GFP_KERNEL);
	if (!ev)
		return 0;
	kref_get(&rail->ref);
	ev->rail = rail;
	ev->up = m->up;
	INIT_WORK(&ev->work, nz_link_event_work);
	queue_work(nz_wq, &ev->work);
	return 0;
}

static int nz_netdev_event(struct notifier_block *nb, unsigned long event,
			   void *ptr)
{
	struct nz_link_match m = {
		.dev = netdev_notifier_info_to_dev(ptr),
		.notify = true,
	};

	switch (event) {
	case NETDEV_REGISTER:
	case NETDEV_CHANGENAME:
		m.notify = false;	/* only adopt it; NETDEV_UP follows */
		break;
	case NETDEV_GOING_DOWN:
	case NETDEV_DOWN:
	case NETDEV_UNREGISTER:
		m.up = false;
		break;
	case NETDEV_CHANGE:
		m.up = netif_running(m.dev) && netif_carrier_ok(m.dev);
		break;
	case NETDEV_UP:
		m.up = netif_carrier_ok(m.dev);
		break;
	default:
		return NOTIFY_DONE;
	}
	/* Under RTNL: only queue work, the closing happens there. */
	nz_rail_for_each(nz_link_match_rail, &m, 0);
	return NOTIFY_DONE;
}

static struct notifier_block nz_netdev_nb = {
	.notifier_call = nz_netdev_event,
};

int nz_health_init(void)
{
	int ret;

	nz_hb_wq = alloc_workqueue("nezha_hb", WQ_HIGHPRI | WQ_MEM_RECLAIM, 0);
	if (!nz_hb_wq)
		return -ENOMEM;
	nz_dial_wq = alloc_workqueue("nezha_dial", WQ_UNBOUND | WQ_MEM_RECLAIM,
				     0);
	ret = -ENOMEM;
	if (!nz_dial_wq)
		goto out_hb;
	ret = register_netdevice_notifier(&nz_netdev_nb);
	if (!ret)
		return 0;
	destroy_workqueue(nz_dial_wq);
out_hb:
	destroy_workqueue(nz_hb_wq);
	return ret;
}

void nz_health_exit(void)
{
	unregister_netdevice_notifier(&nz_netdev_nb);
	destroy_workqueue(nz_dial_wq);
	destroy_workqueue(nz_hb_wq);
}

u64 nz_health_now_ms(void)
{
	return div_u64(ktime_get_boottime_ns(), NSEC_PER_MSEC);
}
