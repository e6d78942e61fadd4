// SPDX-License-Identifier: GPL-2.0
/*
 * Communicators and their connections: creation from NZ_IOC_COMM_CREATE,
 * the (peer, rail slot) connection objects and their transport state
 * coming and going, and teardown.  Messages are in msg.c.
 */
#include <linux/module.h>
#include <linux/error-injection.h>
#include <linux/memcontrol.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <crypto/algapi.h>
#include <crypto/hash.h>
#include <net/net_namespace.h>
#include "comm.h"
#include "transport.h"

/* Largest message: the wire carries 64-bit lengths; keep it sane. */
#define NZ_MAX_MSG		(1ULL << 40)
#define NZ_MAX_TIMEOUT_MS	(3600U * 1000)
/* How long leaving waits for the acknowledgements it owes to go out. */
#define NZ_FLUSH_MS		500
/* Periods a path that came up is probed at most, for its first round trip. */
#define NZ_HB_WARMUP		8
#define NZ_SUSPECT_MIN_MS	500	/* suspect without an echo, at least */

static LIST_HEAD(nz_comms);		/* every communicator, for accepts */
static DEFINE_MUTEX(nz_comms_lock);

static void nz_comm_release(struct kref *ref)
{
	struct nz_comm *comm = container_of(ref, struct nz_comm, ref);
	u32 r, s;

	/* A create that failed early has no peer array yet. */
	for (r = 0; comm->peers && r < comm->size; r++) {
		if (!comm->peers[r])
			continue;
		nz_peer_free_tags(comm->peers[r]);
		nz_peer_free_aborts(comm->peers[r]);
		kfree(comm->peers[r]);
	}
	kfree(comm->peers);
	kvfree(comm->addrs);
	for (s = 0; s < comm->nrails; s++)
		if (comm->rails[s])
			nz_rail_put(comm->rails[s]);
	if (!IS_ERR_OR_NULL(comm->hmac))
		crypto_free_shash(comm->hmac);
	mem_cgroup_put(comm->memcg);
	memzero_explicit(comm->secret, sizeof(comm->secret));
	kfree(comm);
	atomic_dec(&nz_stats.comms);
}

void nz_comm_put(struct nz_comm *comm)
{
	kref_put(&comm->ref, nz_comm_release);
}

/* Whether comm serves slot on rail with this unit and number of rails. */
static bool nz_comm_fits(const struct nz_comm *comm, const struct nz_rail *rail,
			 u32 slot, u32 unit, u32 nrails)
{
	return comm->unit == unit && comm->nrails == nrails &&
	       slot < comm->nrails && comm->rails[slot] == rail;
}

/*
 * The communicator a HELLO that came on rail is for.  Several may carry
 * its job id and rank -- one per local user (nz_comm_publish()), so that
 * nobody can squat another user's slot -- and the one whose key made the
 * HELLO's MAC is it.  NULL if none: *reason is NZ_CLOSE_IDENTITY if no
 * communicator of that job, rank and shape is here (yet), NZ_CLOSE_AUTH
 * if one is but none of them has the key.
 */
struct nz_comm *nz_comm_find_hello(struct nz_rail *rail,
				   const struct nz_frame_hello *h,
				   const u8 *nonce_s, struct nz_conn **connp,
				   u32 *reason)
{
	u8 in[NZ_WIRE_HELLO_MAC_LEN], mac[NZ_WIRE_MAC_LEN];
	struct nz_comm *comm, *found = NULL;
	struct nz_conn *conn;

	*reason = NZ_CLOSE_IDENTITY;
	nz_wire_hello_mac_input(h, nonce_s, in);
	mutex_lock(&nz_comms_lock);
	list_for_each_entry(comm, &nz_comms, node) {
		if (comm->job_id != h->job_id || comm->rank != h->dst_rank)
			continue;
		conn = nz_comm_conn(comm, h->src_rank, h->rail);
		if (!conn || conn->client ||
		    !nz_comm_fits(comm, rail, h->rail, h->unit, h->nrails))
			continue;
		*reason = NZ_CLOSE_AUTH;
		if (nz_comm_mac(comm, in, sizeof(in), mac) ||
		    crypto_memneq(mac, h->mac, sizeof(mac)))
			continue;
		kref_get(&comm->ref);
		*connp = conn;
		found = comm;
		break;
	}
	mutex_unlock(&nz_comms_lock);
	memzero_explicit(mac, sizeof(mac));
	if (found && nz_conn_incarnation(*connp, h->incarnation)) {
		*reason = NZ_CLOSE_RESTARTED;
		nz_comm_put(found);
		found = NULL;
	}
	return found;
}

/* Client: our HELLO on conn, answering the server's CHALLENGE nonce_s. */
int nz_conn_make_hello(struct nz_conn *conn, const u8 *nonce_s,
		       struct nz_frame *f)
{
	struct nz_comm *comm = conn->peer->comm;
	u8 in[NZ_WIRE_HELLO_MAC_LEN];

	nz_frame_init(f, NZ_FRAME_HELLO);
	f->hello.incarnation = comm->incarnation;
	f->hello.job_id = comm->job_id;
	f->hello.src_rank = comm->rank;
	f->hello.dst_rank = conn->peer->rank;
	f->hello.rail = conn->slot;
	f->hello.nrails = comm->nrails;
	f->hello.unit = comm->unit;
	get_random_bytes(f->hello.nonce_c, sizeof(f->hello.nonce_c));
	nz_wire_hello_mac_input(&f->hello, nonce_s, in);
	return nz_comm_mac(comm, in, sizeof(in), f->hello.mac);
}

/*
 * Client: the server's WELCOME proves it knows the secret (its MAC covers
 * our HELLO's nonce, so it answers this HELLO) and names its instance.
 * -EACCES if the MAC does not check, -ESTALE for another instance of a
 * peer we knew.  Process context.
 */
int nz_conn_check_welcome(struct nz_conn *conn,
			  const struct nz_frame_welcome *w,
			  const u8 *nonce_c, const u8 *nonce_s)
{
	struct nz_comm *comm = conn->peer->comm;
	u8 in[NZ_WIRE_WELCOME_MAC_LEN], mac[NZ_WIRE_MAC_LEN];
	int ret;

	nz_wire_welcome_mac_input(nonce_c, nonce_s, comm->job_id,
				  conn->peer->rank, comm->rank, conn->slot,
				  w->incarnation, in);
	ret = nz_comm_mac(comm, in, sizeof(in), mac);
	if (!ret && crypto_memneq(mac, w->mac, sizeof(mac)))
		ret = -EACCES;
	memzero_explicit(mac, sizeof(mac));
	return ret ?: nz_conn_incarnation(conn, w->incarnation);
}

/*
 * The handshake (checked: MAC, job, ranks) names the instance of the
 * peer's communicator at the other end of conn.  The first one named is
 * the peer for the life of this communicator.  Another one means that rank
 * restarted -- its process or its node -- with the same job and secret:
 * the instance we knew is gone with whatever was in flight with it, and
 * the new one cannot take its place, as its message ids start again from
 * 1 and our duplicate window would drain and acknowledge them as old ones
 * (its sends would complete, delivered nowhere).  So the peer counts as
 * gone (-ECONNRESET for its transfers, no more dialling) and the new
 * instance is refused: -ESTALE.  Process context.
 */
int nz_conn_incarnation(struct nz_conn *conn, u64 incarnation)
{
	struct nz_peer *p = conn->peer;
	bool first = false;
	int ret = 0;

	spin_lock_bh(&p->lock);
	if (!p->incarnation) {
		p->incarnation = incarnation;
	} else if (p->incarnation != incarnation) {
		ret = -ESTALE;
		first = !p->left;
		p->left = true;
	}
	spin_unlock_bh(&p->lock);
	if (!ret)
		return 0;
	atomic64_inc(&conn->rail->stats.hs_refused);
	pr_warn_ratelimited("rail %s: rank %u of job %llx restarted: another instance of its communicator connected; it is refused%s\n",
			    conn->rail->name, p->rank, p->comm->job_id,
			    first ? ", and transfers with the one before fail" : "");
	if (first)
		nz_peer_fail_all(p, -ECONNRESET);
	return ret;
}

/*
 * Before any key is checked (RDMA sizes its buffers by it): 1 if a
 * communicator of job and rank here serves rail at slot with this unit
 * and number of rails, 0 if there is none of that job and rank (yet), -1
 * if there are only ones of another shape.
 */
int nz_comm_job_fits(u64 job_id, u32 rank, struct nz_rail *rail, u32 slot,
		     u32 unit, u32 nrails)
{
	struct nz_comm *comm;
	int ret = 0;

	mutex_lock(&nz_comms_lock);
	list_for_each_entry(comm, &nz_comms, node) {
		if (comm->job_id != job_id || comm->rank != rank)
			continue;
		ret = nz_comm_fits(comm, rail, slot, unit, nrails) ? 1 : -1;
		if (ret > 0)
			break;
	}
	mutex_unlock(&nz_comms_lock);
	return ret;
}

struct nz_comm *nz_file_comm_get(struct nz_file *f, u32 id)
{
	struct nz_comm *comm, *found = NULL;

	mutex_lock(&f->comm_lock);
	list_for_each_entry(comm, &f->comms, node_file) {
		if (comm->id == id) {
			kref_get(&comm->ref);
			found = comm;
			break;
		}
	}
	mutex_unlock(&f->comm_lock);
	return found;
}

int nz_comm_mac(struct nz_comm *comm, const u8 *in, unsigned int len, u8 *out)
{
	SHASH_DESC_ON_STACK(desc, comm->hmac);
	int ret;

	desc->tfm = comm->hmac;
	ret = crypto_shash_digest(desc, in, len, out);
	shash_desc_zero(desc);
	return ret;
}
ALLOW_ERROR_INJECTION(nz_comm_mac, ERRNO);

struct nz_conn *nz_comm_conn(struct nz_comm *comm, u32 rank, u32 slot)
{
	if (rank >= comm->size || slot >= comm->nrails || !comm->peers[rank])
		return NULL;
	return &comm->peers[rank]->conns[slot];
}

/* ---- connections -------------------------------------------------------- */

void nz_conn_kick(struct nz_conn *conn)
{
	spin_lock_bh(&conn->kick_lock);
	if (conn->tp && !conn->tp_dead)
		conn->rail->ops->conn_kick(conn);
	spin_unlock_bh(&conn->kick_lock);
}

static void nz_peer_kick_all(struct nz_peer *p)
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

static void nz_conn_init(struct nz_peer *p, u32 slot)
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
static void nz_conn_stop_dial(struct nz_conn *conn)
{
	spin_lock_bh(&conn->peer->lock);
	conn->state = NZ_CONN_DEAD;
	spin_unlock_bh(&conn->peer->lock);
	nz_conn_abort_dial(conn);
}

/* Stop a connection for good: no reconnect, no transport, no chunks. */
static void nz_conn_shutdown(struct nz_conn *conn)
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

/* ---- communicators --------------------------------------------------------- */

static int nz_comm_check_create(const struct nz_comm_create *cc)
{
	u32 i;

	for (i = 0; i < ARRAY_SIZE(cc->rsvd); i++)
		if (cc->rsvd[i])
			return -EINVAL;
	if (!cc->size || cc->size > NZ_MAX_RANKS || cc->rank >= cc->size)
		return -EINVAL;
	if (!cc->nrails || cc->nrails > NZ_MAX_RAILS)
		return -EINVAL;
	if (cc->unit && !nz_wire_unit_ok(cc->unit))
		return -EINVAL;
	if (cc->timeout_ms > NZ_MAX_TIMEOUT_MS)
		return -EINVAL;
	for (i = 0; i < NZ_MAX_RAILS; i++) {
		size_t n = strnlen(cc->rails[i], NZ_RAIL_NAME_LEN);

		if (n == NZ_RAIL_NAME_LEN || (i < cc->nrails) != (n > 0))
			return -EINVAL;
	}
	return 0;
}

/*
 * The rails named, each of the opener's network namespace: a rail of
 * another one is not there for it (its addresses would be dialled from a
 * namespace the caller has no part in).
 */
static int nz_comm_get_rails(struct nz_comm *comm,
			     const struct nz_comm_create *cc, struct net *net)
{
	u32 s, t;

	for (s = 0; s < comm->nrails; s++) {
		comm->rails[s] = nz_rail_get(cc->rails[s]);
		if (!comm->rails[s])
			return -ENODEV;
		if (!net_eq(comm->rails[s]->net, net))
			return -ENODEV;
		for (t = 0; t < s; t++)
			if (comm->rails[t] == comm->rails[s])
				return -EINVAL;
	}
	return 0;
}

static int nz_comm_get_addrs(struct nz_comm *comm, u64 uaddr)
{
	size_t n = (size_t)comm->size * comm->nrails, i;

	comm->addrs = kvmalloc_array(n, sizeof(*comm->addrs),
				     GFP_KERNEL_ACCOUNT);
	if (!comm->addrs)
		return -ENOMEM;
	if (copy_from_user(comm->addrs, u64_to_user_ptr(uaddr),
			   n * sizeof(*comm->addrs)))
		return -EFAULT;
	for (i = 0; i < n; i++)
		if (comm->addrs[i].rsvd ||
		    (i / comm->nrails != comm->rank &&
		     (!comm->addrs[i].addr || !comm->addrs[i].port)))
			return -EINVAL;
	return 0;
}

static int nz_comm_alloc_peers(struct nz_comm *comm)
{
	struct nz_peer *p;
	u32 r, s;

	comm->peers = kcalloc(comm->size, sizeof(*comm->peers),
			      GFP_KERNEL_ACCOUNT);
	if (!comm->peers)
		return -ENOMEM;
	for (r = 0; r < comm->size; r++) {
		if (r == comm->rank)
			continue;
		p = kzalloc(sizeof(*p), GFP_KERNEL_ACCOUNT);
		if (!p)
			return -ENOMEM;
		comm->peers[r] = p;
		p->comm = comm;
		p->rank = r;
		spin_lock_init(&p->lock);
		p->next_msg_id = 1;
		p->down_since = jiffies;
		p->last_progress = jiffies;
		nz_health_peer_init(p);
		INIT_LIST_HEAD(&p->tx_msgs);
		INIT_LIST_HEAD(&p->resend);
		INIT_LIST_HEAD(&p->aborts);
		INIT_LIST_HEAD(&p->refusals);
		INIT_LIST_HEAD(&p->rx_msgs);
		INIT_LIST_HEAD(&p->posted);
		nz_seqwin_init(&p->rxwin);
		for (s = 0; s < comm->nrails; s++)
			nz_conn_init(p, s);
	}
	return 0;
}

static struct nz_comm *nz_comm_new(struct nz_file *f,
				   const struct nz_comm_create *cc)
{
	static atomic64_t serial = ATOMIC64_INIT(0);

	struct nz_comm *comm;
	int ret;

	comm = kzalloc(sizeof(*comm), GFP_KERNEL_ACCOUNT);
	if (!comm)
		return ERR_PTR(-ENOMEM);
	kref_init(&comm->ref);
	/* What arrives for it later is charged to its creator's cgroup. */
	comm->memcg = get_mem_cgroup_from_mm(current->mm);
	atomic_inc(&nz_stats.comms);
	INIT_LIST_HEAD(&comm->node);
	INIT_LIST_HEAD(&comm->node_file);
	init_waitqueue_head(&comm->waitq);
	nz_health_comm_init(comm);
	comm->job_id = cc->job_id;
	do {
		get_random_bytes(&comm->incarnation, sizeof(comm->incarnation));
	} while (!comm->incarnation);
	comm->owner = nz_user_uid(f->user);
	comm->serial = atomic64_inc_return(&serial);
	memcpy(comm->secret, cc->secret, sizeof(comm->secret));
	comm->rank = cc->rank;
	comm->size = cc->size;
	comm->nrails = cc->nrails;
	comm->unit = cc->unit ? cc->unit : NZ_DEFAULT_UNIT;
	comm->timeout_ms = cc->timeout_ms ? cc->timeout_ms :
			   NZ_DEFAULT_TIMEOUT_MS;
	comm->lim.max_msg = NZ_MAX_MSG;
	comm->lim.max_payload = comm->unit;

	ret = nz_comm_get_rails(comm, cc, f->net);
	if (ret)
		goto out_put;
	ret = nz_comm_get_addrs(comm, cc->addrs);
	if (ret)
		goto out_put;
	comm->hmac = crypto_alloc_shash("hmac(sha256)", 0, 0);
	if (IS_ERR(comm->hmac)) {
		ret = PTR_ERR(comm->hmac);
		goto out_put;
	}
	ret = crypto_shash_setkey(comm->hmac, comm->secret,
				  sizeof(comm->secret));
	if (ret)
		goto out_put;
	ret = nz_comm_alloc_peers(comm);
	if (ret)
		goto out_put;
	return comm;

out_put:
	nz_comm_put(comm);
	return ERR_PTR(ret);
}

/* Make the communicator reachable: accepts find it, clients connect. */
static int nz_comm_publish(struct nz_comm *comm)
{
	struct nz_comm *other;
	u32 r, s;

	/*
	 * A (job, rank) slot is taken per user, not for the whole host:
	 * another user naming our job id gets a communicator of its own,
	 * which its key, not ours, authenticates (nz_comm_find_hello()).
	 */
	mutex_lock(&nz_comms_lock);
	list_for_each_entry(other, &nz_comms, node) {
		if (other->job_id == comm->job_id &&
		    other->rank == comm->rank &&
		    (uid_eq(other->owner, comm->owner) ||
		     !crypto_memneq(other->secret, comm->secret,
				    sizeof(comm->secret)))) {
			mutex_unlock(&nz_comms_lock);
			return -EEXIST;
		}
	}
	kref_get(&comm->ref);
	list_add_tail(&comm->node, &nz_comms);
	mutex_unlock(&nz_comms_lock);

	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++) {
			struct nz_conn *conn = &comm->peers[r]->conns[s];

			mutex_lock(&conn->io_lock);
			if (nz_sysfs_conn_add(conn))
				pr_warn_ratelimited("no sysfs statistics for rank %u on rail %s\n",
						    r, conn->rail->name);
			mutex_unlock(&conn->io_lock);
		}
	nz_health_comm_start(comm);
	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++)
			if (comm->peers[r]->conns[s].client)
				nz_health_conn_connect_in(&comm->peers[r]->conns[s], 0);
	return 0;
}

/* Nothing queued to send on any connection that is up: see below. */
static bool nz_comm_ctrl_flushed(struct nz_comm *comm)
{
	bool flushed = true;
	u32 r, s;

	for (r = 0; r < comm->size && flushed; r++) {
		struct nz_peer *p = comm->peers[r];

		if (!p)
			continue;
		spin_lock_bh(&p->lock);
		for (s = 0; s < comm->nrails; s++)
			if (p->conns[s].nctrl &&
			    p->conns[s].state == NZ_CONN_UP)
				flushed = false;
		spin_unlock_bh(&p->lock);
	}
	return flushed;
}

static void nz_comm_destroy(struct nz_comm *comm)
{
	u32 r, s;

	mutex_lock(&nz_comms_lock);
	if (!list_empty(&comm->node)) {
		list_del_init(&comm->node);
		nz_comm_put(comm);		/* the list's reference */
	}
	mutex_unlock(&nz_comms_lock);

	WRITE_ONCE(comm->dead, true);
	wake_up_all(&comm->waitq);
	nz_health_comm_stop(comm);
	/*
	 * The ACK of the last message we received may still be queued: a
	 * transport's close sends its CLOSE after what it wrote but drops
	 * what is queued, and the sender, told that we left, would fail the
	 * send we received whole.  Let the queues drain first, bounded: a
	 * peer that does not read any more must not hold us.
	 */
	for (r = 0; r < comm->size; r++)
		if (comm->peers[r])
			nz_peer_kick_all(comm->peers[r]);
	wait_event_timeout(comm->waitq, nz_comm_ctrl_flushed(comm),
			   msecs_to_jiffies(NZ_FLUSH_MS));
	/*
	 * Every dial gives up first, so that their works unwind side by side
	 * while we wait for the first: one after the other, a job with
	 * hundreds of unanswered dials took seconds to go.
	 */
	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++)
			nz_conn_stop_dial(&comm->peers[r]->conns[s]);
	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++)
			nz_conn_shutdown(&comm->peers[r]->conns[s]);
	for (r = 0; r < comm->size; r++)
		if (comm->peers[r])
			nz_peer_fail_all(comm->peers[r], -ECANCELED);
}

int nz_comm_ioctl_create(struct nz_file *f, void __user *arg)
{
	struct nz_comm_create cc;
	struct nz_comm *comm;
	int ret;

	if (copy_from_user(&cc, arg, sizeof(cc)))
		return -EFAULT;
	ret = nz_comm_check_create(&cc);
	if (!ret)
		ret = nz_user_charge_comm(f->user);
	if (ret) {
		memzero_explicit(cc.secret, sizeof(cc.secret));
		return ret;
	}
	comm = nz_comm_new(f, &cc);
	memzero_explicit(cc.secret, sizeof(cc.secret));
	if (IS_ERR(comm)) {
		nz_user_uncharge_comm(f->user);
		return PTR_ERR(comm);
	}

	/*
	 * The id is taken now but the file's list gets the communicator only
	 * once it is whole and published: until then no SEND, RECV, WAIT or
	 * DESTROY of another thread can find it.
	 */
	mutex_lock(&f->comm_lock);
	comm->id = ++f->next_comm_id;
	comm->file = f;
	mutex_unlock(&f->comm_lock);

	ret = nz_comm_publish(comm);
	if (!ret)
		ret = put_user(comm->id,
			       &((struct nz_comm_create __user *)arg)->comm_id);
	if (!ret)
		ret = put_user(comm->serial,
			       &((struct nz_comm_create __user *)arg)->serial);
	if (ret) {
		nz_comm_destroy(comm);
		nz_comm_put(comm);
		nz_user_uncharge_comm(f->user);
		return ret;
	}
	mutex_lock(&f->comm_lock);
	list_add_tail(&comm->node_file, &f->comms);
	mutex_unlock(&f->comm_lock);
	pr_debug("comm %u: job %llx rank %u/%u, %u rails\n", comm->id,
		 comm->job_id, comm->rank, comm->size, comm->nrails);
	return 0;
}

/*
 * Connections that came up at least once.  Not those up now: a peer may
 * have connected, sent, seen its message acknowledged and left before we
 * wait -- its connections were there, and what it sent is here.
 */
static u32 nz_comm_conns_established(struct nz_comm *comm)
{
	u32 r, n = 0;

	for (r = 0; r < comm->size; r++)
		if (comm->peers[r])
			n += READ_ONCE(comm->peers[r]->conns_established);
	return n;
}

int nz_comm_ioctl_wait(struct nz_file *f, void __user *arg)
{
	struct nz_comm_wait w;
	struct nz_comm *comm;
	u32 expected;
	long left;
	int ret = 0;

	if (copy_from_user(&w, arg, sizeof(w)))
		return -EFAULT;
	if (w.rsvd || w.timeout_ms > NZ_MAX_TIMEOUT_MS)
		return -EINVAL;
	comm = nz_file_comm_get(f, w.comm_id);
	if (!comm)
		return -EINVAL;
	expected = (comm->size - 1) * comm->nrails;
	left = wait_event_interruptible_timeout(comm->waitq,
			nz_comm_conns_established(comm) >= expected ||
			READ_ONCE(comm->dead),
			msecs_to_jiffies(w.timeout_ms));
	w.up = nz_comm_conns_established(comm);
	w.expected = expected;
	if (left < 0)
		ret = left;
	else if (w.up < expected)
		ret = READ_ONCE(comm->dead) ? -ECANCELED : -ETIMEDOUT;
	nz_comm_put(comm);
	if (copy_to_user(arg, &w, sizeof(w)))
		return -EFAULT;
	return ret;
}

int nz_comm_ioctl_destroy(struct nz_file *f, void __user *arg)
{
	struct nz_comm *comm;
	u32 id;

	if (get_user(id, (u32 __user *)arg))
		return -EFAULT;
	mutex_lock(&f->comm_lock);
	list_for_each_entry(comm, &f->comms, node_file) {
		if (comm->id == id) {
			list_del_init(&comm->node_file);
			mutex_unlock(&f->comm_lock);
			nz_comm_destroy(comm);
			nz_comm_put(comm);
			nz_user_uncharge_comm(f->user);
			return 0;
		}
	}
	mutex_unlock(&f->comm_lock);
	return -EINVAL;
}

void nz_comm_file_release(struct nz_file *f)
{
	struct nz_comm *comm;

	for (;;) {
		mutex_lock(&f->comm_lock);
		comm = list_first_entry_or_null(&f->comms, struct nz_comm,
						node_file);
		if (comm)
			list_del_init(&comm->node_file);
		mutex_unlock(&f->comm_lock);
		if (!comm)
			return;
		nz_comm_destroy(comm);
		nz_comm_put(comm);
		nz_user_uncharge_comm(f->user);
	}
}

/* ---- rails changing under communicators ------------------------------------ */

enum nz_rail_change { NZ_RAIL_REMOVED, NZ_RAIL_CHANGED, NZ_RAIL_LINK_DOWN };

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

static void nz_conn_rail_update(struct nz_conn *conn, enum nz_rail_change how)
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

/*
 * Update every connection that uses rail, outside nz_comms_lock since
 * closing sleeps.
 */
static void nz_rail_conns_update(struct nz_rail *rail, enum nz_rail_change how)
{
	struct nz_comm **comms;
	struct nz_comm *comm;
	unsigned int n = 0, i, max = 0;
	u32 r, s;

	mutex_lock(&nz_comms_lock);
	list_for_each_entry(comm, &nz_comms, node)
		max++;
	comms = kcalloc(max, sizeof(*comms), GFP_KERNEL);
	list_for_each_entry(comm, &nz_comms, node) {
		if (!comms || n == max)
			break;
		kref_get(&comm->ref);
		comms[n++] = comm;
	}
	mutex_unlock(&nz_comms_lock);

	for (i = 0; i < n; i++) {
		comm = comms[i];
		for (r = 0; r < comm->size; r++)
			for (s = 0; comm->peers[r] && s < comm->nrails; s++)
				if (comm->rails[s] == rail)
					nz_conn_rail_update(&comm->peers[r]->conns[s],
							    how);
		nz_comm_put(comm);
	}
	kfree(comms);
}

void nz_comm_rail_removed(struct nz_rail *rail)
{
	nz_rail_conns_update(rail, NZ_RAIL_REMOVED);
}

void nz_comm_rail_changed(struct nz_rail *rail)
{
	nz_rail_conns_update(rail, NZ_RAIL_CHANGED);
}

/* health.c: the rail's netdev lost or regained its link. */
void nz_comm_rail_link(struct nz_rail *rail, bool up)
{
	nz_rail_conns_update(rail, up ? NZ_RAIL_CHANGED : NZ_RAIL_LINK_DOWN);
}

/* The path went silent: move its unacknowledged chunks elsewhere. */
static void nz_conn_suspect(struct nz_conn *conn)
{
	struct nz_rail_stats *st = &conn->rail->stats;
	u32 resent;

	resent = nz_conn_requeue_chunks(conn, false);
	atomic64_inc(&st->failovers);
	atomic64_add(resent, &st->resent);
	atomic64_set(&st->last_failover_ms, nz_health_now_ms());
	pr_info("rail %s: path to rank %u silent for %u ms, %u chunks rerouted\n",
		conn->rail->name, conn->peer->rank,
		jiffies_to_msecs(jiffies - conn->quiet_since), resent);
	nz_health_event(conn, NZ_EV_CONN_DOWN, -ETIMEDOUT, resent);
	nz_peer_kick_all(conn->peer);
}

/*
 * Did the peer speak after since on another path that is up (and, with
 * usable, not suspect)?
 */
static bool nz_conn_other_heard(const struct nz_conn *conn,
				unsigned long since, bool usable)
{
	const struct nz_peer *p = conn->peer;
	u32 s;

	for (s = 0; s < p->comm->nrails; s++) {
		const struct nz_conn *o = &p->conns[s];

		if (o != conn && READ_ONCE(o->state) == NZ_CONN_UP &&
		    !(usable && READ_ONCE(o->suspect)) &&
		    time_after(o->quiet_since, since))
			return true;
	}
	return false;
}

/*
 * Is another path to the peer alive: did something arrive on it after this
 * one went quiet (by more than a heartbeat period)?  When every path went
 * silent at once it is the peer (or this host) that stalls, not a path:
 * moving chunks between silent paths would only send them twice.
 */
static bool nz_conn_other_alive(const struct nz_conn *conn)
{
	unsigned long period = msecs_to_jiffies(READ_ONCE(nz_health.hb_interval_ms));

	return nz_conn_other_heard(conn, conn->quiet_since + period, true);
}

/* The transport's last arrival of any packet (jiffies), or 0. */
static unsigned long nz_conn_rx_seen(struct nz_conn *conn)
{
	unsigned long seen = 0;

	if (!conn->rail->ops->conn_rx_seen)
		return 0;
	spin_lock_bh(&conn->kick_lock);
	if (conn->tp && !conn->tp_dead)
		seen = conn->rail->ops->conn_rx_seen(conn);
	spin_unlock_bh(&conn->kick_lock);
	return seen;
}

/*
 * The path's unloaded round trip in ms: the transport's measure (TCP's,
 * from the handshake on), else the heartbeats' (0 until measured).
 */
static unsigned int nz_conn_min_rtt_ms(struct nz_conn *conn)
{
	u32 us = 0;

	spin_lock_bh(&conn->kick_lock);
	if (conn->tp && !conn->tp_dead && conn->rail->ops->conn_min_rtt_us)
		us = conn->rail->ops->conn_min_rtt_us(conn);
	spin_unlock_bh(&conn->kick_lock);
	if (!us) {
		spin_lock_bh(&conn->peer->lock);
		us = nz_est_min_rtt(&conn->est);
		spin_unlock_bh(&conn->peer->lock);
	}
	return us / USEC_PER_MSEC;
}

/* Fail the connection's live transport state, if it has one, with err. */
static void nz_conn_fail_live(struct nz_conn *conn, int err)
{
	void *tp = NULL;

	spin_lock_bh(&conn->kick_lock);
	if (!conn->tp_dead)
		tp = conn->tp;
	spin_unlock_bh(&conn->kick_lock);
	if (tp)
		nz_conn_fail(conn, tp, err);
}

/*
 * How a path is probed now.  A probe is a HEARTBEAT that asks for an echo:
 * it makes the other end speak, and only the end that needs an answer
 * sends one.
 *  - FAST, every period: chunks wait for an answer on it (this is what
 *    detects a dead path in tens of ms), it is suspect (only an echo
 *    re-admits it), it came up a moment ago and has no round trip
 *    measured yet (until the first echo, at most NZ_HB_WARMUP periods), or
 *    another path to the same peer is in doubt: answers on this one tell
 *    a silent path from a silent (busy, descheduled) peer
 *    (nz_conn_other_alive()).
 *  - WAIT, a few times a second: we wait for the peer (a send or receive
 *    with it is pending) and nothing of ours is on this path.  Enough for
 *    the dead timer to notice a peer that went away.
 *  - NONE: nothing pending with the peer.  Silence then is nobody's
 *    business, and the idle cost of watching paths does not grow with
 *    the ranks of a job (issue 23): until 2026-12-02 every path sent a
 *    heartbeat every period, idle or not, 148-230 a second each way.
 */
enum nz_probe { NZ_PROBE_NONE, NZ_PROBE_WAIT, NZ_PROBE_FAST };

static enum nz_probe nz_conn_probe(const struct nz_conn *conn,
				   unsigned long now, unsigned long period)
{
	const struct nz_peer *p = conn->peer;
	u32 s;

	if (conn->suspect || READ_ONCE(conn->inflight_bytes) ||
	    (!READ_ONCE(conn->est.srtt_us) &&
	     time_before(now, conn->up_since + NZ_HB_WARMUP * period)))
		return NZ_PROBE_FAST;
	for (s = 0; s < p->comm->nrails; s++)
		if (READ_ONCE(p->conns[s].doubt))
			return NZ_PROBE_FAST;
	if (!list_empty(&p->tx_msgs) || !list_empty(&p->posted) ||
	    !list_empty(&p->rx_msgs))
		return NZ_PROBE_WAIT;
	return NZ_PROBE_NONE;
}

/* health.c, every heartbeat period, for each connection. */
void nz_conn_heartbeat(struct nz_conn *conn, unsigned long stall)
{
	unsigned int marks = READ_ONCE(conn->rx_marks);
	unsigned int ms = max(READ_ONCE(nz_health.hb_interval_ms), 1U);
	unsigned long now = jiffies, last, period, seen;
	bool blocked = READ_ONCE(conn->rx_blocked), echoed;
	struct nz_peer *p = conn->peer;
	struct nz_ctrl *c;
	unsigned int rtt = 0, owed, extra;
	enum nz_probe probe;
	u64 waiting;

	if (READ_ONCE(conn->state) != NZ_CONN_UP)
		return;
	period = msecs_to_jiffies(ms);
	/*
	 * The carrier is read here, every period: the netdev notifier hears
	 * of its loss only from linkwatch, under RTNL, which in a busy guest
	 * came as late as silence (25 ms and more).
	 */
	if (nz_rail_state(conn->rail) == NZ_RAIL_NO_LINK) {
		nz_conn_fail_live(conn, -ENETDOWN);
		return;
	}
	smp_rmb();	/* rx_last as new as the marks: nz_conn_rx_mark() */
	last = READ_ONCE(conn->rx_last);
	seen = nz_conn_rx_seen(conn);
	/*
	 * Bytes arrived, or we stopped reading on purpose: not silent.
	 * Silence counts from the arrival itself, not from this run, which
	 * may come a period later.  Packets that reached the transport but
	 * no frame yet (TCP holds the data behind a lost segment until its
	 * retransmission, a round trip or more on a loaded rail) count too:
	 * in bidirectional bulk traffic that wait made healthy paths suspect
	 * every few seconds.
	 */
	if (seen && time_after(seen, conn->quiet_since) &&
	    time_after(seen, last))
		last = seen;
	else
		seen = 0;
	/* Silence counts only while someone needs an answer on the path. */
	probe = nz_conn_probe(conn, now, period);
	if (probe == NZ_PROBE_NONE)
		conn->probe_since = now;
	/* Held back for budget a whole timeout: now it refuses (msg.c). */
	if (blocked && nz_conn_refuse_due(conn))
		nz_conn_kick(conn);
	if (marks != conn->hb_marks || blocked || seen) {
		conn->hb_marks = marks;
		if (blocked || time_after(last, now))
			last = now;
		if (time_after(last, conn->quiet_since))
			conn->quiet_since = last;
		conn->silent = 0;
	} else {
		unsigned long from;
		unsigned int quiet;

		/* Our own stall is nobody's silence. */
		conn->quiet_since += min(stall, now - conn->quiet_since);
		conn->owed_since += min(stall, now - conn->owed_since);
		conn->probe_since += min(stall, now - conn->probe_since);
		from = conn->quiet_since;
		if (time_after(conn->probe_since, from))
			from = conn->probe_since;
		quiet = jiffies_to_msecs(now - from);
		/*
		 * Nor is a round trip longer than the time that makes a path
		 * suspect: on a path of 40 ms, healthy ones fell silent for
		 * 12-16 ms in bursts (make check, sched tests).  Its unloaded
		 * round trip on top, then, from the start: the heartbeats'
		 * first sample came after the first burst had made such a path
		 * suspect at every new communicator.  Not a shorter one: in a
		 * busy guest the heartbeats' round trip on a quick rail came
		 * out at 8-12 ms, and a blackhole took 24-48 ms to notice
		 * instead of 16-20.
		 */
		rtt = nz_conn_min_rtt_ms(conn);
		if (rtt < ms * READ_ONCE(nz_health.hb_misses))
			rtt = 0;
		conn->silent = quiet > rtt ? (quiet - rtt) / ms : 0;
	}
	/*
	 * A suspect path is re-admitted when a heartbeat sent after it became
	 * suspect comes back: a round trip that works now.  Not on any
	 * arrival: frames sent before the fault still came in after it (a
	 * busy guest read them from its NIC tens of ms late), and a path
	 * dead one way only still carries the peer's frames to us.  Each such
	 * arrival re-admitted a blackholed path, which then took chunks to
	 * lose again 16 ms later, back and forth with the survivor (a 225 ms
	 * gap with 16 KiB chunks, make bench-failover).  Should no echo come
	 * while frames do, the arrivals re-admit it after NZ_SUSPECT_MIN_MS:
	 * a path that is wrong, then, is suspect again at most that often.
	 */
	echoed = conn->suspect && READ_ONCE(conn->echo_ns) >= conn->suspect_ns;
	if (echoed)
		nz_health_readmitted(conn, now);
	if (conn->suspect &&
	    (echoed ||
	     (time_after(conn->quiet_since, conn->suspect_since) &&
	      time_after(now, conn->suspect_since +
			 msecs_to_jiffies(NZ_SUSPECT_MIN_MS))))) {
		WRITE_ONCE(conn->suspect, false);
		nz_health_event(conn, NZ_EV_CONN_UP, 0, 0);
		nz_peer_kick_all(p);
	}
	/*
	 * Only silence while chunks wait for an answer counts against a
	 * path.  One that owes us nothing holds up no transfer, and a busy
	 * receiver (whose paths carry only its ACKs back) saw them quiet for
	 * 16-36 ms about once a second, a failover counted, logged and
	 * announced each time.  Nor does the quiet before its chunks came: a
	 * path quiet while it owed nothing had no reason to speak, and
	 * judged on that, chunks moved to it were moved off again at the
	 * next period, back and forth between two rails of a busy guest
	 * until a transfer timed out (make check, 4 ranks on 2 guests).
	 */
	waiting = READ_ONCE(conn->inflight_bytes);
	owed = conn->silent;
	if (!waiting) {
		conn->owed_since = now;
		owed = 0;
	} else if (time_after(conn->owed_since, conn->quiet_since)) {
		unsigned int w = jiffies_to_msecs(now - conn->owed_since);

		owed = min(owed, w > rtt ? (w - rtt) / ms : 0);
	}
	/* What this peer's lateness taught us (nz_health_readmitted()). */
	extra = nz_health_suspect_extra_ms(p, now) / ms;
	owed = owed > extra ? owed - extra : 0;
	/*
	 * Half way to suspect: the other rails stop queueing more
	 * (nz_sched_next_chunk()), so that these chunks, if they must move,
	 * wait behind little there.
	 */
	WRITE_ONCE(conn->doubt, !conn->suspect && nz_health_doubt(owed));
	if (nz_health_suspect(owed) && !conn->suspect &&
	    nz_conn_other_alive(conn)) {
		conn->suspect_ns = ktime_get_ns();
		conn->suspect_since = now;
		WRITE_ONCE(conn->suspect, true);
		nz_conn_suspect(conn);
	}
	/*
	 * Silent long enough to tear down: a broken path if the peer spoke
	 * on another one within the last half of this silence, else the
	 * peer stalls (or is gone) and gets longer (nz_health_peer_gone()).
	 */
	if (nz_health_dead(conn->silent) &&
	    (nz_health_peer_gone(conn->silent) ||
	     nz_conn_other_heard(conn, now - msecs_to_jiffies(ms * conn->silent / 2),
				 false))) {
		nz_conn_fail_live(conn, -ETIMEDOUT);
		return;
	}
	/* Up and quiet for a while: forget past backoff. */
	if (conn->backoff_ms && time_after(jiffies, conn->up_since + 10 * HZ))
		conn->backoff_ms = 0;
	nz_sched_tick(conn);
	/*
	 * Frames went both ways within the period: each end has just seen
	 * the other, a probe would tell neither anything.  It would only
	 * cost both CPUs a frame in the middle of the traffic.  But a suspect
	 * path sends one every period: only an echo re-admits it.
	 */
	if (probe == NZ_PROBE_NONE)
		return;
	if (probe == NZ_PROBE_WAIT) {
		period = nz_health_wait_period();
		if (time_before(now, conn->probe_last + period))
			return;
	}
	if (!conn->suspect &&
	    time_before(now, READ_ONCE(conn->tx_last) + period) &&
	    time_before(now, last + period))
		return;
	conn->probe_last = now;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return;
	nz_frame_init(&c->f, NZ_FRAME_HEARTBEAT);
	c->f.hb.ts_ns = ktime_get_ns();
	spin_lock_bh(&p->lock);
	if (conn->state == NZ_CONN_UP && conn->nctrl < 64) {
		list_add_tail(&c->node, &conn->ctrl);
		conn->nctrl++;
		conn->hb_sent++;
		atomic64_inc(&conn->rail->stats.hb_frames);
		/* Every probe is a round-trip sample; unloaded ones are marked. */
		c->f.hb.seq = NZ_HB_ECHO;
		if (!conn->inflight_bytes)
			c->f.hb.seq |= NZ_HB_IDLE;
		c = NULL;
	}
	spin_unlock_bh(&p->lock);
	kfree(c);
	nz_conn_kick(conn);
}

/*
 * health.c, every scan: no connection to p for the grace period.  Quiet
 * when nothing was pending (a peer that left in order, an idle job).
 */
void nz_peer_no_rail(struct nz_peer *p)
{
	u32 n = nz_peer_fail_pending(p, -ENETDOWN);

	if (n)
		pr_warn_ratelimited("no rail left to rank %u: %u transfers failed\n",
				    p->rank, n);
}
